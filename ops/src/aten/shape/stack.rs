//! Stacking and broadcasting composites: atleast_1d/2d/3d, hstack/vstack/dstack/column_stack,
//! block_diag, repeat_interleave (a number of repeats), broadcast_to, sum_to_size.

use super::common::*;
use super::join::cat_values;
use crate::args::Args;
use crate::aten::util::{cast, wrap_dim};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, ReduceKind, Value};

/// `x` with dims added as `atleast_{n}d` adds them: `[]` -> `[1, ..]`; 1-d `[k]` -> `[1, k]`
/// (and `[1, k, 1]` for 3-d); 2-d `[a, b]` -> `[a, b, 1]`.
fn atleast(cx: &mut Lower, x: &Value, n: usize) -> LowerResult<Value> {
    let s = x.shape();
    let shape: Vec<usize> = match (x.rank(), n) {
        (r, n) if r >= n => return Ok(x.clone()),
        (0, n) => vec![1; n],
        (1, 2) => vec![1, s[0]],
        (1, 3) => vec![1, s[0], 1],
        (2, 3) => vec![s[0], s[1], 1],
        _ => unreachable!("rank below n"),
    };
    Ok(cx.reshape(x, &shape)?)
}

/// `atleast_{1,2,3}d(self)`.
pub(super) fn atleast_nd(cx: &mut Lower, a: &Args, n: usize) -> LowerResult<Vec<Out>> {
    one(atleast(cx, &a.tensor("self")?, n)?)
}

/// `hstack` (dim 1, or 0 for 1-d), `vstack` (atleast_2d, dim 0), `dstack` (atleast_3d,
/// dim 2), `column_stack` (1-d and 0-d as columns, dim 1).
pub(super) fn hvd_stack(cx: &mut Lower, a: &Args, how: char) -> LowerResult<Vec<Out>> {
    let ts = a.tensors("tensors")?;
    if ts.is_empty() {
        return Err(LowerError::invalid(format!(
            "{}stack expects a non-empty TensorList",
            how
        )));
    }
    let (xs, dim) = match how {
        'h' => {
            let xs = ts
                .iter()
                .map(|t| atleast(cx, t, 1))
                .collect::<LowerResult<Vec<_>>>()?;
            let dim = if xs[0].rank() == 1 { 0 } else { 1 };
            (xs, dim)
        }
        'v' => (
            ts.iter()
                .map(|t| atleast(cx, t, 2))
                .collect::<LowerResult<Vec<_>>>()?,
            0,
        ),
        'd' => (
            ts.iter()
                .map(|t| atleast(cx, t, 3))
                .collect::<LowerResult<Vec<_>>>()?,
            2,
        ),
        _ => {
            let xs = ts
                .iter()
                .map(|t| match t.rank() {
                    0 | 1 => Ok(cx.reshape(t, &[t.ty().num_elements(), 1])?),
                    _ => Ok(t.clone()),
                })
                .collect::<LowerResult<Vec<_>>>()?;
            (xs, 1)
        }
    };
    one(cat_values(cx, &xs, dim)?)
}

