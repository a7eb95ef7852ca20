//! Bad input and failures: each a clear error naming the op, at the op that caused it.

mod common;
use common::*;
use tessera_lowering::stablehlo::TensorType;
use tessera_ops::{Args, HostArgs, Lower, LowerResult, OpOverride, Out};
use tessera_runtime::DeviceKind;

// An override that lowers fine (the types check) but names a custom call no backend has, so
// the program fails to compile: a real device-side failure to test flush recovery with.
// It applies only to f32 inputs of shape [3, 5], which no other test uses.
inventory::submit! {
    OpOverride {
        op: "erfinv",
        kernel: "test_unknown_custom_call",
        priority: 100,
        applies: unknown_call_applies,
        lower: unknown_call_lower,
    }
}

fn unknown_call_applies(a: &HostArgs, _d: DeviceKind) -> bool {
    a.tensor_ref("self").is_ok_and(|t| t.shape() == [3, 5])
}

fn unknown_call_lower(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let ty = TensorType::new(x.shape(), x.dtype());
    let y = cx.custom_call("tessera_no_such_target", &[&x], vec![ty], "", &[])?;
    Ok(vec![Out::Tensor(y[0].clone())])
}

#[test]
fn debug_names_the_op_and_its_shapes() {
    let _g = ModeGuard::new(EagerMode::Debug).unwrap();
    let a = dev(&host(1, &[2, 3]));
    let b = dev(&host(2, &[4, 5]));
    let e = a.matmul(&b).unwrap_err().to_string();
    assert!(e.contains("matmul"), "{e}");
    assert!(e.contains("f32[2, 3]") && e.contains("f32[4, 5]"), "{e}");
    let e = a.add(&b).unwrap_err().to_string();
    assert!(e.contains("add.Tensor") && e.contains("f32[4, 5]"), "{e}");
}

#[test]
fn defer_reports_a_shape_error_at_the_recorded_op() {
    let _g = ModeGuard::new(EagerMode::DeferAndFuse).unwrap();
    reset_stats();
    let a = dev(&host(3, &[2, 3]));
    let ok = a.mul_scalar(3.0).unwrap();
    // The bad op fails when recorded, before any flush.
    let e = ok.matmul(&a).unwrap_err().to_string();
    assert!(e.contains("matmul") && e.contains("f32[2, 3]"), "{e}");
    assert_eq!(stats().mode(EagerMode::DeferAndFuse).flushes_total(), 0);
    // What was recorded before it is intact.
    let want: Vec<f64> = host(3, &[2, 3])
        .to_f64_vec()
        .iter()
        .map(|v| (v * 3.0) as f32 as f64)
        .collect();
    assert!(max_err(&ok.to_f64_vec().unwrap(), &want) < 1e-6);
}

#[test]
fn a_failed_flush_loses_only_what_depends_on_the_failing_op() {
    let _g = ModeGuard::new(EagerMode::DeferAndFuse).unwrap();
    let xh = host(4, &[3, 5]);
    let x = dev(&xh);
    let good = x.add_scalar(1.0).unwrap();
    let bad = first_tensor(call("erfinv", vec![(&x).into()], vec![]).unwrap()).unwrap();
    let after_bad = bad.mul_scalar(2.0).unwrap();
    let good2 = good.mul_scalar(2.0).unwrap();
    let e = sync().unwrap_err().to_string();
    assert!(e.contains("erfinv"), "{e}");
    let want: Vec<f64> = xh
        .to_f64_vec()
        .iter()
        .map(|v| ((v + 1.0) as f32 * 2.0) as f64)
        .collect();
    assert!(max_err(&good2.to_f64_vec().unwrap(), &want) < 1e-6);
    assert_eq!(good.to_f64_vec().unwrap().len(), 15);
    for t in [&bad, &after_bad] {
        let e = t.to_host().unwrap_err();
        assert!(matches!(e, EagerError::Failed { .. }), "{e}");
        let e = e.to_string();
        assert!(
            e.contains("erfinv") && e.contains("tessera_no_such_target"),
            "{e}"
        );
    }
    // Using a failed tensor in a new op is the same clear error.
    let e = after_bad.add(&good).unwrap_err().to_string();
    assert!(e.contains("erfinv"), "{e}");
}

#[test]
fn strict_reports_a_failing_program_at_its_op() {
    let _g = ModeGuard::new(EagerMode::Strict).unwrap();
    let x = dev(&host(5, &[3, 5]));
    let e = call("erfinv", vec![(&x).into()], vec![])
        .unwrap_err()
        .to_string();
    assert!(e.contains("erfinv"), "{e}");
}

#[test]
fn debug_names_the_shapes_of_an_op_that_fails_on_the_device() {
    let _g = ModeGuard::new(EagerMode::Debug).unwrap();
    let x = dev(&host(7, &[3, 5]));
    let e = call("erfinv", vec![(&x).into()], vec![])
        .unwrap_err()
        .to_string();
    assert!(e.contains("erfinv") && e.contains("self: f32[3, 5]"), "{e}");
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let x = dev(&host(6, &[2, 2]));
    let e = call("aten::no_such_op", vec![(&x).into()], vec![])
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown op"), "{e}");
    let e = x.select(0, 7).unwrap_err().to_string();
    assert!(e.contains("select"), "{e}");
    let i = Tensor::from_f64(DType::I32, &[2], &[1., 2.]).unwrap();
    let e = i.softmax(0).unwrap_err().to_string();
    assert!(e.contains("softmax"), "{e}");
    let e = x.item().unwrap_err().to_string();
    assert!(e.contains("4 elements"), "{e}");
}
