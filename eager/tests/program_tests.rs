//! Programs of other origins (kernel ops) on eager tensors (`ProgramOp`): the result matches a
//! float64 reference in every mode; in DeferAndFuse the program fuses with the ops around it
//! (one launch) and a loop calling it compiles once; a compiled function traces and replays
//! it; inputs of the wrong type and modules that cannot be called are errors.

mod common;
use common::*;

/// `a * b + 1` on f32[4, 3] (a module built outside the op library, as a kernel's is).
const MODULE: &str = r#"module {
  func.func public @main(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %m = stablehlo.multiply %a, %b : tensor<4x3xf32>
    %one = stablehlo.constant dense<1.0> : tensor<4x3xf32>
    %r = stablehlo.add %m, %one : tensor<4x3xf32>
    return %r : tensor<4x3xf32>
  }
}"#;

fn fma() -> ProgramOp {
    ProgramOp::new("kernel `fma`", MODULE.to_string()).unwrap()
}

/// `((a + a) * b + 1) * 0.5` in f64.
fn want(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(x, y)| (2.0 * x * y + 1.0) * 0.5)
        .collect()
}

#[test]
fn a_program_runs_between_eager_ops_in_every_mode() {
    let p = fma();
    assert_eq!(p.inputs().len(), 2);
    assert_eq!(p.outputs()[0].shape, vec![4, 3]);
    let (a, b) = (draws(40, 12), draws(41, 12));
    let step = |x: &Tensor, y: &Tensor| -> Result<Vec<Tensor>> {
        // The program's input `x + x` is an eager op's result (pending in DeferAndFuse), and
        // its result feeds another op.
        let out = p.call(&[x.add(x)?, y.clone()])?;
        Ok(vec![out[0].mul_scalar(0.5)?])
    };
    for m in [EagerMode::Strict, EagerMode::Debug, EagerMode::DeferAndFuse] {
        let x = dev(&HostTensor::from_f64(DType::F32, vec![4, 3], &a));
        let y = dev(&HostTensor::from_f64(DType::F32, vec![4, 3], &b));
        reset_stats();
        let got = in_mode(m, || step(&x, &y).unwrap()[0].to_f64_vec().unwrap());
        assert!(max_err(&got, &want(&a, &b)) < 1e-6, "{m:?}");
        let s = stats().mode(m).clone();
        // Strict and Debug launch three programs; DeferAndFuse one, the program inside it.
        let launches = if m == EagerMode::DeferAndFuse { 1 } else { 3 };
        assert_eq!(s.launches, launches, "{m:?}: {s:?}");
    }
    // A compiled function traces the program into its one program and replays it.
    let mut f = compile(|t: &[Tensor]| step(&t[0], &t[1]));
    for seed in 0..3 {
        let (a, b) = (draws(50 + seed, 12), draws(60 + seed, 12));
        let x = dev(&HostTensor::from_f64(DType::F32, vec![4, 3], &a));
        let y = dev(&HostTensor::from_f64(DType::F32, vec![4, 3], &b));
        let got = f.call(&[x, y]).unwrap()[0].to_f64_vec().unwrap();
        assert!(max_err(&got, &want(&a, &b)) < 1e-6, "replay {seed}");
        assert!(f.is_traced());
    }
}

#[test]
fn a_deferred_loop_calling_a_program_compiles_once() {
    let p = fma();
    let b = dev(&host(71, &[4, 3]));
    let mut x = dev(&host(70, &[4, 3]));
    let mut want = host(70, &[4, 3]).to_f64_vec();
    let bs = host(71, &[4, 3]).to_f64_vec();
    let _g = ModeGuard::new(EagerMode::DeferAndFuse).unwrap();
    reset_stats();
    for _ in 0..20 {
        // x <- tanh(x * b + 1): the program, then an ATen op, then a sync point.
        x = p.call(&[x, b.clone()]).unwrap()[0].tanh().unwrap();
        sync().unwrap();
        for (w, y) in want.iter_mut().zip(&bs) {
            *w = (*w * y + 1.0).tanh();
        }
    }
    assert!(max_err(&x.to_f64_vec().unwrap(), &want) < 1e-5);
    let s = stats().mode(EagerMode::DeferAndFuse).clone();
    assert_eq!(s.compiles, 1, "{s:?}");
    assert_eq!(s.launches, 20, "{s:?}");
}

#[test]
fn inputs_of_another_type_than_the_program_takes_are_an_error() {
    let p = fma();
    let x = dev(&host(42, &[4, 3]));
    let e = p.call(&[x.clone()]).unwrap_err();
    assert!(
        e.to_string()
            .contains("kernel `fma`: takes 2 input(s), 1 given"),
        "{e}"
    );
    let wrong = dev(&host(43, &[3, 4]));
    for m in [EagerMode::Strict, EagerMode::DeferAndFuse] {
        let e = in_mode(m, || p.call(&[x.clone(), wrong.clone()]).unwrap_err());
        assert!(
            e.to_string()
                .contains("kernel `fma`: input 1 is f32[3, 4], the program takes f32[4, 3]"),
            "{m:?}: {e}"
        );
    }
}

#[test]
fn a_module_that_cannot_be_called_is_an_error_at_construction() {
    let bare = MODULE
        .trim()
        .strip_prefix("module {")
        .unwrap()
        .strip_suffix('}')
        .unwrap();
    let e = ProgramOp::new("kernel `fma`", bare.to_string()).unwrap_err();
    assert!(e.to_string().contains("plain `module { ... }`"), "{e}");
    let private = MODULE.replace("public @main", "private @main");
    let e = ProgramOp::new("kernel `fma`", private).unwrap_err();
    assert!(e.to_string().contains("no `func.func public @main`"), "{e}");
    let tuple = MODULE.replace("-> tensor<4x3xf32> {", "-> tuple<tensor<4x3xf32>> {");
    let e = ProgramOp::new("kernel `fma`", tuple).unwrap_err();
    assert!(e.to_string().contains("not read as ranked tensors"), "{e}");
}
