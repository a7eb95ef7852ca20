//! The softmax kernel as an override of `aten::_softmax`: chosen by dispatch when its
//! predicate holds, not otherwise, with the default lowering's results.

use rand::{Rng, SeedableRng};
use tessera_lowering::{DType, HostTensor};
use tessera_ops::{call, ArgValue, CallOptions, CallResult, Output};
use tessera_runtime::Device;
// Linked for its inventory registrations (the overrides under test).
use tessera_kernels as _;

fn softmax(x: &HostTensor, dim: i64, skip_overrides: bool) -> CallResult {
    let args = vec![
        ArgValue::Tensor(x.clone()),
        ArgValue::Int(dim),
        ArgValue::Bool(false),
    ];
    let options = CallOptions {
        skip_overrides,
        ..Default::default()
    };
    call(
        "aten::_softmax",
        args,
        vec![],
        &Device::cpu().unwrap(),
        options,
    )
    .unwrap()
}

fn random(dtype: DType, shape: &[usize]) -> HostTensor {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let v: Vec<f64> = (0..shape.iter().product())
        .map(|_| rng.gen_range(-4.0..4.0))
        .collect();
    HostTensor::from_f64(dtype, shape.to_vec(), &v)
}

fn values(r: &CallResult) -> Vec<f64> {
    match &r.outputs[0] {
        Output::Tensor(t) => t.to_f64_vec(),
        other => panic!("expected a tensor, got {other:?}"),
    }
}

#[test]
fn softmax_kernel_is_chosen_when_its_predicate_holds() {
    for (dtype, tol) in [(DType::F32, 1e-6), (DType::BF16, 8e-3)] {
        let x = random(dtype, &[16, 256]);
        let kernel = softmax(&x, -1, false);
        assert_eq!(kernel.kernel, Some("softmax"));
        assert!(kernel.module.as_deref().unwrap().contains("func.call"));
        let default = softmax(&x, -1, true);
        assert_eq!(default.kernel, None);
        for (a, b) in values(&kernel).iter().zip(values(&default)) {
            assert!((a - b).abs() <= tol, "{dtype}: kernel {a} vs default {b}");
        }
    }
}

#[test]
fn default_lowering_runs_where_the_kernel_does_not_apply() {
    // softmax over dim 0, a 3-D input, and an f64 input: not the kernel's case.
    assert_eq!(
        softmax(&random(DType::F32, &[16, 256]), 0, false).kernel,
        None
    );
    assert_eq!(
        softmax(&random(DType::F32, &[2, 8, 128]), -1, false).kernel,
        None
    );
    assert_eq!(
        softmax(&random(DType::F64, &[16, 256]), 1, false).kernel,
        None
    );
}
