//! The kernels Tessera ships, written with `#[tpu_kernel]`, and a registry that gives each a
//! default launch and a float64 reference, so `tessera check`, the demo and the tests run
//! every kernel the same way (see [`check`]).
//!
//! Each kernel is generic over `T: Float` (f32 and bf16 are tested); kernels that reduce or
//! use transcendental functions compute in f32 and round to `T` once, like Pallas kernels.

pub mod add;
mod check;
pub mod layer_norm;
pub mod matmul;
mod overrides;
mod problem;
pub mod silu;
pub mod softmax;
mod spec;
pub mod tuning;

pub use check::{
    check, check_as, compare, random_inputs, tolerance, tolerance_for, CheckError, CheckReport,
    Mismatch, BF16_TOLERANCE, F32_TOLERANCE,
};

use tessera_lowering::trace::Launch;

/// A float64 reference: every output from the inputs and the problem shape.
pub type Reference = fn(&[Vec<f64>], &[usize]) -> Vec<Vec<f64>>;

/// A shipped kernel: how to launch it on a problem shape, and what it must compute.
#[derive(Debug)]
pub struct ShippedKernel {
    /// The `#[tpu_kernel]` fn's name (and its name in the kernel registry).
    pub name: &'static str,
    /// What it computes, in one line.
    pub about: &'static str,
    /// The problem shape `check` and the demo use by default.
    pub default_shape: &'static [usize],
    /// Names of the problem shape's dims (`["m", "n", "k"]` for matmul).
    pub problem_dims: &'static [&'static str],
    /// The input arrays' shapes for a problem shape (of the right rank).
    pub input_shapes: fn(&[usize]) -> Vec<Vec<usize>>,
    /// The default launch (grid, block specs, scratch, semantics) for a problem shape; `Err`
    /// says why the shape is not one (wrong rank, empty dim).
    pub launch: fn(&[usize]) -> Result<Launch, String>,
    /// Every output, in float64, from the inputs (already rounded to the dtype) and the
    /// problem shape.
    pub reference: Reference,
    /// Terms in the longest f32 sum behind one output element, where that sum's rounding
    /// sets the output's error (matmul's k); 1 otherwise. See [`tolerance_for`].
    pub sum_len: fn(&[usize]) -> usize,
}

static SHIPPED: [ShippedKernel; 5] = [
    add::SHIPPED,
    silu::SHIPPED,
    matmul::SHIPPED,
    softmax::SHIPPED,
    layer_norm::SHIPPED,
];

/// Every shipped kernel.
pub fn shipped() -> &'static [ShippedKernel] {
    &SHIPPED
}

/// The shipped kernel called `name`.
pub fn find(name: &str) -> Option<&'static ShippedKernel> {
    SHIPPED.iter().find(|k| k.name == name)
}
