//! The StableHLO builder: structure of the emitted text, type errors, and (when a Python with
//! jax is installed, see `tests/jaxlib_oracle`) parse-ability and numerics on XLA's CPU client.

mod jaxlib_oracle;

use jaxlib_oracle::{run_with_jaxlib, verify_with_jaxlib};
use tessera_lowering::stablehlo::*;
use tessera_lowering::{DType, HostTensor};

fn verify(m: &Module) {
    if let Some(r) = verify_with_jaxlib(m.text()) {
        r.unwrap_or_else(|e| panic!("{e}\n{}", m.text()));
    }
}

/// Parses, verifies and runs on XLA CPU if jax is available; `None` means "skipped".
fn run(m: &Module, inputs: &[HostTensor], outs: &[(DType, Vec<usize>)]) -> Option<Vec<HostTensor>> {
    run_with_jaxlib(m.text(), inputs, outs)
        .map(|r| r.unwrap_or_else(|e| panic!("{e}\n{}", m.text())))
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn broadcasting_add_reduce_and_matmul() {
    let mut f = FuncBuilder::new("main");
    let a = f.arg(TensorType::new([4, 3], DType::F32));
    let b = f.arg(TensorType::new([3], DType::F32));
    let w = f.arg(TensorType::new([3, 2], DType::F32));
    let c = f.broadcast_binary(BinaryOp::Add, &a, &b).unwrap();
    let s = f.reduce_sum(&c, &[1], true).unwrap();
    let m = f.matmul(&c, &w).unwrap();
    assert_eq!((s.shape(), m.shape()), (&[4, 1][..], &[4, 2][..]));
    let module = f.finish(&[&s, &m]).unwrap();
    let text = module.text();
    assert!(text.starts_with("module {\n  func.func public @main(%arg0: tensor<4x3xf32>, %arg1: tensor<3xf32>, %arg2: tensor<3x2xf32>) -> (tensor<4x1xf32>, tensor<4x2xf32>)"));
    assert!(text.contains("\"stablehlo.broadcast_in_dim\"(%arg1) {broadcast_dimensions = array<i64: 1>} : (tensor<3xf32>) -> tensor<4x3xf32>"));
    assert!(text.contains("lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]"));
    assert!(text.contains("{dimensions = array<i64: 1>}"));
    let av: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let inputs = [
        HostTensor::from_vec(vec![4, 3], av.clone()),
        HostTensor::from_vec(vec![3], vec![1.0f32, 2.0, 3.0]),
        HostTensor::from_vec(vec![3, 2], vec![1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0]),
    ];
    if let Some(out) = run(
        &module,
        &inputs,
        &[(DType::F32, vec![4, 1]), (DType::F32, vec![4, 2])],
    ) {
        let c: Vec<f32> = (0..12).map(|i| av[i] + [1.0, 2.0, 3.0][i % 3]).collect();
        let rows: Vec<f32> = (0..4).map(|r| c[3 * r..3 * r + 3].iter().sum()).collect();
        assert_eq!(f32s(&out[0]), rows);
        let mm: Vec<f32> = (0..4)
            .flat_map(|r| [c[3 * r] + c[3 * r + 2], c[3 * r + 1] + c[3 * r + 2]])
            .collect();
        assert_eq!(f32s(&out[1]), mm);
    }
}

#[test]
fn every_unary_op_verifies_and_compiles() {
    use UnaryOp::*;
    let float_ops = [
        Abs,
        Negate,
        Sign,
        Exponential,
        ExponentialMinusOne,
        Log,
        LogPlusOne,
        Logistic,
        Tanh,
        Sqrt,
        Rsqrt,
        Cbrt,
        Sine,
        Cosine,
        Tan,
        Floor,
        Ceil,
        RoundNearestEven,
        RoundNearestAfz,
        Erf,
        ErfInv,
        Lgamma,
        Digamma,
        Asin,
        Acos,
        Atan,
        Sinh,
        Cosh,
        Asinh,
        Acosh,
        Atanh,
    ];
    let mut f = FuncBuilder::default();
    let x = f.arg(TensorType::new([3], DType::F32));
    let i = f.arg(TensorType::new([3], DType::I32));
    let mut outs: Vec<Value> = float_ops
        .iter()
        .map(|&op| f.unary(op, &x).unwrap())
        .collect();
    outs.push(f.unary(Not, &i).unwrap());
    outs.push(f.unary(PopulationCount, &i).unwrap());
    outs.push(f.is_finite(&x).unwrap());
    assert!(f.unary(Exponential, &i).is_err());
    let refs: Vec<&Value> = outs.iter().collect();
    let module = f.finish(&refs).unwrap();
    let types: Vec<(DType, Vec<usize>)> = outs
        .iter()
        .map(|v| (v.dtype(), v.shape().to_vec()))
        .collect();
    let inputs = [
        HostTensor::from_vec(vec![3], vec![0.25f32, 0.5, 0.75]),
        HostTensor::from_vec(vec![3], vec![1i32, 7, -1]),
    ];
    if let Some(out) = run(&module, &inputs, &types) {
        let erf = f32s(&out[float_ops.iter().position(|&o| o == Erf).unwrap()]);
        assert!((erf[1] - 0.520_499_9).abs() < 1e-6, "{erf:?}");
        assert_eq!(
            out[float_ops.len() + 1].to_vec::<i32>().unwrap(),
            vec![1, 3, 32]
        );
    }
}

#[test]
fn reductions_over_any_axes_and_dtypes() {
    let mut f = FuncBuilder::default();
    let x = f.arg(TensorType::new([2, 3, 4], DType::F32));
    let b = f.arg(TensorType::new([2, 3], DType::Bool));
    let i = f.arg(TensorType::new([2, 3], DType::I32));
    let outs = [
        f.reduce_sum(&x, &[0, 2], false).unwrap(),
        f.reduce_max(&x, &[2, 0], true).unwrap(),
        f.reduce_min(&x, &[], false).unwrap(),
        f.reduce_kind(&x, ReduceKind::Product, &[0, 1, 2], false)
            .unwrap(),
        f.reduce_kind(&b, ReduceKind::And, &[1], false).unwrap(),
        f.reduce_kind(&b, ReduceKind::Or, &[1], false).unwrap(),
        f.reduce_kind(&i, ReduceKind::And, &[0], false).unwrap(),
        f.reduce_min(&i, &[0, 1], false).unwrap(),
    ];
    assert_eq!(outs[0].shape(), &[3]);
    assert_eq!(outs[1].shape(), &[1, 3, 1]);
    assert_eq!(outs[2].shape(), &[2, 3, 4]);
    assert_eq!(outs[3].shape(), &[] as &[usize]);
    assert!(f.reduce_kind(&x, ReduceKind::And, &[0], false).is_err());
    assert!(matches!(
        f.reduce_sum(&x, &[3], false),
        Err(BuildError::AxisOutOfRange {
            axis: 3,
            rank: 3,
            ..
        })
    ));
    assert!(f.reduce_sum(&x, &[1, 1], false).is_err());
    let refs: Vec<&Value> = outs.iter().collect();
    let module = f.finish(&refs).unwrap();
    let xv: Vec<f32> = (0..24).map(|k| ((k * 7) % 11) as f32 - 5.0).collect();
    let inputs = [
        HostTensor::from_vec(vec![2, 3, 4], xv.clone()),
        HostTensor::from_vec(vec![2, 3], vec![true, true, true, true, false, true]),
        HostTensor::from_vec(vec![2, 3], vec![3i32, 5, 6, 1, 7, -2]),
    ];
    let types: Vec<(DType, Vec<usize>)> = outs
        .iter()
        .map(|v| (v.dtype(), v.shape().to_vec()))
        .collect();
    if let Some(out) = run(&module, &inputs, &types) {
        let at = |a: usize, b: usize, c: usize| xv[a * 12 + b * 4 + c];
        let sums: Vec<f32> = (0..3)
            .map(|j| {
                (0..2)
                    .flat_map(|a| (0..4).map(move |c| (a, c)))
                    .map(|(a, c)| at(a, j, c))
                    .sum()
            })
            .collect();
        assert_eq!(f32s(&out[0]), sums);
        assert_eq!(f32s(&out[2]), xv);
        assert_eq!(out[4].to_vec::<bool>().unwrap(), vec![true, false]);
        assert_eq!(out[5].to_vec::<bool>().unwrap(), vec![true, true]);
        assert_eq!(out[6].to_vec::<i32>().unwrap(), vec![3 & 1, 5 & 7, 6 & -2]);
        assert_eq!(out[7].to_vec::<i32>().unwrap(), vec![-2]);
    }
}

#[test]
fn control_flow_while_if_case() {
    let mut f = FuncBuilder::default();
    let x = f.arg(TensorType::new([2], DType::F32));
    let k = f.arg(TensorType::scalar(DType::I32));
    let lo = f.scalar(DType::I32, 0.0).unwrap();
    let hi = f.scalar(DType::I32, 5.0).unwrap();
    // sum_{i<5} (x + i)
    let acc0 = f.zeros(TensorType::new([2], DType::F32)).unwrap();
    let looped = f
        .fori_loop(&lo, &hi, &[&acc0], |f, i, c| {
            let fi = f.convert(i, DType::F32)?;
            let fi = f.broadcast_to(&fi, &[2])?;
            let t = f.add(&x, &fi)?;
            Ok::<_, BuildError>(vec![f.add(&c[0], &t)?])
        })
        .unwrap();
    let zero = f.scalar(DType::I32, 0.0).unwrap();
    let pred = f.compare(Comparison::Gt, &k, &zero).unwrap();
    let chosen = f
        .if_else(
            &pred,
            |f| Ok::<_, BuildError>(vec![f.exp(&x)?]),
            |f| Ok(vec![f.neg(&x)?]),
        )
        .unwrap();
    let branches: Vec<Branch<BuildError>> = vec![
        Box::new(|f: &mut FuncBuilder| Ok(vec![f.full(TensorType::new([2], DType::F32), 10.0)?])),
        Box::new(|f: &mut FuncBuilder| Ok(vec![f.full(TensorType::new([2], DType::F32), 20.0)?])),
    ];
    let cased = f.case(&k, branches).unwrap();
    let module = f.finish(&[&looped[0], &chosen[0], &cased[0]]).unwrap();
    assert!(module.text().contains("\"stablehlo.while\""));
    assert!(module.text().contains("\"stablehlo.case\""));
    let outs = [
        (DType::F32, vec![2]),
        (DType::F32, vec![2]),
        (DType::F32, vec![2]),
    ];
    let xv = HostTensor::from_vec(vec![2], vec![1.0f32, -2.0]);
    if let Some(out) = run(
        &module,
        &[xv.clone(), HostTensor::from_vec(vec![], vec![1i32])],
        &outs,
    ) {
        assert_eq!(f32s(&out[0]), vec![15.0, -0.0]);
        assert_eq!(f32s(&out[1]), vec![1f32.exp(), (-2f32).exp()]);
        assert_eq!(f32s(&out[2]), vec![20.0, 20.0]);
    }
    if let Some(out) = run(
        &module,
        &[xv, HostTensor::from_vec(vec![], vec![-3i32])],
        &outs,
    ) {
        assert_eq!(f32s(&out[1]), vec![-1.0, 2.0]);
        assert_eq!(
            f32s(&out[2]),
            vec![20.0, 20.0],
            "out-of-range index runs the last branch"
        );
    }
}

#[test]
fn region_rules_are_errors() {
    let mut f = FuncBuilder::default();
    let x = f.arg(TensorType::new([2], DType::F32));
    // A value defined inside a branch is not visible after it.
    let mut leaked = None;
    let t = f.scalar(DType::Bool, 1.0).unwrap();
    f.if_else(
        &t,
        |f| {
            let v = f.exp(&x)?;
            leaked = Some(v.clone());
            Ok::<_, BuildError>(vec![v])
        },
        |f| Ok(vec![f.neg(&x)?]),
    )
    .unwrap();
    let leaked = leaked.unwrap();
    assert!(matches!(
        f.add(&leaked, &x),
        Err(BuildError::NotVisible { .. })
    ));
    // Branches must agree.
    let r = f.if_else(
        &t,
        |f| Ok::<_, BuildError>(vec![f.exp(&x)?]),
        |_| Ok(vec![]),
    );
    assert!(matches!(r, Err(BuildError::RegionResults { .. })));
    // Reduce bodies are isolated: the outer `x` is not visible in them.
    let z = f.scalar(DType::F32, 0.0).unwrap();
    let r = f.reduce(&[&x], &[&z], &[0], |f, a| {
        Ok::<_, BuildError>(vec![f.add(&a[0], &z)?])
    });
    assert!(matches!(r, Err(BuildError::NotVisible { .. })));
    // A while body must yield its carried types.
    let r = f.while_loop(
        &[&x],
        |f, _| f.scalar(DType::Bool, 0.0),
        |f, _| Ok(vec![f.scalar(DType::F32, 0.0)?]),
    );
    assert!(matches!(r, Err(BuildError::RegionResults { .. })));
    // After errors the builder still produces a valid module.
    let y = f.neg(&x).unwrap();
    verify(&f.finish(&[&y]).unwrap());
}

#[test]
fn type_errors_are_reported_not_panics() {
    let mut f = FuncBuilder::default();
    let a = f.arg(TensorType::new([2, 3], DType::F32));
    let b = f.arg(TensorType::new([3, 2], DType::F32));
    let h = f.arg(TensorType::new([2, 3], DType::BF16));
    assert!(matches!(
        f.add(&a, &h),
        Err(BuildError::TypeMismatch { .. })
    ));
    assert!(matches!(
        f.broadcast_binary(BinaryOp::Add, &a, &b),
        Err(BuildError::Broadcast { .. })
    ));
    assert!(f.reshape(&a, &[5]).is_err());
    assert!(f.transpose(&a, &[0, 0]).is_err());
    assert!(f.broadcast_in_dim(&a, &[2, 4], &[0, 1]).is_err());
    assert!(f.slice(&a, &[0, 2], &[2, 4], &[1, 1]).is_err());
    assert!(f.concatenate(&[&a, &b], 0).is_err());
    assert!(f
        .dot_general(&a, &a, &DotDims::matmul(0), Precision::Default)
        .is_err());
    assert!(f.matmul(&a, &h).is_err());
    assert!(matches!(
        f.full(TensorType::scalar(DType::U8), 256.0),
        Err(BuildError::ConstantRange { .. })
    ));
    assert!(f.select(&a, &a, &a).is_err());
    // A width change follows the spec: narrower adds a trailing dim of the ratio, wider
    // consumes a last dim of that size (bf16 [2, 3] has 3, not 2).
    assert_eq!(
        f.bitcast_convert(&a, DType::F16).unwrap().shape(),
        &[2, 3, 2]
    );
    assert!(f.bitcast_convert(&h, DType::F32).is_err());
    let i = f.scalar(DType::I32, 0.0).unwrap();
    let j = f.scalar(DType::I64, 0.0).unwrap();
    assert!(f.dynamic_slice(&a, &[&i, &j], &[1, 1]).is_err());
    assert!(f.dynamic_slice(&a, &[&i, &i], &[3, 1]).is_err());
    let msg = f.add(&a, &h).unwrap_err().to_string();
    assert_eq!(
        msg,
        "stablehlo.add: operand types differ: tensor<2x3xf32> vs tensor<2x3xbf16>"
    );
}

#[test]
fn shape_and_indexing_ops_compute_what_numpy_does() {
    let mut f = FuncBuilder::default();
    let x = f.arg(TensorType::new([3, 4], DType::F32));
    let idx = f.arg(TensorType::new([2], DType::I32));
    let t = f.transpose(&x, &[1, 0]).unwrap();
    let s = f.slice(&x, &[0, 1], &[3, 4], &[2, 2]).unwrap(); // rows 0,2; cols 1,3
    let r = f.reverse(&x, &[1]).unwrap();
    let c = f.concatenate(&[&x, &x], 0).unwrap();
    let zero = f.scalar(DType::F32, 0.0).unwrap();
    let p = f.pad(&x, &zero, &[1, -1], &[0, 0], &[0, 1]).unwrap(); // [4, 6]
    let io = f.iota(TensorType::new([2, 3], DType::I32), 1).unwrap();
    let one = f.scalar(DType::I32, 1.0).unwrap();
    let two = f.scalar(DType::I32, 2.0).unwrap();
    let ds = f.dynamic_slice(&x, &[&one, &two], &[2, 2]).unwrap();
    let upd = f.full(TensorType::new([1, 2], DType::F32), -1.0).unwrap();
    let dus = f.dynamic_update_slice(&x, &upd, &[&two, &two]).unwrap();
    // x[idx, :] (rows), embedding-style
    let gdims = GatherDims {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        index_vector_dim: 1,
    };
    let g = f.gather(&x, &idx, &gdims, &[1, 4]).unwrap();
    assert_eq!(g.shape(), &[2, 4]);
    // scatter-add rows of ones at idx
    let ones = f.full(TensorType::new([2, 4], DType::F32), 1.0).unwrap();
    let sdims = ScatterDims {
        update_window_dims: vec![1],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
    };
    let sc = f
        .scatter(&[&x], &idx, &[&ones], &sdims, |f, a| {
            Ok::<_, BuildError>(vec![f.add(&a[0], &a[1])?])
        })
        .unwrap();
    // 2x2 max pool, stride 2, over [3, 4] padded to [4, 4]
    let ninf = f.scalar(DType::F32, f64::NEG_INFINITY).unwrap();
    let win = Window {
        dimensions: vec![2, 2],
        strides: vec![2, 2],
        padding: vec![(0, 1), (0, 0)],
        ..Default::default()
    };
    let mp = f
        .reduce_window(&[&x], &[&ninf], &win, |f, a| {
            Ok::<_, BuildError>(vec![f.max(&a[0], &a[1])?])
        })
        .unwrap();
    assert_eq!(mp[0].shape(), &[2, 2]);
    let five = f.scalar(DType::F32, 5.0).unwrap();
    let cl = f.clamp(&zero, &x, &five).unwrap();
    let outs = [
        t,
        s,
        r,
        c,
        p,
        io,
        ds,
        dus,
        g,
        sc[0].clone(),
        mp[0].clone(),
        cl,
    ];
    let refs: Vec<&Value> = outs.iter().collect();
    let module = f.finish(&refs).unwrap();
    let xv: Vec<f32> = (0..12).map(|k| k as f32).collect();
    let types: Vec<(DType, Vec<usize>)> = outs
        .iter()
        .map(|v| (v.dtype(), v.shape().to_vec()))
        .collect();
    let inputs = [
        HostTensor::from_vec(vec![3, 4], xv),
        HostTensor::from_vec(vec![2], vec![2i32, 0]),
    ];
    let Some(o) = run(&module, &inputs, &types) else {
        return;
    };
    assert_eq!(
        f32s(&o[0]),
        vec![0., 4., 8., 1., 5., 9., 2., 6., 10., 3., 7., 11.]
    );
    assert_eq!(f32s(&o[1]), vec![1., 3., 9., 11.]);
    assert_eq!(f32s(&o[2])[..4], [3., 2., 1., 0.]);
    assert_eq!(f32s(&o[3]).len(), 24);
    assert_eq!(f32s(&o[4])[..6], [0.; 6]);
    assert_eq!(f32s(&o[4])[6..12], [0., 1., 0., 2., 0., 3.]);
    assert_eq!(o[5].to_vec::<i32>().unwrap(), vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(f32s(&o[6]), vec![6., 7., 10., 11.]);
    assert_eq!(f32s(&o[7])[8..], [8., 9., -1., -1.]);
    assert_eq!(f32s(&o[8]), vec![8., 9., 10., 11., 0., 1., 2., 3.]);
    assert_eq!(f32s(&o[9])[..4], [1., 2., 3., 4.]);
    assert_eq!(f32s(&o[9])[8..], [9., 10., 11., 12.]);
    assert_eq!(f32s(&o[10]), vec![5., 7., 9., 11.]);
    assert_eq!(f32s(&o[11])[4..8], [4., 5., 5., 5.]);
}

#[test]
fn constants_are_exact_for_every_dtype() {
    let mut f = FuncBuilder::default();
    let special = HostTensor::from_vec(
        vec![5],
        vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1.0e-45],
    );
    let outs = [
        f.constant(&special).unwrap(),
        f.full(TensorType::new([2], DType::BF16), f64::NEG_INFINITY)
            .unwrap(),
        f.full(TensorType::new([2], DType::F64), 0.1).unwrap(),
        f.full_int(TensorType::scalar(DType::U64), u64::MAX as i128)
            .unwrap(),
        f.full_int(TensorType::scalar(DType::I64), i64::MIN as i128)
            .unwrap(),
        f.constant(&HostTensor::from_vec(vec![3], vec![true, false, true]))
            .unwrap(),
        f.constant(&HostTensor::zeros(DType::F32, vec![0, 3]))
            .unwrap(),
        f.max_value(TensorType::scalar(DType::I8)).unwrap(),
    ];
    let refs: Vec<&Value> = outs.iter().collect();
    let module = f.finish(&refs).unwrap();
    assert!(module.text().contains("dense<0xFF80> : tensor<2xbf16>"));
    let types: Vec<(DType, Vec<usize>)> = outs
        .iter()
        .map(|v| (v.dtype(), v.shape().to_vec()))
        .collect();
    if let Some(o) = run(&module, &[], &types) {
        assert_eq!(o[0].bytes(), special.bytes());
        assert_eq!(o[1].to_f64_vec(), vec![f64::NEG_INFINITY; 2]);
        assert_eq!(o[2].to_vec::<f64>().unwrap(), vec![0.1, 0.1]);
        assert_eq!(o[3].to_vec::<u64>().unwrap(), vec![u64::MAX]);
        assert_eq!(o[4].to_vec::<i64>().unwrap(), vec![i64::MIN]);
        assert_eq!(o[5].to_vec::<bool>().unwrap(), vec![true, false, true]);
        assert_eq!(o[7].to_vec::<i8>().unwrap(), vec![127]);
    }
}

#[test]
fn mixed_precision_dot_and_conversions() {
    let mut f = FuncBuilder::default();
    let a = f.arg(TensorType::new([2, 2, 3], DType::BF16));
    let b = f.arg(TensorType::new([2, 3, 2], DType::BF16));
    let a32 = f.convert(&a, DType::F32).unwrap();
    let b32 = f.convert(&b, DType::F32).unwrap();
    let d = f
        .dot_general(&a32, &b32, &DotDims::matmul(1), Precision::Highest)
        .unwrap();
    assert_eq!(d.shape(), &[2, 2, 2]);
    let back = f.convert(&d, DType::BF16).unwrap();
    let bits = f.bitcast_convert(&d, DType::I32).unwrap();
    let module = f.finish(&[&back, &bits]).unwrap();
    assert!(module.text().contains("lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]"));
    assert!(module.text().contains("#stablehlo<precision HIGHEST>"));
    verify(&module);
}

#[test]
fn convolution_shapes_and_numerics() {
    let mut f = FuncBuilder::default();
    let x = f.arg(TensorType::new([1, 1, 4, 4], DType::F32));
    let w = f
        .full(TensorType::new([1, 1, 3, 3], DType::F32), 1.0)
        .unwrap();
    let opts = ConvOptions {
        padding: vec![(1, 1), (1, 1)],
        ..Default::default()
    };
    let same = f.convolution(&x, &w, &ConvDims::nchw(2), &opts).unwrap();
    assert_eq!(same.shape(), &[1, 1, 4, 4]);
    // Depthwise, strided, dilated: 4 channels, one filter each.
    let x4 = f.arg(TensorType::new([2, 4, 9, 9], DType::F32));
    let w4 = f.arg(TensorType::new([4, 1, 2, 2], DType::F32));
    let dw = ConvOptions {
        window_strides: vec![2, 2],
        rhs_dilation: vec![2, 2],
        feature_group_count: 4,
        ..Default::default()
    };
    let d = f.convolution(&x4, &w4, &ConvDims::nchw(2), &dw).unwrap();
    assert_eq!(d.shape(), &[2, 4, 4, 4]);
    let bad = ConvOptions {
        feature_group_count: 3,
        ..Default::default()
    };
    assert!(f.convolution(&x4, &w4, &ConvDims::nchw(2), &bad).is_err());
    let module = f.finish(&[&same, &d]).unwrap();
    assert!(module
        .text()
        .contains("#stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>"));
    let xv: Vec<f32> = (0..16).map(|k| k as f32).collect();
    let inputs = [
        HostTensor::from_vec(vec![1, 1, 4, 4], xv.clone()),
        HostTensor::zeros(DType::F32, vec![2, 4, 9, 9]),
        HostTensor::zeros(DType::F32, vec![4, 1, 2, 2]),
    ];
    if let Some(o) = run(
        &module,
        &inputs,
        &[
            (DType::F32, vec![1, 1, 4, 4]),
            (DType::F32, vec![2, 4, 4, 4]),
        ],
    ) {
        let at = |r: i64, c: i64| {
            if (0..4).contains(&r) && (0..4).contains(&c) {
                xv[(r * 4 + c) as usize]
            } else {
                0.0
            }
        };
        let want: Vec<f32> = (0..16i64)
            .map(|e| {
                (-1..=1)
                    .flat_map(|dr| (-1..=1).map(move |dc| (dr, dc)))
                    .map(|(dr, dc)| at(e / 4 + dr, e % 4 + dc))
                    .sum()
            })
            .collect();
        assert_eq!(f32s(&o[0]), want);
    }
}

#[test]
fn custom_call_rng_and_unchecked_ops() {
    let mut f = FuncBuilder::default();
    let x = f.arg(TensorType::new([4], DType::F32));
    let state = f.arg(TensorType::new([2], DType::U64));
    let (next, bits) = f
        .rng_bit_generator(RngAlgorithm::ThreeFry, &state, &[3, 2], DType::U32)
        .unwrap();
    assert!(f
        .rng_bit_generator(RngAlgorithm::Philox, &state, &[3], DType::U32)
        .is_err());
    let cc = f
        .custom_call(
            "my_target",
            &[&x],
            vec![TensorType::new([4], DType::F32)],
            "{\"k\": 1}",
            &[("has_side_effect", "false".into())],
        )
        .unwrap();
    let cubed = f
        .unchecked_op(
            "stablehlo.cbrt",
            &[&cc[0]],
            "",
            vec![TensorType::new([4], DType::F32)],
        )
        .unwrap();
    let module = f.finish(&[&next, &bits, &cubed[0]]).unwrap();
    assert!(module.text().contains(
        r#"call_target_name = "my_target", backend_config = "{\"k\": 1}", has_side_effect = false"#
    ));
    verify(&module);
}

#[test]
fn sort_values_with_indices() {
    let mut f = FuncBuilder::default();
    let x = f.arg(TensorType::new([2, 4], DType::F32));
    let idx = f.iota(TensorType::new([2, 4], DType::I32), 1).unwrap();
    // Descending by value, carrying the indices along (argsort / topk).
    let sorted = f
        .sort(&[&x, &idx], 1, true, |f, a| {
            f.compare(Comparison::Gt, &a[0], &a[1])
        })
        .unwrap();
    assert!(f
        .sort(&[&x], 2, true, |f, a| f.compare(
            Comparison::Gt,
            &a[0],
            &a[1]
        ))
        .is_err());
    assert!(matches!(
        f.sort(&[&x], 1, true, |f, a| f.add(&a[0], &a[1])),
        Err(BuildError::RegionResults { .. })
    ));
    let module = f.finish(&[&sorted[0], &sorted[1]]).unwrap();
    let input = HostTensor::from_vec(vec![2, 4], vec![3.0f32, 1.0, 4.0, 1.5, -1.0, 5.0, 9.0, 2.0]);
    if let Some(o) = run(
        &module,
        &[input],
        &[(DType::F32, vec![2, 4]), (DType::I32, vec![2, 4])],
    ) {
        assert_eq!(f32s(&o[0]), vec![4.0, 3.0, 1.5, 1.0, 9.0, 5.0, 2.0, -1.0]);
        assert_eq!(o[1].to_vec::<i32>().unwrap(), vec![2, 0, 3, 1, 2, 1, 3, 0]);
    }
}
