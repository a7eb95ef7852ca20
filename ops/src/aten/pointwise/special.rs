//! More pointwise ops PyTorch/XLA lowers and Core ATen decompositions reach: logaddexp(2),
//! hypot, xlogy, frac, deg2rad/rad2deg, sinc, nan_to_num, copysign, signbit, fmax/fmin,
//! heaviside, positive, isfinite/isposinf/isneginf, float_power, bit shifts.

use super::super::promote::{result_type, to_float, Operand};
use super::arith::trunc_float;
use super::common::*;
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use crate::value::ArgValue;
use tessera_lowering::stablehlo::{BinaryOp, Comparison, UnaryOp, Value};
use tessera_lowering::DType;

/// `self` and `other` (tensors or numbers) promoted and broadcast; float kernels refuse
/// integer results unless `to_float_result` (PyTorch's "binary float ops" promote them).
fn binary(
    cx: &mut Lower,
    a: &Args,
    kernel: &str,
    float_result: bool,
) -> LowerResult<(Vec<Value>, DType)> {
    let ops = [operand(a, "self")?, operand(a, "other")?];
    let d = result_type(&ops);
    let d = if float_result { to_float(d) } else { d };
    require_float(kernel, d)?;
    let (v, _) = promote(cx, &ops, Some(compute_dtype(d)))?;
    Ok((v, d))
}

/// `isinf(a) & a == b ? a : max(a, b) + log1p(base^-|a - b|) / ln(base)`.
pub(super) fn logaddexp(cx: &mut Lower, a: &Args, base2: bool) -> LowerResult<Vec<Out>> {
    let kernel = if base2 {
        "logaddexp2_cpu"
    } else {
        "logaddexp_cpu"
    };
    let (v, d) = binary(cx, a, kernel, false)?;
    let (x, y) = (&v[0], &v[1]);
    let m = max_min_nan(cx, x, y, true)?;
    let diff = cx.sub(x, y)?;
    let ad = cx.unary(UnaryOp::Abs, &diff)?;
    let nad = cx.neg(&ad)?;
    let r = if base2 {
        let two = splat(cx, &nad, 2.0)?;
        let e = cx.binary(BinaryOp::Power, &two, &nad)?;
        let l = cx.unary(UnaryOp::LogPlusOne, &e)?;
        mul_k(cx, &l, std::f64::consts::LOG2_E)?
    } else {
        let e = cx.exp(&nad)?;
        cx.unary(UnaryOp::LogPlusOne, &e)?
    };
    let s = cx.add(&m, &r)?;
    let ax = cx.unary(UnaryOp::Abs, x)?;
    let inf = cmp_k(cx, Comparison::Eq, &ax, f64::INFINITY)?;
    let same = cmp(cx, Comparison::Eq, x, y)?;
    let both = cx.binary(BinaryOp::And, &inf, &same)?;
    let r = sel(cx, &both, x, &s)?;
    out(cast(cx, &r, d)?)
}

/// `hypot(self, other)`: `sqrt(a^2 + b^2)` without overflow (scaled by the larger magnitude);
/// infinite when either is infinite, NaN or not.
pub(super) fn hypot(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (v, d) = binary(cx, a, "hypot_cpu", false)?;
    let ax = cx.unary(UnaryOp::Abs, &v[0])?;
    let ay = cx.unary(UnaryOp::Abs, &v[1])?;
    let m = cx.max(&ax, &ay)?;
    let n = cx.min(&ax, &ay)?;
    let r = cx.div(&n, &m)?;
    let r2 = cx.mul(&r, &r)?;
    let r2 = add_k(cx, &r2, 1.0)?;
    let sq = cx.unary(UnaryOp::Sqrt, &r2)?;
    let h = cx.mul(&m, &sq)?;
    let zero = cmp_k(cx, Comparison::Eq, &m, 0.0)?;
    let h = sel(cx, &zero, &m, &h)?;
    let nan = cx.add(&v[0], &v[1])?;
    let anynan = isnan(cx, &nan)?;
    let h = sel(cx, &anynan, &nan, &h)?;
    let inf_x = cmp_k(cx, Comparison::Eq, &ax, f64::INFINITY)?;
    let inf_y = cmp_k(cx, Comparison::Eq, &ay, f64::INFINITY)?;
    let inf = cx.binary(BinaryOp::Or, &inf_x, &inf_y)?;
    let infs = splat(cx, &h, f64::INFINITY)?;
    let h = sel(cx, &inf, &infs, &h)?;
    out(cast(cx, &h, d)?)
}

