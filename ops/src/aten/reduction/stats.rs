//! var, std, var_mean, and vector p-norms (norm, linalg_vector_norm; cdist/pdist use
//! [`p_norm`] too).

use super::basic::max_min;
use super::{acc_dtype, count, reduce, require_float, to_acc, torch_name, with_const};
use crate::args::Args;
use crate::aten::promote::promote_types;
use crate::aten::util::{cast, reduce_dims};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use crate::value::Scalar;
use tessera_lowering::stablehlo::{BinaryOp, Comparison, ReduceKind, UnaryOp, Value};
use tessera_lowering::DType;

/// How an overload gives the variance's correction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Correction {
    /// `Scalar? correction=None` (None = 1).
    Scalar,
    /// `bool unbiased=True`.
    Unbiased,
}

/// Variance (and mean) over `dims`: `sum((x - mean)^2) / max(0, N - correction)` (a zero
/// divisor gives inf or NaN, as in PyTorch). Returns both in x's dtype.
fn var_of(
    cx: &mut Lower,
    x: &Value,
    dims: &[usize],
    correction: f64,
    keepdim: bool,
    name: &str,
) -> LowerResult<(Value, Value)> {
    require_float(
        x,
        format!("{name} only support floating point and complex dtypes"),
    )?;
    let out = x.dtype();
    let xa = to_acc(cx, x)?;
    let n = count(xa.shape(), dims) as f64;
    let s = reduce(cx, &xa, ReduceKind::Sum, dims, true)?;
    let mean = with_const(cx, BinaryOp::Divide, &s, n)?;
    let mb = cx.broadcast_to(&mean, xa.shape())?;
    let d = cx.sub(&xa, &mb)?;
    let sq = cx.mul(&d, &d)?;
    let ss = reduce(cx, &sq, ReduceKind::Sum, dims, keepdim)?;
    let var = with_const(cx, BinaryOp::Divide, &ss, (n - correction).max(0.0))?;
    let mean = if keepdim {
        mean
    } else {
        cx.reshape(&mean, var.shape())?
    };
    Ok((cast(cx, &var, out)?, cast(cx, &mean, out)?))
}

fn var_args(a: &Args, how: Correction) -> LowerResult<(Value, Vec<usize>, f64, bool)> {
    let x = a.tensor("self")?;
    let dims = reduce_dims(a.opt_int_list("dim")?.as_deref(), x.rank())?;
    let correction = match how {
        Correction::Scalar => a.opt_scalar("correction")?.map_or(1.0, Scalar::as_f64),
        Correction::Unbiased => a.bool("unbiased")? as i64 as f64,
    };
    Ok((x, dims, correction, a.bool("keepdim")?))
}

pub(super) fn var_std(
    cx: &mut Lower,
    a: &Args,
    std: bool,
    how: Correction,
) -> LowerResult<Vec<Out>> {
    let (x, dims, c, keepdim) = var_args(a, how)?;
    let (v, _) = var_of(cx, &x, &dims, c, keepdim, "std and var")?;
    let v = if std { cx.unary(UnaryOp::Sqrt, &v)? } else { v };
    Ok(vec![Out::Tensor(v)])
}

pub(super) fn var_mean(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, dims, c, keepdim) = var_args(a, Correction::Scalar)?;
    let (v, m) = var_of(cx, &x, &dims, c, keepdim, "var_mean")?;
    Ok(vec![Out::Tensor(v), Out::Tensor(m)])
}

/// The `p`-norm of float `x` over `dims`, computed in x's dtype: p = 0 counts nonzeros,
/// ±inf is the max/min of |x|, otherwise `sum(|x|^p)^(1/p)`.
pub(crate) fn p_norm(
    cx: &mut Lower,
    x: &Value,
    p: f64,
    dims: &[usize],
    keepdim: bool,
) -> LowerResult<Value> {
    let ax = cx.unary(UnaryOp::Abs, x)?;
    if p == 0.0 {
        let z = cx.zeros(x.ty().clone())?;
        let nz = cx.compare(Comparison::Ne, x, &z)?;
        let nz = cx.convert(&nz, x.dtype())?;
        return reduce(cx, &nz, ReduceKind::Sum, dims, keepdim);
    }
    if p.is_infinite() {
        return max_min(cx, &ax, dims, keepdim, p > 0.0);
    }
    if p == 1.0 {
        return reduce(cx, &ax, ReduceKind::Sum, dims, keepdim);
    }
    if p == 2.0 {
        let sq = cx.mul(x, x)?;
        let s = reduce(cx, &sq, ReduceKind::Sum, dims, keepdim)?;
        return Ok(cx.unary(UnaryOp::Sqrt, &s)?);
    }
    let pw = with_const(cx, BinaryOp::Power, &ax, p)?;
    let s = reduce(cx, &pw, ReduceKind::Sum, dims, keepdim)?;
    with_const(cx, BinaryOp::Power, &s, 1.0 / p)
}

