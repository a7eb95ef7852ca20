//! Arithmetic: add, sub, mul, div (true, trunc, floor), remainder, fmod, neg, square,
//! addcmul, addcdiv, lerp.
//!
//! Integer division by zero: PyTorch raises `ZeroDivisionError` (it checks the data); so do
//! integer `div(.., rounding_mode=trunc|floor)`, `floor_divide`, `remainder` and `fmod`,
//! through a device-side check ([`crate::check`]).

use super::common::*;
use super::super::promote::{result_type, to_float, Operand};
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use crate::value::Scalar;
use tessera_lowering::stablehlo::{BinaryOp, Comparison, TensorType, UnaryOp, Value};
use tessera_lowering::DType;

/// `self + alpha * other` (`sub`: minus), with PyTorch's checks of bool operands and alpha.
pub(super) fn add_sub(cx: &mut Lower, a: &Args, sub: bool) -> LowerResult<Vec<Out>> {
    // A number `self` only reaches here from `rsub.Scalar` (its operands swapped).
    let x = operand(a, "self")?;
    let y = operand(a, "other")?;
    if sub {
        let (bx, by) = (x.dtype() == DType::Bool, y.dtype() == DType::Bool);
        if bx && by {
            return Err(LowerError::invalid(
                "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.",
            ));
        }
        if bx || by {
            return Err(LowerError::invalid(
                "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
            ));
        }
    }
    // A number `other` is rounded to the result dtype (unlike mul/div, which keep it in f32
    // for f16/bf16); the sum is computed in f32 for those, with alpha in f32.
    let (v, d) = promote(cx, &[x, y], None)?;
    let v = [cast(cx, &v[0], compute_dtype(d))?, cast(cx, &v[1], compute_dtype(d))?];
    let alpha = a.scalar("alpha")?;
    if !d.is_float() && !d.is_complex() && matches!(alpha, Scalar::Float(_)) {
        return Err(LowerError::invalid(
            "For integral input tensors, argument alpha must not be a floating point number.",
        ));
    }
    if d != DType::Bool && matches!(alpha, Scalar::Bool(_)) {
        return Err(LowerError::invalid("Boolean alpha only supported for Boolean results."));
    }
    let alpha = checked(alpha, d)?;
    if d == DType::Bool {
        if alpha.as_f64() == 0.0 {
            return out(v[0].clone());
        }
        return out(cx.binary(BinaryOp::Or, &v[0], &v[1])?);
    }
    let op = if sub { BinaryOp::Subtract } else { BinaryOp::Add };
    let y = if alpha.as_f64() == 1.0 {
        v[1].clone()
    } else {
        let k = konst(cx, alpha, v[1].dtype())?;
        let k = like(cx, &k, &v[1])?;
        cx.mul(&v[1], &k)?
    };
    let r = cx.binary(op, &v[0], &y)?;
    out(cast(cx, &r, d)?)
}

pub(super) fn mul(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = Operand::Tensor(a.tensor("self")?);
    let y = operand(a, "other")?;
    let (v, d) = promote_c(cx, &[x, y])?;
    let r = cx.mul(&v[0], &v[1])?;
    out(cast(cx, &r, d)?)
}

/// `div` with `rounding_mode` None (true division: integers give f32), "trunc" or "floor".
pub(super) fn div(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let mode = if a.schema.args.iter().any(|s| s.name == "rounding_mode") {
        a.opt_str("rounding_mode")?
    } else {
        None
    };
    div_mode(cx, a, mode.as_deref())
}

/// `floor_divide(self, other)` (Tensor and Scalar): `div` with `rounding_mode="floor"`.
pub(super) fn floor_divide(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    div_mode(cx, a, Some("floor"))
}

/// `rsub(self, other, alpha)`: `other - alpha * self` (`self` and `other` swapped for `sub`).
pub(super) fn rsub(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let mut swapped = a.clone();
    swapped.values.swap(0, 1);
    add_sub(cx, &swapped, true)
}

