//! Random ops in the eager runtime draw a new key per call from the runtime's generator
//! (a program input, so `rand` never recompiles), `manual_seed` restarts the sequence, and
//! every mode draws the same numbers for the same sequence of calls. The generator is one per
//! process, so these tests run one at a time (a lock) and use shapes no other test uses.

mod common;
use common::*;
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn rand(n: usize) -> Tensor {
    let size = ArgValue::IntList(vec![n as i64]);
    first_tensor(call("rand", vec![size], vec![]).unwrap()).unwrap()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

/// Mean and variance of `v`.
fn moments(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    (mean, v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n)
}

#[test]
fn each_call_draws_new_numbers_from_one_program_and_a_seed_repeats_them() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let _g = ModeGuard::new(EagerMode::Strict).unwrap();
    manual_seed(5);
    rand(4099);
    reset_stats();
    let draws: Vec<Vec<f64>> = (0..10).map(|_| values(&rand(4099))).collect();
    assert_eq!(
        stats().mode(EagerMode::Strict).compiles,
        0,
        "one program for every call"
    );
    for (i, a) in draws.iter().enumerate() {
        for b in &draws[i + 1..] {
            assert_ne!(a, b, "two calls drew the same numbers");
        }
        // Uniform [0, 1): 4099 draws, mean within 6 standard errors (0.0045) of 1/2,
        // variance within 0.01 of 1/12.
        assert!(a.iter().all(|x| (0.0..1.0).contains(x)));
        let (mean, var) = moments(a);
        assert!((mean - 0.5).abs() < 0.027, "mean {mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.01, "variance {var}");
    }
    manual_seed(5);
    rand(4099);
    let again: Vec<Vec<f64>> = (0..10).map(|_| values(&rand(4099))).collect();
    assert_eq!(draws, again, "manual_seed restarts the sequence");
}

#[test]
fn every_mode_draws_the_same_numbers_for_the_same_calls() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let x = dev(&host(31, &[3, 333]));
    let program = || {
        // Two draws in one fused program must differ; dropout keeps about half, scaled by 2.
        let a = rand(999);
        let b = rand(999);
        let p = ArgValue::Float(0.5);
        let outs = call(
            "native_dropout",
            vec![ArgValue::Tensor(x.clone()), p, ArgValue::Bool(true)],
            vec![],
        )
        .unwrap();
        let kept = first_tensor(outs).unwrap();
        (values(&a), values(&b), values(&kept))
    };
    let mut runs = Vec::new();
    for m in [EagerMode::Strict, EagerMode::Debug, EagerMode::DeferAndFuse] {
        manual_seed(77);
        runs.push(in_mode(m, program));
    }
    let (a, b, kept) = &runs[0];
    assert_ne!(a, b);
    let xs = x.to_f64_vec().unwrap();
    let mut zeros = 0;
    for (k, x) in kept.iter().zip(&xs) {
        if *k == 0.0 {
            zeros += 1;
        } else {
            assert!((k - 2.0 * x).abs() < 1e-6, "a kept value is x / (1 - p)");
        }
    }
    // 999 Bernoulli(1/2): within 6 standard deviations (95) of 499.5.
    assert!(
        (zeros as f64 - 499.5).abs() < 95.0,
        "{zeros} of 999 dropped"
    );
    for r in &runs[1..] {
        assert_eq!(r, &runs[0], "the modes drew different numbers");
    }
}

#[test]
fn a_compiled_function_draws_new_numbers_on_every_replay() {
    let _l = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let x = dev(&host(32, &[1234]));
    let mut noisy = compile(|xs: &[Tensor]| {
        let r = first_tensor(call(
            "rand_like",
            vec![ArgValue::Tensor(xs[0].clone())],
            vec![],
        )?)?;
        Ok(vec![xs[0].add(&r)?])
    });
    let base = x.to_f64_vec().unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        let y = values(&noisy.call(std::slice::from_ref(&x)).unwrap()[0]);
        let r: Vec<f64> = y.iter().zip(&base).map(|(y, x)| y - x).collect();
        assert!(r.iter().all(|v| (-1e-6..1.0 + 1e-6).contains(v)));
        assert!(
            !seen.contains(&r),
            "a replay repeated the numbers of an earlier call"
        );
        seen.push(r);
    }
    assert!(noisy.is_traced());
}
