//! Comparisons, maximum/minimum, clamp, where, logical and bitwise ops.

use super::common::*;
use super::super::promote::{result_type, Operand};
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use crate::value::Scalar;
use tessera_lowering::stablehlo::{BinaryOp, Comparison, UnaryOp, Value};
use tessera_lowering::DType;

/// `eq`/`ne`/`lt`/... of `self` and `other` (Tensor or Scalar) in their common dtype -> bool.
pub(super) fn compare(cx: &mut Lower, a: &Args, dir: Comparison) -> LowerResult<Vec<Out>> {
    let x = Operand::Tensor(a.tensor("self")?);
    let y = operand(a, "other")?;
    let (v, _) = promote(cx, &[x, y], None)?;
    out(cx.compare(dir, &v[0], &v[1])?)
}

/// `maximum`/`minimum` (and `max.other`/`min.other`): NaN propagates.
pub(super) fn max_min(cx: &mut Lower, a: &Args, max: bool) -> LowerResult<Vec<Out>> {
    let x = Operand::Tensor(a.tensor("self")?);
    let y = Operand::Tensor(a.tensor("other")?);
    let (v, _) = promote(cx, &[x, y], None)?;
    out(max_min_nan(cx, &v[0], &v[1], max)?)
}

/// A clamp bound for an integer result type: `None` when it lies beyond the dtype's range on
/// the side where it has no effect; an error (as PyTorch's) on the other side.
fn int_bound(s: Scalar, d: DType, is_min: bool) -> LowerResult<Option<Scalar>> {
    let (lo, hi) = int_range(d);
    let v = match s {
        Scalar::Int(i) => i as i128,
        Scalar::Bool(b) => b as i128,
        Scalar::Float(x) => x.trunc() as i128,
    };
    let name = if is_min { "min" } else { "max" };
    let err = || {
        LowerError::invalid(format!(
            "Clamp {name} value {s} is outside the representable range of {}",
            torch_name(d)
        ))
    };
    match (is_min, v < lo, v > hi) {
        (true, true, _) | (false, _, true) => Ok(None),
        (true, _, true) | (false, true, _) => Err(err()),
        _ => Ok(Some(s)),
    }
}

/// Clamps `x` (already of its result dtype) between the optional bounds, NaN-propagating.
fn clamp_values(cx: &mut Lower, x: &Value, lo: Option<&Value>, hi: Option<&Value>) -> LowerResult<Value> {
    let mut r = x.clone();
    if let Some(lo) = lo {
        r = max_min_nan(cx, &r, lo, true)?;
    }
    if let Some(hi) = hi {
        r = max_min_nan(cx, &r, hi, false)?;
    }
    Ok(r)
}

/// `clamp(self, min, max)` with number bounds (None: no bound); also `clamp_min`,
/// `clamp_max` and `hardtanh` (which keeps integer dtypes: `int_bounds`).
pub(super) fn clamp_scalars(
    cx: &mut Lower,
    x: &Value,
    min: Option<Scalar>,
    max: Option<Scalar>,
    keep_int_dtype: bool,
) -> LowerResult<Value> {
    if min.is_none() && max.is_none() {
        return Err(LowerError::invalid("torch.clamp: At least one of 'min' or 'max' must not be None"));
    }
    let d = if keep_int_dtype && !x.dtype().is_float() {
        x.dtype()
    } else {
        let mut ops = vec![Operand::Tensor(x.clone())];
        ops.extend(min.iter().chain(max.iter()).map(|s| Operand::Scalar(*s)));
        result_type(&ops)
    };
    let kernel = match (min, max) {
        (Some(_), Some(_)) => "clamp_scalar_cpu",
        (Some(_), None) => "clamp_min_scalar_cpu",
        _ => "clamp_max_scalar_cpu",
    };
    refuse_bool(kernel, d)?;
    let x = cast(cx, x, d)?;
    let (min, max) = if d.is_float() {
        (min.map(|s| checked(s, d)).transpose()?, max.map(|s| checked(s, d)).transpose()?)
    } else {
        let lo = min.map(|s| int_bound(s, d, true)).transpose()?.flatten();
        let hi = max.map(|s| int_bound(s, d, false)).transpose()?.flatten();
        (lo, hi)
    };
    let lo = min.map(|s| konst_like(cx, s, &x)).transpose()?;
    let hi = max.map(|s| konst_like(cx, s, &x)).transpose()?;
    clamp_values(cx, &x, lo.as_ref(), hi.as_ref())
}

