//! Helpers of the pointwise family: operands, constants converted as PyTorch converts
//! Python numbers, promotion with wrapping integer scalars, compute dtypes, NaN-propagating
//! max/min, PyTorch-like casts and dtype refusals.

use super::super::promote::{result_type, to_float, Operand};
use super::super::util::broadcast_all;
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use crate::value::Scalar;
use tessera_lowering::stablehlo::{BinaryOp, Comparison, TensorType, Value};
use tessera_lowering::DType;

/// The argument `name`, a Tensor or a Scalar depending on the overload.
pub(crate) fn operand(a: &Args, name: &str) -> LowerResult<Operand> {
    match a.tensor(name) {
        Ok(t) => Ok(Operand::Tensor(t)),
        Err(_) => Ok(Operand::Scalar(a.scalar(name)?)),
    }
}

/// One tensor result.
pub(crate) fn out(v: Value) -> LowerResult<Vec<Out>> {
    Ok(vec![Out::Tensor(v)])
}

pub(crate) use crate::aten::util::torch_name;

/// The C++ type name PyTorch prints in conversion errors (`int8_t`, `c10::Half`).
pub(crate) fn c_name(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::U8 => "uint8_t",
        DType::I8 => "int8_t",
        DType::I16 => "int16_t",
        DType::I32 => "int",
        DType::I64 => "int64_t",
        DType::U16 => "uint16_t",
        DType::U32 => "uint32_t",
        DType::U64 => "uint64_t",
        DType::F16 => "c10::Half",
        DType::BF16 => "c10::BFloat16",
        DType::F32 => "float",
        DType::F64 => "double",
        DType::C64 => "c10::complex<float>",
        DType::C128 => "c10::complex<double>",
    }
}

/// `"kernel" not implemented for 'Bool'`: how PyTorch refuses a dtype its kernel lacks.
pub(crate) fn not_implemented(kernel: &str, d: DType) -> LowerError {
    LowerError::dtype(d, format!("\"{kernel}\" not implemented for '{}'", torch_name(d)))
}

/// Refuses bool and integer inputs of a float-only kernel.
pub(crate) fn require_float(kernel: &str, d: DType) -> LowerResult<()> {
    if d.is_float() {
        Ok(())
    } else {
        Err(not_implemented(kernel, d))
    }
}

/// Refuses bool inputs.
pub(crate) fn refuse_bool(kernel: &str, d: DType) -> LowerResult<()> {
    if d == DType::Bool {
        Err(not_implemented(kernel, d))
    } else {
        Ok(())
    }
}

/// Refuses complex inputs of a real-only kernel that shares a lowering with complex ones (the
/// rounding modes of `div`).
pub(crate) fn refuse_complex(kernel: &str, d: DType) -> LowerResult<()> {
    if d.is_complex() {
        Err(not_implemented(kernel, d))
    } else {
        Ok(())
    }
}

/// The integer range of `d` (bool: 0..=1).
pub(crate) fn int_range(d: DType) -> (i128, i128) {
    match d {
        DType::Bool => (0, 1),
        d if d.is_signed_int() => (-(1i128 << (d.bits() - 1)), (1i128 << (d.bits() - 1)) - 1),
        d => (0, (1i128 << d.bits()) - 1),
    }
}

/// The largest finite value of a float dtype.
pub(crate) fn float_max(d: DType) -> f64 {
    match d {
        DType::F16 => 65504.0,
        DType::BF16 => 3.3895313892515355e38,
        DType::F32 => f32::MAX as f64,
        _ => f64::MAX,
    }
}

/// `i` reduced modulo 2^bits into `d`'s range (two's complement wrap, as a C cast does).
fn wrap_int(i: i128, d: DType) -> i128 {
    if d == DType::Bool {
        return (i != 0) as i128;
    }
    let bits = d.bits() as u32;
    let m = i.rem_euclid(1i128 << bits);
    if d.is_signed_int() && m >= 1i128 << (bits - 1) {
        m - (1i128 << bits)
    } else {
        m
    }
}

/// A rank-0 constant of `d` holding `s` converted as a C++ cast does (PyTorch's conversion of
/// a wrapped number to the common dtype): integers wrap, floats to integers truncate (NaN -> 0),
/// numbers to bool are `!= 0`, out-of-range floats round to infinity; to a complex type, the
/// number is the real part (imaginary part 0).
pub(crate) fn konst(cx: &mut Lower, s: Scalar, d: DType) -> LowerResult<Value> {
    let ty = TensorType::scalar(d);
    if d.is_float() || d.is_complex() {
        return Ok(cx.full(ty, s.as_f64())?);
    }
    if d == DType::Bool {
        return Ok(cx.full(ty, (s.as_f64() != 0.0) as i64 as f64)?);
    }
    let i: i128 = match s {
        Scalar::Bool(b) => b as i128,
        Scalar::Int(i) => i as i128,
        Scalar::Float(x) if x.is_finite() => x.trunc() as i64 as i128,
        Scalar::Float(_) => 0,
    };
    Ok(cx.full_int(ty, wrap_int(i, d))?)
}

