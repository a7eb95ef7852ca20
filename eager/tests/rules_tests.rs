//! Materialization rules of DeferAndFuse, each on its own: where the pending graph is cut.

mod common;
use common::*;

fn defer_stats(f: impl FnOnce() -> Tensor) -> (Tensor, ModeStats) {
    let _g = ModeGuard::new(EagerMode::DeferAndFuse).unwrap();
    reset_stats();
    let t = f();
    sync().unwrap();
    (t, stats().mode(EagerMode::DeferAndFuse).clone())
}

#[test]
fn a_fused_program_holds_at_most_five_large_transcendental_ops_on_cpu() {
    let xh = host(90, &[128, 128]);
    let x = dev(&xh);
    let (y, s) = defer_stats(|| {
        let mut y = x.mul_scalar(0.5).unwrap();
        for _ in 0..12 {
            y = y.sin().unwrap().add_scalar(0.25).unwrap();
        }
        y
    });
    // [mul, 4 x (sin, add), sin] [add, 4 x (sin, add), sin] [add, 2 x (sin, add)]
    assert_eq!(s.launches, 3, "{s:?}");
    assert_eq!(s.flushes.get(&FlushReason::SlowFused), Some(&2), "{s:?}");
    let want: Vec<f64> = xh
        .to_f64_vec()
        .iter()
        .map(|v| {
            let mut y = v * 0.5;
            for _ in 0..12 {
                y = y.sin() + 0.25;
            }
            y
        })
        .collect();
    assert!(max_err(&y.to_f64_vec().unwrap(), &want) < 1e-5);
}

#[test]
fn small_tensors_and_arithmetic_stay_in_one_program() {
    let x = dev(&host(91, &[8, 8]));
    let big_tanh = dev(&host(95, &[128, 128]));
    let (_, s) = defer_stats(|| {
        let mut y = x.clone();
        for _ in 0..5 {
            y = y.sin().unwrap().mul_scalar(1.5).unwrap();
        }
        y
    });
    assert_eq!(s.launches, 1, "{s:?}");
    // tanh fuses as fast as it runs alone: it does not cut.
    let (_, s) = defer_stats(|| {
        let mut y = big_tanh.clone();
        for _ in 0..5 {
            y = y.tanh().unwrap().mul_scalar(1.5).unwrap();
        }
        y
    });
    assert_eq!(s.launches, 1, "{s:?}");
    let big = dev(&host(92, &[256, 130]));
    let (_, s) = defer_stats(|| {
        let mut y = big.clone();
        for _ in 0..20 {
            y = y.mul(&big).unwrap().add_scalar(0.1).unwrap();
        }
        y
    });
    assert_eq!(s.launches, 1, "{s:?}");
}

#[test]
fn a_loop_without_syncs_is_cut_at_the_same_place_and_compiles_once() {
    let (xh, yh) = (host(93, &[3, 4]), host(94, &[3, 4]));
    let (x, y0) = (dev(&xh), dev(&yh));
    set_max_pending_ops(30);
    let (y, s) = defer_stats(|| {
        // (Starting from `x` itself would make the first graph read one buffer twice, and
        // from a clone of `y0` would leave its first input held by a tensor, not donated:
        // different programs.)
        let mut y = y0;
        for _ in 0..80 {
            // Four ops a step: past 30 ops the graph is cut at 32, a whole number of steps.
            y = y
                .mul(&x)
                .unwrap()
                .add_scalar(0.1)
                .unwrap()
                .sin()
                .unwrap()
                .mul_scalar(1.5)
                .unwrap();
        }
        y
    });
    set_max_pending_ops(MAX_PENDING_OPS);
    assert_eq!(s.flushes.get(&FlushReason::SizeLimit), Some(&10), "{s:?}");
    assert_eq!(s.compiles, 1, "{s:?}");
    let want: Vec<f64> = xh
        .to_f64_vec()
        .iter()
        .zip(yh.to_f64_vec())
        .map(|(&v, y0)| {
            let mut y = y0;
            for _ in 0..80 {
                y = ((y * v) + 0.1).sin() * 1.5;
            }
            y
        })
        .collect();
    assert!(max_err(&y.to_f64_vec().unwrap(), &want) < 1e-4);
}
