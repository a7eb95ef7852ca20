//! Reductions, scans, softmax, sort/topk and linear algebra: end-to-end calls on the XLA CPU
//! plugin against hand-computed values (PyTorch's results: `python/tools/check_ops.py`).

mod common;

use common::*;

fn f32s(shape: &[usize], v: &[f64]) -> A {
    t(DType::F32, shape, v)
}

/// Runs `op` and returns its outputs as (dtype, shape, values).
fn outs(op: &str, args: Vec<A>, kwargs: Vec<(&str, A)>) -> Vec<(DType, Vec<usize>, Vec<f64>)> {
    run(op, args, kwargs)
        .unwrap_or_else(|e| panic!("{op}: {e}"))
        .iter()
        .map(|o| {
            let t = tensor(o);
            (t.dtype(), t.shape().to_vec(), t.to_f64_vec())
        })
        .collect()
}

fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol * (1.0 + y.abs())
        })
}

#[track_caller]
fn check(got: &(DType, Vec<usize>, Vec<f64>), dtype: DType, shape: &[usize], want: &[f64]) {
    assert_eq!(got.0, dtype, "dtype of {got:?}");
    assert_eq!(got.1, shape, "shape of {got:?}");
    assert!(close(&got.2, want, 1e-5), "got {:?}, want {want:?}", got.2);
}

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

