//! Compiled mode: a closure traced once into one program, then replayed without recording.

mod common;
use common::*;

#[test]
fn a_compiled_function_traces_once_and_replays_on_new_inputs() {
    let w = dev(&host(60, &[6, 5]));
    let mut f = compile(|x: &[Tensor]| Ok(vec![x[0].matmul(&w)?.tanh()?.add_scalar(1.0)?]));
    reset_stats();
    for seed in 0..5 {
        let xh = host(61 + seed, &[3, 6]);
        let y = f.call(&[dev(&xh)]).unwrap().remove(0);
        assert!(f.is_traced());
        // Reference: the host path for the matmul, f64 for the rest.
        use tessera_ops::ArgValue as A;
        let wh = host(60, &[6, 5]);
        let m = host_call("matmul", vec![A::Tensor(xh), A::Tensor(wh)]);
        let want: Vec<f64> = m.to_f64_vec().iter().map(|v| v.tanh() + 1.0).collect();
        assert!(
            max_err(&y.to_f64_vec().unwrap(), &want) < 1e-6,
            "call {seed}"
        );
    }
    let s = stats().mode(EagerMode::Compiled).clone();
    assert_eq!(s.compiles, 1, "{s:?}");
    assert_eq!(s.launches, 5, "{s:?}");
    // Only the trace recorded ops (matmul, tanh, add).
    assert_eq!(s.ops, 3, "{s:?}");
}

#[test]
fn replays_update_captured_weights_and_arguments_in_place() {
    let x = dev(&host(70, &[4, 3]));
    let w = dev(&host(71, &[3, 2]));
    let count = Tensor::zeros(DType::F32, &[1]).unwrap();
    // Gradient descent on sum((x w)^2) with a fixed rate, and a step counter argument.
    let mut step = compile(|a: &[Tensor]| {
        let y = x.matmul(&w)?;
        let g = x.t()?.matmul(&y)?.mul_scalar(2.0)?;
        w.add_scaled_(&g, -0.01)?;
        a[0].add_scalar_(1.0)?;
        Ok(vec![y.mul(&y)?.sum()?])
    });
    let mut losses = Vec::new();
    for _ in 0..4 {
        losses.push(
            step.call(std::slice::from_ref(&count)).unwrap()[0]
                .item()
                .unwrap(),
        );
    }
    assert_eq!(count.to_f64_vec().unwrap(), vec![4.0]);
    // The same four steps in f64 on the host.
    let xs = host(70, &[4, 3]).to_f64_vec();
    let mut ws = host(71, &[3, 2]).to_f64_vec();
    for (k, got) in losses.iter().enumerate() {
        let mut y = [0.0; 8];
        for i in 0..4 {
            for j in 0..2 {
                y[i * 2 + j] = (0..3).map(|c| xs[i * 3 + c] * ws[c * 2 + j]).sum();
            }
        }
        let loss: f64 = y.iter().map(|v| v * v).sum();
        assert!(
            (loss - got).abs() < 1e-4 * loss.max(1.0),
            "step {k}: {got} vs {loss}"
        );
        for c in 0..3 {
            for j in 0..2 {
                let g: f64 = (0..4).map(|i| xs[i * 3 + c] * y[i * 2 + j]).sum::<f64>() * 2.0;
                ws[c * 2 + j] -= 0.01 * g;
            }
        }
    }
    assert!(max_err(&w.to_f64_vec().unwrap(), &ws) < 1e-5);
    assert!(losses[3] < losses[0]);
}

#[test]
fn new_argument_types_trace_again() {
    let mut f = compile(|x: &[Tensor]| Ok(vec![x[0].mul_scalar(3.0)?]));
    let a = f.call(&[dev(&host(80, &[2]))]).unwrap().remove(0);
    let b = f.call(&[dev(&host(81, &[3]))]).unwrap().remove(0);
    assert_eq!(a.shape(), vec![2]);
    assert_eq!(b.shape(), vec![3]);
    let want: Vec<f64> = host(81, &[3])
        .to_f64_vec()
        .iter()
        .map(|v| v * 3.0)
        .collect();
    assert!(max_err(&b.to_f64_vec().unwrap(), &want) < 1e-6);
}

#[test]
fn tensors_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tensor>();
    check::<EagerError>();
}

#[test]
fn a_trace_with_a_host_read_inside_runs_the_closure_each_call() {
    // The closure reads a value on the host mid-way: that is not one program, so every call
    // runs the closure again (with correct results), rather than replaying half of it.
    let mut f = compile(|x: &[Tensor]| {
        let s = x[0].sum()?.item()?;
        Ok(vec![x[0].mul_scalar(s)?])
    });
    for seed in 0..3 {
        let xh = host(100 + seed, &[5]);
        let y = f.call(&[dev(&xh)]).unwrap().remove(0);
        assert!(!f.is_traced());
        let v = xh.to_f64_vec();
        let s: f64 = v.iter().sum();
        let want: Vec<f64> = v.iter().map(|a| a * s).collect();
        assert!(
            max_err(&y.to_f64_vec().unwrap(), &want) < 1e-5,
            "call {seed}"
        );
    }
}
