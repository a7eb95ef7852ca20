//! The eager runtime's random generator. A random op (`Tag::Random`: rand, randn, dropout,
//! bernoulli, ...) takes its stream's key as a program input, a new key per call: `rand`
//! gives new numbers every call without a new program (a seed baked into the program would
//! give the same numbers each call, or a compile per call). A compiled function's replay
//! draws a new key per replay. [`manual_seed`] restarts the sequence, as `torch.manual_seed`
//! does; the sequence is one per process, as torch's default generator.

use std::sync::Mutex;
use tessera_lowering::stablehlo::TensorType;
use tessera_lowering::{DType, HostTensor};

struct Generator {
    seed: u64,
    calls: u64,
}

/// The seed of a process that never called [`manual_seed`] (fixed: runs are reproducible).
const DEFAULT_SEED: u64 = 0x7E55_E7A5_EED0_0001;

static GENERATOR: Mutex<Generator> = Mutex::new(Generator {
    seed: DEFAULT_SEED,
    calls: 0,
});

/// Restarts the random sequence from `seed`.
pub fn manual_seed(seed: u64) {
    let mut g = GENERATOR.lock().unwrap_or_else(|p| p.into_inner());
    g.seed = seed;
    g.calls = 0;
}

/// The key input's type: ThreeFry's `[key, counter]` state; the op adds its stream to the
/// counter.
pub(crate) fn key_type() -> TensorType {
    TensorType::new(vec![2], DType::U64)
}

/// The key of the next random call: a mix of the seed and the call's number (distinct calls
/// get unrelated keys, so their bits do not overlap however many each draws).
pub(crate) fn next_key() -> HostTensor {
    let mut g = GENERATOR.lock().unwrap_or_else(|p| p.into_inner());
    g.calls += 1;
    HostTensor::from_vec(vec![2], vec![mix(g.seed ^ mix(g.calls)), 0u64])
}

/// SplitMix64's finalizer: a bijective mix of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
