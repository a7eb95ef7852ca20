//! Typed methods with PyTorch's names for the common ops. Each is a call of one ATen
//! overload by name through [`crate::call`] (positional calls through [`call_tensors`]), so it
//! runs in the current mode like any op.

use crate::error::Result;
use crate::memo::call_tensors;
use crate::runtime::{call, schema_named, Output};
use crate::tensor::Tensor;
use tessera_lowering::DType;
use tessera_ops::ArgValue;

type A = ArgValue<Tensor>;

impl From<&Tensor> for ArgValue<Tensor> {
    fn from(t: &Tensor) -> Self {
        ArgValue::Tensor(t.clone())
    }
}

fn t(x: &Tensor) -> A {
    ArgValue::Tensor(x.clone())
}

/// Calls `op` and takes its first result. Positional calls go through [`call_tensors`]: a
/// call on tensors alone is then memoized per op and tensor types (no bind, lift or cache key
/// per call), as the PyTorch device's calls are; anything else takes the general path.
fn one(op: &str, args: Vec<A>, kwargs: Vec<(&str, A)>) -> Result<Tensor> {
    let mut outs = if kwargs.is_empty() {
        call_tensors(schema_named(op)?, args)?
    } else {
        call(op, args, kwargs)?
    };
    outs.swap_remove(0).tensor()
}

fn dims(d: &[i64]) -> A {
    ArgValue::IntList(d.to_vec())
}