fn div_mode(cx: &mut Lower, a: &Args, mode: Option<&str>) -> LowerResult<Vec<Out>> {
    let x = Operand::Tensor(a.tensor("self")?);
    let y = operand(a, "other")?;
    let d = result_type(&[x.clone(), y.clone()]);
    match mode {
        None => {
            let f = to_float(d);
            let (v, _) = promote(cx, &[x, y], Some(compute_dtype(f)))?;
            let r = cx.div(&v[0], &v[1])?;
            out(cast(cx, &r, f)?)
        }
        Some("trunc") => {
            refuse_bool("div_trunc_cpu", d)?;
            refuse_complex("div_trunc_cpu", d)?;
            // TensorIterator treats a one-element divisor (a number, a 0-dim or any all-ones
            // shape tensor) as a scalar and takes its f32 path for f16/bf16.
            let scalar = match &y {
                Operand::Scalar(_) => true,
                Operand::Tensor(t) => t.shape().iter().all(|&n| n == 1),
            };
            let (v, _) = promote_c(cx, &[x, y])?;
            if !d.is_float() {
                cx.check_nonzero(&v[1])?;
                return out(cx.div(&v[0], &v[1])?);
            }
            // Tensor by tensor, PyTorch rounds the f16/bf16 quotient before truncating; by a
            // scalar divisor, it computes in f32 throughout.
            let q = cx.div(&v[0], &v[1])?;
            let q = if scalar {
                q
            } else {
                let rounded = cast(cx, &q, d)?;
                cast(cx, &rounded, compute_dtype(d))?
            };
            let r = trunc_float(cx, &q)?;
            out(cast(cx, &r, d)?)
        }
        Some("floor") => {
            refuse_bool("div_floor_cpu", d)?;
            refuse_complex("div_floor_cpu", d)?;
            let (v, _) = promote_c(cx, &[x, y])?;
            if !d.is_float() {
                cx.check_nonzero(&v[1])?;
                return out(floor_div_int(cx, &v[0], &v[1])?);
            }
            let r = floor_div_float(cx, &v[0], &v[1])?;
            out(cast(cx, &r, d)?)
        }
        Some(m) => Err(LowerError::invalid(format!(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{m}'"
        ))),
    }
}

/// Rounding toward zero of a float (keeps -0.0 and NaN).
pub(super) fn trunc_float(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    let neg = cmp_k(cx, Comparison::Lt, x, 0.0)?;
    let c = cx.unary(UnaryOp::Ceil, x)?;
    let f = cx.unary(UnaryOp::Floor, x)?;
    sel(cx, &neg, &c, &f)
}

/// Integer floor division: the truncated quotient, minus one where the remainder is nonzero
/// and its sign differs from the divisor's.
fn floor_div_int(cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
    let q = cx.div(a, b)?;
    if a.dtype().is_unsigned_int() {
        return Ok(q);
    }
    let r = cx.binary(BinaryOp::Remainder, a, b)?;
    let nz = cmp_k(cx, Comparison::Ne, &r, 0.0)?;
    let rn = cmp_k(cx, Comparison::Lt, &r, 0.0)?;
    let bn = cmp_k(cx, Comparison::Lt, b, 0.0)?;
    let differ = cx.binary(BinaryOp::Xor, &rn, &bn)?;
    let fix = cx.binary(BinaryOp::And, &nz, &differ)?;
    let q1 = add_k(cx, &q, -1.0)?;
    sel(cx, &fix, &q1, &q)
}

