//! Shape, indexing and creation lowerings, end to end on the XLA CPU plugin, against values
//! computed by hand (and, for random ops, their statistics).

mod common;

use common::*;

fn f32s(shape: &[usize]) -> A {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
    t(DType::F32, shape, &v)
}

/// The first result's shape and values.
fn r1(op: &str, args: Vec<A>, kwargs: Vec<(&str, A)>) -> (Vec<usize>, Vec<f64>) {
    let out = run(op, args, kwargs).unwrap_or_else(|e| panic!("{op}: {e}"));
    let t = tensor(&out[0]);
    (t.shape().to_vec(), t.to_f64_vec())
}

fn list(o: &Output) -> Vec<(Vec<usize>, Vec<f64>)> {
    match o {
        Output::Tensors(ts) => ts.iter().map(|t| (t.shape().to_vec(), t.to_f64_vec())).collect(),
        other => panic!("expected tensors, got {other:?}"),
    }
}

fn err(op: &str, args: Vec<A>, kwargs: Vec<(&str, A)>) -> String {
    run(op, args, kwargs).expect_err(op).to_string()
}

#[test]
fn views_reshape_permute_expand() {
    assert_eq!(r1("view", vec![f32s(&[2, 3]), ints(&[3, -1])], vec![]), (vec![3, 2], vec![0., 1., 2., 3., 4., 5.]));
    assert!(err("view", vec![f32s(&[2, 3]), ints(&[4, -1])], vec![]).contains("shape '[4, -1]' is invalid for input of size 6"));
    assert!(err("reshape", vec![f32s(&[2, 3]), ints(&[-1, -1])], vec![]).contains("only one dimension can be inferred"));
    assert_eq!(r1("permute", vec![f32s(&[2, 3]), ints(&[1, 0])], vec![]), (vec![3, 2], vec![0., 3., 1., 4., 2., 5.]));
    assert_eq!(r1("t", vec![f32s(&[3])], vec![]).0, vec![3]);
    assert_eq!(r1("transpose.int", vec![f32s(&[1, 2, 3]), ArgValue::Int(0), ArgValue::Int(-1)], vec![]).0, vec![3, 2, 1]);
    assert_eq!(
        r1("expand", vec![t(DType::I64, &[2, 1], &[1., 2.]), ints(&[2, 2, -1, 3])], vec![]),
        (vec![2, 2, 2, 3], [1., 1., 1., 2., 2., 2.].repeat(4))
    );
    assert!(err("expand", vec![f32s(&[2, 3]), ints(&[2, 4])], vec![]).contains("must match the existing size (3) at non-singleton dimension 1"));
    assert_eq!(r1("squeeze.dims", vec![f32s(&[1, 2, 1]), ints(&[0, 1, -1])], vec![]).0, vec![2]);
    assert_eq!(r1("unsqueeze", vec![f32s(&[2]), ArgValue::Int(-1)], vec![]).0, vec![2, 1]);
    assert_eq!(r1("alias", vec![f32s(&[2])], vec![]).1, vec![0., 1.]);
}

