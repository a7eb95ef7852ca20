//! Errors of the reference interpreter; out-of-bounds accesses name the op and its source.

use crate::dtype::DType;
use crate::ir::Loc;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InterpError {
    #[error("kernel `{kernel}` takes {expected} inputs, got {got}")]
    InputCount {
        kernel: String,
        expected: usize,
        got: usize,
    },

    #[error("kernel `{kernel}`: operand `{name}` is {dtype}: the interpreter runs real element types only (complex is for StableHLO programs)")]
    Complex {
        kernel: String,
        name: String,
        dtype: DType,
    },

    #[error("kernel `{kernel}`: input `{name}` was traced as {expected_dtype}{expected_shape:?}, got {got_dtype}{got_shape:?}")]
    InputMismatch {
        kernel: String,
        name: String,
        expected_dtype: DType,
        expected_shape: Vec<usize>,
        got_dtype: DType,
        got_shape: Vec<usize>,
    },

    #[error("{loc}: block {block_index:?}{units} of {operand} at grid step {grid_index:?} is out of bounds: blocks of {block_shape:?} in an array of {array_shape:?}")]
    BlockOutOfBounds {
        operand: String,
        grid_index: Vec<usize>,
        /// The index map's results: block indices, or element offsets along element dims.
        block_index: Vec<i64>,
        /// Empty, or which of `block_index` are element offsets (`BlockSpec::element`).
        units: String,
        block_shape: Vec<usize>,
        array_shape: Vec<usize>,
        loc: Loc,
    },

    #[error("{loc}: `{op}`: window at {starts:?} of size {sizes:?} is out of bounds of a ref of shape {shape:?}")]
    SliceOutOfBounds {
        op: &'static str,
        starts: Vec<i64>,
        sizes: Vec<usize>,
        shape: Vec<usize>,
        loc: Loc,
    },

    #[error("{loc}: `while` ran {trips} trips without its condition turning false; a loop that never ends is a kernel bug")]
    WhileLimit { trips: u64, loc: Loc },

    /// A manual-DMA protocol error (a race, or a start/wait mismatch).
    #[error("{loc}: DMA: {message}")]
    Dma { message: String, loc: Loc },

    /// IR the interpreter cannot run; verified programs do not produce it.
    #[error("{loc}: `{op}`: {message}")]
    Invalid {
        op: &'static str,
        message: String,
        loc: Loc,
    },
}
