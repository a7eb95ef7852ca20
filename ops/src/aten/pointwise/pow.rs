//! `pow` (Tensor_Tensor, Tensor_Scalar, Scalar) with PyTorch's special cases and integer
//! semantics (wrapping square-and-multiply; negative tensor exponents give 0 except for
//! bases 1 and -1; a negative number exponent of an integer tensor is an error).

use super::arith::rsub_k_div;
use super::common::*;
use super::super::promote::{result_type, Operand};
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use crate::value::Scalar;
use tessera_lowering::stablehlo::{BinaryOp, Comparison, UnaryOp, Value};
use tessera_lowering::DType;

/// `pow.Tensor_Tensor`, `pow.Tensor_Scalar`, `pow.Scalar`.
pub(super) fn pow(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let base = operand(a, "self")?;
    let exp = operand(a, "exponent")?;
    let d = result_type(&[base.clone(), exp.clone()]);
    if let (Operand::Tensor(x), Operand::Scalar(e)) = (&base, &exp) {
        // PyTorch's `pow_out`: exponent 0 fills ones, 1 copies (bool tensors included).
        if e.as_f64() == 0.0 {
            let k = konst(cx, Scalar::Int(1), d)?;
            return out(cx.broadcast_to(&k, x.shape())?);
        }
        if e.as_f64() == 1.0 {
            return out(cast(cx, x, d)?);
        }
    }
    if d == DType::Bool {
        return Err(not_implemented("pow", d));
    }
    match (&base, &exp) {
        (Operand::Tensor(x), Operand::Scalar(e)) => {
            if !d.is_float() && matches!(e, Scalar::Int(i) if *i < 0) {
                return Err(LowerError::invalid("Integers to negative integer powers are not allowed."));
            }
            let e = checked(*e, d)?;
            let x = cast(cx, x, d)?;
            pow_tensor_scalar(cx, &x, e)
        }
        (Operand::Scalar(s), Operand::Tensor(e)) if s.as_f64() == 1.0 => {
            let k = konst(cx, Scalar::Int(1), d)?;
            out(cx.broadcast_to(&k, e.shape())?)
        }
        _ => {
            let (v, _) = promote(cx, &[base, exp], None)?;
            if d.is_float() {
                out(compute_in(cx, &v, d, |cx, v| Ok(cx.binary(BinaryOp::Power, &v[0], &v[1])?))?)
            } else {
                out(int_pow(cx, &v[0], &v[1])?)
            }
        }
    }
}

/// `x ** e` for a number `e`, with PyTorch's special cases (0, 1, 2, 3, ±0.5, -1, -2).
fn pow_tensor_scalar(cx: &mut Lower, x: &Value, e: Scalar) -> LowerResult<Vec<Out>> {
    let d = x.dtype();
    let ev = e.as_f64();
    if ev == 0.0 {
        return out(splat(cx, x, 1.0)?);
    }
    if ev == 1.0 {
        return out(x.clone());
    }
    if !d.is_float() {
        // Exponentiation by squaring with the exponent's bits known here.
        let mut n = match e {
            Scalar::Int(i) => i as u64,
            _ => ev as u64,
        };
        let mut acc: Option<Value> = None;
        let mut b = x.clone();
        while n > 0 {
            if n & 1 == 1 {
                acc = Some(match acc {
                    None => b.clone(),
                    Some(a) => cx.mul(&a, &b)?,
                });
            }
            n >>= 1;
            if n > 0 {
                b = cx.mul(&b, &b)?;
            }
        }
        return out(acc.unwrap_or(x.clone()));
    }
    // f16 takes no square-root shortcuts (`pow(-inf, 0.5)` is inf there, NaN for other dtypes).
    let roots = d != DType::F16;
    out(compute_in(cx, &[x.clone()], d, |cx, v| {
        let x = &v[0];
        Ok(match ev {
            2.0 => cx.mul(x, x)?,
            3.0 => {
                let s = cx.mul(x, x)?;
                cx.mul(&s, x)?
            }
            0.5 if roots => cx.unary(UnaryOp::Sqrt, x)?,
            -0.5 if roots => cx.unary(UnaryOp::Rsqrt, x)?,
            -1.0 => rsub_k_div(cx, x)?,
            -2.0 => {
                let s = cx.mul(x, x)?;
                rsub_k_div(cx, &s)?
            }
            _ => {
                let k = splat(cx, x, ev)?;
                cx.binary(BinaryOp::Power, x, &k)?
            }
        })
    })?)
}

/// Integer `a ** b` (same type and shape) as PyTorch's `powi`: square-and-multiply with
/// wrapping; negative exponents give 0 except for bases 1 and -1.
fn int_pow(cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
    let d = a.dtype();
    let signed = d.is_signed_int();
    let neg = if signed { Some(cmp_k(cx, Comparison::Lt, b, 0.0)?) } else { None };
    let e = match &neg {
        Some(n) => {
            let z = splat(cx, b, 0.0)?;
            sel(cx, n, &z, b)?
        }
        None => b.clone(),
    };
    let steps = if signed { d.bits() - 1 } else { d.bits() };
    let one = splat(cx, a, 1.0)?;
    let lo = cx.scalar(DType::I32, 0.0)?;
    let hi = cx.scalar(DType::I32, steps as f64)?;
    let r = cx.fori_loop(&lo, &hi, &[&one, a, &e], |f, _i, c| -> LowerResult<Vec<Value>> {
        let (acc, base, e) = (&c[0], &c[1], &c[2]);
        let one = f.full(e.ty().clone(), 1.0)?;
        let zero = f.full(e.ty().clone(), 0.0)?;
        let bit = f.binary(BinaryOp::And, e, &one)?;
        let set = f.compare(Comparison::Ne, &bit, &zero)?;
        let prod = f.mul(acc, base)?;
        let acc = f.select(&set, &prod, acc)?;
        let base = f.mul(base, base)?;
        let e = f.binary(BinaryOp::ShiftRightLogical, e, &one)?;
        Ok(vec![acc, base, e])
    })?;
    let acc = r[0].clone();
    let Some(neg) = neg else { return Ok(acc) };
    // Negative exponents: 1 for base 1, ±1 for base -1 (by parity), else 0.
    let is_one = cmp_k(cx, Comparison::Eq, a, 1.0)?;
    let is_m1 = cmp_k(cx, Comparison::Eq, a, -1.0)?;
    let onev = splat(cx, b, 1.0)?;
    let parity = cx.binary(BinaryOp::And, b, &onev)?;
    let odd = cmp_k(cx, Comparison::Ne, &parity, 0.0)?;
    let m1 = splat(cx, a, -1.0)?;
    let zero = splat(cx, a, 0.0)?;
    let pm = sel(cx, &odd, &m1, &one)?;
    let r = sel(cx, &is_m1, &pm, &zero)?;
    let r = sel(cx, &is_one, &one, &r)?;
    sel(cx, &neg, &r, &acc)
}
