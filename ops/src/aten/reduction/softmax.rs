//! softmax / log_softmax (max-subtracted, in f32 for f16/bf16) and their backward.

use super::{acc_dtype, reduce, require_float, torch_name};
use crate::args::Args;
use crate::aten::util::{cast, wrap_dim};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{ReduceKind, UnaryOp, Value};
use tessera_lowering::DType;

/// Runs `f` on `x` viewed as rank >= 1 (a rank-0 `x` as `[1]`) with the wrapped dim.
fn on_rank1(
    cx: &mut Lower,
    xs: &[&Value],
    dim: i64,
    f: impl FnOnce(&mut Lower, &[Value], usize) -> LowerResult<Value>,
) -> LowerResult<Value> {
    let rank = xs[0].rank();
    let d = wrap_dim(dim, rank)?;
    if rank > 0 {
        let owned: Vec<Value> = xs.iter().map(|&v| v.clone()).collect();
        return f(cx, &owned, d);
    }
    let owned = xs
        .iter()
        .map(|v| Ok(cx.reshape(v, &[1])?))
        .collect::<LowerResult<Vec<_>>>()?;
    let r = f(cx, &owned, 0)?;
    Ok(cx.reshape(&r, &[])?)
}

/// softmax (or log_softmax) of float `x` along `dim`, returned in `out`.
pub(crate) fn softmax_of(
    cx: &mut Lower,
    x: &Value,
    dim: i64,
    log: bool,
    out: DType,
) -> LowerResult<Value> {
    on_rank1(cx, &[x], dim, |cx, v, d| {
        let xa = cast(cx, &v[0], acc_dtype(v[0].dtype()))?;
        let m = super::basic::max_min(cx, &xa, &[d], true, true)?;
        let mb = cx.broadcast_to(&m, xa.shape())?;
        let z = cx.sub(&xa, &mb)?;
        let e = cx.exp(&z)?;
        let s = reduce(cx, &e, ReduceKind::Sum, &[d], true)?;
        let s = cx.broadcast_to(&s, xa.shape())?;
        let r = if log {
            // PyTorch's CPU kernel along the last dim keeps the sum and its log in the input's
            // dtype (f16/bf16); its other kernel, and every float32/64 path, keep them in acc.
            let dt = v[0].dtype();
            let round = matches!(dt, DType::F16 | DType::BF16) && d + 1 == v[0].rank();
            let s = if round { round_to(cx, &s, dt)? } else { s };
            let ls = cx.unary(UnaryOp::Log, &s)?;
            let ls = if round { round_to(cx, &ls, dt)? } else { ls };
            cx.sub(&z, &ls)?
        } else {
            cx.div(&e, &s)?
        };
        cast(cx, &r, out)
    })
}

/// `x` rounded to `dtype` and back.
fn round_to(cx: &mut Lower, x: &Value, dtype: DType) -> LowerResult<Value> {
    let r = cast(cx, x, dtype)?;
    cast(cx, &r, x.dtype())
}

fn not_implemented(x: &Value, log: bool) -> LowerError {
    let k = if log { "log_softmax" } else { "softmax" };
    LowerError::dtype(
        x.dtype(),
        format!(
            "\"{k}_kernel_impl\" not implemented for '{}'",
            torch_name(x.dtype())
        ),
    )
}

/// PyTorch skips the kernel (and its dtype check) for an empty tensor.
fn empty_non_float(x: &Value) -> bool {
    !x.dtype().is_float() && x.shape().iter().product::<usize>() == 0
}

/// `_softmax(self, dim, half_to_float)`: with `half_to_float`, f16/bf16 input gives f32.
pub(super) fn softmax_internal(cx: &mut Lower, a: &Args, log: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if empty_non_float(&x) {
        return Ok(vec![Out::Tensor(x)]);
    }
    require_float(&x, "").map_err(|_| not_implemented(&x, log))?;
    let out = if a.bool("half_to_float")? {
        acc_dtype(x.dtype())
    } else {
        x.dtype()
    };
    Ok(vec![Out::Tensor(softmax_of(
        cx,
        &x,
        a.int("dim")?,
        log,
        out,
    )?)])
}

