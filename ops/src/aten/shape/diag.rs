//! Diagonals written or built: diagonal_scatter, diagonal_backward, diag_embed, diag.

use super::common::*;
use super::views::diagonal_value;
use crate::args::Args;
use crate::aten::util::{cast, wrap_dim};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{Comparison, Value};

/// The shape `diagonal(x, offset, d1, d2)` has.
fn diagonal_shape(shape: &[usize], offset: i64, d1: usize, d2: usize) -> Vec<usize> {
    let (n1, n2) = (shape[d1] as i64, shape[d2] as i64);
    let len = (n1 - offset.min(0).abs()).min(n2 - offset.max(0)).max(0) as usize;
    let mut out: Vec<usize> = (0..shape.len())
        .filter(|&d| d != d1 && d != d2)
        .map(|d| shape[d])
        .collect();
    out.push(len);
    out
}

/// `x` with `src` (of [`diagonal_shape`]) written on its diagonal (`offset`, dims `d1` != `d2`).
pub(crate) fn write_diagonal(
    cx: &mut Lower,
    x: &Value,
    src: &Value,
    offset: i64,
    d1: usize,
    d2: usize,
) -> LowerResult<Value> {
    let want = diagonal_shape(x.shape(), offset, d1, d2);
    if src.shape() != want.as_slice() {
        return Err(LowerError::invalid(format!(
            "expected src to have a size equal to the slice of self. src size = {:?}, slice size = {want:?}",
            src.shape()
        )));
    }
    let len = *want.last().expect("a diagonal dim");
    if len == 0 || x.ty().num_elements() == 0 {
        return Ok(x.clone());
    }
    let src = cast(cx, src, x.dtype())?;
    // The diagonal's index k runs along d1 (offset >= 0) or d2 (offset < 0): pad it to that
    // dim's size and broadcast the batch dims in place.
    let kdim = if offset >= 0 { d1 } else { d2 };
    let r = x.rank();
    let mut hi = vec![0i64; src.rank()];
    hi[src.rank() - 1] = (x.shape()[kdim] - len) as i64;
    let z = zeros(cx, &[], x.dtype())?;
    let padded = cx.pad(&src, &z, &vec![0; src.rank()], &hi, &vec![0; src.rank()])?;
    let mut map: Vec<usize> = (0..r).filter(|&d| d != d1 && d != d2).collect();
    map.push(kdim);
    let full = cx.broadcast_in_dim(&padded, x.shape(), &map)?;
    let i1 = iota(cx, x.shape(), d1)?;
    let i2 = iota(cx, x.shape(), d2)?;
    let diff = cx.sub(&i2, &i1)?;
    let off = i64_full(cx, x.shape(), offset)?;
    let on = cx.compare(Comparison::Eq, &diff, &off)?;
    Ok(cx.select(&on, &full, x)?)
}

fn diag_dims(a: &Args, rank: usize) -> LowerResult<(usize, usize)> {
    let d1 = wrap_dim(a.int("dim1")?, rank)?;
    let d2 = wrap_dim(a.int("dim2")?, rank)?;
    if d1 == d2 {
        return Err(LowerError::invalid(format!(
            "diagonal dimensions cannot be identical {d1}, {d2}"
        )));
    }
    Ok((d1, d2))
}

/// `diagonal_scatter(self, src, offset=0, dim1=0, dim2=1)`.
pub(super) fn diagonal_scatter(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let (d1, d2) = diag_dims(a, x.rank())?;
    one(write_diagonal(
        cx,
        &x,
        &a.tensor("src")?,
        a.int("offset")?,
        d1,
        d2,
    )?)
}

/// `diagonal_backward(grad_output, input_sizes, offset, dim1, dim2)`: the gradient written
/// on the diagonal of zeros of the input's shape.
pub(super) fn diagonal_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_output")?;
    let shape = sizes(&a.int_list("input_sizes")?)?;
    let (d1, d2) = diag_dims(a, shape.len())?;
    let z = zeros(cx, &shape, g.dtype())?;
    one(write_diagonal(cx, &z, &g, a.int("offset")?, d1, d2)?)
}

/// `diag_embed(self, offset=0, dim1=-2, dim2=-1)`: the last dim of `self` on the diagonal of
/// a new pair of dims (sized `n + |offset|`), zeros elsewhere.
pub(super) fn diag_embed(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let offset = a.int("offset")?;
    let (d1, d2) = diag_dims(a, x.rank() + 1)?;
    let n = x.shape().last().copied().unwrap_or(1) + offset.unsigned_abs() as usize;
    let batch: Vec<usize> = if x.rank() == 0 {
        vec![]
    } else {
        x.shape()[..x.rank() - 1].to_vec()
    };
    let mut shape = Vec::with_capacity(x.rank() + 1);
    let mut b = batch.iter();
    for d in 0..x.rank() + 1 {
        shape.push(if d == d1 || d == d2 {
            n
        } else {
            *b.next().expect("batch dims fill the rest")
        });
    }
    let src = if x.rank() == 0 {
        cx.reshape(&x, &[1])?
    } else {
        x.clone()
    };
    let z = zeros(cx, &shape, x.dtype())?;
    one(write_diagonal(cx, &z, &src, offset, d1, d2)?)
}

/// `diag(self, diagonal=0)`: a 1-d tensor becomes a square matrix with it on the diagonal; a
/// 2-d tensor gives its diagonal.
pub(super) fn diag(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let k = a.int("diagonal")?;
    match x.rank() {
        1 => {
            let n = x.shape()[0] + k.unsigned_abs() as usize;
            let z = zeros(cx, &[n, n], x.dtype())?;
            one(write_diagonal(cx, &z, &x, k, 0, 1)?)
        }
        2 => one(diagonal_value(cx, &x, k, 0, 1)?),
        _ => Err(LowerError::invalid(
            "diag(): Supports 1D or 2D tensors. Got ".to_string() + &format!("{}D", x.rank()),
        )),
    }
}
