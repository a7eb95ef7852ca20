//! End-to-end calls on the XLA CPU plugin: results against values computed here in f64.

mod common;

use common::*;

#[test]
fn add_broadcasts_promotes_and_scales() {
    let out = run(
        "aten::add.Tensor",
        vec![
            t(DType::I32, &[2, 2], &[1., 2., 3., 4.]),
            t(DType::F32, &[2], &[0.5, 1.5]),
        ],
        vec![("alpha", ArgValue::Int(2))],
    )
    .unwrap();
    let r = tensor(&out[0]);
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(r.to_f64_vec(), vec![2., 5., 4., 7.]);
}

#[test]
fn int_tensor_plus_float_scalar_is_float() {
    let out = run(
        "add.Scalar",
        vec![t(DType::I64, &[3], &[1., 2., 3.]), ArgValue::Float(0.5)],
        vec![],
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).dtype(), DType::F32);
    assert_eq!(tensor(&out[0]).to_f64_vec(), vec![1.5, 2.5, 3.5]);
}

#[test]
fn inplace_runs_the_functional_op_and_says_where_to_write() {
    let dev = Device::cpu().unwrap();
    let r = call(
        "add_.Tensor",
        vec![
            t(DType::F32, &[2], &[1., 2.]),
            t(DType::F32, &[2], &[3., 4.]),
        ],
        vec![],
        &dev,
        CallOptions::default(),
    )
    .unwrap();
    assert_eq!(r.writes, vec![(0, 0)]);
    assert_eq!(tensor(&r.outputs[0]).to_f64_vec(), vec![4., 6.]);
    let e = call(
        "add_.Tensor",
        vec![
            t(DType::I32, &[2], &[1., 2.]),
            t(DType::F32, &[2], &[3., 4.]),
        ],
        vec![],
        &dev,
        CallOptions::default(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("result type f32 can't be cast to the desired output type i32"),
        "{e}"
    );
}

#[test]
fn errors_name_the_op_and_the_problem() {
    let e = run("aten::no_such_op", vec![], vec![]).unwrap_err();
    assert!(matches!(e, OpError::UnknownOp { .. }), "{e}");
    let e = run("add.Tensor", vec![t(DType::F32, &[2], &[1., 2.])], vec![]).unwrap_err();
    assert!(
        e.to_string().contains("add.Tensor")
            && e.to_string().contains("missing required argument `other`"),
        "{e}"
    );
    let e = run(
        "add.Tensor",
        vec![
            t(DType::F32, &[2], &[1., 2.]),
            t(DType::F32, &[3], &[1., 2., 3.]),
        ],
        vec![],
    )
    .unwrap_err();
    assert!(e.to_string().contains("must match the size"), "{e}");
    let e = run("abs", vec![t(DType::Bool, &[1], &[1.])], vec![]).unwrap_err();
    assert!(e.to_string().contains("dtype bool is not supported"), "{e}");
}

#[test]
fn batch_norm_training_returns_the_new_running_statistics_as_writes() {
    // x [2, 1, 2]: one channel holding 1, 3, 5, 7 (mean 4, unbiased var 20/3).
    let args = vec![
        t(DType::F64, &[2, 1, 2], &[1., 3., 5., 7.]),
        ArgValue::None,
        ArgValue::None,
        t(DType::F64, &[1], &[1.0]),
        t(DType::F64, &[1], &[2.0]),
        ArgValue::Bool(true),
        ArgValue::Float(0.1),
        ArgValue::Float(1e-5),
    ];
    let r = call(
        "_native_batch_norm_legit",
        args.clone(),
        vec![],
        &Device::cpu().unwrap(),
        CallOptions::default(),
    )
    .unwrap();
    assert_eq!(r.returns, 3);
    assert_eq!(r.writes, vec![(3, 3), (4, 4)]);
    let mean = tensor(&r.outputs[3]).to_f64_vec()[0];
    let var = tensor(&r.outputs[4]).to_f64_vec()[0];
    assert!((mean - (0.1 * 4.0 + 0.9 * 1.0)).abs() < 1e-12, "{mean}");
    assert!(
        (var - (0.1 * 20.0 / 3.0 + 0.9 * 2.0)).abs() < 1e-12,
        "{var}"
    );
    // Eval mode writes nothing.
    let mut eval = args;
    eval[5] = ArgValue::Bool(false);
    let r = call(
        "_native_batch_norm_legit",
        eval,
        vec![],
        &Device::cpu().unwrap(),
        CallOptions::default(),
    )
    .unwrap();
    assert_eq!((r.outputs.len(), r.writes.len()), (3, 0));
}
