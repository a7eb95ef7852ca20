//! Reductions that skip NaN or count: nansum, nanmean, count_nonzero, and aminmax.

use super::basic::max_min;
use super::{int_to_i64, reduce, to_acc};
use crate::args::Args;
use crate::aten::util::{cast, reduce_dims};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{Comparison, ReduceKind, Value};
use tessera_lowering::DType;

/// `x` with NaN replaced by 0 (non-floats unchanged).
fn zero_nan(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    if !x.dtype().is_float() {
        return Ok(x.clone());
    }
    let n = cx.compare(Comparison::Ne, x, x)?;
    let z = cx.zeros(x.ty().clone())?;
    Ok(cx.select(&n, &z, x)?)
}

/// The sum of the non-NaN elements over `dims`, accumulated in f32 for f16/bf16, in `out`.
fn nan_sum(
    cx: &mut Lower,
    x: &Value,
    out: DType,
    dims: &[usize],
    keepdim: bool,
) -> LowerResult<Value> {
    let x = cast(cx, x, out)?;
    let x = zero_nan(cx, &x)?;
    let xa = to_acc(cx, &x)?;
    let s = reduce(cx, &xa, ReduceKind::Sum, dims, keepdim)?;
    cast(cx, &s, out)
}

/// `nansum(self, dim=None, keepdim=False, dtype=None)`: integers and bool sum to i64.
pub(super) fn nansum(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let out = a
        .opt_dtype("dtype")?
        .unwrap_or_else(|| int_to_i64(x.dtype()));
    let dims = reduce_dims(a.opt_int_list("dim")?.as_deref(), x.rank())?;
    Ok(vec![Out::Tensor(nan_sum(
        cx,
        &x,
        out,
        &dims,
        a.bool("keepdim")?,
    )?)])
}

/// `nanmean(self, dim=None, keepdim=False, dtype=None)`: `nansum / count(not NaN)`, the sum
/// rounded to the dtype first (PyTorch divides the `nansum` result).
pub(super) fn nanmean(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if !x.dtype().is_float() {
        return Err(LowerError::dtype(
            x.dtype(),
            format!(
                "nanmean(): expected input to have floating point or complex dtype but got {}",
                super::torch_name(x.dtype())
            ),
        ));
    }
    let out = a.opt_dtype("dtype")?.unwrap_or(x.dtype());
    let dims = reduce_dims(a.opt_int_list("dim")?.as_deref(), x.rank())?;
    let keep = a.bool("keepdim")?;
    let s = nan_sum(cx, &x, out, &dims, keep)?;
    let s = to_acc(cx, &s)?;
    let ok = cx.compare(Comparison::Eq, &x, &x)?;
    let n = cast(cx, &ok, s.dtype())?;
    let n = reduce(cx, &n, ReduceKind::Sum, &dims, keep)?;
    let m = cx.div(&s, &n)?;
    Ok(vec![Out::Tensor(cast(cx, &m, out)?)])
}

/// `count_nonzero(self, dim=None)` and `.dim_IntList(self, dim)`: i64 counts.
pub(super) fn count_nonzero(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims = match a.get("dim")? {
        crate::value::ArgValue::Int(d) => Some(vec![*d]),
        _ => a.opt_int_list("dim")?,
    };
    let dims = reduce_dims(dims.as_deref(), x.rank())?;
    let nz = if x.dtype() == DType::Bool {
        x.clone()
    } else {
        let z = cx.zeros(x.ty().clone())?;
        cx.compare(Comparison::Ne, &x, &z)?
    };
    let n = cast(cx, &nz, DType::I64)?;
    Ok(vec![Out::Tensor(reduce(
        cx,
        &n,
        ReduceKind::Sum,
        &dims,
        false,
    )?)])
}

/// `aminmax(self, *, dim=None, keepdim=False) -> (min, max)`, NaN-propagating.
pub(super) fn aminmax(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let keep = a.bool("keepdim")?;
    let (dims, keep) = match a.opt_int("dim")? {
        Some(d) => {
            let dims = reduce_dims(Some(&[d]), x.rank())?;
            if x.rank() > 0 && x.shape()[dims[0]] == 0 {
                return Err(LowerError::invalid(
                    "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.",
                ));
            }
            (dims, keep)
        }
        None => {
            if x.ty().num_elements() == 0 {
                return Err(LowerError::invalid(
                    "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.",
                ));
            }
            ((0..x.rank()).collect(), keep)
        }
    };
    let lo = max_min(cx, &x, &dims, keep, false)?;
    let hi = max_min(cx, &x, &dims, keep, true)?;
    Ok(vec![Out::Tensor(lo), Out::Tensor(hi)])
}