/// PyTorch's `div_floor_floating` (Python's `//` on floats).
fn floor_div_float(cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
    let m = cx.binary(BinaryOp::Remainder, a, b)?;
    let am = cx.sub(a, &m)?;
    let div = cx.div(&am, b)?;
    // div -= 1 where mod != 0 and (b < 0) != (mod < 0)
    let mnz = cmp_k(cx, Comparison::Ne, &m, 0.0)?;
    let bn = cmp_k(cx, Comparison::Lt, b, 0.0)?;
    let mn = cmp_k(cx, Comparison::Lt, &m, 0.0)?;
    let differ = cx.binary(BinaryOp::Xor, &bn, &mn)?;
    let fix = cx.binary(BinaryOp::And, &mnz, &differ)?;
    let d1 = add_k(cx, &div, -1.0)?;
    let div = sel(cx, &fix, &d1, &div)?;
    // floordiv = floor(div), + 1 if div - floor(div) > 0.5; zero keeps the sign of a / b.
    let fl = cx.unary(UnaryOp::Floor, &div)?;
    let frac = cx.sub(&div, &fl)?;
    let up = cmp_k(cx, Comparison::Gt, &frac, 0.5)?;
    let fl1 = add_k(cx, &fl, 1.0)?;
    let fl = sel(cx, &up, &fl1, &fl)?;
    let q = cx.div(a, b)?;
    let zero = splat(cx, &q, 0.0)?;
    // copysign(0, q): q < 0, or q is -0.0 (1 / q is -inf).
    let lt = cmp(cx, Comparison::Lt, &q, &zero)?;
    let inv = rsub_k_div(cx, &q)?;
    let inv_neg = cmp(cx, Comparison::Lt, &inv, &zero)?;
    let qneg = cx.binary(BinaryOp::Or, &lt, &inv_neg)?;
    let nzero = splat(cx, &q, -0.0)?;
    let signed_zero = sel(cx, &qneg, &nzero, &zero)?;
    let dz = cmp_k(cx, Comparison::Eq, &div, 0.0)?;
    let r = sel(cx, &dz, &signed_zero, &fl)?;
    // Division by zero: the IEEE quotient.
    let bz = cmp_k(cx, Comparison::Eq, b, 0.0)?;
    sel(cx, &bz, &q, &r)
}

/// `remainder` (Python's `%`: the sign of the divisor).
pub(super) fn remainder(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = Operand::Tensor(a.tensor("self")?);
    let y = operand(a, "other")?;
    let d = result_type(&[x.clone(), y.clone()]);
    refuse_bool("remainder_cpu", d)?;
    let (v, _) = promote(cx, &[x, y], None)?;
    if !d.is_float() {
        cx.check_nonzero(&v[1])?;
    }
    if d.is_unsigned_int() {
        return out(cx.binary(BinaryOp::Remainder, &v[0], &v[1])?);
    }
    out(compute_in(cx, &v, d, |cx, v| {
        let (a, b) = (&v[0], &v[1]);
        let m = cx.binary(BinaryOp::Remainder, a, b)?;
        let nz = cmp_k(cx, Comparison::Ne, &m, 0.0)?;
        let mn = cmp_k(cx, Comparison::Lt, &m, 0.0)?;
        let bn = cmp_k(cx, Comparison::Lt, b, 0.0)?;
        let differ = cx.binary(BinaryOp::Xor, &mn, &bn)?;
        let fix = cx.binary(BinaryOp::And, &nz, &differ)?;
        let mb = cx.add(&m, b)?;
        sel(cx, &fix, &mb, &m)
    })?)
}

/// `fmod` (C's: the sign of the dividend).
pub(super) fn fmod(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = Operand::Tensor(a.tensor("self")?);
    let y = operand(a, "other")?;
    let d = result_type(&[x.clone(), y.clone()]);
    refuse_bool("fmod_cpu", d)?;
    let (v, _) = promote(cx, &[x, y], None)?;
    if !d.is_float() {
        cx.check_nonzero(&v[1])?;
    }
    out(compute_in(cx, &v, d, |cx, v| Ok(cx.binary(BinaryOp::Remainder, &v[0], &v[1])?))?)
}

pub(super) fn neg(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    match x.dtype() {
        DType::Bool => Err(LowerError::dtype(
            DType::Bool,
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
        )),
        d if d.is_unsigned_int() => out(rsub_k(cx, 0.0, &x)?),
        _ => out(cx.neg(&x)?),
    }
}

pub(super) fn reciprocal(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(float_map(cx, &x, |cx, x| rsub_k_div(cx, x))?)
}

