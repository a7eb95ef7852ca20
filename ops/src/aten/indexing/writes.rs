//! Writing a slice or a masked set of elements: select_scatter, slice_scatter, masked_scatter,
//! and the backward ops of select and slice (the gradient written into zeros).

use super::points::*;
use crate::aten::shape::common::*;
use crate::aten::shape::views::slice_args;
use crate::aten::util::cast;
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, Value};
use tessera_lowering::DType;

/// `x` with `src` (already `x`'s dtype and the slice's shape) written at
/// `start : start + step*len : step` along `dim`.
fn write_strided(cx: &mut Lower, x: &Value, src: &Value, dim: usize, start: usize, step: usize) -> LowerResult<Value> {
    let len = src.shape()[dim];
    if len == 0 || x.ty().num_elements() == 0 {
        return Ok(x.clone());
    }
    let size = x.shape()[dim];
    let r = x.rank();
    let end = start + step * (len - 1) + 1;
    let (mut lo, mut hi) = (vec![0i64; r], vec![0i64; r]);
    let mut interior = vec![0usize; r];
    lo[dim] = start as i64;
    hi[dim] = (size - end) as i64;
    interior[dim] = step - 1;
    let z = zeros(cx, &[], x.dtype())?;
    let padded = cx.pad(src, &z, &lo, &hi, &interior)?;
    let pos = iota(cx, x.shape(), dim)?;
    let s = i64_full(cx, x.shape(), start as i64)?;
    let e = i64_full(cx, x.shape(), end as i64)?;
    let ge = cx.compare(Comparison::Ge, &pos, &s)?;
    let lt = cx.compare(Comparison::Lt, &pos, &e)?;
    let mut keep = cx.binary(BinaryOp::And, &ge, &lt)?;
    if step > 1 {
        let off = cx.sub(&pos, &s)?;
        let st = i64_full(cx, x.shape(), step as i64)?;
        let m = cx.binary(BinaryOp::Remainder, &off, &st)?;
        let z = i64_full(cx, x.shape(), 0)?;
        let on = cx.compare(Comparison::Eq, &m, &z)?;
        keep = cx.binary(BinaryOp::And, &keep, &on)?;
    }
    Ok(cx.select(&keep, &padded, x)?)
}

pub(super) fn select_scatter(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    one(select_write(cx, a, &x, &a.tensor("src")?)?)
}

/// `select_backward(grad_output, input_sizes, dim, index)`: the gradient written at `index`
/// of zeros of the input's shape.
pub(super) fn select_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_output")?;
    let z = zeros(cx, &sizes(&a.int_list("input_sizes")?)?, g.dtype())?;
    one(select_write(cx, a, &z, &g)?)
}

/// `slice_backward(grad_output, input_sizes, dim, start, end, step)`: the gradient written
/// into the slice of zeros of the input's shape.
pub(super) fn slice_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_output")?;
    let z = zeros(cx, &sizes(&a.int_list("input_sizes")?)?, g.dtype())?;
    one(slice_write(cx, a, &z, &g)?)
}

/// `x` with `src` written at `index` along `dim` (the arguments of `a`).
fn select_write(cx: &mut Lower, a: &Args, x: &Value, src: &Value) -> LowerResult<Value> {
    let d = wrap_dim_nonscalar(a.int("dim")?, x.rank(), "select")?;
    let size = x.shape()[d] as i64;
    let index = a.int("index")?;
    if index < -size || index >= size {
        return Err(LowerError::invalid(format!(
            "select(): index {index} out of range for tensor of size {:?} at dimension {d}",
            x.shape()
        )));
    }
    let i = if index < 0 { index + size } else { index } as usize;
    let mut slice = x.shape().to_vec();
    slice.remove(d);
    if src.shape() != slice.as_slice() {
        return Err(LowerError::invalid(format!(
            "expected src to have a size equal to the slice of self. src size = {:?}, slice size = {slice:?}",
            src.shape()
        )));
    }
    let src = cast(cx, src, x.dtype())?;
    let src = unsqueeze(cx, &src, d)?;
    write_strided(cx, x, &src, d, i, 1)
}

pub(super) fn slice_scatter(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    one(slice_write(cx, a, &x, &a.tensor("src")?)?)
}

/// `x` with `src` written into the slice `start:end:step` along `dim` (the arguments of `a`).
fn slice_write(cx: &mut Lower, a: &Args, x: &Value, src: &Value) -> LowerResult<Value> {
    let (d, s, e, step) = slice_args(a, x.shape())?;
    let mut slice = x.shape().to_vec();
    slice[d] = (e - s).div_ceil(step);
    if src.shape() != slice.as_slice() {
        return Err(LowerError::invalid(format!(
            "expected src to have a size equal to the slice of self. src size = {:?}, slice size = {slice:?}",
            src.shape()
        )));
    }
    let src = cast(cx, src, x.dtype())?;
    write_strided(cx, x, &src, d, s, step)
}

pub(super) fn masked_scatter(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let mask = a.tensor("mask")?;
    let source = a.tensor("source")?;
    if mask.dtype() != DType::Bool {
        return Err(LowerError::invalid(format!(
            "masked_scatter_ only supports boolean masks, but got mask with dtype {}",
            crate::aten::util::torch_name(mask.dtype())
        )));
    }
    if source.dtype() != x.dtype() {
        return Err(LowerError::invalid(format!(
            "masked_scatter: expected self and source to have same dtypes but got {} and {}",
            x.dtype(),
            source.dtype()
        )));
    }
    let shape = crate::aten::util::broadcast_all(&[x.clone(), mask.clone()])?;
    let x = cx.broadcast_to(&x, &shape)?;
    let mask = cx.broadcast_to(&mask, &shape)?;
    let n: usize = shape.iter().product();
    if n == 0 {
        return one(x);
    }
    let (pos, _count) = nonzero_flat(cx, &mask)?;
    let m = source.ty().num_elements();
    let src = cx.reshape(&source, &[m])?;
    let src = if m >= n {
        cx.slice(&src, &[0], &[n], &[1])?
    } else {
        let z = zeros(cx, &[], x.dtype())?;
        cx.pad(&src, &z, &[0], &[(n - m) as i64], &[0])?
    };
    let flat = cx.reshape(&x, &[n])?;
    let placed = scatter_points(cx, &flat, &[pos], &[n], &src, Combine::Replace)?;
    let mflat = cx.reshape(&mask, &[n])?;
    let mflat = if mflat.dtype() == DType::Bool {
        mflat
    } else {
        let z = zeros(cx, &[n], mflat.dtype())?;
        cx.compare(Comparison::Ne, &mflat, &z)?
    };
    let r = cx.select(&mflat, &placed, &flat)?;
    one(cx.reshape(&r, &shape)?)
}

