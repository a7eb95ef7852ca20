//! The one place that decides how a traced kernel is lowered for a device: the reference
//! interpreter, StableHLO in one of its forms (CPU and GPU PJRT plugins), or Mosaic wrapped
//! in a `tpu_custom_call` (a TPU runs the Mosaic kernel, never the StableHLO form of the
//! grid). The runtime maps its devices onto [`Target`]s; every caller (launches, autotuning,
//! AOT compiles, the CLI, exported libraries, op overrides) lowers through [`lower`].
//!
//! Checked slices are part of the [`Backend`] rather than a second entry point: the value
//! says fully which module comes out, and the [`Lowered`] result carries the checked module's
//! [`BoundsCheck`] table with its text, so a caller cannot lower in one mode and read the
//! outputs in the other.

use crate::ir::KernelProgram;
use crate::mosaic::{self, MosaicError, MosaicKernel, TpuGeneration};
use crate::stablehlo::{self, BoundsCheck, CheckedModule, EmitError, Form};
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
    /// The kernel's grid in StableHLO, in `form`; with `checked`, traced slice starts are
    /// checked instead of clamped (`stablehlo::emit_kernel_checked`).
    StableHlo {
        form: Form,
        checked: bool,
    },
    /// The Mosaic kernel in a `tpu_custom_call`. Mosaic has no clamping `dynamic_slice` to
    /// check: its traced indices are refused before lowering unless provably aligned
    /// (`mosaic::alignment`).
    Mosaic(TpuGeneration),
}

impl Backend {
    /// The backend for `target`. `form` and `checked` are the StableHLO form and checking
    /// asked for; they only matter where StableHLO is what runs.
    pub fn for_target(target: Target, form: Form, checked: bool) -> Backend {
        match target {
            Target::Interpreter => Backend::Interpreter,
            Target::StableHlo => Backend::StableHlo { form, checked },
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
    /// A module asked of the interpreter backend, which runs the program itself.
    #[error("the interpreter runs kernels itself: it lowers them to no module")]
    NoModule,
}

/// A kernel lowered by a [`Backend`].
#[derive(Clone, Debug, PartialEq)]
pub enum Lowered {
    /// The interpreter runs the program itself.
    Interpreted,
    /// StableHLO for a PJRT plugin. Where `module.checks` is not empty the module returns
    /// the bounds-check state after the kernel's outputs ([`CheckedModule`]).
    StableHlo(CheckedModule),
    /// The Mosaic kernel, and the StableHLO module that calls it through `tpu_custom_call`.
    Mosaic {
        kernel: Box<MosaicKernel>,
        module: String,
    },
}

impl Lowered {
    /// The module text a PJRT plugin compiles; `None` for the interpreter.
    pub fn module(&self) -> Option<&str> {
        match self {
            Lowered::Interpreted => None,
            Lowered::StableHlo(m) => Some(&m.text),
            Lowered::Mosaic { module, .. } => Some(module),
        }
    }

    /// The bounds checks whose state the module returns after the kernel's outputs (empty:
    /// its outputs are the kernel's).
    pub fn checks(&self) -> &[BoundsCheck] {
        match self {
            Lowered::StableHlo(m) => &m.checks,
            Lowered::Interpreted | Lowered::Mosaic { .. } => &[],
        }
    }

    /// The module text (see [`Lowered::checks`] for what it returns); an error for the
    /// interpreter.
    pub fn into_module(self) -> Result<String, LowerError> {
        match self {
            Lowered::Interpreted => Err(LowerError::NoModule),
            Lowered::StableHlo(m) => Ok(m.text),
            Lowered::Mosaic { module, .. } => Ok(module),
        }
    }
}

/// `program` lowered by `backend`.
pub fn lower(program: &KernelProgram, backend: Backend) -> Result<Lowered, LowerError> {
    Ok(match backend {
        Backend::Interpreter => Lowered::Interpreted,
        Backend::StableHlo { form, checked } => Lowered::StableHlo(match checked {
            true => stablehlo::emit_kernel_checked(program, form)?,
            false => CheckedModule {
                text: stablehlo::emit_kernel_as(program, form)?,
                checks: Vec::new(),
                grid_rank: program.grid.len(),
            },
        }),
        Backend::Mosaic(generation) => {
            let kernel = mosaic::lower_to_mosaic(program, generation)?;
            let module = mosaic::tpu_custom_call(program, &kernel)?.into_text();
            Lowered::Mosaic {
                kernel: Box::new(kernel),
                module,
            }
        }
    })
}
