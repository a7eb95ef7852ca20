//! sort (stable; NaN sorts as the largest value) and topk, with i64 indices.

use super::torch_name;
use crate::args::Args;
use crate::aten::util::wrap_dim;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, TensorType, UnaryOp, Value};
use tessera_lowering::DType;

/// Stable sort of `x` along `dim` (rank >= 1) with its indices; NaN is larger than any number.
pub(crate) fn sort_with_indices(
    cx: &mut Lower,
    x: &Value,
    dim: usize,
    descending: bool,
) -> LowerResult<(Value, Value)> {
    let idx = cx.iota(TensorType::new(x.shape(), DType::I64), dim)?;
    let float = x.dtype().is_float();
    let mut r = cx.sort(&[x, &idx], dim, true, |f, v| {
        let (a, b) = (&v[0], &v[1]);
        let dir = if descending {
            Comparison::Gt
        } else {
            Comparison::Lt
        };
        let mut first = f.compare(dir, a, b)?;
        if float {
            // ascending: a number goes before NaN; descending: NaN goes before a number.
            let an = f.compare(Comparison::Ne, a, a)?;
            let bn = f.compare(Comparison::Ne, b, b)?;
            let (p, q) = if descending { (an, bn) } else { (bn, an) };
            let not_q = f.unary(UnaryOp::Not, &q)?;
            let nan_order = f.binary(BinaryOp::And, &p, &not_q)?;
            first = f.binary(BinaryOp::Or, &first, &nan_order)?;
        }
        Ok::<_, LowerError>(first)
    })?;
    let i = r.remove(1);
    Ok((r.remove(0), i))
}

pub(super) fn sort(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    if x.rank() == 0 {
        let z = cx.zeros(TensorType::scalar(DType::I64))?;
        return Ok(vec![Out::Tensor(x), Out::Tensor(z)]);
    }
    let (v, i) = sort_with_indices(cx, &x, d, a.bool("descending")?)?;
    Ok(vec![Out::Tensor(v), Out::Tensor(i)])
}

pub(super) fn topk(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.dtype() == DType::Bool {
        return Err(LowerError::dtype(
            DType::Bool,
            format!(
                "topk does not support {} dtypes on CPU",
                torch_name(DType::Bool).to_lowercase()
            ),
        ));
    }
    let k = a.int("k")?;
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    let size = if x.rank() == 0 { 1 } else { x.shape()[d] };
    if k < 0 || k as usize > size {
        return Err(LowerError::invalid("selected index k out of range"));
    }
    if x.rank() == 0 {
        let z = cx.zeros(TensorType::scalar(DType::I64))?;
        return Ok(vec![Out::Tensor(x), Out::Tensor(z)]);
    }
    let (v, i) = sort_with_indices(cx, &x, d, a.bool("largest")?)?;
    let v = cx.slice_axis(&v, d, 0, k as usize)?;
    let i = cx.slice_axis(&i, d, 0, k as usize)?;
    Ok(vec![Out::Tensor(v), Out::Tensor(i)])
}

/// `argsort(self, dim=-1, descending=False)` and `.stable(self, *, stable, dim, descending)`:
/// the indices of a stable sort.
pub(super) fn argsort(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    if x.rank() == 0 {
        return Ok(vec![Out::Tensor(cx.zeros(TensorType::scalar(DType::I64))?)]);
    }
    let (_, i) = sort_with_indices(cx, &x, d, a.bool("descending")?)?;
    Ok(vec![Out::Tensor(i)])
}

/// `msort(self)`: the values sorted along dim 0.
pub(super) fn msort(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.rank() == 0 {
        return Ok(vec![Out::Tensor(x)]);
    }
    let (v, _) = sort_with_indices(cx, &x, 0, false)?;
    Ok(vec![Out::Tensor(v)])
}

/// `x` sorted along `d` (NaN last, stable) with its indices, and the entries of both at the
/// per-slice position `pos` (i64, `x`'s shape without `d`), optionally keeping `d`.
fn pick_sorted(
    cx: &mut Lower,
    x: &Value,
    d: usize,
    pos: &Value,
    keepdim: bool,
) -> LowerResult<Vec<Out>> {
    let (v, i) = sort_with_indices(cx, x, d, false)?;
    let mut kept = x.shape().to_vec();
    kept[d] = 1;
    let p = cx.reshape(pos, &kept)?;
    let pb = cx.broadcast_to(&p, x.shape())?;
    let io = cx.iota(TensorType::new(x.shape(), DType::I64), d)?;
    let hit = cx.compare(Comparison::Eq, &io, &pb)?;
    let mut outs = Vec::new();
    for s in [&v, &i] {
        // Exactly one position per slice matches: a masked max picks it.
        let low = cx.min_value(s.ty().clone())?;
        let m = cx.select(&hit, s, &low)?;
        let r = if s.dtype().is_float() {
            // NaN-aware: a NaN at the position must survive the reduction.
            super::basic::max_min(cx, &m, &[d], keepdim, true)?
        } else {
            cx.reduce_kind(
                &m,
                tessera_lowering::stablehlo::ReduceKind::Max,
                &[d],
                keepdim,
            )?
        };
        outs.push(Out::Tensor(r));
    }
    Ok(outs)
}

