//! View ops, computed as copies: alias/detach/contiguous, view/reshape, expand, permute and
//! transposes, squeeze/unsqueeze, select/slice/narrow, diagonal, as_strided.

use super::common::*;
use crate::aten::util::wrap_dim;
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::Value;

pub(super) fn identity(_cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    one(a.tensor("self")?)
}

/// PyTorch's `infer_size`: at most one `-1`, the element count preserved.
pub(crate) fn infer_size(size: &[i64], numel: usize) -> LowerResult<Vec<usize>> {
    let mut infer = None;
    let mut prod: usize = 1;
    for (i, &s) in size.iter().enumerate() {
        if s == -1 {
            if infer.is_some() {
                return Err(LowerError::invalid("only one dimension can be inferred"));
            }
            infer = Some(i);
        } else if s < 0 {
            return Err(LowerError::invalid(format!("invalid shape dimension {s} at index {i} of shape {size:?}")));
        } else {
            prod = prod.saturating_mul(s as usize);
        }
    }
    let bad = || LowerError::invalid(format!("shape '{size:?}' is invalid for input of size {numel}"));
    let mut out: Vec<usize> = size.iter().map(|&s| s.max(0) as usize).collect();
    match infer {
        Some(i) => {
            if prod == 0 {
                if numel == 0 {
                    return Err(LowerError::invalid(format!(
                        "cannot reshape tensor of 0 elements into shape {size:?} because the unspecified dimension size -1 can be any value and is ambiguous"
                    )));
                }
                return Err(bad());
            }
            if numel % prod != 0 {
                return Err(bad());
            }
            out[i] = numel / prod;
        }
        None if prod != numel => return Err(bad()),
        None => {}
    }
    Ok(out)
}

/// `view` and `reshape` (tensors here are always contiguous).
pub(super) fn view(cx: &mut Lower, a: &Args, arg: &str) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let shape = infer_size(&a.int_list(arg)?, x.ty().num_elements())?;
    one(cx.reshape(&x, &shape)?)
}

pub(super) fn expand(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let size = a.int_list("size")?;
    let (r, n) = (x.rank(), size.len());
    if n < r {
        return Err(LowerError::invalid(format!(
            "expand({}{{{:?}}}, size={size:?}): the number of sizes provided ({n}) must be greater or equal to the number of dimensions in the tensor ({r})",
            x.dtype(),
            x.shape()
        )));
    }
    let off = n - r;
    let mut out = Vec::with_capacity(n);
    for (i, &s) in size.iter().enumerate() {
        if i < off {
            if s < 0 {
                return Err(LowerError::invalid(format!(
                    "The expanded size of the tensor ({s}) isn't allowed in a leading, non-existing dimension {i}"
                )));
            }
            out.push(s as usize);
            continue;
        }
        let cur = x.shape()[i - off];
        if s == -1 {
            out.push(cur);
        } else if s >= 0 && (cur == 1 || cur as i64 == s) {
            out.push(s as usize);
        } else {
            return Err(LowerError::invalid(format!(
                "The expanded size of the tensor ({s}) must match the existing size ({cur}) at non-singleton dimension {i}.  Target sizes: {size:?}.  Tensor sizes: {:?}",
                x.shape()
            )));
        }
    }
    checked_numel(&out)?;
    let dims: Vec<usize> = (off..n).collect();
    one(cx.broadcast_in_dim(&x, &out, &dims)?)
}

pub(super) fn permute(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims = a.int_list("dims")?;
    if dims.len() != x.rank() {
        return Err(LowerError::invalid(format!(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = {} is not equal to len(dims) = {}",
            x.rank(),
            dims.len()
        )));
    }
    let mut perm = Vec::with_capacity(dims.len());
    for &d in &dims {
        let w = wrap_dim(d, x.rank())?;
        if perm.contains(&w) {
            return Err(LowerError::invalid("permute(): duplicate dims are not allowed."));
        }
        perm.push(w);
    }
    if x.rank() == 0 {
        return one(x);
    }
    one(cx.transpose(&x, &perm)?)
}

/// Swaps two dims (a no-op on rank 0 and 1 dims).
pub(crate) fn swap_dims(cx: &mut Lower, x: &Value, d0: usize, d1: usize) -> LowerResult<Value> {
    if x.rank() < 2 || d0 == d1 {
        return Ok(x.clone());
    }
    let mut perm: Vec<usize> = (0..x.rank()).collect();
    perm.swap(d0, d1);
    Ok(cx.transpose(x, &perm)?)
}

pub(super) fn transpose(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d0 = wrap_dim(a.int("dim0")?, x.rank())?;
    let d1 = wrap_dim(a.int("dim1")?, x.rank())?;
    one(swap_dims(cx, &x, d0, d1)?)
}

pub(super) fn t(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.rank() > 2 {
        return Err(LowerError::invalid(format!(
            "t() expects a tensor with <= 2 dimensions, but self is {}D",
            x.rank()
        )));
    }
    one(swap_dims(cx, &x, 0, 1)?)
}