#[test]
fn select_slice_narrow_diagonal() {
    assert_eq!(r1("select.int", vec![f32s(&[2, 3]), ArgValue::Int(1), ArgValue::Int(-1)], vec![]), (vec![2], vec![2., 5.]));
    assert!(err("select.int", vec![f32s(&[2, 3]), ArgValue::Int(0), ArgValue::Int(5)], vec![]).contains("index 5 out of range"));
    let s = |start: A, end: A, step: i64| r1("slice.Tensor", vec![f32s(&[6]), ArgValue::Int(0), start, end, ArgValue::Int(step)], vec![]).1;
    assert_eq!(s(ArgValue::Int(1), ArgValue::Int(100), 2), vec![1., 3., 5.]);
    assert_eq!(s(ArgValue::Int(-2), ArgValue::None, 1), vec![4., 5.]);
    assert_eq!(s(ArgValue::Int(4), ArgValue::Int(2), 1), Vec::<f64>::new());
    assert_eq!(s(ArgValue::Int(-100), ArgValue::Int(-3), 2), vec![0., 2.]);
    assert_eq!(r1("narrow", vec![f32s(&[2, 3]), ArgValue::Int(1), ArgValue::Int(-2), ArgValue::Int(2)], vec![]).1, vec![1., 2., 4., 5.]);
    assert_eq!(r1("diagonal", vec![f32s(&[3, 4])], vec![]).1, vec![0., 5., 10.]);
    assert_eq!(r1("diagonal", vec![f32s(&[3, 4]), ArgValue::Int(1)], vec![]).1, vec![1., 6., 11.]);
    assert_eq!(r1("diagonal", vec![f32s(&[3, 4]), ArgValue::Int(-1)], vec![]).1, vec![4., 9.]);
    assert_eq!(r1("diagonal", vec![f32s(&[2, 2, 2]), ArgValue::Int(0), ArgValue::Int(0), ArgValue::Int(2)], vec![]), (vec![2, 2], vec![0., 5., 2., 7.]));
    assert_eq!(r1("diagonal", vec![f32s(&[2, 2]), ArgValue::Int(5)], vec![]).0, vec![0]);
    assert_eq!(
        r1("as_strided", vec![f32s(&[3, 3]), ints(&[2, 2]), ints(&[1, 3]), ArgValue::Int(1)], vec![]),
        (vec![2, 2], vec![1., 4., 2., 5.])
    );
    assert!(err("as_strided", vec![f32s(&[2, 3]), ints(&[3, 3]), ints(&[1, 1]), ArgValue::Int(5)], vec![]).contains("out of bounds for storage"));
}

#[test]
fn cat_stack_split() {
    let out = r1("cat", vec![ArgValue::TensorList(vec![
        HostTensor::from_f64(DType::I32, vec![1, 2], &[1., 2.]),
        HostTensor::from_f64(DType::F32, vec![0], &[]),
        HostTensor::from_f64(DType::F64, vec![1, 2], &[3., 4.]),
    ]), ArgValue::Int(-1)], vec![]);
    assert_eq!(out, (vec![1, 4], vec![1., 2., 3., 4.]));
    let r = run("cat", vec![ArgValue::TensorList(vec![HostTensor::from_f64(DType::I32, vec![2], &[1., 2.])])], vec![]).unwrap();
    assert_eq!(tensor(&r[0]).dtype(), DType::I32);
    assert!(err("cat", vec![ArgValue::TensorList(vec![HostTensor::from_f64(DType::F32, vec![], &[1.])])], vec![]).contains("zero-dimensional"));
    let s = r1("stack", vec![ArgValue::TensorList(vec![
        HostTensor::from_f64(DType::F32, vec![2], &[1., 2.]),
        HostTensor::from_f64(DType::F32, vec![2], &[3., 4.]),
    ]), ArgValue::Int(1)], vec![]);
    assert_eq!(s, (vec![2, 2], vec![1., 3., 2., 4.]));
    let out = run("split.Tensor", vec![f32s(&[5]), ArgValue::Int(2)], vec![]).unwrap();
    assert_eq!(list(&out[0]), vec![(vec![2], vec![0., 1.]), (vec![2], vec![2., 3.]), (vec![1], vec![4.])]);
    let out = run("split_with_sizes", vec![f32s(&[2, 3]), ints(&[1, 2]), ArgValue::Int(1)], vec![]).unwrap();
    assert_eq!(list(&out[0]), vec![(vec![2, 1], vec![0., 3.]), (vec![2, 2], vec![1., 2., 4., 5.])]);
    let out = run("chunk", vec![f32s(&[5]), ArgValue::Int(3)], vec![]).unwrap();
    assert_eq!(list(&out[0]).iter().map(|x| x.0[0]).collect::<Vec<_>>(), vec![2, 2, 1]);
    let out = run("chunk", vec![f32s(&[0]), ArgValue::Int(3)], vec![]).unwrap();
    assert_eq!(list(&out[0]).len(), 3);
    let out = run("unbind.int", vec![f32s(&[2, 2]), ArgValue::Int(1)], vec![]).unwrap();
    assert_eq!(list(&out[0]), vec![(vec![2], vec![0., 2.]), (vec![2], vec![1., 3.])]);
}

