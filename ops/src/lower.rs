//! What a lowering gets (a [`Lower`] context around the StableHLO builder, and its [`Args`])
//! and what it returns ([`Out`] per schema return).

use crate::args::Args;
use crate::check::Check;
use crate::error::{LowerError, LowerResult};
use std::ops::{Deref, DerefMut};
use tessera_lowering::backend::Target;
use tessera_lowering::stablehlo::{FuncBuilder, Value};
use tessera_runtime::DeviceKind;

/// The function being built for one call, plus what a lowering may need to know of the call.
pub struct Lower {
    pub f: FuncBuilder,
    /// Seed of the call's random stream (random ops draw from it, explicitly, so a seeded
    /// call is reproducible).
    pub seed: u64,
    /// The key of the call's random stream as a `u64[2]` program input, where a runtime
    /// draws a new key per call without a new program (the eager runtime's generator);
    /// `None`: the constant `seed`.
    pub rng_key: Option<Value>,
    pub device: DeviceKind,
    /// What kernels called from the module (overrides) are lowered for, where the caller
    /// knows it: Mosaic kernels are per TPU generation and `DeviceKind::Tpu` does not say
    /// which (a call on a device sets the device's target, an AOT compile its topology's).
    /// `None`: the kind's target ([`Lower::kernel_target`]).
    pub target: Option<Target>,
    /// Whether lowerings add data checks ([`crate::check`]; `TESSERA_CHECK_INDICES`).
    pub checks_enabled: bool,
    /// The checks added so far; their flags are extra outputs of the module, after its
    /// results.
    pub checks: Vec<Check>,
}

impl Lower {
    /// A context around a new `@main`, with checks as `TESSERA_CHECK_INDICES` says.
    pub fn new(seed: u64, device: DeviceKind) -> Self {
        Lower {
            f: FuncBuilder::new("main"),
            seed,
            rng_key: None,
            device,
            target: None,
            checks_enabled: crate::check::enabled_by_env(),
            checks: Vec::new(),
        }
    }

    /// What a kernel called from the module is lowered for: [`Lower::target`], else the
    /// target of the device kind (on a TPU, the attached one's generation).
    pub fn kernel_target(&self) -> LowerResult<Target> {
        match self.target {
            Some(target) => Ok(target),
            None => self.device.target().map_err(LowerError::Device),
        }
    }
}

impl Deref for Lower {
    type Target = FuncBuilder;
    fn deref(&self) -> &FuncBuilder {
        &self.f
    }
}

impl DerefMut for Lower {
    fn deref_mut(&mut self) -> &mut FuncBuilder {
        &mut self.f
    }
}

/// One result of a lowering, per return of the op's schema.
#[derive(Clone, Debug)]
pub enum Out {
    Tensor(Value),
    /// `Tensor[]` returns.
    Tensors(Vec<Value>),
    /// Only the first `count` (a rank-0 integer) entries along dim 0 of `value` are the result:
    /// how ops whose output shape depends on the data (`nonzero`) return a padded array.
    Prefix {
        value: Value,
        count: Value,
    },
    /// A rank-0 tensor returned to the caller as a number (`_local_scalar_dense`).
    Item(Value),
    /// Known without running anything (`sym_size`).
    Int(i64),
    Float(f64),
    Bool(bool),
    /// No tensor: a gradient masked out by `output_mask` or undefined (`Tensor?` returns),
    /// None as in PyTorch.
    None,
}

/// A lowering: builds the op's results from its arguments.
pub type LowerFn = fn(&mut Lower, &Args) -> LowerResult<Vec<Out>>;

/// A default lowering of one overload (`op` is the full name: `add.Tensor`, `abs`).
#[derive(Debug)]
pub struct Lowering {
    pub op: &'static str,
    pub lower: LowerFn,
    /// Whether the lowering takes complex (c64/c128) tensors and dtype arguments. A call of
    /// any other op with one is refused up front as unsupported, so no real-only lowering
    /// ever sees a complex value.
    pub complex: bool,
}

/// `Lowering { op, lower }` entries for a family's table: `lowerings![("abs", abs), ...]`
/// (real dtypes only); `lowerings![complex: ("_fft_c2r", f), ...]` for lowerings that also
/// take complex tensors.
#[macro_export]
macro_rules! lowerings {
    (complex: $(($op:expr, $f:expr)),* $(,)?) => {
        &[$($crate::lower::Lowering { op: $op, lower: $f, complex: true }),*]
    };
    ($(($op:expr, $f:expr)),* $(,)?) => {
        &[$($crate::lower::Lowering { op: $op, lower: $f, complex: false }),*]
    };
}
