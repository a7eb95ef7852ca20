//! Helpers shared by the ops integration tests: argument builders and one call on the XLA CPU
//! plugin. Each test file uses some of them.
#![allow(dead_code)]

// What every test file names, so each needs only `use common::*;`.
pub use tessera_lowering::{DType, HostTensor};
pub use tessera_ops::{call, ArgValue, CallOptions, OpError, Output};
pub use tessera_runtime::Device;

pub type A = ArgValue<HostTensor>;

/// A tensor argument of `dtype` and `shape` holding `v`.
pub fn t(dtype: DType, shape: &[usize], v: &[f64]) -> A {
    ArgValue::Tensor(HostTensor::from_f64(dtype, shape.to_vec(), v))
}

pub fn ints(v: &[i64]) -> A {
    ArgValue::IntList(v.to_vec())
}

/// The outputs of `op` on the CPU plugin, random ops drawing from `seed`.
pub fn run_seeded(
    op: &str,
    args: Vec<A>,
    kwargs: Vec<(&str, A)>,
    seed: u64,
) -> Result<Vec<Output>, OpError> {
    let kwargs = kwargs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let options = CallOptions {
        seed,
        ..Default::default()
    };
    Ok(call(op, args, kwargs, &Device::cpu().unwrap(), options)?.outputs)
}

pub fn run(op: &str, args: Vec<A>, kwargs: Vec<(&str, A)>) -> Result<Vec<Output>, OpError> {
    run_seeded(op, args, kwargs, 0)
}

pub fn tensor(o: &Output) -> &HostTensor {
    match o {
        Output::Tensor(t) => t,
        other => panic!("expected a tensor, got {other:?}"),
    }
}

/// The values of a tensor output.
pub fn values(o: &Output) -> Vec<f64> {
    tensor(o).to_f64_vec()
}

/// `got` matches `want` elementwise within `tol * (1 + |want|)` (NaN matches NaN).
pub fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (x, y) in got.iter().zip(want) {
        let ok = (x - y).abs() <= tol * (1.0 + y.abs()) || (x.is_nan() && y.is_nan()) || x == y;
        assert!(ok, "{got:?} vs {want:?}");
    }
}

/// Deterministic pseudo-random values in `[lo, hi)` (a fixed LCG: tests are seeded).
pub fn draws(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}