pub(super) fn rsub_k_div(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    let one = splat(cx, x, 1.0)?;
    Ok(cx.div(&one, x)?)
}

/// `square` is `pow(self, 2)`: bool becomes i64.
pub(super) fn square(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let x = if x.dtype() == DType::Bool { cast(cx, &x, DType::I64)? } else { x };
    let d = x.dtype();
    out(compute_in(cx, &[x], d, |cx, v| Ok(cx.mul(&v[0], &v[0])?))?)
}

/// `self + value * t1 * t2` (`div`: `self + value * t1 / t2`).
pub(super) fn addc(cx: &mut Lower, a: &Args, div: bool) -> LowerResult<Vec<Out>> {
    let s = a.tensor("self")?;
    let t1 = a.tensor("tensor1")?;
    let t2 = a.tensor("tensor2")?;
    if div && !t1.dtype().is_float() && !t2.dtype().is_float() {
        return Err(LowerError::invalid(
            "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all dtypes.",
        ));
    }
    let ops = [Operand::Tensor(s), Operand::Tensor(t1), Operand::Tensor(t2)];
    let d = result_type(&ops);
    refuse_bool(if div { "addcdiv_cpu_out" } else { "addcmul_cpu_out" }, d)?;
    let value = a.scalar("value")?;
    let (v, _) = promote(cx, &ops, None)?;
    out(compute_in(cx, &v, d, |cx, v| {
        let k = konst(cx, value, v[1].dtype())?;
        let k = like(cx, &k, &v[1])?;
        let p = cx.mul(&k, &v[1])?;
        let p = if div { cx.div(&p, &v[2])? } else { cx.mul(&p, &v[2])? };
        Ok(cx.add(&v[0], &p)?)
    })?)
}

/// `lerp.Scalar` / `lerp.Tensor`: `self + w * (end - self)` for |w| < 0.5, else
/// `end - (end - self) * (1 - w)` (PyTorch's formula, exact at both ends).
pub(super) fn lerp(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let s = a.tensor("self")?;
    let e = a.tensor("end")?;
    let d = s.dtype();
    if e.dtype() != d {
        return Err(LowerError::invalid(format!(
            "expected dtype {} for `end` but got dtype {}",
            c_name(d).trim_start_matches("c10::"),
            c_name(e.dtype()).trim_start_matches("c10::")
        )));
    }
    let w = operand(a, "weight")?;
    if let Operand::Tensor(w) = &w {
        if w.dtype() != d && w.rank() > 0 {
            return Err(LowerError::invalid(format!(
                "expected dtype {} for `weight` but got dtype {}",
                c_name(d).trim_start_matches("c10::"),
                c_name(w.dtype()).trim_start_matches("c10::")
            )));
        }
    }
    require_float(
        if matches!(w, Operand::Tensor(_)) { "lerp_kernel_tensor" } else { "lerp_kernel_scalar" },
        d,
    )?;
    let c = compute_dtype(d);
    let wv = match &w {
        Operand::Tensor(t) => cast(cx, t, c)?,
        Operand::Scalar(x) => cx.full(TensorType::scalar(c), x.as_f64())?,
    };
    let s = cast(cx, &s, c)?;
    let e = cast(cx, &e, c)?;
    let v = broadcast_vals(cx, &[s, e, wv])?;
    let (s, e, w) = (&v[0], &v[1], &v[2]);
    let diff = cx.sub(e, s)?;
    let small_a = cx.mul(w, &diff)?;
    let small = cx.add(s, &small_a)?;
    let omw = rsub_k(cx, 1.0, w)?;
    let big_a = cx.mul(&diff, &omw)?;
    let big = cx.sub(e, &big_a)?;
    let aw = cx.unary(UnaryOp::Abs, w)?;
    let is_small = cmp_k(cx, Comparison::Lt, &aw, 0.5)?;
    let r = sel(cx, &is_small, &small, &big)?;
    out(cast(cx, &r, d)?)
}