fn konst_like(cx: &mut Lower, s: Scalar, x: &Value) -> LowerResult<Value> {
    let k = konst(cx, s, x.dtype())?;
    like(cx, &k, x)
}

pub(super) fn clamp(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(clamp_scalars(cx, &x, a.opt_scalar("min")?, a.opt_scalar("max")?, false)?)
}

pub(super) fn clamp_min(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(clamp_scalars(cx, &x, Some(a.scalar("min")?), None, false)?)
}

pub(super) fn clamp_max(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    out(clamp_scalars(cx, &x, None, Some(a.scalar("max")?), false)?)
}

/// `clamp.Tensor`: bounds are optional tensors; all three broadcast together.
pub(super) fn clamp_tensor(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let lo = a.opt_tensor("min")?;
    let hi = a.opt_tensor("max")?;
    if lo.is_none() && hi.is_none() {
        return Err(LowerError::invalid("torch.clamp: At least one of 'min' or 'max' must not be None"));
    }
    let mut ops = vec![Operand::Tensor(x)];
    ops.extend(lo.iter().chain(hi.iter()).map(|t| Operand::Tensor(t.clone())));
    let (v, _) = promote(cx, &ops, None)?;
    let mut it = v[1..].iter();
    let lo_v = lo.as_ref().and_then(|_| it.next());
    let hi_v = hi.as_ref().and_then(|_| it.next());
    out(clamp_values(cx, &v[0], lo_v, hi_v)?)
}

/// `where(condition, self, other)`: condition must be bool.
pub(super) fn where_self(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let c = a.tensor("condition")?;
    // uint8 conditions are deprecated in PyTorch but still accepted.
    let c = if c.dtype() == DType::U8 { to_bool(cx, &c)? } else { c };
    if c.dtype() != DType::Bool {
        return Err(LowerError::invalid(format!(
            "where expected condition to be a boolean tensor, but got a tensor with dtype {}",
            torch_name(c.dtype())
        )));
    }
    let x = Operand::Tensor(a.tensor("self")?);
    let y = Operand::Tensor(a.tensor("other")?);
    let d = result_type(&[x.clone(), y.clone()]);
    let xv = operand_as(cx, &x, d)?;
    let yv = operand_as(cx, &y, d)?;
    let v = broadcast_vals(cx, &[c, xv, yv])?;
    out(sel(cx, &v[0], &v[1], &v[2])?)
}

/// `logical_and`/`or`/`xor`: operands as `!= 0`, result bool.
pub(super) fn logical(cx: &mut Lower, a: &Args, op: BinaryOp) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let y = a.tensor("other")?;
    let x = to_bool(cx, &x)?;
    let y = to_bool(cx, &y)?;
    let v = broadcast_vals(cx, &[x, y])?;
    out(cx.binary(op, &v[0], &v[1])?)
}

pub(super) fn logical_not(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let b = to_bool(cx, &x)?;
    out(cx.unary(UnaryOp::Not, &b)?)
}

/// `bitwise_and`/`or`/`xor` on integers and bool.
pub(super) fn bitwise(cx: &mut Lower, a: &Args, op: BinaryOp) -> LowerResult<Vec<Out>> {
    let x = Operand::Tensor(a.tensor("self")?);
    let y = operand(a, "other")?;
    let d = result_type(&[x.clone(), y.clone()]);
    if d.is_float() {
        let kernel = match op {
            BinaryOp::And => "bitwise_and_cpu",
            BinaryOp::Or => "bitwise_or_cpu",
            _ => "bitwise_xor_cpu",
        };
        return Err(not_implemented(kernel, d));
    }
    let (v, _) = promote(cx, &[x, y], None)?;
    out(cx.binary(op, &v[0], &v[1])?)
}

pub(super) fn bitwise_not(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.dtype().is_float() {
        return Err(not_implemented("bitwise_not_cpu", x.dtype()));
    }
    out(cx.unary(UnaryOp::Not, &x)?)
}