#[test]
fn sum_prod_mean_dtypes_and_dims() {
    let x = t(DType::I32, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    check(
        &outs("sum", vec![x.clone()], vec![])[0],
        DType::I64,
        &[],
        &[21.],
    );
    check(
        &outs(
            "sum.dim_IntList",
            vec![x.clone(), ArgValue::IntList(vec![1]), ArgValue::Bool(true)],
            vec![],
        )[0],
        DType::I64,
        &[2, 1],
        &[6., 15.],
    );
    check(
        &outs(
            "sum.dim_IntList",
            vec![x.clone(), ArgValue::IntList(vec![])],
            vec![("dtype", ArgValue::DType(DType::F32))],
        )[0],
        DType::F32,
        &[],
        &[21.],
    );
    check(
        &outs("prod.dim_int", vec![x.clone(), ArgValue::Int(0)], vec![])[0],
        DType::I64,
        &[3],
        &[4., 10., 18.],
    );
    let b = t(DType::Bool, &[3], &[1., 0., 1.]);
    check(
        &outs("sum", vec![b.clone()], vec![])[0],
        DType::I64,
        &[],
        &[2.],
    );
    check(&outs("prod", vec![b], vec![])[0], DType::I64, &[], &[0.]);
    let e = f32s(&[0, 2], &[]);
    check(
        &outs(
            "sum.dim_IntList",
            vec![e.clone(), ArgValue::IntList(vec![0])],
            vec![],
        )[0],
        DType::F32,
        &[2],
        &[0., 0.],
    );
    check(
        &outs("prod.dim_int", vec![e.clone(), ArgValue::Int(0)], vec![])[0],
        DType::F32,
        &[2],
        &[1., 1.],
    );
    let m = outs("mean.dim", vec![e, ArgValue::IntList(vec![0])], vec![]);
    assert!(m[0].2.iter().all(|v| v.is_nan()));
    check(
        &outs("mean", vec![f32s(&[4], &[1., 2., 3., 4.])], vec![])[0],
        DType::F32,
        &[],
        &[2.5],
    );
    let h = t(DType::BF16, &[3], &[1., 2., 4.]);
    check(
        &outs(
            "mean",
            vec![h],
            vec![("dtype", ArgValue::DType(DType::F64))],
        )[0],
        DType::F64,
        &[],
        &[7. / 3.],
    );
    let err = run("mean", vec![x], vec![]).unwrap_err().to_string();
    assert!(
        err.contains("Input dtype must be either a floating point"),
        "{err}"
    );
}

#[test]
fn max_min_propagate_nan_and_pick_the_first_index() {
    let x = f32s(&[2, 4], &[1., 3., 3., 0., 2., NAN, 5., NAN]);
    let r = outs("max.dim", vec![x.clone(), ArgValue::Int(1)], vec![]);
    assert!(close(&r[0].2, &[3., NAN], 0.0), "{:?}", r[0]);
    assert_eq!(r[1].2, vec![1., 1.]);
    assert_eq!(r[1].0, DType::I64);
    let r = outs(
        "min.dim",
        vec![x.clone(), ArgValue::Int(1), ArgValue::Bool(true)],
        vec![],
    );
    assert!(close(&r[0].2, &[0., NAN], 0.0));
    assert_eq!(r[1].1, vec![2, 1]);
    assert_eq!(r[1].2, vec![3., 1.]);
    assert!(outs("amax", vec![x.clone()], vec![])[0].2[0].is_nan());
    check(
        &outs("amin", vec![x.clone(), ArgValue::IntList(vec![0])], vec![])[0],
        DType::F32,
        &[4],
        &[1., NAN, 3., NAN],
    );
    check(
        &outs("argmax", vec![x.clone()], vec![])[0],
        DType::I64,
        &[],
        &[5.],
    );
    check(
        &outs(
            "argmin",
            vec![x.clone(), ArgValue::None, ArgValue::Bool(true)],
            vec![],
        )[0],
        DType::I64,
        &[1, 1],
        &[5.],
    );
    let e = run(
        "amax",
        vec![f32s(&[0, 3], &[]), ArgValue::IntList(vec![0])],
        vec![],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("Expected reduction dim 0 to have non-zero size"),
        "{e}"
    );
    let e = run("max", vec![f32s(&[0], &[])], vec![])
        .unwrap_err()
        .to_string();
    assert!(e.contains("numel() == 0"), "{e}");
    let b = t(DType::Bool, &[3], &[0., 1., 1.]);
    check(
        &outs("max", vec![b.clone()], vec![])[0],
        DType::Bool,
        &[],
        &[1.],
    );
    assert!(run("argmax", vec![b], vec![]).is_err());
}

#[test]
fn any_all_and_logsumexp() {
    let x = t(DType::U8, &[2, 2], &[0., 3., 0., 0.]);
    check(
        &outs("any", vec![x.clone()], vec![])[0],
        DType::U8,
        &[],
        &[1.],
    );
    check(
        &outs("all.dim", vec![x.clone(), ArgValue::Int(1)], vec![])[0],
        DType::U8,
        &[2],
        &[0., 0.],
    );
    let f = f32s(&[3], &[0., NAN, 0.]);
    check(&outs("any", vec![f], vec![])[0], DType::Bool, &[], &[1.]);
    let l = outs(
        "logsumexp",
        vec![
            f32s(&[2, 2], &[1., 2., -INF, -INF]),
            ArgValue::IntList(vec![1]),
        ],
        vec![],
    );
    check(
        &l[0],
        DType::F32,
        &[2],
        &[(1f64.exp() + 2f64.exp()).ln(), -INF],
    );
    let l = outs(
        "logsumexp",
        vec![
            t(DType::I64, &[2], &[1000., 1000.]),
            ArgValue::IntList(vec![0]),
        ],
        vec![],
    );
    check(&l[0], DType::F32, &[], &[1000. + 2f64.ln()]);
}

#[test]
fn var_std_norms() {
    let x = f32s(&[2, 3], &[1., 2., 3., 4., 6., 8.]);
    check(
        &outs(
            "var.correction",
            vec![x.clone(), ArgValue::IntList(vec![1])],
            vec![],
        )[0],
        DType::F32,
        &[2],
        &[1., 4.],
    );
    check(
        &outs(
            "std.correction",
            vec![x.clone(), ArgValue::IntList(vec![1])],
            vec![
                ("correction", ArgValue::Int(0)),
                ("keepdim", ArgValue::Bool(true)),
            ],
        )[0],
        DType::F32,
        &[2, 1],
        &[(2f64 / 3.).sqrt(), (8f64 / 3.).sqrt()],
    );
    let vm = outs(
        "var_mean.correction",
        vec![x.clone(), ArgValue::IntList(vec![0])],
        vec![],
    );
    check(&vm[0], DType::F32, &[3], &[4.5, 8., 12.5]);
    check(&vm[1], DType::F32, &[3], &[2.5, 4., 5.5]);
    assert!(outs("var.correction", vec![f32s(&[1], &[1.])], vec![])[0].2[0].is_nan());
    check(
        &outs(
            "var.correction",
            vec![f32s(&[2], &[1., 2.])],
            vec![("correction", ArgValue::Int(3))],
        )[0],
        DType::F32,
        &[],
        &[INF],
    );
    let v = f32s(&[4], &[3., -4., 0., 0.]);
    check(
        &outs("linalg_vector_norm", vec![v.clone()], vec![])[0],
        DType::F32,
        &[],
        &[5.],
    );
    check(
        &outs(
            "linalg_vector_norm",
            vec![v.clone(), ArgValue::Int(0)],
            vec![],
        )[0],
        DType::F32,
        &[],
        &[2.],
    );
    check(
        &outs(
            "linalg_vector_norm",
            vec![v.clone(), ArgValue::Float(INF)],
            vec![],
        )[0],
        DType::F32,
        &[],
        &[4.],
    );
    check(
        &outs(
            "linalg_vector_norm",
            vec![v.clone(), ArgValue::Float(-INF)],
            vec![],
        )[0],
        DType::F32,
        &[],
        &[0.],
    );
    check(
        &outs(
            "linalg_vector_norm",
            vec![v.clone(), ArgValue::Int(3)],
            vec![],
        )[0],
        DType::F32,
        &[],
        &[91f64.powf(1. / 3.)],
    );
    check(
        &outs(
            "norm.ScalarOpt_dim",
            vec![v, ArgValue::Int(1), ArgValue::IntList(vec![0])],
            vec![],
        )[0],
        DType::F32,
        &[],
        &[7.],
    );
    assert!(run(
        "linalg_vector_norm",
        vec![f32s(&[0], &[]), ArgValue::Float(INF)],
        vec![]
    )
    .is_err());
}

#[test]
fn cumsum_cumprod() {
    let x = t(DType::I32, &[2, 3], &[1., 2., 3., 4., 5., 6.]);
    check(
        &outs("cumsum", vec![x.clone(), ArgValue::Int(1)], vec![])[0],
        DType::I64,
        &[2, 3],
        &[1., 3., 6., 4., 9., 15.],
    );
    check(
        &outs(
            "cumprod",
            vec![x.clone(), ArgValue::Int(0)],
            vec![("dtype", ArgValue::DType(DType::F32))],
        )[0],
        DType::F32,
        &[2, 3],
        &[1., 2., 3., 4., 10., 18.],
    );
    let long: Vec<f64> = (1..=13).map(f64::from).collect();
    let want: Vec<f64> = (1..=13).map(|n| f64::from(n * (n + 1) / 2)).collect();
    check(
        &outs("cumsum", vec![f32s(&[13], &long), ArgValue::Int(0)], vec![])[0],
        DType::F32,
        &[13],
        &want,
    );
}

#[test]
fn softmax_family() {
    let x = f32s(&[2, 2], &[0., 0., 1., -INF]);
    check(
        &outs(
            "_softmax",
            vec![x.clone(), ArgValue::Int(1), ArgValue::Bool(false)],
            vec![],
        )[0],
        DType::F32,
        &[2, 2],
        &[0.5, 0.5, 1., 0.],
    );
    check(
        &outs("log_softmax.int", vec![x.clone(), ArgValue::Int(1)], vec![])[0],
        DType::F32,
        &[2, 2],
        &[-(2f64.ln()), -(2f64.ln()), 0., -INF],
    );
    let h = t(DType::F16, &[2], &[1., 1.]);
    check(
        &outs(
            "_softmax",
            vec![h, ArgValue::Int(0), ArgValue::Bool(true)],
            vec![],
        )[0],
        DType::F32,
        &[2],
        &[0.5, 0.5],
    );
    let y = f32s(&[2], &[0.25, 0.75]);
    let g = f32s(&[2], &[1., 0.]);
    // y * (g - sum(g * y)) = [0.25 * 0.75, 0.75 * -0.25]
    check(
        &outs(
            "_softmax_backward_data",
            vec![g, y, ArgValue::Int(0), ArgValue::DType(DType::F32)],
            vec![],
        )[0],
        DType::F32,
        &[2],
        &[0.1875, -0.1875],
    );
    assert!(run(
        "_softmax",
        vec![
            t(DType::I64, &[2], &[1., 2.]),
            ArgValue::Int(0),
            ArgValue::Bool(false)
        ],
        vec![]
    )
    .is_err());
}

#[test]
fn sort_and_topk() {
    let x = f32s(&[7], &[3., NAN, 1., NAN, 2., -INF, 1.]);
    let r = outs("sort", vec![x.clone()], vec![]);
    assert!(
        close(&r[0].2, &[-INF, 1., 1., 2., 3., NAN, NAN], 0.0),
        "{:?}",
        r[0]
    );
    assert_eq!(r[1].2, vec![5., 2., 6., 4., 0., 1., 3.]);
    let r = outs(
        "sort",
        vec![x.clone(), ArgValue::Int(0), ArgValue::Bool(true)],
        vec![],
    );
    assert!(
        close(&r[0].2, &[NAN, NAN, 3., 2., 1., 1., -INF], 0.0),
        "{:?}",
        r[0]
    );
    assert_eq!(r[1].2, vec![1., 3., 0., 4., 2., 6., 5.]);
    let r = outs("topk", vec![x.clone(), ArgValue::Int(3)], vec![]);
    assert_eq!(r[1].2, vec![1., 3., 0.]);
    let r = outs(
        "topk",
        vec![x.clone(), ArgValue::Int(2)],
        vec![("largest", ArgValue::Bool(false))],
    );
    assert_eq!(r[1].2, vec![5., 2.]);
    assert_eq!(r[1].0, DType::I64);
    assert!(run("topk", vec![x, ArgValue::Int(8)], vec![]).is_err());
}

#[test]
fn matrix_products() {
    let a = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let b = f32s(&[3, 2], &[1., 0., 0., 1., 1., 1.]);
    check(
        &outs("mm", vec![a.clone(), b.clone()], vec![])[0],
        DType::F32,
        &[2, 2],
        &[4., 5., 10., 11.],
    );
    let c = f32s(&[2], &[1., 1.]);
    check(
        &outs(
            "addmm",
            vec![c, a.clone(), b.clone()],
            vec![("beta", ArgValue::Int(2)), ("alpha", ArgValue::Float(0.5))],
        )[0],
        DType::F32,
        &[2, 2],
        &[4., 4.5, 7., 7.5],
    );
    // matmul: batched [2, 1, 2, 3] @ [3, 3, 2] -> [2, 3, 2, 2]; 1-D operands.
    let v = f32s(&[3], &[1., 1., 1.]);
    check(
        &outs("matmul", vec![a.clone(), v.clone()], vec![])[0],
        DType::F32,
        &[2],
        &[6., 15.],
    );
    check(
        &outs("matmul", vec![v.clone(), b.clone()], vec![])[0],
        DType::F32,
        &[2],
        &[2., 2.],
    );
    check(
        &outs("matmul", vec![v.clone(), v.clone()], vec![])[0],
        DType::F32,
        &[],
        &[3.],
    );
    let big: Vec<f64> = (0..12).map(f64::from).collect();
    let r = outs(
        "matmul",
        vec![
            f32s(&[2, 1, 2, 3], &big),
            t(DType::F32, &[3, 3, 2], &[1.; 18]),
        ],
        vec![],
    );
    assert_eq!(r[0].1, vec![2, 3, 2, 2]);
    check(
        &outs(
            "linear",
            vec![a.clone(), f32s(&[1, 3], &[1., 1., 1.]), f32s(&[1], &[10.])],
            vec![],
        )[0],
        DType::F32,
        &[2, 1],
        &[16., 25.],
    );
    check(
        &outs("dot", vec![v.clone(), v.clone()], vec![])[0],
        DType::F32,
        &[],
        &[3.],
    );
    check(
        &outs(
            "outer",
            vec![t(DType::I32, &[2], &[1., 2.]), f32s(&[2], &[0.5, 1.])],
            vec![],
        )[0],
        DType::F32,
        &[2, 2],
        &[0.5, 1., 1., 2.],
    );
    let i = t(DType::I64, &[2, 2], &[1., 2., 3., 4.]);
    check(
        &outs(
            "bmm",
            vec![
                t(DType::I64, &[1, 2, 2], &[1., 2., 3., 4.]),
                t(DType::I64, &[1, 2, 2], &[1., 0., 0., 1.]),
            ],
            vec![],
        )[0],
        DType::I64,
        &[1, 2, 2],
        &[1., 2., 3., 4.],
    );
    let e = run("mm", vec![i, a.clone()], vec![])
        .unwrap_err()
        .to_string();
    assert!(e.contains("same dtype"), "{e}");
    let h = t(DType::BF16, &[2, 2], &[1., 2., 3., 4.]);
    check(
        &outs("mm", vec![h.clone(), h], vec![])[0],
        DType::BF16,
        &[2, 2],
        &[7., 10., 15., 22.],
    );
}

#[test]
fn einsum_equations() {
    let e = |eq: &str, xs: Vec<HostTensor>| {
        outs(
            "einsum",
            vec![ArgValue::Str(eq.into()), ArgValue::TensorList(xs)],
            vec![],
        )
    };
    let m = HostTensor::from_f64(DType::F32, vec![2, 2], &[1., 2., 3., 4.]);
    check(&e("ii", vec![m.clone()])[0], DType::F32, &[], &[5.]);
    check(&e("ii->i", vec![m.clone()])[0], DType::F32, &[2], &[1., 4.]);
    check(
        &e("ij->ji", vec![m.clone()])[0],
        DType::F32,
        &[2, 2],
        &[1., 3., 2., 4.],
    );
    check(
        &e("ij,jk", vec![m.clone(), m.clone()])[0],
        DType::F32,
        &[2, 2],
        &[7., 10., 15., 22.],
    );
    check(
        &e("ij,ij->", vec![m.clone(), m.clone()])[0],
        DType::F32,
        &[],
        &[30.],
    );
    check(
        &e(
            "...j,j",
            vec![
                m.clone(),
                HostTensor::from_f64(DType::F32, vec![2], &[1., 1.]),
            ],
        )[0],
        DType::F32,
        &[2],
        &[3., 7.],
    );
    check(
        &e(
            "i,j",
            vec![
                HostTensor::from_f64(DType::F32, vec![2], &[1., 2.]),
                HostTensor::from_f64(DType::F32, vec![1], &[3.]),
            ],
        )[0],
        DType::F32,
        &[2, 1],
        &[3., 6.],
    );
    let int = HostTensor::from_f64(DType::I32, vec![2, 2], &[1., 2., 3., 4.]);
    check(&e("ij->", vec![int])[0], DType::I64, &[], &[10.]);
    assert!(run(
        "einsum",
        vec![ArgValue::Str("ij->k".into()), ArgValue::TensorList(vec![m])],
        vec![]
    )
    .is_err());
}

#[test]
fn cdist_pdist() {
    let x = f32s(&[2, 2], &[0., 0., 3., 4.]);
    let y = f32s(&[1, 2], &[0., 0.]);
    check(
        &outs(
            "_cdist_forward",
            vec![x.clone(), y.clone(), ArgValue::Float(2.), ArgValue::None],
            vec![],
        )[0],
        DType::F32,
        &[2, 1],
        &[0., 5.],
    );
    check(
        &outs(
            "_cdist_forward",
            vec![x.clone(), y.clone(), ArgValue::Float(1.), ArgValue::None],
            vec![],
        )[0],
        DType::F32,
        &[2, 1],
        &[0., 7.],
    );
    check(
        &outs(
            "_cdist_forward",
            vec![x.clone(), y, ArgValue::Float(2.), ArgValue::Int(1)],
            vec![],
        )[0],
        DType::F32,
        &[2, 1],
        &[0., 5.],
    );
    let p = f32s(&[3, 2], &[0., 0., 3., 4., 6., 8.]);
    check(
        &outs("_pdist_forward", vec![p], vec![])[0],
        DType::F32,
        &[3],
        &[5., 10., 5.],
    );
}

/// histc against a float64 count of the same bins: given ranges, the data's range, integer
/// inputs (as CUDA takes them), and torch's errors (bins <= 0, min > max, NaN in the data's
/// range, which a device-side check raises).
#[test]
fn histc_counts_like_torch_and_refuses_what_it_refuses() {
    let v: Vec<f64> = (0..97)
        .map(|i| ((i * 37 % 101) as f64 - 50.0) / 17.0)
        .collect();
    let count = |bins: usize, lo: f64, hi: f64, v: &[f64]| {
        let mut c = vec![0.0; bins];
        for &x in v.iter().filter(|x| (lo..=hi).contains(*x)) {
            let b = ((x - lo) * bins as f64 / (hi - lo)) as usize;
            c[b.min(bins - 1)] += 1.0;
        }
        c
    };
    let x = || t(DType::F64, &[97], &v);
    let given = run(
        "histc",
        vec![x(), A::Int(7), A::Float(-1.5), A::Float(2.0)],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&given[0]), count(7, -1.5, 2.0, &v));
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    let data = run("histc", vec![x(), A::Int(10)], vec![]).unwrap();
    assert_eq!(values(&data[0]), count(10, lo, hi, &v));
    let ids = run(
        "histc",
        vec![
            t(DType::I64, &[6], &[0.0, 1.0, 1.0, 3.0, 2.0, 9.0]),
            A::Int(4),
            A::Int(0),
            A::Int(3),
        ],
        vec![],
    )
    .unwrap();
    assert_eq!(
        (tensor(&ids[0]).dtype(), values(&ids[0])),
        (DType::I64, vec![1.0, 2.0, 1.0, 1.0])
    );
    for (args, message) in [
        (vec![x(), A::Int(0)], "bins must be > 0"),
        (
            vec![x(), A::Int(4), A::Float(2.0), A::Float(1.0)],
            "max must be larger than min",
        ),
        (
            vec![t(DType::F32, &[3], &[1.0, f64::NAN, 2.0]), A::Int(4)],
            "range of the data is not finite",
        ),
    ] {
        let e = run("histc", args, vec![]).unwrap_err().to_string();
        assert!(e.contains(message), "{e}");
    }
}