/// Drops the listed dims that have size 1.
fn squeeze_dims(cx: &mut Lower, x: &Value, dims: &[usize]) -> LowerResult<Vec<Out>> {
    let shape: Vec<usize> = (0..x.rank())
        .filter(|d| !(dims.contains(d) && x.shape()[*d] == 1))
        .map(|d| x.shape()[d])
        .collect();
    one(cx.reshape(x, &shape)?)
}

pub(super) fn squeeze_dim(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    squeeze_dims(cx, &x, &[d])
}

pub(super) fn squeeze_list(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let mut dims = Vec::new();
    for d in a.int_list("dim")? {
        let w = wrap_dim(d, x.rank())?;
        if dims.contains(&w) {
            return Err(LowerError::invalid(format!("dim {w} appears multiple times in the list of dims")));
        }
        dims.push(w);
    }
    squeeze_dims(cx, &x, &dims)
}

pub(super) fn unsqueeze_op(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim(a.int("dim")?, x.rank() + 1)?;
    one(unsqueeze(cx, &x, d)?)
}

/// `x.select(dim, index)` with PyTorch's checks (index may be negative).
pub(crate) fn select_value(
    cx: &mut Lower,
    x: &Value,
    dim: i64,
    index: i64,
) -> LowerResult<Value> {
    let d = wrap_dim_nonscalar(dim, x.rank(), "select")?;
    let size = x.shape()[d] as i64;
    if index < -size || index >= size {
        return Err(LowerError::invalid(format!(
            "select(): index {index} out of range for tensor of size {:?} at dimension {d}",
            x.shape()
        )));
    }
    let i = if index < 0 { index + size } else { index } as usize;
    let s = slice_dim(cx, x, d, i, i + 1, 1)?;
    let mut shape = x.shape().to_vec();
    shape.remove(d);
    Ok(cx.reshape(&s, &shape)?)
}

pub(super) fn select(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    one(select_value(cx, &x, a.int("dim")?, a.int("index")?)?)
}

/// PyTorch's slice bounds: `None` start/end are 0/size, negatives wrap, then both clamp to
/// `0..=size` and `end >= start`. Returns `(start, end)`.
pub(crate) fn slice_bounds(start: Option<i64>, end: Option<i64>, size: usize) -> (usize, usize) {
    let size = size as i64;
    let fix = |v: i64| {
        let v = if v < 0 { v.saturating_add(size) } else { v };
        v.clamp(0, size)
    };
    let s = fix(start.unwrap_or(0));
    let e = fix(end.unwrap_or(size)).max(s);
    (s as usize, e as usize)
}

/// The dim, bounds and step of a `slice`-like call (`slice.Tensor`, `slice_scatter`) on a
/// tensor of `shape`: `(dim, start, end, step)`.
pub(crate) fn slice_args(a: &Args, shape: &[usize]) -> LowerResult<(usize, usize, usize, usize)> {
    let d = wrap_dim_nonscalar(a.int("dim")?, shape.len(), "slice")?;
    let step = a.int("step")?;
    if step <= 0 {
        return Err(LowerError::invalid("slice step must be positive"));
    }
    let (s, e) = slice_bounds(a.opt_int("start")?, a.opt_int("end")?, shape[d]);
    Ok((d, s, e, step as usize))
}

pub(super) fn slice(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let (d, s, e, step) = slice_args(a, x.shape())?;
    one(slice_dim(cx, &x, d, s, e, step)?)
}

pub(super) fn narrow(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim_nonscalar(a.int("dim")?, x.rank(), "narrow")?;
    let (start, length) = (a.int("start")?, a.int("length")?);
    if length < 0 {
        return Err(LowerError::invalid("narrow(): length must be non-negative."));
    }
    let size = x.shape()[d] as i64;
    if start < -size || start > size {
        return Err(LowerError::invalid(format!(
            "start out of range (expected to be in range of [{}, {size}], but got {start})",
            -size
        )));
    }
    let start = if start < 0 { start + size } else { start };
    if start + length > size {
        return Err(LowerError::invalid(format!(
            "start ({start}) + length ({length}) exceeds dimension size ({size})."
        )));
    }
    one(slice_dim(cx, &x, d, start as usize, (start + length) as usize, 1)?)
}

pub(super) fn diagonal(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let offset = a.int("offset")?;
    let d1 = wrap_dim(a.int("dim1")?, x.rank())?;
    let d2 = wrap_dim(a.int("dim2")?, x.rank())?;
    if d1 == d2 {
        return Err(LowerError::invalid(format!("diagonal dimensions cannot be identical {}, {}", a.int("dim1")?, a.int("dim2")?)));
    }
    one(diagonal_value(cx, &x, offset, d1, d2)?)
}

