//! Joining and splitting: cat, stack, split, split_with_sizes, chunk, unbind.

use super::common::*;
use super::views::select_value;
use crate::aten::promote::promote_types;
use crate::aten::util::{cast, wrap_dim};
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::Value;

/// `torch.cat`: dtypes promote; legacy 1-D empty tensors are skipped.
pub(crate) fn cat_values(cx: &mut Lower, xs: &[Value], dim: i64) -> LowerResult<Value> {
    if xs.is_empty() {
        return Err(LowerError::invalid("torch.cat(): expected a non-empty list of Tensors"));
    }
    if let Some(i) = xs.iter().position(|x| x.rank() == 0) {
        return Err(LowerError::invalid(format!(
            "zero-dimensional tensor (at position {i}) cannot be concatenated"
        )));
    }
    let dtype = xs.iter().skip(1).fold(xs[0].dtype(), |d, x| promote_types(d, x.dtype()));
    let kept: Vec<&Value> = xs.iter().filter(|x| !(x.rank() == 1 && x.shape()[0] == 0)).collect();
    let Some(first) = kept.first() else {
        return zeros(cx, &[0], dtype);
    };
    let d = wrap_dim(dim, first.rank())?;
    for (i, x) in xs.iter().enumerate() {
        if x.rank() == 1 && x.shape()[0] == 0 {
            continue;
        }
        if x.rank() != first.rank() {
            return Err(LowerError::invalid(format!(
                "Tensors must have same number of dimensions: got {} and {}",
                first.rank(),
                x.rank()
            )));
        }
        for k in 0..x.rank() {
            if k != d && x.shape()[k] != first.shape()[k] {
                return Err(LowerError::invalid(format!(
                    "Sizes of tensors must match except in dimension {d}. Expected size {} but got size {} for tensor number {i} in the list.",
                    first.shape()[k],
                    x.shape()[k]
                )));
            }
        }
    }
    let vals = kept.iter().map(|x| cast(cx, x, dtype)).collect::<LowerResult<Vec<_>>>()?;
    if vals.len() == 1 {
        return Ok(vals[0].clone());
    }
    let refs: Vec<&Value> = vals.iter().collect();
    Ok(cx.concatenate(&refs, d)?)
}

pub(super) fn cat(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let xs = a.tensors("tensors")?;
    one(cat_values(cx, &xs, a.int("dim")?)?)
}

pub(super) fn stack(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let xs = a.tensors("tensors")?;
    let Some(first) = xs.first() else {
        return Err(LowerError::invalid("stack expects a non-empty TensorList"));
    };
    let d = wrap_dim(a.int("dim")?, first.rank() + 1)?;
    for (i, x) in xs.iter().enumerate() {
        if x.shape() != first.shape() {
            return Err(LowerError::invalid(format!(
                "stack expects each tensor to be equal size, but got {:?} at entry 0 and {:?} at entry {i}",
                first.shape(),
                x.shape()
            )));
        }
    }
    let us = xs.iter().map(|x| unsqueeze(cx, x, d)).collect::<LowerResult<Vec<_>>>()?;
    one(cat_values(cx, &us, d as i64)?)
}

/// Consecutive pieces of `sizes` along `d`.
fn split_sizes(cx: &mut Lower, x: &Value, d: usize, sizes: &[usize]) -> LowerResult<Vec<Out>> {
    let mut out = Vec::with_capacity(sizes.len());
    let mut at = 0;
    for &s in sizes {
        out.push(slice_dim(cx, x, d, at, at + s, 1)?);
        at += s;
    }
    Ok(vec![Out::Tensors(out)])
}

pub(super) fn split_with_sizes(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim_strict(a.int("dim")?, x.rank())?;
    let ss = a.int_list("split_sizes")?;
    let size = x.shape()[d];
    if ss.iter().any(|&s| s < 0) {
        return Err(LowerError::invalid(format!(
            "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={ss:?}"
        )));
    }
    if ss.iter().sum::<i64>() != size as i64 {
        return Err(LowerError::invalid(format!(
            "split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at dimension {d}), but got split_sizes={ss:?}"
        )));
    }
    let ss: Vec<usize> = ss.iter().map(|&s| s as usize).collect();
    split_sizes(cx, &x, d, &ss)
}

/// Pieces of `split` along `d` (the last one shorter), as `torch.split` makes them.
fn split_even(cx: &mut Lower, x: &Value, d: usize, split: i64) -> LowerResult<Vec<Out>> {
    let size = x.shape()[d];
    if split < 0 {
        return Err(LowerError::invalid(format!("split expects split_size be non-negative, but got split_size={split}")));
    }
    if split == 0 && size != 0 {
        return Err(LowerError::invalid(format!(
            "split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
        )));
    }
    let split = split as usize;
    let n = if split == 0 { 1 } else { size.div_ceil(split).max(1) };
    let ss: Vec<usize> = (0..n).map(|i| split.min(size.saturating_sub(i * split))).collect();
    split_sizes(cx, x, d, &ss)
}

pub(super) fn split(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim_strict(a.int("dim")?, x.rank())?;
    split_even(cx, &x, d, a.int("split_size")?)
}

pub(super) fn chunk(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let chunks = a.int("chunks")?;
    if chunks <= 0 {
        return Err(LowerError::invalid(format!("chunk expects `chunks` to be greater than 0, got: {chunks}")));
    }
    let d = wrap_dim_strict(a.int("dim")?, x.rank())?;
    let size = x.shape()[d];
    if size == 0 {
        if chunks > 1 << 16 {
            return Err(LowerError::Unsupported(format!("{chunks} empty chunks")));
        }
        return split_sizes(cx, &x, d, &vec![0; chunks as usize]);
    }
    split_even(cx, &x, d, size.div_ceil(chunks as usize) as i64)
}

pub(super) fn unbind(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dim = a.int("dim")?;
    let d = wrap_dim_strict(dim, x.rank())?;
    let out = (0..x.shape()[d])
        .map(|i| select_value(cx, &x, d as i64, i as i64))
        .collect::<LowerResult<Vec<_>>>()?;
    Ok(vec![Out::Tensors(out)])
}
