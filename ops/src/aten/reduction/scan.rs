//! Scans along one dim, as log2(n) shifted combines (Hillis-Steele): cumsum and cumprod
//! (in f32 for f16/bf16), cummax/cummin (value and index tuples), logcumsumexp.

use super::{int_to_i64, to_acc};
use crate::args::Args;
use crate::aten::util::{cast, wrap_dim};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, TensorType, UnaryOp, Value};
use tessera_lowering::DType;

/// Inclusive scan of `x` along `dim` with `op` (whose identity is `identity`).
pub(crate) fn scan(
    cx: &mut Lower,
    x: &Value,
    dim: usize,
    op: BinaryOp,
    identity: f64,
) -> LowerResult<Value> {
    let n = x.shape()[dim];
    let r = x.rank();
    let id = cx.full(TensorType::scalar(x.dtype()), identity)?;
    let mut y = x.clone();
    let mut k = 1;
    while k < n {
        let head = cx.slice_axis(&y, dim, 0, n - k)?;
        let mut low = vec![0i64; r];
        low[dim] = k as i64;
        let shifted = cx.pad(&head, &id, &low, &vec![0; r], &vec![0; r])?;
        y = cx.binary(op, &y, &shifted)?;
        k *= 2;
    }
    Ok(y)
}

pub(super) fn cumulative(cx: &mut Lower, a: &Args, is_sum: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let out = a
        .opt_dtype("dtype")?
        .unwrap_or_else(|| int_to_i64(x.dtype()));
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    let x = cast(cx, &x, out)?;
    if x.rank() == 0 {
        return Ok(vec![Out::Tensor(x)]);
    }
    let xa = to_acc(cx, &x)?;
    let (op, id) = match (is_sum, out == DType::Bool) {
        (true, false) => (BinaryOp::Add, 0.0),
        (false, false) => (BinaryOp::Multiply, 1.0),
        (true, true) => (BinaryOp::Or, 0.0),
        (false, true) => (BinaryOp::And, 1.0),
    };
    let r = scan(cx, &xa, d, op, id)?;
    Ok(vec![Out::Tensor(cast(cx, &r, out)?)])
}

/// Inclusive scan of the tuples `xs` (same shape) along `dim` with an associative `combine`
/// of an earlier segment's summary and a later one's (Hillis-Steele: log2(n) steps; at step
/// `k` element `i >= k` combines with element `i - k`, the first `k` stay).
pub(crate) fn scan_tuple(
    cx: &mut Lower,
    xs: &[Value],
    dim: usize,
    mut combine: impl FnMut(&mut Lower, &[Value], &[Value]) -> LowerResult<Vec<Value>>,
) -> LowerResult<Vec<Value>> {
    let n = xs[0].shape()[dim];
    let shape = xs[0].shape().to_vec();
    let r = shape.len();
    let pos = cx.iota(TensorType::new(shape.clone(), DType::I64), dim)?;
    let mut ys = xs.to_vec();
    let mut k = 1;
    while k < n {
        let mut low = vec![0i64; r];
        low[dim] = k as i64;
        let earlier = ys
            .iter()
            .map(|y| {
                let head = cx.slice_axis(y, dim, 0, n - k)?;
                let z = cx.zeros(TensorType::scalar(y.dtype()))?;
                Ok(cx.pad(&head, &z, &low, &vec![0; r], &vec![0; r])?)
            })
            .collect::<LowerResult<Vec<_>>>()?;
        let combined = combine(cx, &earlier, &ys)?;
        let kk = cx.full_int(TensorType::new(shape.clone(), DType::I64), k as i128)?;
        let has = cx.compare(Comparison::Ge, &pos, &kk)?;
        ys = combined
            .iter()
            .zip(&ys)
            .map(|(c, y)| Ok(cx.select(&has, c, y)?))
            .collect::<LowerResult<Vec<_>>>()?;
        k *= 2;
    }
    Ok(ys)
}

