//! Errors of the StableHLO builder: every shape or type rule an op checks has a variant, so a
//! bad ATen lowering or kernel is reported, never emitted as text the parser rejects.

use super::types::TensorType;
use crate::dtype::DType;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error("{op}: operand types differ: {lhs} vs {rhs}")]
    TypeMismatch {
        op: &'static str,
        lhs: TensorType,
        rhs: TensorType,
    },
    #[error("{op}: element type {dtype} is not supported (expects {expected})")]
    UnsupportedDType {
        op: &'static str,
        dtype: DType,
        expected: &'static str,
    },
    #[error("{op}: axis {axis} is out of range for rank {rank}")]
    AxisOutOfRange {
        op: &'static str,
        axis: i64,
        rank: usize,
    },
    #[error("{op}: {message}")]
    Shape { op: &'static str, message: String },
    #[error("cannot broadcast shapes {lhs:?} and {rhs:?}")]
    Broadcast { lhs: Vec<usize>, rhs: Vec<usize> },
    #[error("{op}: constant {value} does not fit {dtype}")]
    ConstantRange {
        op: &'static str,
        value: String,
        dtype: DType,
    },
    #[error("aliasing argument {arg} to result {result}: they must exist (of {args} arguments, {results} results) and have the same type")]
    Alias {
        arg: usize,
        result: usize,
        args: usize,
        results: usize,
    },
    #[error("{op}: value %{id} is not visible here (defined inside another region, or by another builder)")]
    NotVisible { op: &'static str, id: u32 },
    #[error("{op}: region yields {got:?}, expected {expected:?}")]
    RegionResults {
        op: &'static str,
        expected: Vec<String>,
        got: Vec<String>,
    },
}

impl BuildError {
    pub(crate) fn shape(op: &'static str, message: impl Into<String>) -> Self {
        BuildError::Shape {
            op,
            message: message.into(),
        }
    }
}