#[test]
fn pad_flip_repeat_roll_tri() {
    let p = r1("constant_pad_nd", vec![t(DType::I64, &[3], &[1., 2., 3.]), ints(&[1, -1]), ArgValue::Float(2.7)], vec![]);
    assert_eq!(p, (vec![3], vec![2., 1., 2.]));
    assert_eq!(r1("constant_pad_nd", vec![f32s(&[1, 1]), ints(&[0, 0, 1, 0])], vec![]).1, vec![0., 0.]);
    assert_eq!(r1("flip", vec![f32s(&[2, 2]), ints(&[0, -1])], vec![]).1, vec![3., 2., 1., 0.]);
    assert_eq!(r1("repeat", vec![f32s(&[2]), ints(&[2, 2])], vec![]), (vec![2, 4], vec![0., 1., 0., 1., 0., 1., 0., 1.]));
    assert_eq!(r1("roll", vec![f32s(&[2, 2]), ints(&[1])], vec![]).1, vec![3., 0., 1., 2.]);
    assert_eq!(r1("roll", vec![f32s(&[2, 3]), ints(&[-1, 1]), ints(&[1, 0])], vec![]).1, vec![4., 5., 3., 1., 2., 0.]);
    assert_eq!(r1("tril", vec![f32s(&[2, 3])], vec![]).1, vec![0., 0., 0., 3., 4., 0.]);
    assert_eq!(r1("triu", vec![f32s(&[2, 3]), ArgValue::Int(1)], vec![]).1, vec![0., 1., 2., 0., 0., 5.]);
    assert_eq!(r1("tril", vec![t(DType::Bool, &[2, 2], &[1., 1., 1., 1.])], vec![]).1, vec![1., 0., 1., 1.]);
}

fn i64s(shape: &[usize], v: &[f64]) -> A {
    t(DType::I64, shape, v)
}

