//! Programs of other origins (kernel ops) run on eager tensors (`run_program`): the result
//! matches a float64 reference, pending inputs are computed first, every mode but Compiled
//! takes it, and a program whose results do not match the declared types is an error.

mod common;
use common::*;
use tessera_lowering::stablehlo::TensorType;
use tessera_runtime::{CompileOptions, Device};

/// `a * b + 1` on f32[4, 3] (a program built outside the op library, as a kernel's is).
const MODULE: &str = r#"
func.func @main(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %m = stablehlo.multiply %a, %b : tensor<4x3xf32>
  %one = stablehlo.constant dense<1.0> : tensor<4x3xf32>
  %r = stablehlo.add %m, %one : tensor<4x3xf32>
  return %r : tensor<4x3xf32>
}
"#;

fn program() -> std::sync::Arc<tessera_runtime::Executable> {
    let client = Device::cpu().unwrap().client().unwrap().clone();
    client
        .compile_cached(MODULE, &CompileOptions::default())
        .unwrap()
}

fn ty() -> TensorType {
    TensorType::new(vec![4, 3], DType::F32)
}

#[test]
fn a_program_runs_on_device_tensors_in_strict_debug_and_defer() {
    let exe = program();
    let (a, b) = (draws(40, 12), draws(41, 12));
    // (a + a) * b + 1: the input `a + a` is an eager op's result (pending in DeferAndFuse).
    let want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| 2.0 * x * y + 1.0).collect();
    for m in [EagerMode::Strict, EagerMode::Debug, EagerMode::DeferAndFuse] {
        let got = in_mode(m, || {
            let x = dev(&HostTensor::from_f64(DType::F32, vec![4, 3], &a));
            let y = dev(&HostTensor::from_f64(DType::F32, vec![4, 3], &b));
            let x2 = x.add(&x).unwrap();
            let out = run_program(&exe, &[x2, y], &[ty()], "kernel `fma`").unwrap();
            assert_eq!(out.len(), 1);
            out[0].to_f64_vec().unwrap()
        });
        assert!(max_err(&got, &want) < 1e-6, "{m:?}");
    }
}

#[test]
fn declared_types_that_do_not_match_the_program_are_an_error() {
    let exe = program();
    let x = dev(&host(42, &[4, 3]));
    let wrong = TensorType::new(vec![3, 4], DType::F32);
    let e = run_program(&exe, &[x.clone(), x.clone()], &[wrong], "kernel `fma`").unwrap_err();
    assert!(
        e.to_string()
            .contains("kernel `fma`: the program returned f32[4, 3]"),
        "{e}"
    );
    let e = run_program(&exe, &[x.clone(), x], &[ty(), ty()], "kernel `fma`").unwrap_err();
    assert!(
        e.to_string().contains("returned 1 result(s), 2 expected"),
        "{e}"
    );
}

#[test]
fn a_compiled_trace_refuses_a_program_it_could_not_replay() {
    let exe = program();
    let x = dev(&host(43, &[4, 3]));
    let _g = ModeGuard::new(EagerMode::Compiled).unwrap();
    let e = run_program(&exe, &[x.clone(), x], &[ty()], "kernel `fma`").unwrap_err();
    assert!(
        e.to_string()
            .contains("inside a tessera_eager::compile trace"),
        "{e}"
    );
}
