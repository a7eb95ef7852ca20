//! The softmax kernel as an override of `aten::_softmax`: chosen by dispatch when its
//! predicate holds, not otherwise, with the default lowering's results; lowered for a TPU,
//! the op's module calls the Mosaic kernel, and libtpu compiles it for three generations (no
//! TPU needed; needs libtpu, which `make test` installs).

use rand::{Rng, SeedableRng};
use tessera_kernels::shipped;
use tessera_lowering::backend::{self, Backend, Target};
use tessera_lowering::stablehlo::{TensorType, Value};
use tessera_lowering::{DType, HostTensor};
use tessera_ops::plan::types_of;
use tessera_ops::{
    bind, call, find, lower_planned, plan, result_values, ArgValue, CallOptions, CallResult, Lower,
    Output,
};
use tessera_runtime::{CompileOptions, Device, DeviceKind, TpuTarget};
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

/// The module of an `aten::_softmax` call over the last dim of `x`, planned for a device of
/// `kind` and lowered with `target` as the kernels' target, as `ops::call` builds it (without
/// running it, so no TPU is needed).
fn softmax_module(x: &HostTensor, kind: DeviceKind, target: Option<Target>) -> String {
    let args = vec![
        ArgValue::Tensor(x.clone()),
        ArgValue::Int(-1),
        ArgValue::Bool(false),
    ];
    let bound = bind(find("aten::_softmax").unwrap(), args, Vec::new()).unwrap();
    let p = plan(
        &types_of(&bound),
        Some(&bound),
        kind,
        CallOptions::default(),
    )
    .unwrap();
    assert_eq!(p.choice.kernel(), Some("softmax"));
    let mut cx = Lower::new(0, kind);
    cx.target = target;
    let inputs: Vec<Value> = p
        .inputs
        .iter()
        .map(|_| cx.f.arg(TensorType::new(x.shape(), x.dtype())))
        .collect();
    let lowered = lower_planned(&mut cx, &p, &inputs).unwrap();
    let results = result_values(&lowered.outs);
    let refs: Vec<&Value> = results.iter().collect();
    cx.f.finish(&refs).unwrap().into_text()
}

/// The `tpu_custom_call` line of the softmax kernel lowered on its own to Mosaic for
/// `target`: the Mosaic kernel rides in its `backend_config`.
fn mosaic_custom_call(x: &HostTensor, target: Target) -> String {
    let k = shipped().iter().find(|k| k.name == "softmax").unwrap();
    let program = (k.launch)(x.shape())
        .unwrap()
        .trace_program(&[(x.dtype(), x.shape().to_vec())])
        .unwrap();
    let lowered = backend::lower(
        &program,
        Backend::for_target(target, Default::default(), false),
    );
    let module = lowered.unwrap().into_module().unwrap();
    let line = module.lines().find(|l| l.contains("tpu_custom_call"));
    line.expect("a tpu_custom_call").trim().to_string()
}

const TOPOLOGIES: [&str; 3] = ["v5e:2x2", "v6e:2x2", "tpu7x:2x2x1"];

#[test]
fn on_a_tpu_the_override_calls_the_mosaic_kernel_and_libtpu_compiles_it() {
    for topology in TOPOLOGIES {
        let aot = TpuTarget::aot(topology).unwrap_or_else(|e| panic!("{topology}: {e}"));
        let target = aot.target().unwrap();
        for dtype in [DType::F32, DType::BF16] {
            for shape in [[16, 256], [512, 1024]] {
                let x = random(dtype, &shape);
                let module = softmax_module(&x, DeviceKind::Tpu, Some(target));
                let call = mosaic_custom_call(&x, target);
                assert!(
                    module.contains("func.call") && module.contains(&call),
                    "{topology} {dtype} {shape:?}: no call of the Mosaic kernel in\n{module}"
                );
                let out = aot
                    .compile(&module, &CompileOptions::default())
                    .unwrap_or_else(|e| panic!("{topology} {dtype} {shape:?}: {e}"));
                assert!(out.code_bytes > 0, "{topology} {dtype} {shape:?}");
            }
        }
    }
}

#[test]
fn on_cpu_the_override_inlines_the_kernel_as_stablehlo() {
    // No target given: the CPU kind's own (StableHLO), as for an op of the eager runtime.
    let x = random(DType::F32, &[16, 256]);
    let module = softmax_module(&x, DeviceKind::Cpu, None);
    assert!(module.contains("func.call"), "{module}");
    assert!(!module.contains("custom_call"), "{module}");
}