/// The rank-0-as-rank-1 view of `x` and its wrapped dim (PyTorch's order statistics accept
/// a 0-d tensor with dim 0 or -1).
fn order_input(cx: &mut Lower, x: &Value, dim: i64) -> LowerResult<(Value, usize)> {
    let d = wrap_dim(dim, x.rank())?;
    Ok((
        if x.rank() == 0 {
            cx.reshape(x, &[1])?
        } else {
            x.clone()
        },
        d,
    ))
}

/// `kthvalue(self, k, dim=-1, keepdim=False) -> (values, indices)`: the k-th smallest.
pub(super) fn kthvalue(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x0 = a.tensor("self")?;
    let (x, d) = order_input(cx, &x0, a.int("dim")?)?;
    let k = a.int("k")?;
    let n = x.shape()[d] as i64;
    if k < 1 || k > n {
        return Err(LowerError::invalid(format!(
            "kthvalue(): selected number k out of range for dimension {d}"
        )));
    }
    let mut out_shape = x.shape().to_vec();
    out_shape.remove(d);
    let pos = cx.full_int(TensorType::new(out_shape, DType::I64), (k - 1) as i128)?;
    let keep = a.bool("keepdim")? && x0.rank() > 0;
    let mut r = pick_sorted(cx, &x, d, &pos, keep)?;
    if x0.rank() == 0 {
        for o in r.iter_mut() {
            if let Out::Tensor(v) = o {
                *v = cx.reshape(v, &[])?;
            }
        }
    }
    Ok(r)
}

/// `median(self)` / `median.dim(self, dim, keepdim)` (a NaN in a slice gives NaN) and the
/// `nanmedian` forms (NaN ignored): the lower median of the sorted slice.
pub(super) fn median(cx: &mut Lower, a: &Args, ignore_nan: bool) -> LowerResult<Vec<Out>> {
    let x0 = a.tensor("self")?;
    let with_dim = a.schema.overload == "dim";
    let name = if ignore_nan { "nanmedian" } else { "median" };
    let (x, d) = if with_dim {
        order_input(cx, &x0, a.int("dim")?)?
    } else {
        let n = x0.ty().num_elements();
        (cx.reshape(&x0, &[n])?, 0)
    };
    let n = x.shape()[d];
    if n == 0 {
        if !with_dim {
            let nan = cx.full(TensorType::scalar(x0.dtype()), f64::NAN)?;
            return Ok(vec![Out::Tensor(nan)]);
        }
        return Err(LowerError::invalid(format!(
            "{name}() cannot compute {name} for a dimension of size 0 (dim {d})"
        )));
    }
    let mut out_shape = x.shape().to_vec();
    out_shape.remove(d);
    let ty = TensorType::new(out_shape.clone(), DType::I64);
    let pos = if x.dtype().is_float() {
        // m non-NaN entries sort first.
        let ok = cx.compare(Comparison::Eq, &x, &x)?;
        let okc = cx.convert(&ok, DType::I64)?;
        let m = cx.reduce_kind(
            &okc,
            tessera_lowering::stablehlo::ReduceKind::Sum,
            &[d],
            false,
        )?;
        let one_ = cx.full_int(ty.clone(), 1)?;
        let two = cx.full_int(ty.clone(), 2)?;
        if ignore_nan {
            // (max(m, 1) - 1) / 2
            let m1 = cx.max(&m, &one_)?;
            let m1 = cx.sub(&m1, &one_)?;
            cx.div(&m1, &two)?
        } else {
            // Any NaN: the first NaN (position m); else (n - 1) / 2.
            let nn = cx.full_int(ty.clone(), n as i128)?;
            let has_nan = cx.compare(Comparison::Lt, &m, &nn)?;
            let mid = cx.full_int(ty.clone(), ((n - 1) / 2) as i128)?;
            cx.select(&has_nan, &m, &mid)?
        }
    } else {
        cx.full_int(ty, ((n - 1) / 2) as i128)?
    };
    let keep = with_dim && a.bool("keepdim")? && x0.rank() > 0;
    let mut r = pick_sorted(cx, &x, d, &pos, keep)?;
    if !with_dim {
        r.truncate(1);
    } else if x0.rank() == 0 {
        for o in r.iter_mut() {
            if let Out::Tensor(v) = o {
                *v = cx.reshape(v, &[])?;
            }
        }
    }
    Ok(r)
}