fn show(p: f64) -> String {
    if p.is_infinite() {
        (if p > 0.0 { "inf" } else { "-inf" }).to_string()
    } else {
        format!("{p}")
    }
}

/// The norm after PyTorch's checks: no norm without identity (p < 0, inf) over an empty dim.
fn checked_norm(
    cx: &mut Lower,
    x: &Value,
    p: f64,
    dims: &[usize],
    all: bool,
    keepdim: bool,
    out: DType,
) -> LowerResult<Value> {
    if p < 0.0 || p.is_infinite() {
        let numel: usize = x.shape().iter().product();
        if all && numel == 0 {
            return Err(LowerError::invalid(format!(
                "linalg.vector_norm cannot compute the {} norm on an empty tensor because the operation does not have an identity",
                show(p)
            )));
        }
        if let Some(d) = dims.iter().find(|&&d| x.shape()[d] == 0) {
            return Err(LowerError::invalid(format!(
                "linalg.vector_norm cannot compute the {} norm on the dimension {d}because this dimension is empty and the operation does not have an identity",
                show(p)
            )));
        }
    }
    let xa = cast(cx, x, acc_dtype(out))?;
    let r = p_norm(cx, &xa, p, dims, keepdim)?;
    cast(cx, &r, out)
}

pub(super) fn linalg_vector_norm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    require_float(
        &x,
        format!(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got {}",
            torch_name(x.dtype())
        ),
    )?;
    let p = a.scalar("ord")?.as_f64();
    let out = match a.opt_dtype("dtype")? {
        None => x.dtype(),
        Some(d) if d.is_float() && promote_types(x.dtype(), d) == d => d,
        Some(d) => {
            return Err(LowerError::dtype(
                d,
                format!(
                    "linalg.vector_norm: the dtype of the input ({}) should be convertible without narrowing to the specified dtype ({})",
                    torch_name(x.dtype()),
                    torch_name(d)
                ),
            ))
        }
    };
    let list = a.opt_int_list("dim")?;
    let all = list.as_ref().is_none_or(|l| l.is_empty());
    let dims = reduce_dims(list.as_deref(), x.rank())?;
    let x = cast(cx, &x, out)?;
    let r = checked_norm(cx, &x, p, &dims, all, a.bool("keepdim")?, out)?;
    Ok(vec![Out::Tensor(r)])
}

pub(super) fn norm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    require_float(
        &x,
        format!(
            "norm(): input dtype should be either floating point or complex. Got {} instead.",
            torch_name(x.dtype())
        ),
    )?;
    let p = a.opt_scalar("p")?.map_or(2.0, Scalar::as_f64);
    let list = a.int_list("dim")?;
    let dims = reduce_dims(Some(&list), x.rank())?;
    let r = checked_norm(
        cx,
        &x,
        p,
        &dims,
        list.is_empty(),
        a.bool("keepdim")?,
        x.dtype(),
    )?;
    Ok(vec![Out::Tensor(r)])
}

/// `std_mean.correction(self, dim=None, *, correction=None, keepdim=False) -> (std, mean)`.
pub(super) fn std_mean(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, dims, c, keepdim) = var_args(a, Correction::Scalar)?;
    let (v, m) = var_of(cx, &x, &dims, c, keepdim, "std_mean")?;
    Ok(vec![
        Out::Tensor(cx.unary(UnaryOp::Sqrt, &v)?),
        Out::Tensor(m),
    ])
}

/// `dist(self, other, p=2)`: the p-norm of `self - other` (broadcast) over every element.
pub(super) fn dist(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let y = a.tensor("other")?;
    let d = promote_types(x.dtype(), y.dtype());
    if !d.is_float() {
        return Err(LowerError::dtype(
            d,
            format!(
                "dist only supports floating-point dtypes, but got {}",
                torch_name(d)
            ),
        ));
    }
    let (x, y) = (cast(cx, &x, acc_dtype(d))?, cast(cx, &y, acc_dtype(d))?);
    let (x, y) = cx
        .broadcast_pair(&x, &y)
        .map_err(|_| LowerError::invalid("dist: the shapes of self and other do not broadcast"))?;
    let diff = cx.sub(&x, &y)?;
    let dims: Vec<usize> = (0..diff.rank()).collect();
    let diff = if diff.rank() == 0 {
        cx.reshape(&diff, &[1])?
    } else {
        diff
    };
    let dims = if dims.is_empty() { vec![0] } else { dims };
    let r = p_norm(cx, &diff, a.scalar("p")?.as_f64(), &dims, false)?;
    Ok(vec![Out::Tensor(cast(cx, &r, d)?)])
}