/// `block_diag(tensors)`: the tensors (0-d as 1x1, 1-d as a row) on the diagonal of one
/// matrix, in their promoted dtype.
pub(super) fn block_diag(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let ts = a.tensors("tensors")?;
    let mut ms = Vec::with_capacity(ts.len());
    for (i, t) in ts.iter().enumerate() {
        ms.push(match t.rank() {
            0 => cx.reshape(t, &[1, 1])?,
            1 => cx.reshape(t, &[1, t.shape()[0]])?,
            2 => t.clone(),
            r => {
                return Err(LowerError::invalid(format!(
                    "torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {r} dimensions"
                )))
            }
        });
    }
    let dt = ms
        .iter()
        .fold(None, |acc: Option<tessera_lowering::DType>, m| {
            Some(acc.map_or(m.dtype(), |d| {
                crate::aten::promote::promote_types(d, m.dtype())
            }))
        });
    let dt = dt.unwrap_or(tessera_lowering::DType::F32);
    let rows: usize = ms.iter().map(|m| m.shape()[0]).sum();
    let cols: usize = ms.iter().map(|m| m.shape()[1]).sum();
    let (mut r0, mut c0) = (0i64, 0i64);
    let z = zeros(cx, &[], dt)?;
    let mut out = zeros(cx, &[rows, cols], dt)?;
    for m in &ms {
        let (h, w) = (m.shape()[0] as i64, m.shape()[1] as i64);
        if h > 0 && w > 0 {
            let mc = cast(cx, m, dt)?;
            let placed = cx.pad(
                &mc,
                &z,
                &[r0, c0],
                &[rows as i64 - r0 - h, cols as i64 - c0 - w],
                &[0, 0],
            )?;
            // The blocks do not overlap: adding (or, for bool, or-ing) places each one.
            let op = if dt == tessera_lowering::DType::Bool {
                BinaryOp::Or
            } else {
                BinaryOp::Add
            };
            out = cx.binary(op, &out, &placed)?;
        }
        r0 += h;
        c0 += w;
    }
    one(out)
}

/// `repeat_interleave.self_int(self, repeats, dim=None, output_size=None)`: each element
/// (along `dim`; of the flattened tensor without one) repeated `repeats` times.
pub(super) fn repeat_interleave(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let r = a.int("repeats")?;
    if r < 0 {
        return Err(LowerError::invalid("repeats can not be negative"));
    }
    let (x, d) = match a.opt_int("dim")? {
        Some(d) => {
            let d = wrap_dim(d, x.rank())?;
            (
                if x.rank() == 0 {
                    cx.reshape(&x, &[1])?
                } else {
                    x
                },
                d,
            )
        }
        None => (cx.reshape(&x, &[x.ty().num_elements()])?, 0),
    };
    let r = r as usize;
    let mut big = x.shape().to_vec();
    big.insert(d + 1, r);
    let map: Vec<usize> = (0..x.rank())
        .map(|i| if i <= d { i } else { i + 1 })
        .collect();
    let b = cx.broadcast_in_dim(&x, &big, &map)?;
    let mut shape = x.shape().to_vec();
    shape[d] *= r;
    if let Some(n) = a.opt_int("output_size")? {
        if n as usize != shape[d] {
            return Err(LowerError::invalid(format!(
                "allocated size does not match required size (output_size {n}, required {})",
                shape[d]
            )));
        }
    }
    one(cx.reshape(&b, &shape)?)
}

/// `sum_to_size(self, size)`: summed over the dims broadcasting would have expanded.
pub(super) fn sum_to_size(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let shape = sizes(&a.int_list("size")?)?;
    let lead = x.rank().checked_sub(shape.len());
    let ok = lead.is_some_and(|l| {
        shape
            .iter()
            .enumerate()
            .all(|(i, &s)| s == 1 || s == x.shape()[l + i])
    });
    let Some(lead) = lead.filter(|_| ok) else {
        return Err(LowerError::invalid(format!(
            "size {shape:?} is not expandable to size {:?}",
            x.shape()
        )));
    };
    let dims: Vec<usize> = (0..x.rank())
        .filter(|&d| d < lead || (shape[d - lead] == 1 && x.shape()[d] != 1))
        .collect();
    // PyTorch's `sum_to` returns the tensor itself when nothing is reduced, except for an
    // empty target size, which is always a `sum` (so integers become i64).
    if dims.is_empty() && !shape.is_empty() {
        return one(cx.reshape(&x, &shape)?);
    }
    // As `sum`: integers and bool sum to i64, f16/bf16 accumulate in f32.
    let out = crate::aten::reduction::int_to_i64(x.dtype());
    let xa = cast(cx, &x, out)?;
    let xa = cast(cx, &xa, crate::aten::reduction::acc_dtype(out))?;
    let s = cx.reduce_kind(&xa, ReduceKind::Sum, &dims, false)?;
    let s = cast(cx, &s, out)?;
    one(cx.reshape(&s, &shape)?)
}