/// `self` of `softmax.int`/`_safe_softmax`, converted to `dtype` where given, and whether it
/// is a float (an empty non-float tensor is the result as it is, as in torch; other
/// non-floats are an error).
fn softmax_input(cx: &mut Lower, a: &Args, log: bool) -> LowerResult<(Value, bool)> {
    let x = a.tensor("self")?;
    let x = match a.opt_dtype("dtype")? {
        Some(d) => cast(cx, &x, d)?,
        None => x,
    };
    if empty_non_float(&x) {
        return Ok((x, false));
    }
    require_float(&x, "").map_err(|_| not_implemented(&x, log))?;
    Ok((x, true))
}

/// `softmax.int(self, dim, dtype=None)`: `dtype` converts the input first.
pub(super) fn softmax_int(cx: &mut Lower, a: &Args, log: bool) -> LowerResult<Vec<Out>> {
    let (x, float) = softmax_input(cx, a, log)?;
    if !float {
        return Ok(vec![Out::Tensor(x)]);
    }
    let out = x.dtype();
    Ok(vec![Out::Tensor(softmax_of(
        cx,
        &x,
        a.int("dim")?,
        log,
        out,
    )?)])
}

/// `_softmax_backward_data(grad_output, output, dim, input_dtype)`:
/// softmax: `y * (g - sum(g * y))`; log_softmax: `g - exp(y) * sum(g)`. The result has the
/// gradient's dtype, or `input_dtype` when the forward ran half-to-float.
pub(super) fn backward(cx: &mut Lower, a: &Args, log: bool) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_output")?;
    let y = a.tensor("output")?;
    let input_dtype = a.dtype("input_dtype")?;
    require_float(&g, "").map_err(|_| not_implemented(&g, log))?;
    if g.dtype() != y.dtype() {
        return Err(LowerError::invalid(format!(
            "expected scalar type {} but found {}",
            torch_name(g.dtype()),
            torch_name(y.dtype())
        )));
    }
    if g.shape() != y.shape() {
        return Err(LowerError::invalid(format!(
            "grad_output and output must have the same shape, got {:?} and {:?}",
            g.shape(),
            y.shape()
        )));
    }
    let out = if g.dtype() == DType::F32 && matches!(input_dtype, DType::F16 | DType::BF16) {
        input_dtype
    } else {
        g.dtype()
    };
    let r = on_rank1(cx, &[&g, &y], a.int("dim")?, |cx, v, d| {
        let acc = acc_dtype(g.dtype());
        let g = cast(cx, &v[0], acc)?;
        let y = cast(cx, &v[1], acc)?;
        let r = if log {
            let s = reduce(cx, &g, ReduceKind::Sum, &[d], true)?;
            let s = cx.broadcast_to(&s, g.shape())?;
            let e = cx.exp(&y)?;
            let t = cx.mul(&e, &s)?;
            cx.sub(&g, &t)?
        } else {
            let gy = cx.mul(&g, &y)?;
            let s = reduce(cx, &gy, ReduceKind::Sum, &[d], true)?;
            let s = cx.broadcast_to(&s, g.shape())?;
            let t = cx.sub(&g, &s)?;
            cx.mul(&y, &t)?
        };
        Ok(r)
    })?;
    Ok(vec![Out::Tensor(cast(cx, &r, out)?)])
}

/// `_safe_softmax(self, dim, dtype=None)`: softmax, with 0 (not NaN) for slices that are all
/// `-inf` (fully masked attention rows).
pub(super) fn safe_softmax(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, float) = softmax_input(cx, a, false)?;
    if !float {
        return Ok(vec![Out::Tensor(x)]);
    }
    let dim = a.int("dim")?;
    let y = softmax_of(cx, &x, dim, false, x.dtype())?;
    let masked = on_rank1(cx, &[&x], dim, |cx, v, d| {
        let ninf = cx.full(v[0].ty().clone(), f64::NEG_INFINITY)?;
        let m = cx.compare(tessera_lowering::stablehlo::Comparison::Eq, &v[0], &ninf)?;
        let all = reduce(cx, &m, ReduceKind::And, &[d], true)?;
        Ok(cx.broadcast_to(&all, v[0].shape())?)
    })?;
    let z = cx.zeros(y.ty().clone())?;
    Ok(vec![Out::Tensor(cx.select(&masked, &z, &y)?)])
}
