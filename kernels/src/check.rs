//! Checking a shipped kernel against its float64 reference on seeded random inputs.
//!
//! Outputs cannot be poisoned from here: the API hands back fresh output arrays, so there is
//! no buffer to fill first. What each backend starts them at instead:
//! - the interpreter fills float outputs with NaN, and NaN counts as an infinite error here,
//!   so any element a kernel leaves unwritten fails the check;
//! - the StableHLO grid-loop form starts outputs at zero: an unwritten element is off by
//!   `|want| / max(1, |want|)`, so a skipped block fails wherever its reference values exceed
//!   the tolerance. On random inputs add, silu, matmul and layer norm blocks hold values of
//!   order 1; softmax outputs are ~1/cols, which hides under bf16's 1e-2 past ~100 columns,
//!   so there only the interpreter run catches a skipped block;
//! - the batched form is only emitted when every output element is written by exactly one
//!   grid step.
//!
//! The tests check that a kernel skipping a block fails on the interpreter and the CPU plugin.

use crate::ShippedKernel;
use std::time::{Duration, Instant};
use tessera_lowering::stablehlo::Form;
use tessera_lowering::{DType, HostTensor};
use tessera_runtime::{Device, LaunchExt, RuntimeError};

/// Largest relative error `|got - want| / max(1, |want|)` accepted for f32 outputs.
pub const F32_TOLERANCE: f64 = 1e-5;
/// The same for bf16 (8 significant bits: one rounding is up to 2^-9 relative).
pub const BF16_TOLERANCE: f64 = 1e-2;

/// The tolerance for outputs of `dtype` (f16 gets bf16's; f64 is near exact).
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => F32_TOLERANCE,
        DType::BF16 | DType::F16 => BF16_TOLERANCE,
        _ => 0.0,
    }
}

/// The tolerance `check` applies to `kernel` on `shape`: the dtype's, but at least
/// `F32_TOLERANCE * sqrt(sum_len / 256)`. A long f32 sum's rounding error grows with its
/// length (measured for matmul on random inputs: about 5e-6 at k = 256, 1.5e-5 at k = 4096,
/// on the interpreter and the CPU plugin alike), so a fixed 1e-5 would fail correct kernels.
pub fn tolerance_for(kernel: &ShippedKernel, dtype: DType, shape: &[usize]) -> f64 {
    let terms = (kernel.sum_len)(shape) as f64;
    tolerance(dtype).max(F32_TOLERANCE * (terms / 256.0).sqrt())
}

/// Why a check could not run (a mismatch is a [`CheckReport`] with `passed: false`).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The problem shape does not fit the kernel.
    #[error("{0}")]
    Shape(String),
    /// Tracing, lowering, compiling or running failed (boxed: it is large, and cold).
    #[error(transparent)]
    Runtime(Box<RuntimeError>),
    /// The kernel's outputs do not line up with its reference's.
    #[error("kernel `{kernel}`: {message}")]
    Outputs { kernel: String, message: String },
}

impl From<RuntimeError> for CheckError {
    fn from(e: RuntimeError) -> Self {
        CheckError::Runtime(Box::new(e))
    }
}

/// The worst output element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mismatch {
    /// Which output, and the element's row-major index in it.
    pub output: usize,
    pub index: usize,
    pub got: f64,
    pub want: f64,
    pub rel_err: f64,
}

/// What one check found.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// The largest relative error over every element of every output (infinite for NaN).
    pub max_rel_err: f64,
    pub tolerance: f64,
    pub passed: bool,
    /// Wall time of the launch: trace, lowering, compile (or executable-cache hit), run.
    pub elapsed: Duration,
    /// Where `max_rel_err` was found (`None` when the outputs are empty).
    pub worst: Option<Mismatch>,
    /// What the kernel returned (to compare devices with each other).
    pub outputs: Vec<HostTensor>,
}

/// Runs `kernel` on `shape` with seeded random `dtype` inputs on `device` (StableHLO in its
/// default form) and compares every output to the float64 reference.
pub fn check(
    kernel: &ShippedKernel,
    device: &Device,
    dtype: DType,
    shape: &[usize],
    seed: u64,
) -> Result<CheckReport, CheckError> {
    check_as(kernel, device, dtype, shape, seed, Form::Auto)
}

/// As [`check`], lowering to StableHLO in `form` (the interpreter ignores it).
pub fn check_as(
    kernel: &ShippedKernel,
    device: &Device,
    dtype: DType,
    shape: &[usize],
    seed: u64,
    form: Form,
) -> Result<CheckReport, CheckError> {
    let launch = (kernel.launch)(shape).map_err(CheckError::Shape)?;
    let inputs = random_inputs(kernel, dtype, shape, seed);
    // The reference sees the inputs as the kernel does: rounded to `dtype`.
    let rounded: Vec<Vec<f64>> = inputs.iter().map(HostTensor::to_f64_vec).collect();
    let want = (kernel.reference)(&rounded, shape);
    let refs: Vec<&HostTensor> = inputs.iter().collect();
    let start = Instant::now();
    let got = launch.run_as(device, &refs, form)?;
    let elapsed = start.elapsed();
    let worst = compare(&got, &want).map_err(|message| CheckError::Outputs {
        kernel: kernel.name.into(),
        message,
    })?;
    let max_rel_err = worst.map_or(0.0, |w| w.rel_err);
    let tolerance = tolerance_for(kernel, dtype, shape);
    Ok(CheckReport {
        max_rel_err,
        tolerance,
        passed: max_rel_err <= tolerance,
        elapsed,
        worst,
        outputs: got,
    })
}

/// The inputs `check` uses: uniform in [-1, 1), rounded to `dtype`, a stream per input.
/// `shape` must be a valid problem shape (see [`ShippedKernel::launch`]).
pub fn random_inputs(
    kernel: &ShippedKernel,
    dtype: DType,
    shape: &[usize],
    seed: u64,
) -> Vec<HostTensor> {
    (kernel.input_shapes)(shape)
        .into_iter()
        .enumerate()
        .map(|(k, s)| {
            let mut rng = SplitMix64(seed ^ (k as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93));
            let values: Vec<f64> = (0..s.iter().product())
                .map(|_| rng.uniform() * 2.0 - 1.0)
                .collect();
            HostTensor::from_f64(dtype, s, &values)
        })
        .collect()
}

/// The element with the largest relative error of `got` vs `want` (NaN or infinity where the
/// reference is finite is an infinite error), or why the two do not line up.
pub fn compare(got: &[HostTensor], want: &[Vec<f64>]) -> Result<Option<Mismatch>, String> {
    if got.len() != want.len() {
        return Err(format!(
            "{} output(s), the reference has {}",
            got.len(),
            want.len()
        ));
    }
    let mut worst: Option<Mismatch> = None;
    for (output, (g, w)) in got.iter().zip(want).enumerate() {
        let g = g.to_f64_vec();
        if g.len() != w.len() {
            return Err(format!(
                "output {output} has {} elements, the reference {}",
                g.len(),
                w.len()
            ));
        }
        for (index, (&got, &want)) in g.iter().zip(w).enumerate() {
            let e = (got - want).abs() / want.abs().max(1.0);
            let rel_err = if e.is_nan() { f64::INFINITY } else { e };
            if worst.is_none_or(|m| rel_err > m.rel_err) {
                worst = Some(Mismatch {
                    output,
                    index,
                    got,
                    want,
                    rel_err,
                });
            }
        }
    }
    Ok(worst)
}

/// SplitMix64: a tiny, well-mixed generator, so checks need no RNG dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    /// Uniform in [0, 1), 53 random bits.
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}
