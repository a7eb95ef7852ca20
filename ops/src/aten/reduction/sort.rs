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
