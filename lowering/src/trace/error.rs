//! Errors found while tracing a kernel or checking its launch spec. Each carries the user's
//! source location (`file:line:column`), first in the message.

use crate::dtype::DType;
use crate::ir::{Loc, VerifyError};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TraceError {
    /// A vocabulary call (op, load, store, ...) with wrong shapes, dtypes or axes.
    #[error("{loc}: `{op}`: {message}")]
    Op {
        op: &'static str,
        message: String,
        loc: Loc,
    },

    #[error("{loc}: kernel `{kernel}` has {expected} {role} parameter(s), the launch gives {got}")]
    OperandCount {
        kernel: &'static str,
        role: &'static str,
        expected: usize,
        got: usize,
        loc: Loc,
    },

    #[error("{loc}: kernel `{kernel}`: {what} is {expected}, got {got}")]
    DTypeMismatch {
        kernel: &'static str,
        what: String,
        expected: DType,
        got: DType,
        loc: Loc,
    },

    #[error("{loc}: kernel `{kernel}`: generic dtype is {first} (from {first_from}) but {second_from} is {second}; all generic operands must agree")]
    GenericConflict {
        kernel: &'static str,
        first: DType,
        first_from: String,
        second: DType,
        second_from: String,
        loc: Loc,
    },

    #[error("{loc}: kernel `{kernel}`: {message}")]
    Generic {
        kernel: &'static str,
        message: String,
        loc: Loc,
    },

    #[error("{loc}: {what}: block shape {block:?} has rank {}, the array {array:?} has rank {}", block.len(), array.len())]
    BlockRank {
        what: String,
        block: Vec<usize>,
        array: Vec<usize>,
        loc: Loc,
    },

    #[error("{loc}: {what}: block dim {dim} is {block_dim}, which does not divide the array's dim {array_dim} (block {block:?}, array {array:?}; `BlockSpec::padded()` allows a partial last block)")]
    BlockNotDividing {
        what: String,
        dim: usize,
        block_dim: usize,
        array_dim: usize,
        block: Vec<usize>,
        array: Vec<usize>,
        loc: Loc,
    },

    #[error("{loc}: {what}: the index map takes {arity} grid indices but the grid {grid:?} has rank {}", grid.len())]
    IndexMapArity {
        what: String,
        arity: usize,
        grid: Vec<usize>,
        loc: Loc,
    },

    #[error(
        "{loc}: {what}: the index map returns {got} block indices, the block has rank {expected}"
    )]
    IndexMapRank {
        what: String,
        got: usize,
        expected: usize,
        loc: Loc,
    },

    /// Grid or dimension-semantics problems.
    #[error("{loc}: {message}")]
    Launch { message: String, loc: Loc },

    /// A Rust (untraced) value that would have to change under a traced `if` or loop.
    #[error("{loc}: `{construct}`: {message}")]
    NotTraced {
        construct: &'static str,
        message: String,
        loc: Loc,
    },

    /// The kernel asked the tracer for a parameter the launch does not bind as it asks.
    #[error("{loc}: kernel parameter: {message}")]
    Param { message: String, loc: Loc },

    /// The traced IR failed verification: a tracer bug, since every op is checked when recorded.
    #[error("internal error, traced IR does not verify: {0}")]
    Verify(#[from] VerifyError),
}

impl TraceError {
    /// The user's source location the error points at, if it has one.
    pub fn loc(&self) -> Loc {
        match self {
            TraceError::Op { loc, .. }
            | TraceError::OperandCount { loc, .. }
            | TraceError::DTypeMismatch { loc, .. }
            | TraceError::GenericConflict { loc, .. }
            | TraceError::Generic { loc, .. }
            | TraceError::BlockRank { loc, .. }
            | TraceError::BlockNotDividing { loc, .. }
            | TraceError::IndexMapArity { loc, .. }
            | TraceError::IndexMapRank { loc, .. }
            | TraceError::Launch { loc, .. }
            | TraceError::NotTraced { loc, .. }
            | TraceError::Param { loc, .. } => *loc,
            TraceError::Verify(e) => e.loc,
        }
    }
}