#[test]
fn gather_scatter() {
    let x = f32s(&[2, 3]);
    assert_eq!(r1("gather", vec![x.clone(), ArgValue::Int(1), i64s(&[2, 2], &[2., 0., 1., 1.])], vec![]).1, vec![2., 0., 4., 4.]);
    assert_eq!(r1("index_select", vec![x.clone(), ArgValue::Int(1), i64s(&[2], &[2., 0.])], vec![]).1, vec![2., 0., 5., 3.]);
    let z = t(DType::F32, &[2, 3], &[0.; 6]);
    let src = t(DType::F32, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let idx = i64s(&[1, 3], &[1., 0., 1.]);
    assert_eq!(r1("scatter.src", vec![z.clone(), ArgValue::Int(0), idx.clone(), src.clone()], vec![]).1, vec![0., 2., 0., 1., 0., 3.]);
    assert_eq!(r1("scatter.value", vec![z.clone(), ArgValue::Int(0), idx.clone(), ArgValue::Float(7.)], vec![]).1, vec![0., 7., 0., 7., 0., 7.]);
    let idx2 = i64s(&[2, 3], &[0., 0., 0., 0., 0., 0.]);
    assert_eq!(r1("scatter_add", vec![z.clone(), ArgValue::Int(0), idx2.clone(), src.clone()], vec![]).1, vec![5., 7., 9., 0., 0., 0.]);
    let base = t(DType::F32, &[2, 3], &[1.; 6]);
    let sr = |red: &str, incl: bool| {
        r1("scatter_reduce.two", vec![base.clone(), ArgValue::Int(0), idx2.clone(), src.clone(), ArgValue::Str(red.into())], vec![("include_self", ArgValue::Bool(incl))]).1
    };
    assert_eq!(sr("sum", true), vec![6., 8., 10., 1., 1., 1.]);
    assert_eq!(sr("prod", false), vec![4., 10., 18., 1., 1., 1.]);
    assert_eq!(sr("amax", true), vec![4., 5., 6., 1., 1., 1.]);
    assert_eq!(sr("amin", false), vec![1., 2., 3., 1., 1., 1.]);
    assert_eq!(sr("mean", true), vec![2., (8f32 / 3.) as f64, (10f32 / 3.) as f64, 1., 1., 1.]);
    assert_eq!(sr("mean", false), vec![2.5, 3.5, 4.5, 1., 1., 1.]);
    let ib = t(DType::I64, &[3], &[1., 2., 3.]);
    let r = r1("scatter_reduce.two", vec![ib, ArgValue::Int(0), i64s(&[2], &[0., 0.]), i64s(&[2], &[4., 5.]), ArgValue::Str("mean".into())], vec![]);
    assert_eq!(r.1, vec![3., 2., 3.]);
    assert!(err("scatter.src", vec![z.clone(), ArgValue::Int(0), idx.clone(), f32s(&[2, 3]).clone_as(DType::F64)], vec![]).contains("Expected self.dtype to be equal to src.dtype"));
}

trait CloneAs {
    fn clone_as(&self, d: DType) -> A;
}

impl CloneAs for A {
    fn clone_as(&self, d: DType) -> A {
        match self {
            ArgValue::Tensor(h) => t(d, h.shape(), &h.to_f64_vec()),
            _ => panic!(),
        }
    }
}

#[test]
fn index_add_copy_slice_scatter() {
    let x = f32s(&[2, 3]);
    let r = r1("index_add", vec![x.clone(), ArgValue::Int(0), i64s(&[2], &[1., 1.]), t(DType::F32, &[2, 3], &[1.; 6])], vec![("alpha", ArgValue::Int(2))]);
    assert_eq!(r.1, vec![0., 1., 2., 7., 8., 9.]);
    let r = r1("index_copy", vec![x.clone(), ArgValue::Int(1), i64s(&[1], &[2.]), t(DType::F32, &[2, 1], &[9., 8.])], vec![]);
    assert_eq!(r.1, vec![0., 1., 9., 3., 4., 8.]);
    let r = r1("select_scatter", vec![x.clone(), t(DType::I64, &[3], &[1., 1., 1.]), ArgValue::Int(0), ArgValue::Int(-1)], vec![]);
    assert_eq!(r.1, vec![0., 1., 2., 1., 1., 1.]);
    let r = r1("slice_scatter", vec![f32s(&[2, 5]), t(DType::F32, &[2, 2], &[9.; 4]), ArgValue::Int(1), ArgValue::Int(1), ArgValue::None, ArgValue::Int(3)], vec![]);
    assert_eq!(r.1, vec![0., 9., 2., 3., 9., 5., 9., 7., 8., 9.]);
    let m = t(DType::Bool, &[2, 3], &[0., 1., 0., 1., 1., 0.]);
    let r = r1("masked_scatter", vec![x.clone(), m, t(DType::F32, &[4], &[10., 20., 30., 40.])], vec![]);
    assert_eq!(r.1, vec![0., 10., 2., 20., 30., 5.]);
}

#[test]
fn advanced_indexing() {
    let x = f32s(&[3, 4]);
    let some = |v: A| match v {
        ArgValue::Tensor(h) => Some(h),
        _ => None,
    };
    let idx = |v: Vec<Option<HostTensor>>| ArgValue::OptTensorList(v);
    // x[[0, -1], [1, 2]]
    let r = r1("index.Tensor", vec![x.clone(), idx(vec![some(i64s(&[2], &[0., -1.])), some(i64s(&[2], &[1., 2.]))])], vec![]);
    assert_eq!(r, (vec![2], vec![1., 10.]));
    // x[:, [3, 0]]
    let r = r1("index.Tensor", vec![x.clone(), idx(vec![None, some(i64s(&[2], &[3., 0.]))])], vec![]);
    assert_eq!(r, (vec![3, 2], vec![3., 0., 7., 4., 11., 8.]));
    // x3[[0], :, [1]]: non-adjacent, the index dim goes first
    let x3 = f32s(&[2, 3, 2]);
    let r = r1("index.Tensor", vec![x3.clone(), idx(vec![some(i64s(&[1], &[0.])), None, some(i64s(&[1], &[1.]))])], vec![]);
    assert_eq!(r, (vec![1, 3], vec![1., 3., 5.]));
    // x[mask]
    let m = t(DType::Bool, &[3], &[1., 0., 1.]);
    let r = r1("index.Tensor", vec![x.clone(), idx(vec![some(m.clone())])], vec![]);
    assert_eq!(r, (vec![2, 4], vec![0., 1., 2., 3., 8., 9., 10., 11.]));
    let m2 = t(DType::Bool, &[3, 4], &[0., 1., 0., 0., 0., 0., 0., 0., 0., 0., 1., 1.]);
    let r = r1("index.Tensor", vec![x.clone(), idx(vec![some(m2.clone())])], vec![]);
    assert_eq!(r, (vec![3], vec![1., 10., 11.]));
    // index_put
    let r = r1("index_put", vec![x.clone(), idx(vec![some(m.clone())]), t(DType::F32, &[], &[-1.])], vec![]);
    assert_eq!(r.1, vec![-1., -1., -1., -1., 4., 5., 6., 7., -1., -1., -1., -1.]);
    let r = r1("index_put", vec![x.clone(), idx(vec![some(m2.clone())]), t(DType::F32, &[3], &[-1., -2., -3.])], vec![]);
    assert_eq!(r.1, vec![0., -1., 2., 3., 4., 5., 6., 7., 8., 9., -2., -3.]);
    let r = r1(
        "index_put",
        vec![t(DType::F32, &[3], &[0.; 3]), idx(vec![some(i64s(&[3], &[0., 0., 2.]))]), t(DType::F32, &[3], &[1., 2., 3.]), ArgValue::Bool(true)],
        vec![],
    );
    assert_eq!(r.1, vec![3., 0., 3.]);
    // nonzero
    let r = r1("nonzero", vec![t(DType::F32, &[2, 2], &[0., 1., f64::NAN, 0.])], vec![]);
    assert_eq!(r, (vec![2, 2], vec![0., 1., 1., 0.]));
    let r = r1("nonzero", vec![t(DType::I32, &[], &[0.])], vec![]);
    assert_eq!(r.0, vec![0, 0]);
    assert!(err("index.Tensor", vec![x.clone(), idx(vec![some(t(DType::I16, &[1], &[0.]))])], vec![]).contains("long, int, byte or bool"));
}

#[test]
fn embedding_and_backward() {
    let w = f32s(&[4, 2]);
    let r = r1("embedding", vec![w, t(DType::I32, &[2, 1], &[3., 1.])], vec![]);
    assert_eq!(r, (vec![2, 1, 2], vec![6., 7., 2., 3.]));
    let g = t(DType::F32, &[3, 2], &[1., 1., 2., 2., 4., 4.]);
    let r = r1("embedding_dense_backward", vec![g.clone(), i64s(&[3], &[1., 1., 0.]), ArgValue::Int(3), ArgValue::Int(0), ArgValue::Bool(false)], vec![]);
    assert_eq!(r, (vec![3, 2], vec![0., 0., 3., 3., 0., 0.]));
    let r = r1("embedding_dense_backward", vec![g, i64s(&[3], &[1., 1., 0.]), ArgValue::Int(3), ArgValue::Int(-1), ArgValue::Bool(true)], vec![]);
    assert_eq!(r.1, vec![4., 4., 1.5, 1.5, 0., 0.]);
}

#[test]
fn creation_and_metadata() {
    let r = run("arange.start_step", vec![ArgValue::Int(0), ArgValue::Int(5), ArgValue::Float(1.5)], vec![]).unwrap();
    assert_eq!(tensor(&r[0]).dtype(), DType::F32);
    assert_eq!(tensor(&r[0]).to_f64_vec(), vec![0., 1.5, 3., 4.5]);
    let r = run("arange", vec![ArgValue::Int(4)], vec![]).unwrap();
    assert_eq!(tensor(&r[0]).dtype(), DType::I64);
    assert_eq!(r1("arange.start_step", vec![ArgValue::Int(5), ArgValue::Int(0), ArgValue::Int(-2)], vec![]).1, vec![5., 3., 1.]);
    assert!(err("arange.start_step", vec![ArgValue::Int(0), ArgValue::Int(5), ArgValue::Int(-1)], vec![]).contains("inconsistent with step sign"));
    let r = run("full", vec![ints(&[2]), ArgValue::Bool(true)], vec![]).unwrap();
    assert_eq!(tensor(&r[0]).dtype(), DType::Bool);
    let r = run("full_like", vec![f32s(&[2]), ArgValue::Float(2.5)], vec![("dtype", ArgValue::DType(DType::I32))]).unwrap();
    assert_eq!((tensor(&r[0]).dtype(), tensor(&r[0]).to_f64_vec()), (DType::I32, vec![2., 2.]));
    assert_eq!(r1("ones", vec![ints(&[2, 1])], vec![]).1, vec![1., 1.]);
    assert_eq!(r1("zeros_like", vec![f32s(&[3])], vec![]).1, vec![0.; 3]);
    assert!(err("empty.memory_format", vec![ints(&[-1])], vec![]).contains("negative dimension"));
    let x = f32s(&[2, 0, 3]);
    assert_eq!(run("sym_size.int", vec![x.clone(), ArgValue::Int(-1)], vec![]).unwrap(), vec![Output::Int(3)]);
    assert_eq!(run("sym_stride.int", vec![x.clone(), ArgValue::Int(0)], vec![]).unwrap(), vec![Output::Int(3)]);
    assert_eq!(run("sym_numel", vec![x.clone()], vec![]).unwrap(), vec![Output::Int(0)]);
    assert_eq!(run("sym_is_contiguous", vec![x], vec![]).unwrap(), vec![Output::Bool(true)]);
    assert_eq!(r1("resize_", vec![f32s(&[3]), ints(&[2, 2])], vec![]), (vec![2, 2], vec![0., 1., 2., 0.]));
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
}

#[test]
fn random_ops_have_the_right_statistics() {
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let r = run_seeded("rand", vec![ints(&[100, 100])], vec![("dtype", ArgValue::DType(dtype))], 7).unwrap();
        let v = tensor(&r[0]).to_f64_vec();
        assert_eq!(tensor(&r[0]).dtype(), dtype);
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)), "{dtype}");
        let (m, var) = mean_var(&v);
        assert!((m - 0.5).abs() < 0.02 && (var - 1. / 12.).abs() < 0.01, "{dtype}: {m} {var}");
        let r = run_seeded("randn", vec![ints(&[100, 100])], vec![("dtype", ArgValue::DType(dtype))], 7).unwrap();
        let (m, var) = mean_var(&tensor(&r[0]).to_f64_vec());
        assert!(m.abs() < 0.05 && (var - 1.).abs() < 0.05, "{dtype}: {m} {var}");
    }
    let a = run_seeded("rand", vec![ints(&[8])], vec![], 1).unwrap();
    let b = run_seeded("rand", vec![ints(&[8])], vec![], 2).unwrap();
    assert_ne!(a, b);
    let r = run_seeded("randperm", vec![ArgValue::Int(50)], vec![("dtype", ArgValue::DType(DType::I64))], 3).unwrap();
    let mut p = tensor(&r[0]).to_f64_vec();
    assert_ne!(p, (0..50).map(|i| i as f64).collect::<Vec<_>>());
    p.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(p, (0..50).map(|i| i as f64).collect::<Vec<_>>());
    let r = run_seeded("bernoulli.p", vec![t(DType::F32, &[10000], &[0.; 10000]), ArgValue::Float(0.3)], vec![], 5).unwrap();
    let (m, _) = mean_var(&tensor(&r[0]).to_f64_vec());
    assert!((m - 0.3).abs() < 0.02, "{m}");
    let r = run_seeded("native_dropout", vec![t(DType::F32, &[10000], &[1.; 10000]), ArgValue::Float(0.25), ArgValue::Bool(true)], vec![], 5).unwrap();
    let (y, mask) = (tensor(&r[0]).to_f64_vec(), tensor(&r[1]));
    assert_eq!(mask.dtype(), DType::Bool);
    let kept = mask.to_f64_vec().iter().sum::<f64>() / 10000.;
    assert!((kept - 0.75).abs() < 0.02, "{kept}");
    assert!(y.iter().zip(mask.to_f64_vec()).all(|(&v, m)| if m == 1. { (v - 4. / 3.).abs() < 1e-6 } else { v == 0. }));
    let r = run("native_dropout", vec![f32s(&[3]), ArgValue::Float(0.5), ArgValue::Bool(false)], vec![]).unwrap();
    assert_eq!(tensor(&r[0]).to_f64_vec(), vec![0., 1., 2.]);
    assert_eq!(tensor(&r[1]).to_f64_vec(), vec![1., 1., 1.]);
}

