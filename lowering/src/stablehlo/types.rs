//! Tensor types and SSA values of the StableHLO builder.

use crate::dtype::DType;
use std::fmt;

/// A ranked, statically shaped tensor type: `tensor<2x3xf32>`, `tensor<i1>` for rank 0.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub shape: Vec<usize>,
    pub dtype: DType,
}

impl TensorType {
    pub fn new(shape: impl Into<Vec<usize>>, dtype: DType) -> Self {
        TensorType {
            shape: shape.into(),
            dtype,
        }
    }

    /// A rank-0 tensor (how StableHLO spells scalars).
    pub fn scalar(dtype: DType) -> Self {
        TensorType {
            shape: Vec::new(),
            dtype,
        }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn num_elements(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn with_dtype(&self, dtype: DType) -> Self {
        TensorType {
            shape: self.shape.clone(),
            dtype,
        }
    }

    pub fn with_shape(&self, shape: impl Into<Vec<usize>>) -> Self {
        TensorType {
            shape: shape.into(),
            dtype: self.dtype,
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::mlir::types::tensor(self.dtype, &self.shape))
    }
}

/// An SSA value of one function under construction. Only a [`FuncBuilder`](super::FuncBuilder)
/// creates values, so a `Value` always names something that was really emitted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Value {
    pub(crate) id: u32,
    pub(crate) ty: TensorType,
}

impl Value {
    pub fn id(&self) -> u32 {
        self.id
    }
    pub fn ty(&self) -> &TensorType {
        &self.ty
    }
    pub fn shape(&self) -> &[usize] {
        &self.ty.shape
    }
    pub fn dtype(&self) -> DType {
        self.ty.dtype
    }
    pub fn rank(&self) -> usize {
        self.ty.rank()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_tensor_types() {
        assert_eq!(
            TensorType::new([2, 3], DType::F32).to_string(),
            "tensor<2x3xf32>"
        );
        assert_eq!(TensorType::scalar(DType::Bool).to_string(), "tensor<i1>");
        assert_eq!(
            TensorType::new([0, 4], DType::U8).to_string(),
            "tensor<0x4xui8>"
        );
    }
}
