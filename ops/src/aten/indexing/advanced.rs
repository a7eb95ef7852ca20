//! Advanced indexing: `index.Tensor` (`x[i, :, j]`, boolean masks), `index_put`, `nonzero`.
//!
//! Boolean masks become their `nonzero` coordinates, padded to the mask's size; `index.Tensor`
//! then returns the padded result and the count (`Out::Prefix`), `index_put` neutralises the
//! padded rows.

use super::points::{nonzero_flat, stack_indices, unravel, Combine};
use crate::aten::shape::common::*;
use crate::aten::util::broadcast_all;
use crate::args::Args;
use crate::check::CheckKind;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{Comparison, GatherDims, ScatterDims, Value};
use tessera_lowering::DType;

/// How `x[indices]` reads `x`.
struct Plan {
    /// Operand dims indexed, ascending (one per index vector component).
    dims: Vec<usize>,
    /// The index tensors (i64, broadcast to `b`, negatives wrapped), one per `dims` entry.
    comps: Vec<Value>,
    /// The broadcast shape of the index tensors.
    b: Vec<usize>,
    /// Where `b` sits in the result.
    b_at: usize,
    result: Vec<usize>,
    /// Result dims that hold the operand's non-indexed dims.
    offset_dims: Vec<usize>,
    /// With boolean masks: the number of true elements, and `[N]` "row < count" (N = the
    /// padded length, the last dim of `b`).
    count: Option<(Value, Value)>,
}

fn plan(cx: &mut Lower, x: &Value, indices: &[Option<Value>]) -> LowerResult<Option<Plan>> {
    let r = x.rank();
    let used: usize = indices.iter().map(|i| match i {
        Some(t) if matches!(t.dtype(), DType::Bool | DType::U8) => t.rank(),
        _ => 1,
    }).sum();
    if used > r {
        return Err(LowerError::invalid(format!("too many indices for tensor of dimension {r} (got {used})")));
    }
    let mut d = 0;
    let mut dims = Vec::new();
    let mut comps = Vec::new();
    let mut mask: Option<(Value, usize)> = None;
    let mut given = 0usize;
    for ix in indices {
        let Some(t) = ix else {
            d += 1;
            continue;
        };
        let k = given;
        given += 1;
        match t.dtype() {
            DType::Bool | DType::U8 => {
                if t.rank() == 0 {
                    return Err(LowerError::Unsupported("a 0-dim boolean index".into()));
                }
                for j in 0..t.rank() {
                    if t.shape()[j] != x.shape()[d + j] {
                        return Err(LowerError::invalid(format!(
                            "The shape of the mask {:?} at index {j} does not match the shape of the indexed tensor {:?} at index {}",
                            t.shape(),
                            x.shape(),
                            d + j
                        )));
                    }
                }
                let (pos, count) = nonzero_flat(cx, t)?;
                for (j, c) in unravel(cx, &pos, t.shape())?.into_iter().enumerate() {
                    dims.push(d + j);
                    comps.push(c);
                }
                if mask.is_none() {
                    mask = Some((count, t.ty().num_elements()));
                }
                d += t.rank();
            }
            DType::I64 | DType::I32 => {
                // torch numbers the dimension among the index tensors given.
                let size = x.shape()[d] as i64;
                let kind = CheckKind::Bounds { prefix: "", dim: k, size };
                cx.check_range(t, -size, size, None, kind)?;
                dims.push(d);
                comps.push(cx.convert(t, DType::I64)?);
                d += 1;
            }
            other => {
                return Err(LowerError::dtype(other, "tensors used as indices must be long, int, byte or bool tensors"));
            }
        }
    }
    if dims.is_empty() {
        return Ok(None);
    }
    let b = broadcast_all(&comps).map_err(|_| {
        let shapes: Vec<String> = comps.iter().map(|c| format!("{:?}", c.shape())).collect();
        LowerError::invalid(format!(
            "shape mismatch: indexing tensors could not be broadcast together with shapes {}",
            shapes.join(", ")
        ))
    })?;
    let mut wrapped = Vec::with_capacity(comps.len());
    for (c, &dim) in comps.iter().zip(&dims) {
        let c = cx.broadcast_to(c, &b)?;
        let zero = i64_full(cx, &b, 0)?;
        let size = i64_full(cx, &b, x.shape()[dim] as i64)?;
        let neg = cx.compare(Comparison::Lt, &c, &zero)?;
        let up = cx.add(&c, &size)?;
        wrapped.push(cx.select(&neg, &up, &c)?);
    }
    let adjacent = dims.windows(2).all(|w| w[1] == w[0] + 1);
    let rest: Vec<usize> = (0..r).filter(|d| !dims.contains(d)).collect();
    let (b_at, result) = if adjacent {
        let first = dims[0];
        let last = *dims.last().unwrap_or(&first);
        let mut res = x.shape()[..first].to_vec();
        res.extend_from_slice(&b);
        res.extend_from_slice(&x.shape()[last + 1..]);
        (first, res)
    } else {
        let mut res = b.clone();
        res.extend(rest.iter().map(|&d| x.shape()[d]));
        (0, res)
    };
    let offset_dims: Vec<usize> = (0..result.len()).filter(|&i| i < b_at || i >= b_at + b.len()).collect();
    let count = match mask {
        Some((count, n)) => {
            let rows = iota(cx, &[n], 0)?;
            let c = cx.broadcast_to(&count, &[n])?;
            let valid = cx.compare(Comparison::Lt, &rows, &c)?;
            Some((count, valid))
        }
        None => None,
    };
    Ok(Some(Plan { dims, comps: wrapped, b, b_at, result, offset_dims, count }))
}