impl Tensor {
    /// `self + other`.
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        one("add.Tensor", vec![t(self), t(other)], vec![])
    }
    /// `self + alpha * other` (`alpha` a device scalar: changing it does not recompile).
    pub fn add_scaled(&self, other: &Tensor, alpha: f64) -> Result<Tensor> {
        one(
            "add.Tensor",
            vec![t(self), t(other)],
            vec![("alpha", ArgValue::Float(alpha))],
        )
    }
    pub fn add_scalar(&self, other: f64) -> Result<Tensor> {
        one("add.Tensor", vec![t(self), ArgValue::Float(other)], vec![])
    }
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        one("sub.Tensor", vec![t(self), t(other)], vec![])
    }
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        one("mul.Tensor", vec![t(self), t(other)], vec![])
    }
    pub fn mul_scalar(&self, other: f64) -> Result<Tensor> {
        one("mul.Tensor", vec![t(self), ArgValue::Float(other)], vec![])
    }
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        one("div.Tensor", vec![t(self), t(other)], vec![])
    }
    pub fn neg(&self) -> Result<Tensor> {
        one("neg", vec![t(self)], vec![])
    }
    pub fn exp(&self) -> Result<Tensor> {
        one("exp", vec![t(self)], vec![])
    }
    pub fn tanh(&self) -> Result<Tensor> {
        one("tanh", vec![t(self)], vec![])
    }
    pub fn sin(&self) -> Result<Tensor> {
        one("sin", vec![t(self)], vec![])
    }
    pub fn sqrt(&self) -> Result<Tensor> {
        one("sqrt", vec![t(self)], vec![])
    }
    pub fn relu(&self) -> Result<Tensor> {
        one("relu", vec![t(self)], vec![])
    }
    /// GELU (`approximate`: "none" or "tanh").
    pub fn gelu(&self, approximate: &str) -> Result<Tensor> {
        one(
            "gelu",
            vec![t(self)],
            vec![("approximate", ArgValue::Str(approximate.into()))],
        )
    }
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        one("matmul", vec![t(self), t(other)], vec![])
    }
    pub fn mm(&self, other: &Tensor) -> Result<Tensor> {
        one("mm", vec![t(self), t(other)], vec![])
    }
    pub fn softmax(&self, dim: i64) -> Result<Tensor> {
        one("softmax.int", vec![t(self), ArgValue::Int(dim)], vec![])
    }
    /// Layer norm over the trailing `shape` dims.
    pub fn layer_norm(
        &self,
        shape: &[i64],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        let opt = |x: Option<&Tensor>| x.map_or(ArgValue::None, t);
        one(
            "layer_norm",
            vec![
                t(self),
                dims(shape),
                opt(weight),
                opt(bias),
                ArgValue::Float(eps),
            ],
            vec![],
        )
    }
    /// Sum of every element.
    pub fn sum(&self) -> Result<Tensor> {
        one("sum", vec![t(self)], vec![])
    }
    pub fn sum_dim(&self, dim: &[i64], keepdim: bool) -> Result<Tensor> {
        one(
            "sum.dim_IntList",
            vec![t(self), dims(dim), ArgValue::Bool(keepdim)],
            vec![],
        )
    }
    pub fn mean(&self) -> Result<Tensor> {
        one("mean", vec![t(self)], vec![])
    }
    pub fn mean_dim(&self, dim: &[i64], keepdim: bool) -> Result<Tensor> {
        one(
            "mean.dim",
            vec![t(self), dims(dim), ArgValue::Bool(keepdim)],
            vec![],
        )
    }
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        one(
            "_to_copy",
            vec![t(self)],
            vec![("dtype", ArgValue::DType(dtype))],
        )
    }
    /// A copy with its own storage (torch's `clone`; `Clone` on the handle aliases).
    pub fn deep_clone(&self) -> Result<Tensor> {
        one("clone", vec![t(self)], vec![])
    }

    // Views: share the storage.

    pub fn view(&self, shape: &[i64]) -> Result<Tensor> {
        one("view", vec![t(self), dims(shape)], vec![])
    }
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        one("reshape", vec![t(self), dims(shape)], vec![])
    }
    pub fn transpose(&self, dim0: i64, dim1: i64) -> Result<Tensor> {
        one(
            "transpose.int",
            vec![t(self), ArgValue::Int(dim0), ArgValue::Int(dim1)],
            vec![],
        )
    }
    #[allow(clippy::should_implement_trait)]
    pub fn t(&self) -> Result<Tensor> {
        one("t", vec![t(self)], vec![])
    }
    pub fn permute(&self, dims_: &[i64]) -> Result<Tensor> {
        one("permute", vec![t(self), dims(dims_)], vec![])
    }
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        one("unsqueeze", vec![t(self), ArgValue::Int(dim)], vec![])
    }
    /// `x[..., index, ...]` along `dim`.
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        one(
            "select.int",
            vec![t(self), ArgValue::Int(dim), ArgValue::Int(index)],
            vec![],
        )
    }
    /// `x[start:end:step]` along `dim`.
    pub fn slice(&self, dim: i64, start: i64, end: i64, step: i64) -> Result<Tensor> {
        one(
            "slice.Tensor",
            vec![
                t(self),
                ArgValue::Int(dim),
                ArgValue::Int(start),
                ArgValue::Int(end),
                ArgValue::Int(step),
            ],
            vec![],
        )
    }

    // In place: write `self` (and its base and views); return `self`.

    pub fn add_(&self, other: &Tensor) -> Result<Tensor> {
        one("add_.Tensor", vec![t(self), t(other)], vec![])
    }
    /// `self += alpha * other` (the SGD update `p.add_(g, alpha=-lr)`).
    pub fn add_scaled_(&self, other: &Tensor, alpha: f64) -> Result<Tensor> {
        one(
            "add_.Tensor",
            vec![t(self), t(other)],
            vec![("alpha", ArgValue::Float(alpha))],
        )
    }
    pub fn add_scalar_(&self, other: f64) -> Result<Tensor> {
        one("add_.Tensor", vec![t(self), ArgValue::Float(other)], vec![])
    }
    pub fn sub_(&self, other: &Tensor) -> Result<Tensor> {
        one("sub_.Tensor", vec![t(self), t(other)], vec![])
    }
    pub fn mul_(&self, other: &Tensor) -> Result<Tensor> {
        one("mul_.Tensor", vec![t(self), t(other)], vec![])
    }
    pub fn mul_scalar_(&self, other: f64) -> Result<Tensor> {
        one("mul_.Tensor", vec![t(self), ArgValue::Float(other)], vec![])
    }
    /// Copies `src` into `self` (broadcast, cast to `self`'s dtype).
    pub fn copy_(&self, src: &Tensor) -> Result<Tensor> {
        one("copy_", vec![t(self), t(src)], vec![])
    }
    pub fn zero_(&self) -> Result<Tensor> {
        one("zero_", vec![t(self)], vec![])
    }
}

/// `out=`: `add.out(self, other, out=out)` writes `out` (resizing it as PyTorch does).
pub fn add_out(x: &Tensor, y: &Tensor, out: &Tensor) -> Result<Tensor> {
    one("add.out", vec![t(x), t(y)], vec![("out", t(out))])
}

/// The first tensor of an op's outputs.
pub fn first_tensor(outs: Vec<Output>) -> Result<Tensor> {
    outs.into_iter()
        .next()
        .ok_or_else(|| crate::EagerError::Usage("the op returned nothing".into()))?
        .tensor()
}