/// `s` converted to `d` with PyTorch's overflow check (`Scalar::to<T>()`): an error when the
/// value is out of `d`'s range, except that unsigned types take negative integers down to
/// `-max` (they wrap) and every type takes infinities and NaN where it has them.
pub(crate) fn checked(s: Scalar, d: DType) -> LowerResult<Scalar> {
    let err = || {
        LowerError::invalid(format!("value cannot be converted to type {} without overflow", c_name(d)))
    };
    if d == DType::Bool {
        return Ok(s);
    }
    if d.is_float() || d.is_complex() {
        // A complex type checks the range of its parts.
        let x = s.as_f64();
        if x.is_finite() && x.abs() > float_max(d.component()) {
            return Err(err());
        }
        return Ok(s);
    }
    let (lo, hi) = int_range(d);
    match s {
        Scalar::Bool(_) => Ok(s),
        Scalar::Int(i) => {
            let i = i as i128;
            let lo = if d.is_unsigned_int() { -hi } else { lo };
            if i < lo || i > hi {
                Err(err())
            } else {
                Ok(s)
            }
        }
        Scalar::Float(x) => {
            if x.is_infinite() {
                Ok(s)
            } else if x.is_nan() || x < lo as f64 || x > hi as f64 {
                Err(err())
            } else {
                Ok(s)
            }
        }
    }
}

/// [`konst`] of a [`checked`] value.
pub(crate) fn checked_const(cx: &mut Lower, s: Scalar, d: DType) -> LowerResult<Value> {
    let s = checked(s, d)?;
    konst(cx, s, d)
}

/// `x` converted to `dtype` (no op when it already is). Bool converts to floats (and complex)
/// through u8: XLA rewrites `convert(pred) * c` into `select(pred, c, 0)`, wrong for c = inf or
/// NaN. Complex to real keeps the real part (as PyTorch's casts do, with a warning there).
pub(crate) fn cast(cx: &mut Lower, x: &Value, dtype: DType) -> LowerResult<Value> {
    if x.dtype() == dtype {
        return Ok(x.clone());
    }
    if x.dtype().is_complex() && !dtype.is_complex() {
        let re = cx.real(x)?;
        return cast(cx, &re, dtype);
    }
    if x.dtype() == DType::Bool && (dtype.is_float() || dtype.is_complex()) {
        let u = cx.convert(x, DType::U8)?;
        return Ok(cx.convert(&u, dtype)?);
    }
    Ok(cx.convert(x, dtype)?)
}

/// A tensor of `x`'s type filled with `v` (integral for integer types).
pub(crate) fn splat(cx: &mut Lower, x: &Value, v: f64) -> LowerResult<Value> {
    Ok(cx.full(x.ty().clone(), v)?)
}

/// An operand as a tensor of `d` (scalars wrap as [`konst`] says).
pub(crate) fn operand_as(cx: &mut Lower, o: &Operand, d: DType) -> LowerResult<Value> {
    match o {
        Operand::Tensor(v) => cast(cx, v, d),
        Operand::Scalar(s) => konst(cx, *s, d),
    }
}

/// The operands converted to `compute` (default: their result type) and broadcast to their
/// common shape; returns the values and the result type.
pub(crate) fn promote(cx: &mut Lower, ops: &[Operand], compute: Option<DType>) -> LowerResult<(Vec<Value>, DType)> {
    let result = result_type(ops);
    let d = compute.unwrap_or(result);
    let vals = ops.iter().map(|o| operand_as(cx, o, d)).collect::<LowerResult<Vec<_>>>()?;
    let vals = broadcast_vals(cx, &vals)?;
    Ok((vals, result))
}

/// Like [`promote`], but the values come in the compute dtype of the result type (f32 for
/// f16/bf16: numbers are not rounded to the narrow type first, as PyTorch's CPU kernels keep a
/// scalar operand in `opmath`); returns them and the result type.
pub(crate) fn promote_c(cx: &mut Lower, ops: &[Operand]) -> LowerResult<(Vec<Value>, DType)> {
    let d = result_type(ops);
    let (v, _) = promote(cx, ops, Some(compute_dtype(d)))?;
    Ok((v, d))
}

/// Values broadcast to their common shape.
pub(crate) fn broadcast_vals(cx: &mut Lower, vals: &[Value]) -> LowerResult<Vec<Value>> {
    let shape = broadcast_all(vals)?;
    vals.iter().map(|v| Ok(cx.broadcast_to(v, &shape)?)).collect()
}

