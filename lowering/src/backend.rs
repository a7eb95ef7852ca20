//! The one place that decides how a traced kernel is lowered for a device: the reference
//! interpreter, StableHLO in one of its forms (CPU and GPU PJRT plugins), or Mosaic wrapped
//! in a `tpu_custom_call` (a TPU runs the Mosaic kernel, never the StableHLO form of the
//! grid). The runtime maps its device kinds onto [`Target`]s and calls [`lower`].

use crate::ir::KernelProgram;
use crate::mosaic::{self, MosaicError, TpuGeneration};
use crate::stablehlo::{self, EmitError, Form};
use thiserror::Error;

/// What a kernel is lowered for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// The reference interpreter (no lowering: it runs the IR).
    Interpreter,
    /// A PJRT plugin that compiles StableHLO (XLA CPU, CUDA).
    StableHlo,
    /// A TPU of this generation (a real chip or libtpu's compile-only topology).
    Tpu(TpuGeneration),
}

/// How a kernel is lowered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    Interpreter,
    /// The kernel's grid in StableHLO, in `form`.
    StableHlo(Form),
    /// The Mosaic kernel in a `tpu_custom_call`.
    Mosaic(TpuGeneration),
}

impl Backend {
    /// The backend for `target`. `form` is the StableHLO form asked for; it only matters
    /// where StableHLO is what runs.
    pub fn for_target(target: Target, form: Form) -> Backend {
        match target {
            Target::Interpreter => Backend::Interpreter,
            Target::StableHlo => Backend::StableHlo(form),
            Target::Tpu(generation) => Backend::Mosaic(generation),
        }
    }
}

#[derive(Debug, Error)]
pub enum LowerError {
    #[error(transparent)]
    StableHlo(#[from] EmitError),
    #[error(transparent)]
    Mosaic(#[from] MosaicError),
}

/// `program` lowered by `backend`: the StableHLO module text a PJRT plugin compiles (for
/// Mosaic, the module calling the kernel through `tpu_custom_call`), or `None` for the
/// interpreter, which runs the program itself.
pub fn lower(program: &KernelProgram, backend: Backend) -> Result<Option<String>, LowerError> {
    Ok(match backend {
        Backend::Interpreter => None,
        Backend::StableHlo(form) => Some(stablehlo::emit_kernel_as(program, form)?),
        Backend::Mosaic(generation) => {
            let kernel = mosaic::lower_to_mosaic(program, generation)?;
            Some(mosaic::tpu_custom_call(program, &kernel)?.into_text())
        }
    })
}
