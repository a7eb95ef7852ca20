//! Helpers shared by the shape, indexing and creation families: results, constants of a
//! shape, dims, index arithmetic (iota, row-major strides) and point gathers.

use super::super::util::wrap_dim;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{GatherDims, TensorType, Value};
use tessera_lowering::DType;

/// One tensor result.
pub(crate) fn one(v: Value) -> LowerResult<Vec<Out>> {
    Ok(vec![Out::Tensor(v)])
}

/// A constant of `shape` and `dtype` filled with zeros (false for bool).
pub(crate) fn zeros(cx: &mut Lower, shape: &[usize], dtype: DType) -> LowerResult<Value> {
    Ok(cx.full(TensorType::new(shape.to_vec(), dtype), 0.0)?)
}

/// A rank-0 i64 constant.
pub(crate) fn i64_scalar(cx: &mut Lower, v: i64) -> LowerResult<Value> {
    Ok(cx.full_int(TensorType::scalar(DType::I64), v as i128)?)
}

/// An i64 constant of `shape` filled with `v`.
pub(crate) fn i64_full(cx: &mut Lower, shape: &[usize], v: i64) -> LowerResult<Value> {
    Ok(cx.full_int(TensorType::new(shape.to_vec(), DType::I64), v as i128)?)
}

/// `0, 1, 2, ...` (i64) along `dim` of `shape`.
pub(crate) fn iota(cx: &mut Lower, shape: &[usize], dim: usize) -> LowerResult<Value> {
    Ok(cx.iota(TensorType::new(shape.to_vec(), DType::I64), dim)?)
}

/// Sizes from an `int[]` argument; a negative size is PyTorch's error.
pub(crate) fn sizes(size: &[i64]) -> LowerResult<Vec<usize>> {
    if let Some(&s) = size.iter().find(|&&s| s < 0) {
        return Err(LowerError::invalid(format!(
            "Trying to create tensor with negative dimension {s}: {size:?}"
        )));
    }
    let shape: Vec<usize> = size.iter().map(|&s| s as usize).collect();
    checked_numel(&shape)?;
    Ok(shape)
}

/// The element count of `shape`, refusing counts that overflow (or could not be allocated:
/// beyond 2^53 elements, or a dim beyond that).
pub(crate) fn checked_numel(shape: &[usize]) -> LowerResult<usize> {
    const LIMIT: usize = 1 << 53;
    shape
        .iter()
        .try_fold(1usize, |n, &s| if s > LIMIT { None } else { n.checked_mul(s) })
        .filter(|&n| n <= LIMIT)
        .ok_or_else(|| LowerError::invalid(format!("Storage size calculation overflowed with sizes={shape:?}")))
}

/// Row-major strides of `shape` as PyTorch computes them (a size-0 dim counts as 1).
pub(crate) fn contiguous_strides(shape: &[usize]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1) as i64;
    }
    strides
}

/// `dim` wrapped for a tensor of `rank` that must have dims (`what` names the op for the
/// 0-dim error, as PyTorch does: "select() cannot be applied to a 0-dim tensor.").
pub(crate) fn wrap_dim_nonscalar(dim: i64, rank: usize, what: &str) -> LowerResult<usize> {
    if rank == 0 {
        return Err(LowerError::invalid(format!("{what}() cannot be applied to a 0-dim tensor.")));
    }
    wrap_dim(dim, rank)
}

/// `dim` wrapped for ops that need a real dim (PyTorch: "Dimension specified as 0 but tensor
/// has no dimensions").
pub(crate) fn wrap_dim_strict(dim: i64, rank: usize) -> LowerResult<usize> {
    if rank == 0 {
        return Err(LowerError::invalid(format!(
            "Dimension specified as {dim} but tensor has no dimensions"
        )));
    }
    wrap_dim(dim, rank)
}

/// `x` with a size-1 dim inserted at `dim` (`0..=rank`).
pub(crate) fn unsqueeze(cx: &mut Lower, x: &Value, dim: usize) -> LowerResult<Value> {
    let mut shape = x.shape().to_vec();
    shape.insert(dim, 1);
    Ok(cx.reshape(x, &shape)?)
}

/// `x[start:end:step]` along `dim` (bounds already valid).
pub(crate) fn slice_dim(
    cx: &mut Lower,
    x: &Value,
    dim: usize,
    start: usize,
    end: usize,
    step: usize,
) -> LowerResult<Value> {
    let r = x.rank();
    let mut lo = vec![0; r];
    let mut hi = x.shape().to_vec();
    let mut st = vec![1; r];
    lo[dim] = start;
    hi[dim] = end;
    st[dim] = step;
    Ok(cx.slice(x, &lo, &hi, &st)?)
}

/// `x[c0, c1, ...]` elementwise: `comps` holds one integer index tensor of `shape` per dim of
/// `x`; the result has `shape`. Out-of-range indices are clamped (the caller checks or wraps).
pub(crate) fn gather_points(cx: &mut Lower, x: &Value, comps: &[Value], shape: &[usize]) -> LowerResult<Value> {
    let n: usize = shape.iter().product();
    if x.rank() == 0 {
        return Ok(cx.broadcast_to(x, shape)?);
    }
    if n == 0 || x.ty().num_elements() == 0 {
        return zeros(cx, shape, x.dtype());
    }
    let mut cols = Vec::with_capacity(comps.len());
    let mut s1 = shape.to_vec();
    s1.push(1);
    for c in comps {
        let c = cx.convert(c, DType::I64)?;
        cols.push(cx.reshape(&c, &s1)?);
    }
    let refs: Vec<&Value> = cols.iter().collect();
    let idx = if refs.len() == 1 { cols[0].clone() } else { cx.concatenate(&refs, shape.len())? };
    let r = x.rank();
    let dims = GatherDims {
        offset_dims: vec![],
        collapsed_slice_dims: (0..r).collect(),
        start_index_map: (0..r).collect(),
        index_vector_dim: shape.len(),
    };
    Ok(cx.gather(x, &idx, &dims, &vec![1; r])?)
}
