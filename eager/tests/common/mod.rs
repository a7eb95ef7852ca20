//! Helpers shared by the eager tests: seeded random tensors, float64 references, and the
//! host path (`tessera_ops::call`, verified against torch) as an oracle.
#![allow(dead_code)]

pub use rand::{rngs::StdRng, Rng, SeedableRng};
pub use tessera_eager::*;
pub use tessera_lowering::{DType, HostTensor};

/// `n` uniform draws in [-1, 1) from `seed`.
pub fn draws(seed: u64, n: usize) -> Vec<f64> {
    let mut r = StdRng::seed_from_u64(seed);
    (0..n).map(|_| r.gen_range(-1.0..1.0)).collect()
}

/// A seeded random f32 host tensor.
pub fn host(seed: u64, shape: &[usize]) -> HostTensor {
    let n = shape.iter().product();
    HostTensor::from_f64(DType::F32, shape.to_vec(), &draws(seed, n))
}

pub fn dev(h: &HostTensor) -> Tensor {
    Tensor::from_host(h).unwrap()
}

/// Max |a - b| over the elements, asserting equal lengths.
pub fn max_err(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Runs `op` through the host path (`tessera_ops::call`) on the CPU plugin.
pub fn host_call(op: &str, args: Vec<tessera_ops::ArgValue<HostTensor>>) -> HostTensor {
    let dev = tessera_runtime::Device::cpu().unwrap();
    let r = tessera_ops::call(op, args, vec![], &dev, tessera_ops::CallOptions::default()).unwrap();
    match r.outputs.into_iter().next().unwrap() {
        tessera_ops::Output::Tensor(t) => t,
        o => panic!("not a tensor: {o:?}"),
    }
}

/// Every mode, in order.
pub const MODES: [EagerMode; 4] = EagerMode::ALL;

/// Runs `f` with this thread in mode `m`, then syncs.
pub fn in_mode<R>(m: EagerMode, f: impl FnOnce() -> R) -> R {
    let _g = ModeGuard::new(m).unwrap();
    let r = f();
    sync().unwrap();
    r
}
