//! Buffer donation in DeferAndFuse: an input whose tensor moved on (overwritten in place, or
//! dropped) gives its memory to a result; one a tensor still holds is never donated and stays
//! readable. Values match Strict mode, which never donates.

mod common;
use common::*;

/// `steps` SGD steps of y = x w on mean squared error, updating `w` in place; the losses.
fn train(mode: EagerMode, steps: usize) -> (Vec<f64>, Vec<f64>, ModeStats) {
    let _g = ModeGuard::new(mode).unwrap();
    let (xh, th) = (host(201, &[16, 8]), host(202, &[16, 4]));
    let (x, t, w) = (dev(&xh), dev(&th), dev(&host(203, &[8, 4])));
    reset_stats();
    let mut losses = Vec::new();
    for _ in 0..steps {
        let d = x.matmul(&w).unwrap().sub(&t).unwrap();
        let g = x
            .t()
            .unwrap()
            .matmul(&d)
            .unwrap()
            .mul_scalar(2.0 / 64.0)
            .unwrap();
        w.add_scaled_(&g, -0.1).unwrap();
        losses.push(d.mul(&d).unwrap().mean().unwrap().item().unwrap());
    }
    let s = stats().mode(mode).clone();
    // The read-only inputs were never donated: they read back as uploaded.
    assert_eq!(x.to_host().unwrap(), xh);
    assert_eq!(t.to_host().unwrap(), th);
    (losses, w.to_f64_vec().unwrap(), s)
}

#[test]
fn in_place_updates_donate_the_old_buffer_and_match_strict() {
    let (strict_losses, strict_w, strict) = train(EagerMode::Strict, 20);
    let (losses, w, defer) = train(EagerMode::DeferAndFuse, 20);
    assert_eq!(strict.donated, 0, "{strict:?}");
    // Every step after the first donates the weight's old buffer (the first one is the
    // upload, which aliases host memory: copied, not donated). One program for all steps.
    assert!(defer.donated >= 19, "{defer:?}");
    assert_eq!(defer.compiles, 1, "{defer:?}");
    // f32, fused vs op by op: rounding order only.
    assert!(
        max_err(&losses, &strict_losses) < 1e-5,
        "{losses:?} vs {strict_losses:?}"
    );
    assert!(max_err(&w, &strict_w) < 1e-5);
    assert!(losses[19] < losses[0]);
}

#[test]
fn a_held_value_is_never_donated_and_a_dropped_one_is() {
    let _g = ModeGuard::new(EagerMode::DeferAndFuse).unwrap();
    let xh = host(204, &[32, 16]);
    let x = dev(&xh);
    let a = x.mul_scalar(2.0).unwrap();
    sync().unwrap();
    reset_stats();
    // `a` is still held: its buffer is read, not donated.
    let b = a.add_scalar(1.0).unwrap();
    sync().unwrap();
    assert_eq!(stats().mode(EagerMode::DeferAndFuse).donated, 0);
    let x2: Vec<f64> = xh
        .to_f64_vec()
        .iter()
        .map(|v| 2.0 * (*v as f32) as f64)
        .collect();
    assert!(max_err(&a.to_f64_vec().unwrap(), &x2) < 1e-6);
    // Dropped before the flush: nothing else can read it, so the result takes its memory.
    let c = a.mul_scalar(3.0).unwrap();
    drop(a);
    sync().unwrap();
    assert_eq!(stats().mode(EagerMode::DeferAndFuse).donated, 1);
    let x6: Vec<f64> = x2.iter().map(|v| 3.0 * v).collect();
    assert!(max_err(&c.to_f64_vec().unwrap(), &x6) < 1e-5);
    let x2p1: Vec<f64> = x2.iter().map(|v| v + 1.0).collect();
    assert!(max_err(&b.to_f64_vec().unwrap(), &x2p1) < 1e-6);
    assert!(format!("{}", stats()).contains("1 buffer(s) donated"));
}