/// `cummax` / `cummin(self, dim) -> (values, indices)`: the running max (min) and the index
/// of its latest occurrence; a NaN, once seen, stays (with the index of the latest NaN).
pub(super) fn cummax_cummin(cx: &mut Lower, a: &Args, max: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    if x.rank() == 0 {
        let z = cx.zeros(TensorType::scalar(DType::I64))?;
        return Ok(vec![Out::Tensor(x), Out::Tensor(z)]);
    }
    if x.shape()[d] == 0 {
        let z = cx.zeros(TensorType::new(x.shape().to_vec(), DType::I64))?;
        return Ok(vec![Out::Tensor(x), Out::Tensor(z)]);
    }
    let idx = cx.iota(TensorType::new(x.shape().to_vec(), DType::I64), d)?;
    let float = x.dtype().is_float();
    let dir = if max { Comparison::Ge } else { Comparison::Le };
    let r = scan_tuple(cx, &[x, idx], d, |cx, e, l| {
        let mut later = cx.compare(dir, &l[0], &e[0])?;
        if float {
            let ln = cx.compare(Comparison::Ne, &l[0], &l[0])?;
            let en = cx.compare(Comparison::Ne, &e[0], &e[0])?;
            let not_en = cx.unary(UnaryOp::Not, &en)?;
            later = cx.binary(BinaryOp::And, &later, &not_en)?;
            later = cx.binary(BinaryOp::Or, &later, &ln)?;
        }
        Ok(vec![
            cx.select(&later, &l[0], &e[0])?,
            cx.select(&later, &l[1], &e[1])?,
        ])
    })?;
    Ok(r.into_iter().map(Out::Tensor).collect())
}

/// `logcumsumexp(self, dim)`: the running `log(sum(exp(x)))`, floats only, in f32 for
/// f16/bf16.
pub(super) fn logcumsumexp(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    super::require_float(
        &x,
        format!(
            "\"logcumsumexp_out_cpu\" not implemented for '{}'",
            super::torch_name(x.dtype())
        ),
    )?;
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    if x.rank() == 0 || x.shape()[d] == 0 {
        return Ok(vec![Out::Tensor(x)]);
    }
    let xa = to_acc(cx, &x)?;
    let r = scan_tuple(cx, &[xa], d, |cx, e, l| {
        Ok(vec![log_add_exp(cx, &e[0], &l[0])?])
    })?;
    Ok(vec![Out::Tensor(cast(cx, &r[0], x.dtype())?)])
}

/// `log(exp(a) + exp(b))`, stable: `max + log1p(exp(min - max))`; equal infinities give
/// themselves; a NaN propagates.
fn log_add_exp(cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
    let mx = cx.binary(BinaryOp::Maximum, a, b)?;
    let mn = cx.binary(BinaryOp::Minimum, a, b)?;
    let d = cx.sub(&mn, &mx)?;
    let e = cx.exp(&d)?;
    let l = cx.unary(UnaryOp::LogPlusOne, &e)?;
    let s = cx.add(&mx, &l)?;
    let same = cx.compare(Comparison::Eq, a, b)?;
    let fin = cx.is_finite(a)?;
    let not_fin = cx.unary(UnaryOp::Not, &fin)?;
    let inf_same = cx.binary(BinaryOp::And, &same, &not_fin)?;
    let s = cx.select(&inf_same, a, &s)?;
    let an = cx.compare(Comparison::Ne, a, a)?;
    let s = cx.select(&an, a, &s)?;
    let bn = cx.compare(Comparison::Ne, b, b)?;
    Ok(cx.select(&bn, b, &s)?)
}

/// `diff(self, n=1, dim=-1, prepend=None, append=None)`: `n` times the differences of
/// neighbours along `dim` (of `prepend`, `self`, `append` joined); bool gives `!=`.
pub(super) fn diff(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.rank() == 0 {
        return Err(LowerError::invalid(
            "diff expects input to be at least one-dimensional",
        ));
    }
    let n = a.int("n")?;
    if n < 0 {
        return Err(LowerError::invalid(format!(
            "order must be non-negative but got {n}"
        )));
    }
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    let mut parts = Vec::new();
    for name in ["prepend", "self", "append"] {
        if let Some(t) = a.opt_tensor(name)? {
            parts.push(t);
        }
    }
    let mut y = if parts.len() == 1 {
        x
    } else {
        crate::aten::shape::cat_values(cx, &parts, d as i64)?
    };
    for _ in 0..n {
        let len = y.shape()[d];
        if len == 0 {
            break;
        }
        let hi = cx.slice_axis(&y, d, 1, len - 1)?;
        let lo = cx.slice_axis(&y, d, 0, len - 1)?;
        y = if y.dtype() == DType::Bool {
            cx.compare(Comparison::Ne, &hi, &lo)?
        } else {
            cx.sub(&hi, &lo)?
        };
    }
    Ok(vec![Out::Tensor(y)])
}