/// The dtype a float computation runs in: f16 and bf16 compute in f32 (as PyTorch's CPU
/// kernels do, rounding once at the end).
pub(crate) fn compute_dtype(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// `f(x)` for a float function: integer and bool inputs become f32 (and so does the result),
/// f16/bf16 compute in f32 and round back.
pub(crate) fn float_map(
    cx: &mut Lower,
    x: &Value,
    f: impl FnOnce(&mut Lower, &Value) -> LowerResult<Value>,
) -> LowerResult<Value> {
    let out = to_float(x.dtype());
    let xc = cast(cx, x, compute_dtype(out))?;
    let r = f(cx, &xc)?;
    cast(cx, &r, out)
}

/// `f(values)` computed in [`compute_dtype`] of `d`, the result returned in `d`.
pub(crate) fn compute_in(
    cx: &mut Lower,
    vals: &[Value],
    d: DType,
    f: impl FnOnce(&mut Lower, &[Value]) -> LowerResult<Value>,
) -> LowerResult<Value> {
    let c = compute_dtype(d);
    let vs = vals.iter().map(|v| cast(cx, v, c)).collect::<LowerResult<Vec<_>>>()?;
    let r = f(cx, &vs)?;
    cast(cx, &r, d)
}

/// `x != x` for floats; all false otherwise.
pub(crate) fn isnan(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    if x.dtype().is_float() {
        Ok(cx.compare(Comparison::Ne, x, x)?)
    } else {
        Ok(cx.full(x.ty().with_dtype(DType::Bool), 0.0)?)
    }
}

/// `x != 0` (NaN is true).
pub(crate) fn to_bool(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    if x.dtype() == DType::Bool {
        return Ok(x.clone());
    }
    let z = splat(cx, x, 0.0)?;
    Ok(cx.compare(Comparison::Ne, x, &z)?)
}

/// Elementwise max or min of same-typed values; a NaN in either propagates (PyTorch's
/// `maximum`/`minimum`/`clamp`).
pub(crate) fn max_min_nan(cx: &mut Lower, a: &Value, b: &Value, max: bool) -> LowerResult<Value> {
    let op = if max { BinaryOp::Maximum } else { BinaryOp::Minimum };
    let r = cx.binary(op, a, b)?;
    if !a.dtype().is_float() {
        return Ok(r);
    }
    let na = isnan(cx, a)?;
    let nb = isnan(cx, b)?;
    let r = cx.select(&nb, b, &r)?;
    Ok(cx.select(&na, a, &r)?)
}

/// `x` converted to `d` as PyTorch's casts do: to bool is `x != 0` (NaN is true); floats to
/// 8/16-bit integers go through i32 (C's conversion then truncation); complex to real keeps the
/// real part ([`cast`]); others convert directly. Out-of-range float-to-int values are
/// undefined in C++ and here differ (XLA saturates).
pub(crate) fn torch_cast(cx: &mut Lower, x: &Value, d: DType) -> LowerResult<Value> {
    if x.dtype() == d {
        return Ok(x.clone());
    }
    if d == DType::Bool {
        return to_bool(cx, x);
    }
    if x.dtype().is_complex() && !d.is_complex() {
        let re = cx.real(x)?;
        return torch_cast(cx, &re, d);
    }
    if x.dtype().is_float() && d.is_int() && d.bits() < 32 {
        let i = cx.convert(x, DType::I32)?;
        return Ok(cx.convert(&i, d)?);
    }
    cast(cx, x, d)
}

/// `c ? a : b` with `c` a bool of the same shape.
pub(crate) fn sel(cx: &mut Lower, c: &Value, a: &Value, b: &Value) -> LowerResult<Value> {
    Ok(cx.select(c, a, b)?)
}

/// `a OP b` for a comparison.
pub(crate) fn cmp(cx: &mut Lower, dir: Comparison, a: &Value, b: &Value) -> LowerResult<Value> {
    Ok(cx.compare(dir, a, b)?)
}

/// A compare of `x` against the constant `v` (of `x`'s type).
pub(crate) fn cmp_k(cx: &mut Lower, dir: Comparison, x: &Value, v: f64) -> LowerResult<Value> {
    let k = splat(cx, x, v)?;
    cmp(cx, dir, x, &k)
}

/// `x * v` for a constant `v`.
pub(crate) fn mul_k(cx: &mut Lower, x: &Value, v: f64) -> LowerResult<Value> {
    let k = splat(cx, x, v)?;
    Ok(cx.mul(x, &k)?)
}

/// `x + v` for a constant `v`.
pub(crate) fn add_k(cx: &mut Lower, x: &Value, v: f64) -> LowerResult<Value> {
    let k = splat(cx, x, v)?;
    Ok(cx.add(x, &k)?)
}

/// `v - x` for a constant `v`.
pub(crate) fn rsub_k(cx: &mut Lower, v: f64, x: &Value) -> LowerResult<Value> {
    let k = splat(cx, x, v)?;
    Ok(cx.sub(&k, x)?)
}

/// A rank-0 scalar broadcast to `x`'s shape.
pub(crate) fn like(cx: &mut Lower, k: &Value, x: &Value) -> LowerResult<Value> {
    Ok(cx.broadcast_to(k, x.shape())?)
}