/// `xlogy(self, other)`: NaN where `other` is NaN, else 0 where `self` is 0, else
/// `self * log(other)`; integer operands give f32.
pub(super) fn xlogy(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    x_log(cx, a, "xlogy_cpu", UnaryOp::Log)
}

/// `self * log(other)` (`log`: Log or LogPlusOne) with xlogy's zeros and NaNs.
fn x_log(cx: &mut Lower, a: &Args, name: &str, log: UnaryOp) -> LowerResult<Vec<Out>> {
    let (v, d) = binary(cx, a, name, true)?;
    let (x, y) = (&v[0], &v[1]);
    let l = cx.unary(log, y)?;
    let p = cx.mul(x, &l)?;
    let z = cmp_k(cx, Comparison::Eq, x, 0.0)?;
    let zero = splat(cx, x, 0.0)?;
    let r = sel(cx, &z, &zero, &p)?;
    let yn = isnan(cx, y)?;
    let r = sel(cx, &yn, y, &r)?;
    out(cast(cx, &r, d)?)
}

/// `frac(self)`: `x - trunc(x)`, floats only.
pub(super) fn frac(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    require_float("frac_cpu", x.dtype())?;
    out(compute_in(cx, &[x.clone()], x.dtype(), |cx, v| {
        let t = trunc_float(cx, &v[0])?;
        Ok(cx.sub(&v[0], &t)?)
    })?)
}

/// `deg2rad` / `rad2deg`: a multiply by a constant; integers and bool give f32.
pub(super) fn scale_float(cx: &mut Lower, a: &Args, k: f64) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| mul_k(cx, x, k))?)
}

/// `sinc(self)`: 1 at 0, else `sin(pi x) / (pi x)`.
pub(super) fn sinc(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| {
        let p = mul_k(cx, x, std::f64::consts::PI)?;
        let s = cx.unary(UnaryOp::Sine, &p)?;
        let q = cx.div(&s, &p)?;
        let z = cmp_k(cx, Comparison::Eq, x, 0.0)?;
        let one = splat(cx, x, 1.0)?;
        sel(cx, &z, &one, &q)
    })?)
}

/// `nan_to_num(self, nan, posinf, neginf)`: NaN and infinities replaced (by 0 and the
/// dtype's largest and lowest finite values by default); integers and bool are copied.
pub(super) fn nan_to_num(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = x.dtype();
    if !d.is_float() {
        return out(x);
    }
    let nan = a.opt_float("nan")?.unwrap_or(0.0);
    let pos = a.opt_float("posinf")?.unwrap_or(float_max(d));
    let neg = a.opt_float("neginf")?.unwrap_or(-float_max(d));
    // The replacements are converted to the dtype as a C++ cast would (1e20 in f16 is inf).
    let c = compute_dtype(d);
    let rep = |cx: &mut Lower, v: f64| -> LowerResult<Value> {
        let k = cx.full(x.ty().with_dtype(c), v)?;
        let k = cast(cx, &k, d)?;
        Ok(k)
    };
    let (kn, kp, kneg) = (rep(cx, nan)?, rep(cx, pos)?, rep(cx, neg)?);
    let isn = isnan(cx, &x)?;
    let ip = cmp_k(cx, Comparison::Eq, &x, f64::INFINITY)?;
    let ineg = cmp_k(cx, Comparison::Eq, &x, f64::NEG_INFINITY)?;
    let r = sel(cx, &isn, &kn, &x)?;
    let r = sel(cx, &ip, &kp, &r)?;
    out(sel(cx, &ineg, &kneg, &r)?)
}

/// Whether the sign bit of `x` is set (NaN and -0.0 included for floats).
pub(crate) fn sign_bit(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    let d = x.dtype();
    if d.is_float() {
        let it = match d.bits() {
            16 => DType::I16,
            32 => DType::I32,
            _ => DType::I64,
        };
        let b = cx.bitcast_convert(x, it)?;
        return cmp_k(cx, Comparison::Lt, &b, 0.0);
    }
    if d.is_signed_int() {
        return cmp_k(cx, Comparison::Lt, x, 0.0);
    }
    Ok(cx.full(x.ty().with_dtype(DType::Bool), 0.0)?)
}

