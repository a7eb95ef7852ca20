//! IR types: values (scalars and tiles, both with static shapes) and refs to memory.

use crate::dtype::DType;
use std::fmt;

/// Where a ref's memory lives. Block operands of a launch live in VMEM; scratch buffers in
/// VMEM or SMEM as the launch says; `Any` is memory the kernel does not get blocked (HBM,
/// Pallas' `pl.ANY`: reached only by DMA); `Semaphore` holds DMA semaphores (one `i32`
/// count each, never loaded or stored by the body).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemorySpace {
    Any,
    Vmem,
    Smem,
    Semaphore,
}

impl MemorySpace {
    pub fn name(self) -> &'static str {
        match self {
            MemorySpace::Any => "any",
            MemorySpace::Vmem => "vmem",
            MemorySpace::Smem => "smem",
            MemorySpace::Semaphore => "semaphore_mem",
        }
    }
}

/// An SSA value's type. A value with an empty shape is a scalar; the index type is `i32`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Value {
        dtype: DType,
        shape: Vec<usize>,
    },
    Ref {
        dtype: DType,
        shape: Vec<usize>,
        space: MemorySpace,
    },
}

impl Type {
    pub fn scalar(dtype: DType) -> Type {
        Type::Value {
            dtype,
            shape: Vec::new(),
        }
    }

    pub fn tile(dtype: DType, shape: impl Into<Vec<usize>>) -> Type {
        Type::Value {
            dtype,
            shape: shape.into(),
        }
    }

    /// The index type: grid indices, block indices, loop counters and slice starts.
    pub fn index() -> Type {
        Type::scalar(DType::I32)
    }

    pub fn dtype(&self) -> DType {
        match self {
            Type::Value { dtype, .. } | Type::Ref { dtype, .. } => *dtype,
        }
    }

    pub fn shape(&self) -> &[usize] {
        match self {
            Type::Value { shape, .. } | Type::Ref { shape, .. } => shape,
        }
    }

    pub fn is_ref(&self) -> bool {
        matches!(self, Type::Ref { .. })
    }

    pub fn is_scalar(&self) -> bool {
        matches!(self, Type::Value { shape, .. } if shape.is_empty())
    }

    pub fn is_index(&self) -> bool {
        *self == Type::index()
    }

    /// Number of elements (1 for scalars).
    pub fn num_elements(&self) -> usize {
        self.shape().iter().product()
    }
}

/// `8x128` (empty for scalars).
pub(crate) fn fmt_shape(shape: &[usize]) -> String {
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Value { dtype, shape } if shape.is_empty() => write!(f, "{dtype}"),
            Type::Value { dtype, shape } => write!(f, "tile<{}x{dtype}>", fmt_shape(shape)),
            Type::Ref {
                dtype,
                shape,
                space,
            } if shape.is_empty() => {
                write!(f, "ref<{dtype}, {}>", space.name())
            }
            Type::Ref {
                dtype,
                shape,
                space,
            } => {
                write!(f, "ref<{}x{dtype}, {}>", fmt_shape(shape), space.name())
            }
        }
    }
}
