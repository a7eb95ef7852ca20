//! The lowering cache and the fused-program cache: repeated work compiles once, and numbers
//! that change every step (a learning rate) do not recompile. Each test uses shapes no other
//! test uses, since the caches are shared by the process.

mod common;
use common::*;

/// One SGD step of a linear model y = x w, loss = mean((y - t)^2), hand-written gradient.
fn sgd_step(x: &Tensor, w: &Tensor, target: &Tensor, lr: f64) -> Tensor {
    let y = x.matmul(w).unwrap();
    let d = y.sub(target).unwrap();
    let loss = d.mul(&d).unwrap().mean().unwrap();
    let n = d.numel() as f64;
    let g = x
        .t()
        .unwrap()
        .matmul(&d)
        .unwrap()
        .mul_scalar(2.0 / n)
        .unwrap();
    w.add_scaled_(&g, -lr).unwrap();
    loss
}

#[test]
fn a_deferred_loop_compiles_once_even_with_a_changing_learning_rate() {
    let _g = ModeGuard::new(EagerMode::DeferAndFuse).unwrap();
    let x = dev(&host(10, &[7, 3]));
    let t = dev(&host(11, &[7, 2]));
    let w = dev(&host(12, &[3, 2]));
    // Warm-up step (compiles), then 100 steps with a different lr each.
    sgd_step(&x, &w, &t, 0.1).item().unwrap();
    reset_stats();
    let mut losses = Vec::new();
    for i in 0..100 {
        let lr = 0.1 + 0.001 * i as f64;
        losses.push(sgd_step(&x, &w, &t, lr).item().unwrap());
    }
    let s = stats();
    let d = s.mode(EagerMode::DeferAndFuse);
    assert_eq!(d.compiles, 0, "{s}");
    assert_eq!(d.launches, 100, "{s}");
    assert_eq!(d.flushes_total(), 100, "{s}");
    assert!(
        losses[99] < losses[0],
        "training lowers the loss: {losses:?}"
    );
}

#[test]
fn first_loop_compiles_exactly_once() {
    let _g = ModeGuard::new(EagerMode::DeferAndFuse).unwrap();
    let x = dev(&host(13, &[9, 4]));
    let t = dev(&host(14, &[9, 3]));
    let w = dev(&host(15, &[4, 3]));
    reset_stats();
    for i in 0..100 {
        sgd_step(&x, &w, &t, 0.05 + 0.0001 * i as f64)
            .item()
            .unwrap();
    }
    let d = stats().mode(EagerMode::DeferAndFuse).clone();
    assert_eq!(d.compiles, 1, "{d:?}");
    assert_eq!(d.launches, 100, "{d:?}");
}

#[test]
fn strict_ops_compile_once_per_signature() {
    let _g = ModeGuard::new(EagerMode::Strict).unwrap();
    let a = dev(&host(16, &[11, 13]));
    reset_stats();
    let mut x = a.clone();
    for i in 0..50 {
        // Different scalars every step: one program for mul, one for add.
        x = x
            .mul_scalar(1.0 + 1e-3 * i as f64)
            .unwrap()
            .add_scalar(0.01 * i as f64)
            .unwrap();
    }
    x.wait().unwrap();
    let s = stats().mode(EagerMode::Strict).clone();
    assert_eq!(s.compiles, 2, "{s:?}");
    assert_eq!(s.launches, 100, "{s:?}");
    assert!(s.cache_hits >= 98, "{s:?}");
    // And the value is right (f64 reference, f32 rounding tolerance).
    let mut r = host(16, &[11, 13]).to_f64_vec();
    for i in 0..50 {
        for v in &mut r {
            *v = *v * (1.0 + 1e-3 * i as f64) + 0.01 * i as f64;
        }
    }
    assert!(max_err(&x.to_f64_vec().unwrap(), &r) < 1e-4);
}

#[test]
fn only_live_values_leave_a_fused_program() {
    let _g = ModeGuard::new(EagerMode::DeferAndFuse).unwrap();
    let a = dev(&host(17, &[17, 5]));
    reset_stats();
    let kept = {
        let dead1 = a.exp().unwrap();
        let dead2 = dead1.add_scalar(1.0).unwrap();
        dead2.mul(&a).unwrap()
    };
    sync().unwrap();
    let s = stats().mode(EagerMode::DeferAndFuse).clone();
    assert_eq!((s.launches, s.compiles), (1, 1), "{s:?}");
    // One output of 17*5 f32 comes back when read; nothing else was materialized.
    reset_stats();
    let got = kept.to_f64_vec().unwrap();
    assert_eq!(
        stats().mode(EagerMode::DeferAndFuse).bytes_to_host,
        17 * 5 * 4
    );
    let want: Vec<f64> = host(17, &[17, 5])
        .to_f64_vec()
        .iter()
        .map(|v| (v.exp() + 1.0) * v)
        .collect();
    assert!(max_err(&got, &want) < 1e-5);
}

/// Adam's update, `p.addcdiv_(m, v.sqrt() + eps, value=-step_size)`, with a step size that
/// changes every step: the value is a device input (the eager runtime's scalar lifting), so
/// DeferAndFuse compiles the step once; the result is PyTorch's order, `p + (value*m)/d`
/// (checked against a float64 reference each step), and addcmul likewise.
#[test]
fn adam_step_sizes_in_addcdiv_do_not_recompile() {
    let _g = ModeGuard::new(EagerMode::DeferAndFuse).unwrap();
    let pos: Vec<f64> = draws(19, 30).iter().map(|v| v.abs() + 0.5).collect();
    let (m, d) = (
        dev(&host(18, &[6, 5])),
        dev(&HostTensor::from_f64(DType::F32, vec![6, 5], &pos)),
    );
    let p = dev(&host(20, &[6, 5]));
    let step = |value: f64| {
        let value = ArgValue::Float(value);
        call(
            "addcdiv_",
            vec![(&p).into(), (&m).into(), (&d).into()],
            vec![("value", value)],
        )
        .unwrap();
        let q = call(
            "addcmul",
            vec![(&p).into(), (&m).into(), (&d).into()],
            vec![("value", ArgValue::Float(0.25))],
        )
        .unwrap();
        match q.into_iter().next().unwrap() {
            Output::Tensor(q) => q.to_f64_vec().unwrap(),
            o => panic!("not a tensor: {o:?}"),
        }
    };
    step(-0.001);
    reset_stats();
    let mut want = p.to_f64_vec().unwrap();
    let (vm, vd) = (m.to_f64_vec().unwrap(), d.to_f64_vec().unwrap());
    for i in 0..20 {
        let value = -0.001 * (1.0 + i as f64 / 7.0);
        let got_q = step(value);
        for (w, (a, b)) in want.iter_mut().zip(vm.iter().zip(&vd)) {
            *w += value * a / b;
        }
        let got = p.to_f64_vec().unwrap();
        assert!(max_err(&got, &want) < 1e-5, "step {i}");
        let want_q: Vec<f64> = got
            .iter()
            .zip(vm.iter().zip(&vd))
            .map(|(p, (a, b))| p + 0.25 * a * b)
            .collect();
        assert!(max_err(&got_q, &want_q) < 1e-5, "step {i}");
    }
    let s = stats().mode(EagerMode::DeferAndFuse).clone();
    assert_eq!(s.compiles, 0, "{s:?}");
}