pub(super) fn signbit(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(sign_bit(cx, &x)?)
}

/// `copysign(self, other)`: `|self|` with the sign bit of `other`; integers give f32.
pub(super) fn copysign(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let ops = [operand(a, "self")?, operand(a, "other")?];
    let d = to_float(result_type(&ops));
    let (v, _) = promote(cx, &ops, Some(d))?;
    let neg = sign_bit(cx, &v[1])?;
    let c = compute_dtype(d);
    let x = cast(cx, &v[0], c)?;
    let ax = cx.unary(UnaryOp::Abs, &x)?;
    let nax = cx.neg(&ax)?;
    let r = sel(cx, &neg, &nax, &ax)?;
    out(cast(cx, &r, d)?)
}

/// `fmax` / `fmin`: max/min that ignore a NaN (NaN only where both are).
pub(super) fn fmax_fmin(cx: &mut Lower, a: &Args, max: bool) -> LowerResult<Vec<Out>> {
    let ops = [
        Operand::Tensor(a.tensor("self")?),
        Operand::Tensor(a.tensor("other")?),
    ];
    let (v, d) = promote(cx, &ops, None)?;
    if d == DType::Bool {
        let op = if max { BinaryOp::Or } else { BinaryOp::And };
        return out(cx.binary(op, &v[0], &v[1])?);
    }
    let op = if max {
        BinaryOp::Maximum
    } else {
        BinaryOp::Minimum
    };
    let r = cx.binary(op, &v[0], &v[1])?;
    if !d.is_float() {
        return out(r);
    }
    let na = isnan(cx, &v[0])?;
    let nb = isnan(cx, &v[1])?;
    let r = sel(cx, &na, &v[1], &r)?;
    out(sel(cx, &nb, &v[0], &r)?)
}

/// `heaviside(self, values)`: `values` where `self == 0`, else `self > 0`; both of one dtype.
pub(super) fn heaviside(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let values = a.tensor("values")?;
    if x.dtype() != values.dtype() {
        return Err(LowerError::invalid(
            "heaviside is not yet implemented for tensors with different dtypes",
        ));
    }
    let v = broadcast_vals(cx, &[x, values])?;
    let pos = cmp_k(cx, Comparison::Gt, &v[0], 0.0)?;
    let pos = cast(cx, &pos, v[0].dtype())?;
    let z = cmp_k(cx, Comparison::Eq, &v[0], 0.0)?;
    out(sel(cx, &z, &v[1], &pos)?)
}

pub(super) fn positive(_cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.dtype() == DType::Bool {
        return Err(LowerError::invalid(
            "The `+` operator, on a bool tensor is not supported.",
        ));
    }
    out(x)
}

/// `isfinite`: neither NaN nor infinite (always true for integers and bool).
pub(super) fn isfinite(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.dtype().is_float() {
        return out(cx.is_finite(&x)?);
    }
    out(cx.full(x.ty().with_dtype(DType::Bool), 1.0)?)
}

/// `isposinf` / `isneginf`.
pub(super) fn is_inf_signed(cx: &mut Lower, a: &Args, positive: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if !x.dtype().is_float() {
        return out(cx.full(x.ty().with_dtype(DType::Bool), 0.0)?);
    }
    let v = if positive {
        f64::INFINITY
    } else {
        f64::NEG_INFINITY
    };
    out(cmp_k(cx, Comparison::Eq, &x, v)?)
}

/// `float_power`: `pow` of the operands converted to f64 (the result is f64).
pub(super) fn float_power(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let mut up = a.clone();
    for v in up.values.iter_mut() {
        if let ArgValue::Tensor(t) = v {
            *t = cast(cx, t, DType::F64)?;
        }
    }
    super::pow::pow(cx, &up)
}

/// `bitwise_left_shift` / `bitwise_right_shift` (Tensor, Tensor_Scalar, Scalar_Tensor):
/// integers only. A shift by a negative amount or by at least the width gives 0 (left, and
/// right for unsigned) or the sign fill (right, signed), as PyTorch's CPU kernel does; XLA's
/// shifts do the same for shift amounts read as unsigned.
pub(super) fn shift(cx: &mut Lower, a: &Args, left: bool) -> LowerResult<Vec<Out>> {
    let ops = [operand(a, "self")?, operand(a, "other")?];
    let d = result_type(&ops);
    if !d.is_int() {
        return Err(not_implemented(
            if left { "lshift_cpu" } else { "rshift_cpu" },
            d,
        ));
    }
    let (v, _) = promote(cx, &ops, None)?;
    let op = match (left, d.is_signed_int()) {
        (true, _) => BinaryOp::ShiftLeft,
        (false, true) => BinaryOp::ShiftRightArithmetic,
        (false, false) => BinaryOp::ShiftRightLogical,
    };
    out(cx.binary(op, &v[0], &v[1])?)
}

