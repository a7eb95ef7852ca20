//! Errors of the op library. Every error names the op; lowerings return [`LowerError`], which
//! the dispatcher wraps into [`OpError::Lower`] with the op's name.

use tessera_lowering::stablehlo::BuildError;
use tessera_lowering::DType;
use tessera_runtime::RuntimeError;

/// Why a lowering refused or failed (the op's name is added by the dispatcher).
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// An argument PyTorch itself would reject (bad dim, shapes that don't broadcast, ...).
    #[error("{0}")]
    Invalid(String),
    #[error("dtype {dtype} is not supported: {reason}")]
    Dtype { dtype: DType, reason: String },
    /// Valid for PyTorch but not (yet) for Tessera.
    #[error("not supported: {0}")]
    Unsupported(String),
    #[error("StableHLO builder: {0}")]
    Build(#[from] BuildError),
    /// What a called kernel is lowered for could not be read from the device.
    #[error("the device's kernel target: {0}")]
    Device(#[source] RuntimeError),
}

impl LowerError {
    pub fn invalid(msg: impl Into<String>) -> Self {
        LowerError::Invalid(msg.into())
    }
    pub fn dtype(dtype: DType, reason: impl Into<String>) -> Self {
        LowerError::Dtype {
            dtype,
            reason: reason.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error(
        "unknown op `{op}`: not an ATen overload in Tessera's table (see `tessera ops coverage`)"
    )]
    UnknownOp { op: String },
    #[error("`aten::{op}`: {reason}")]
    BadArgs { op: String, reason: String },
    #[error("`aten::{op}` has no lowering yet (it is in the table but not implemented)")]
    NotImplemented { op: String },
    #[error("`aten::{op}`: {source}")]
    Lower {
        op: String,
        #[source]
        source: LowerError,
    },
    #[error("`aten::{op}` override `{kernel}`: {message}")]
    Override {
        op: String,
        kernel: String,
        message: String,
    },
    /// A check of the data made on the device failed ([`crate::check`]): an index out of
    /// range, an integer division by zero (`message` is torch's).
    #[error("`aten::{op}`: {message}")]
    Checked { op: String, message: String },
    #[error("`aten::{op}` on the device: {source}")]
    Runtime {
        op: String,
        #[source]
        source: RuntimeError,
    },
}

pub type LowerResult<T> = Result<T, LowerError>;