/// The diagonal of dims `d1`, `d2` (distinct, wrapped) at `offset`, appended as the last dim.
pub(crate) fn diagonal_value(
    cx: &mut Lower,
    x: &Value,
    offset: i64,
    d1: usize,
    d2: usize,
) -> LowerResult<Value> {
    let mut perm: Vec<usize> = (0..x.rank()).filter(|&d| d != d1 && d != d2).collect();
    perm.push(d1);
    perm.push(d2);
    let y = cx.transpose(x, &perm)?;
    let r = y.rank();
    let (n1, n2) = (y.shape()[r - 2] as i64, y.shape()[r - 1] as i64);
    let (r0, c0) = (offset.min(0).unsigned_abs() as i64, offset.max(0));
    let len = (n1 - r0).min(n2 - c0).max(0) as usize;
    let batch: Vec<usize> = y.shape()[..r - 2].to_vec();
    let mut out_shape = batch.clone();
    out_shape.push(len);
    if len == 0 || batch.contains(&0) {
        return zeros(cx, &out_shape, x.dtype());
    }
    let mut lo = vec![0; r];
    let mut hi = y.shape().to_vec();
    lo[r - 2] = r0 as usize;
    lo[r - 1] = c0 as usize;
    hi[r - 2] = r0 as usize + len;
    hi[r - 1] = c0 as usize + len;
    let sq = cx.slice(&y, &lo, &hi, &vec![1; r])?;
    let mut flat = batch.clone();
    flat.push(len * len);
    let sq = cx.reshape(&sq, &flat)?;
    Ok(slice_dim(cx, &sq, r - 2, 0, len * len, len + 1)?)
}

/// The flat positions in `x`'s elements (row-major, as its storage for a contiguous
/// tensor) that `as_strided(x, size, stride, storage_offset)` reads, as an i64 tensor of the
/// view's shape (None when the view is empty), and that shape. torch's checks and messages.
fn strided_positions(cx: &mut Lower, a: &Args, x: &Value) -> LowerResult<(Option<Value>, Vec<usize>)> {
    let size = a.int_list("size")?;
    let stride = a.int_list("stride")?;
    let offset = a.opt_int("storage_offset")?.unwrap_or(0);
    if size.len() != stride.len() {
        return Err(LowerError::invalid(format!(
            "mismatch in length of strides and shape: {} and {}",
            stride.len(),
            size.len()
        )));
    }
    if stride.iter().any(|&s| s < 0) {
        return Err(LowerError::invalid(format!(
            "as_strided: Negative strides are not supported at the moment, got strides: {stride:?}"
        )));
    }
    if offset < 0 {
        return Err(LowerError::invalid(format!("Tensor: invalid storage offset {offset}")));
    }
    let shape = sizes(&size)?;
    let numel = x.ty().num_elements();
    let n: usize = shape.iter().product();
    let needed: i128 = if n == 0 {
        0
    } else {
        offset as i128 + size.iter().zip(&stride).map(|(&s, &st)| (s as i128 - 1) * st as i128).sum::<i128>() + 1
    };
    if needed > numel as i128 {
        return Err(LowerError::invalid(format!(
            "setStorage: sizes {size:?}, strides {stride:?}, storage offset {offset}, and itemsize {} requiring a storage size of {} are out of bounds for storage of size {}",
            x.dtype().size_bytes(),
            needed * x.dtype().size_bytes() as i128,
            numel * x.dtype().size_bytes()
        )));
    }
    if n == 0 {
        return Ok((None, shape));
    }
    let mut idx = i64_full(cx, &shape, offset)?;
    for (d, &st) in stride.iter().enumerate() {
        if st == 0 || shape[d] == 1 {
            continue;
        }
        let io = iota(cx, &shape, d)?;
        let k = i64_full(cx, &shape, st)?;
        let term = cx.mul(&io, &k)?;
        idx = cx.add(&idx, &term)?;
    }
    Ok((Some(idx), shape))
}

pub(super) fn as_strided(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let (idx, shape) = strided_positions(cx, a, &x)?;
    let Some(idx) = idx else {
        return one(zeros(cx, &shape, x.dtype())?);
    };
    let flat = cx.reshape(&x, &[x.ty().num_elements()])?;
    one(gather_points(cx, &flat, &[idx], &shape)?)
}

/// `as_strided_scatter(self, src, size, stride, storage_offset)`: `self` (contiguous) with
/// `src` written where `as_strided` with these arguments reads (overlapping positions get
/// one of their values, as torch leaves them unspecified).
pub(super) fn as_strided_scatter(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let src = a.tensor("src")?;
    let (idx, shape) = strided_positions(cx, a, &x)?;
    if src.shape() != shape.as_slice() {
        return Err(LowerError::invalid(format!(
            "expected src to have a size equal to the slice of self. src size = {:?}, slice size = {shape:?}",
            src.shape()
        )));
    }
    let Some(idx) = idx else {
        return one(x);
    };
    let src = cx.convert(&src, x.dtype())?;
    let flat = cx.reshape(&x, &[x.ty().num_elements()])?;
    let out = crate::aten::indexing::points::scatter_points(cx, &flat, &[idx], &shape, &src, crate::aten::indexing::points::Combine::Replace)?;
    one(cx.reshape(&out, x.shape())?)
}