/// `special_ndtr(self)`: the standard normal CDF, `erfc(-x / sqrt 2) / 2`.
pub(super) fn ndtr(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| {
        let s = mul_k(cx, x, -std::f64::consts::FRAC_1_SQRT_2)?;
        let e = cx.unary(UnaryOp::Erfc, &s)?;
        mul_k(cx, &e, 0.5)
    })?)
}

/// `special_ndtri(self)`: the inverse of ndtr, `sqrt 2 * erfinv(2p - 1)`.
pub(super) fn ndtri(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| {
        let t = mul_k(cx, x, 2.0)?;
        let t = add_k(cx, &t, -1.0)?;
        let e = cx.unary(UnaryOp::ErfInv, &t)?;
        mul_k(cx, &e, std::f64::consts::SQRT_2)
    })?)
}

/// `special_entr(self)`: `-x log x` for x > 0, 0 at 0, -inf below 0 (NaN stays).
pub(super) fn entr(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| {
        let l = cx.unary(UnaryOp::Log, x)?;
        let p = cx.mul(x, &l)?;
        let r = cx.neg(&p)?;
        let z = cmp_k(cx, Comparison::Eq, x, 0.0)?;
        let zero = splat(cx, x, 0.0)?;
        let r = sel(cx, &z, &zero, &r)?;
        let neg = cmp_k(cx, Comparison::Lt, x, 0.0)?;
        let ninf = splat(cx, x, f64::NEG_INFINITY)?;
        sel(cx, &neg, &ninf, &r)
    })?)
}

/// `special_xlog1py(self, other)` (and its Scalar overloads): like `xlogy` with `log1p`.
pub(super) fn xlog1py(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    x_log(cx, a, "xlog1py_cpu", UnaryOp::LogPlusOne)
}

/// `isclose(self, other, rtol, atol, equal_nan)`: `self == other`, or (finite)
/// `|self - other| <= atol + |rtol * other|`, NaNs equal with `equal_nan`; integers compare
/// in f32 (PyTorch's default dtype), f16/bf16 in f32.
pub(super) fn isclose(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let y = a.tensor("other")?;
    if x.dtype() != y.dtype() {
        return Err(LowerError::invalid(format!(
            "{} did not match {}",
            torch_name(x.dtype()),
            torch_name(y.dtype())
        )));
    }
    let (rtol, atol) = (a.float("rtol")?, a.float("atol")?);
    if rtol < 0.0 || atol < 0.0 {
        return Err(LowerError::invalid(format!(
            "rtol must be greater than or equal to zero, but got {rtol} (atol {atol})"
        )));
    }
    let v = broadcast_vals(cx, &[x.clone(), y])?;
    let mut close = cmp(cx, Comparison::Eq, &v[0], &v[1])?;
    if a.bool("equal_nan")? {
        let na = isnan(cx, &v[0])?;
        let nb = isnan(cx, &v[1])?;
        let both = cx.binary(BinaryOp::And, &na, &nb)?;
        close = cx.binary(BinaryOp::Or, &close, &both)?;
    }
    if x.dtype() == DType::Bool || (rtol == 0.0 && atol == 0.0) {
        return out(close);
    }
    let c = if x.dtype() == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let (p, q) = (cast(cx, &v[0], c)?, cast(cx, &v[1], c)?);
    let rq = mul_k(cx, &q, rtol)?;
    let rq = cx.unary(UnaryOp::Abs, &rq)?;
    let allowed = add_k(cx, &rq, atol)?;
    let diff = cx.sub(&p, &q)?;
    let actual = cx.unary(UnaryOp::Abs, &diff)?;
    let fin = cx.is_finite(&actual)?;
    let within = cmp(cx, Comparison::Le, &actual, &allowed)?;
    let ok = cx.binary(BinaryOp::And, &fin, &within)?;
    out(cx.binary(BinaryOp::Or, &close, &ok)?)
}