#[test]
fn odd_inputs_give_errors_or_results_not_panics() {
    let big = i64::MAX / 2;
    assert!(err("zeros", vec![ints(&[big, big])], vec![]).contains("overflow"));
    assert!(err("expand", vec![f32s(&[1, 1]), ints(&[big, big])], vec![]).contains("overflow"));
    assert!(err("repeat", vec![f32s(&[2]), ints(&[big, big])], vec![]).contains("overflow"));
    assert!(run("constant_pad_nd", vec![f32s(&[2]), ints(&[big, big])], vec![]).is_err());
    assert!(run("as_strided", vec![f32s(&[2]), ints(&[big]), ints(&[big]), ArgValue::Int(0)], vec![]).is_err());
    assert!(err("as_strided", vec![f32s(&[2]), ints(&[3]), ints(&[big]), ArgValue::Int(0)], vec![]).contains("out of bounds"));
    assert!(run("arange.start_step", vec![ArgValue::Float(0.), ArgValue::Float(1.), ArgValue::Float(1e-300)], vec![]).is_err());
    assert!(run("arange.start_step", vec![ArgValue::Float(0.), ArgValue::Float(f64::NAN), ArgValue::Int(1)], vec![]).is_err());
    // 0-dim index tensors: the broadcast index shape is empty.
    let some = |v: A| match v {
        ArgValue::Tensor(h) => Some(h),
        _ => None,
    };
    let x = f32s(&[2, 3]);
    let r = r1("index.Tensor", vec![x.clone(), ArgValue::OptTensorList(vec![some(i64s(&[], &[1.])), some(i64s(&[], &[-1.]))])], vec![]);
    assert_eq!(r, (vec![], vec![5.]));
    let r = r1("index_put", vec![x.clone(), ArgValue::OptTensorList(vec![some(i64s(&[], &[1.]))]), t(DType::F32, &[], &[9.])], vec![]);
    assert_eq!(r.1, vec![0., 1., 2., 9., 9., 9.]);
    assert!(err("index.Tensor", vec![x.clone(), ArgValue::OptTensorList(vec![None, None, some(i64s(&[1], &[0.]))])], vec![]).contains("too many indices"));
    assert!(run("index.Tensor", vec![x.clone(), ArgValue::OptTensorList(vec![None, some(t(DType::Bool, &[3], &[1., 0., 1.]))])], vec![]).is_err());
    assert!(err("gather", vec![x.clone(), ArgValue::Int(0), i64s(&[3], &[0., 0., 0.])], vec![]).contains("same number of dimensions"));
    assert_eq!(r1("gather", vec![x.clone(), ArgValue::Int(0), t(DType::U8, &[0], &[])], vec![]).0, vec![0]);
    assert!(err("slice.Tensor", vec![x.clone(), ArgValue::Int(0), ArgValue::None, ArgValue::None, ArgValue::Int(0)], vec![]).contains("step must be positive"));
    assert!(err("select.int", vec![t(DType::F32, &[], &[1.]), ArgValue::Int(0), ArgValue::Int(0)], vec![]).contains("0-dim"));
    assert!(err("unbind.int", vec![t(DType::F32, &[], &[1.])], vec![]).contains("no dimensions"));
    assert!(err("roll", vec![x.clone(), ints(&[1, 2])], vec![]).contains("must align"));
    assert!(err("native_dropout", vec![x.clone(), ArgValue::Float(1.5), ArgValue::Bool(true)], vec![]).contains("between 0 and 1"));
    assert!(err("rand", vec![ints(&[2])], vec![("dtype", ArgValue::DType(DType::I64))]).contains("not supported"));
}
