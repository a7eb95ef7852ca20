//! Copying shape ops: constant_pad_nd, flip, repeat, roll, tril/triu.

use super::common::*;
use crate::aten::util::{reduce_dims, scalar_const, wrap_dim};
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{Comparison, Value};

pub(crate) fn constant_pad_nd(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let pad = a.int_list("pad")?;
    let r = x.rank();
    if pad.len() % 2 != 0 {
        return Err(LowerError::invalid(format!("Length of pad must be even but instead it equals {}", pad.len())));
    }
    if pad.len() > 2 * r {
        return Err(LowerError::invalid(format!(
            "Length of pad should be no more than twice the number of dimensions of the input. Pad length is {} while the input has {r} dimensions.",
            pad.len()
        )));
    }
    let (mut lo, mut hi) = (vec![0i64; r], vec![0i64; r]);
    for (i, p) in pad.chunks(2).enumerate() {
        let d = r - 1 - i;
        lo[d] = p[0];
        hi[d] = p[1];
        let size = (x.shape()[d] as i128) + p[0] as i128 + p[1] as i128;
        if size < 0 {
            return Err(LowerError::invalid(format!(
                "The input size {}, plus negative padding {} and {} resulted in a negative output size, which is invalid. Check dimension {d} of your input.",
                x.shape()[d],
                p[0],
                p[1]
            )));
        }
    }
    let out: Vec<usize> = (0..r)
        .map(|d| (x.shape()[d] as i128 + lo[d] as i128 + hi[d] as i128).min(i64::MAX as i128) as usize)
        .collect();
    checked_numel(&out)?;
    let v = scalar_const(cx, a.scalar("value")?, x.dtype())?;
    one(cx.pad(&x, &v, &lo, &hi, &vec![0; r])?)
}

pub(super) fn flip(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims = a.int_list("dims")?;
    if dims.is_empty() || x.rank() == 0 {
        for &d in &dims {
            wrap_dim(d, x.rank())?;
        }
        return one(x);
    }
    let dims = reduce_dims(Some(&dims), x.rank())?;
    one(cx.reverse(&x, &dims)?)
}

pub(super) fn repeat(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    one(repeat_value(cx, &x, &a.int_list("repeats")?)?)
}

/// `x.repeat(reps)` (`reps` at least as long as x's rank).
pub(super) fn repeat_value(cx: &mut Lower, x: &Value, reps: &[i64]) -> LowerResult<Value> {
    let reps = reps.to_vec();
    if reps.len() < x.rank() {
        return Err(LowerError::invalid(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
        ));
    }
    let off = reps.len() - x.rank();
    let padded: Vec<usize> = (0..reps.len()).map(|i| if i < off { 1 } else { x.shape()[i - off] }).collect();
    let target: Vec<i64> = reps.iter().zip(&padded).map(|(&r, &s)| r.saturating_mul(s as i64)).collect();
    sizes(&target)?;
    let mut big_sizes: Vec<i64> = reps.clone();
    big_sizes.extend(padded.iter().map(|&s| s as i64));
    sizes(&big_sizes)?;
    let mut big = Vec::with_capacity(2 * reps.len());
    for (&r, &s) in reps.iter().zip(&padded) {
        big.push(r as usize);
        big.push(s);
    }
    let dims: Vec<usize> = (off..reps.len()).map(|i| 2 * i + 1).collect();
    let b = cx.broadcast_in_dim(x, &big, &dims)?;
    let out: Vec<usize> = target.iter().map(|&t| t as usize).collect();
    Ok(cx.reshape(&b, &out)?)
}

/// `x` rolled by `shift` along `d`.
fn roll_dim(cx: &mut Lower, x: &Value, d: usize, shift: i64) -> LowerResult<Value> {
    let n = x.shape()[d] as i64;
    if n == 0 {
        return Ok(x.clone());
    }
    let s = shift.rem_euclid(n) as usize;
    if s == 0 {
        return Ok(x.clone());
    }
    let n = n as usize;
    let tail = slice_dim(cx, x, d, n - s, n, 1)?;
    let head = slice_dim(cx, x, d, 0, n - s, 1)?;
    Ok(cx.concatenate(&[&tail, &head], d)?)
}

pub(super) fn roll(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let shifts = a.int_list("shifts")?;
    let dims = a.int_list("dims")?;
    if shifts.is_empty() {
        return Err(LowerError::invalid("`shifts` required"));
    }
    if dims.is_empty() && shifts.len() == 1 {
        let n = x.ty().num_elements();
        let flat = cx.reshape(&x, &[n])?;
        let r = roll_dim(cx, &flat, 0, shifts[0])?;
        return one(cx.reshape(&r, x.shape())?);
    }
    if shifts.len() != dims.len() {
        return Err(LowerError::invalid(format!(
            "shifts and dimensions must align. shifts: {}, dims:{}",
            shifts.len(),
            dims.len()
        )));
    }
    let mut y = x;
    for (&s, &d) in shifts.iter().zip(&dims) {
        let d = wrap_dim_strict(d, y.rank())?;
        y = roll_dim(cx, &y, d, s)?;
    }
    one(y)
}

/// `tril` (`lower`) or `triu`: keeps `col - row <= diagonal` (resp. `>=`) of the last two dims.
pub(super) fn tri(cx: &mut Lower, a: &Args, lower: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let k = a.int("diagonal")?;
    let r = x.rank();
    if r < 2 {
        return Err(LowerError::invalid(format!(
            "{}: input tensor must have at least 2 dimensions",
            if lower { "tril" } else { "triu" }
        )));
    }
    if x.ty().num_elements() == 0 {
        return one(x);
    }
    let m = [x.shape()[r - 2], x.shape()[r - 1]];
    let row = iota(cx, &m, 0)?;
    let col = iota(cx, &m, 1)?;
    let diff = cx.sub(&col, &row)?;
    let kk = i64_full(cx, &m, k)?;
    let keep = cx.compare(if lower { Comparison::Le } else { Comparison::Ge }, &diff, &kk)?;
    let keep = cx.broadcast_in_dim(&keep, x.shape(), &[r - 2, r - 1])?;
    let z = zeros(cx, x.shape(), x.dtype())?;
    one(cx.select(&keep, &x, &z)?)
}
