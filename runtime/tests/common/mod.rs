//! Shared helpers of the runtime's integration tests: the real CPU plugin, random inputs,
//! and float64 comparisons.
#![allow(dead_code)]

pub mod programs;

use rand::{Rng, SeedableRng};
use tessera_runtime::{Client, Device, HostTensor};

/// The shared CPU client (the real XLA CPU PJRT plugin).
pub fn cpu() -> Client {
    Device::cpu()
        .expect("CPU plugin (run `make setup` or `tessera plugin install cpu`)")
        .client()
        .unwrap()
        .clone()
}

pub fn random_f64(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-2.0..2.0)).collect()
}

/// Max relative error of `got` vs `want`: |got - want| / max(1, |want|).
pub fn max_rel_err(got: &HostTensor, want: &[f64]) -> f64 {
    let got = got.to_f64_vec();
    assert_eq!(got.len(), want.len(), "element count");
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
        .fold(0.0, f64::max)
}
