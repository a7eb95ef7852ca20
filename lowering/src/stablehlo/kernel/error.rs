//! Errors of the kernel -> StableHLO emitter.

use crate::ir::discharge::DischargeError;
use crate::ir::{Loc, Operation, VerifyError};
use crate::stablehlo::BuildError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EmitError {
    /// The IR (body or an index map) breaks an IR rule.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// The launch does not fit the kernel (operand counts, ranks, index-map arity, ...).
    #[error("launch of `{kernel}`: {message}")]
    Launch { kernel: String, message: String },
    /// The batched form is not legal for this kernel (see `batched.rs`); `Form::Auto` falls
    /// back to the grid loop on it.
    #[error("the batched (loop-free) form does not apply to `{kernel}`: {reason}")]
    NotBatchable { kernel: String, reason: String },
    /// A StableHLO type rule failed while translating the op at `loc`.
    #[error("{loc}: `{op}`: {source}")]
    AtOp {
        op: &'static str,
        loc: Loc,
        source: Box<EmitError>,
    },
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Discharging refs broke (only a bug reaches it: see `ir::discharge`).
    #[error(transparent)]
    Discharge(#[from] DischargeError),
    /// A broken invariant of the emitter itself (a verified IR never reaches it).
    #[error("internal emitter error: {0}")]
    Internal(String),
}

impl EmitError {
    pub(super) fn internal(message: String) -> Self {
        EmitError::Internal(message)
    }

    /// Attaches the op's location; the innermost op (the one that failed) wins. A
    /// `NotBatchable` stays as it is (it names its op), so callers can fall back on it.
    pub(super) fn at(self, op: &Operation) -> Self {
        match self {
            e @ (EmitError::AtOp { .. } | EmitError::NotBatchable { .. }) => e,
            e => EmitError::AtOp {
                op: op.kind.name(),
                loc: op.loc,
                source: Box::new(e),
            },
        }
    }
}
