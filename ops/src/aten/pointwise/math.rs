//! Unary math: float functions (integers and bool compute in f32), abs, sign, rounding,
//! atan2, isnan, isinf.

use super::arith::trunc_float;
use super::common::*;
use super::super::promote::{result_type, to_float, Operand};
use crate::args::Args;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, UnaryOp, Value};
use tessera_lowering::DType;

/// A float math function of `self`; integer and bool inputs compute in (and return) f32.
pub(crate) fn float_unary(cx: &mut Lower, a: &Args, op: UnaryOp) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| Ok(cx.unary(op, x)?))?)
}

pub(super) fn exp2(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| {
        let two = splat(cx, x, 2.0)?;
        Ok(cx.binary(BinaryOp::Power, &two, x)?)
    })?)
}

/// `log(x) / ln(base)`.
pub(super) fn log_base(cx: &mut Lower, a: &Args, base: f64) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| {
        let l = cx.unary(UnaryOp::Log, x)?;
        mul_k(cx, &l, 1.0 / base.ln())
    })?)
}

pub(super) fn abs(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    refuse_bool("abs_cpu", x.dtype())?;
    if x.dtype().is_unsigned_int() {
        return out(x);
    }
    out(cx.unary(UnaryOp::Abs, &x)?)
}

/// `sign`: -1, 0 or 1 in the input's dtype; NaN and -0.0 give 0 (PyTorch's `(0 < x) - (x < 0)`);
/// bool is itself.
pub(super) fn sign(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = x.dtype();
    if d == DType::Bool {
        return out(x);
    }
    if d.is_signed_int() {
        return out(cx.unary(UnaryOp::Sign, &x)?);
    }
    let pos = cmp_k(cx, Comparison::Gt, &x, 0.0)?;
    let one = splat(cx, &x, 1.0)?;
    let zero = splat(cx, &x, 0.0)?;
    if d.is_unsigned_int() {
        return out(sel(cx, &pos, &one, &zero)?);
    }
    let negv = cmp_k(cx, Comparison::Lt, &x, 0.0)?;
    let m1 = splat(cx, &x, -1.0)?;
    let r = sel(cx, &negv, &m1, &zero)?;
    out(sel(cx, &pos, &one, &r)?)
}

/// `sgn`: [`sign`] of a real tensor; of a complex one `x / |x|`, 0 where `x` is 0 (PyTorch's).
pub(super) fn sgn(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if !x.dtype().is_complex() {
        return sign(cx, a);
    }
    let m = cx.unary(UnaryOp::Abs, &x)?;
    let zero = splat(cx, &m, 0.0)?;
    let is_zero = cmp(cx, Comparison::Eq, &m, &zero)?;
    let mc = cx.complex(&m, &zero)?;
    let q = cx.div(&x, &mc)?;
    let z = splat(cx, &x, 0.0)?;
    out(sel(cx, &is_zero, &z, &q)?)
}

#[derive(Clone, Copy)]
pub(super) enum Rounding {
    Ceil,
    Floor,
    Trunc,
    Round,
}

/// `ceil`/`floor`/`trunc`/`round` (half to even): integers are returned as they are.
pub(super) fn rounding(cx: &mut Lower, a: &Args, r: Rounding) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let kernel = match r {
        Rounding::Ceil => "ceil_vml_cpu",
        Rounding::Floor => "floor_vml_cpu",
        Rounding::Trunc => "trunc_vml_cpu",
        Rounding::Round => "round_vml_cpu",
    };
    refuse_bool(kernel, x.dtype())?;
    if !x.dtype().is_float() {
        return out(x);
    }
    out(match r {
        Rounding::Ceil => cx.unary(UnaryOp::Ceil, &x)?,
        Rounding::Floor => cx.unary(UnaryOp::Floor, &x)?,
        Rounding::Round => cx.unary(UnaryOp::RoundNearestEven, &x)?,
        Rounding::Trunc => trunc_float(cx, &x)?,
    })
}

pub(super) fn atan2(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = Operand::Tensor(a.tensor("self")?);
    let y = Operand::Tensor(a.tensor("other")?);
    let d = to_float(result_type(&[x.clone(), y.clone()]));
    let (v, _) = promote(cx, &[x, y], Some(d))?;
    out(compute_in(cx, &v, d, |cx, v| Ok(cx.binary(BinaryOp::Atan2, &v[0], &v[1])?))?)
}

pub(super) fn isnan_op(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(isnan(cx, &x)?)
}

pub(super) fn isinf(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if !x.dtype().is_float() {
        return out(cx.full(x.ty().with_dtype(DType::Bool), 0.0)?);
    }
    let ax: Value = cx.unary(UnaryOp::Abs, &x)?;
    out(cmp_k(cx, Comparison::Eq, &ax, f64::INFINITY)?)
}

/// `0.5 * exp(a)` for `a >= 0` without overflowing early: `(0.5 * exp(a/2)) * exp(a/2)`.
fn half_exp(cx: &mut Lower, a: &Value) -> LowerResult<Value> {
    let h = mul_k(cx, a, 0.5)?;
    let e = cx.exp(&h)?;
    let he = mul_k(cx, &e, 0.5)?;
    Ok(cx.mul(&he, &e)?)
}

/// `cosh(x) = 0.5 exp(|x|) + 0.5 exp(-|x|)` (more accurate in f32 than XLA's expansion).
pub(super) fn cosh(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| {
        let ax = cx.unary(UnaryOp::Abs, x)?;
        let big = half_exp(cx, &ax)?;
        let nax = cx.neg(&ax)?;
        let small = cx.exp(&nax)?;
        let small = mul_k(cx, &small, 0.5)?;
        Ok(cx.add(&big, &small)?)
    })?)
}

/// `sinh(x)`: through `expm1` for |x| < 1 (no cancellation), else
/// `0.5 exp(|x|) - 0.5 exp(-|x|)`; the sign of x (and -0.0) kept.
pub(super) fn sinh(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| {
        let ax = cx.unary(UnaryOp::Abs, x)?;
        let em = cx.unary(UnaryOp::ExponentialMinusOne, &ax)?;
        let em1 = add_k(cx, &em, 1.0)?;
        let q = cx.div(&em, &em1)?;
        let s = cx.add(&em, &q)?;
        let small = mul_k(cx, &s, 0.5)?;
        let big = half_exp(cx, &ax)?;
        let nax = cx.neg(&ax)?;
        let tail = cx.exp(&nax)?;
        let tail = mul_k(cx, &tail, 0.5)?;
        let big = cx.sub(&big, &tail)?;
        let lt1 = cmp_k(cx, Comparison::Lt, &ax, 1.0)?;
        let r = sel(cx, &lt1, &small, &big)?;
        let neg = cmp_k(cx, Comparison::Lt, x, 0.0)?;
        let nr = cx.neg(&r)?;
        let r = sel(cx, &neg, &nr, &r)?;
        let zero = cmp_k(cx, Comparison::Eq, x, 0.0)?;
        sel(cx, &zero, x, &r)
    })?)
}