/// `x[indices]` per the plan (padded rows included).
fn gather_plan(cx: &mut Lower, x: &Value, p: &Plan) -> LowerResult<Value> {
    if p.result.iter().product::<usize>() == 0 || x.ty().num_elements() == 0 {
        return zeros(cx, &p.result, x.dtype());
    }
    let idx = stack_indices(cx, &p.comps, &p.b)?;
    let mut slice = x.shape().to_vec();
    for &d in &p.dims {
        slice[d] = 1;
    }
    let dims = GatherDims {
        offset_dims: p.offset_dims.clone(),
        collapsed_slice_dims: p.dims.clone(),
        start_index_map: p.dims.clone(),
        index_vector_dim: p.b.len(),
    };
    Ok(cx.gather(x, &idx, &dims, &slice)?)
}

pub(super) fn index(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let indices = a.opt_tensors("indices")?;
    let Some(p) = plan(cx, &x, &indices)? else {
        return one(x);
    };
    let v = gather_plan(cx, &x, &p)?;
    match &p.count {
        None => one(v),
        Some((count, valid)) => {
            let n = valid.shape()[0];
            if p.b.len() != 1 || p.b_at != 0 || p.b[0] != n {
                return Err(LowerError::Unsupported(
                    "boolean mask indexing whose masked result dim is not the leading one (e.g. x[:, mask])".into(),
                ));
            }
            Ok(vec![Out::Prefix { value: v, count: count.clone() }])
        }
    }
}

pub(super) fn index_put(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let indices = a.opt_tensors("indices")?;
    let mut values = a.tensor("values")?;
    let accumulate = a.bool("accumulate")?;
    if values.dtype() != x.dtype() {
        return Err(LowerError::invalid(format!(
            "Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.",
            x.dtype(),
            values.dtype()
        )));
    }
    let mismatch = |v: &Value, r: &[usize]| {
        LowerError::invalid(format!(
            "shape mismatch: value tensor of shape {:?} cannot be broadcast to indexing result of shape {r:?}",
            v.shape()
        ))
    };
    let Some(p) = plan(cx, &x, &indices)? else {
        let v = cx.broadcast_to(&values, x.shape()).map_err(|_| mismatch(&values, x.shape()))?;
        return one(if accumulate { cx.add(&x, &v)? } else { v });
    };
    let res = p.result.clone();
    // With masks, the padded (data-dependent) dim is the last of `b` (never empty then).
    let q = (p.b_at + p.b.len()).saturating_sub(1);
    if let Some((_, valid)) = &p.count {
        let n = valid.shape()[0];
        let off = res.len() as isize - values.rank() as isize;
        let vq = q as isize - off;
        if off >= 0 && vq >= 0 {
            let vq = vq as usize;
            let c = values.shape()[vq];
            if c != 1 && c < n {
                let z = zeros(cx, &[], values.dtype())?;
                let mut hi = vec![0i64; values.rank()];
                hi[vq] = (n - c) as i64;
                values = cx.pad(&values, &z, &vec![0; values.rank()], &hi, &vec![0; values.rank()])?;
            }
        }
    }
    let mut v = cx.broadcast_to(&values, &res).map_err(|_| mismatch(&values, &res))?;
    if res.iter().product::<usize>() == 0 || x.ty().num_elements() == 0 {
        return one(x);
    }
    if let Some((_, valid)) = &p.count {
        let keep = cx.broadcast_in_dim(valid, &res, &[q])?;
        let fallback = if accumulate { zeros(cx, &res, x.dtype())? } else { gather_plan(cx, &x, &p)? };
        v = cx.select(&keep, &v, &fallback)?;
    }
    let idx = stack_indices(cx, &p.comps, &p.b)?;
    let dims = ScatterDims {
        update_window_dims: p.offset_dims.clone(),
        inserted_window_dims: p.dims.clone(),
        scatter_dims_to_operand_dims: p.dims.clone(),
        index_vector_dim: p.b.len(),
    };
    let c = if accumulate { Combine::Add } else { Combine::Replace };
    let mut out = cx.scatter(&[&x], &idx, &[&v], &dims, |f, a| -> LowerResult<Vec<Value>> {
        Ok(vec![match c {
            Combine::Add => f.add(&a[0], &a[1])?,
            _ => a[1].clone(),
        }])
    })?;
    one(out.remove(0))
}

pub(super) fn nonzero(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let n = x.ty().num_elements();
    let r = x.rank();
    let (pos, count) = nonzero_flat(cx, &x)?;
    let value = if r == 0 || n == 0 {
        zeros(cx, &[n, r], DType::I64)?
    } else {
        let cols = unravel(cx, &pos, x.shape())?
            .iter()
            .map(|c| cx.reshape(c, &[n, 1]))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Value> = cols.iter().collect();
        if refs.len() == 1 { cols[0].clone() } else { cx.concatenate(&refs, 1)? }
    };
    Ok(vec![Out::Prefix { value, count }])
}
