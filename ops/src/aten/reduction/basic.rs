//! sum, mean, prod, amax/amin, any/all, max/min (whole and along a dim), argmax/argmin,
//! logsumexp.

use super::{acc_dtype, dims_of, int_to_i64, kept_shape, reduce, to_acc, torch_name, DimsArg};
use crate::args::Args;
use crate::aten::promote::to_float;
use crate::aten::util::{cast, reduce_dims, wrap_dim};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, ReduceKind, TensorType, UnaryOp, Value};
use tessera_lowering::DType;

fn one(v: Value) -> LowerResult<Vec<Out>> {
    Ok(vec![Out::Tensor(v)])
}

/// Sum or product of `x` over `dims`, in `dtype` (or i64 for integers and bool), accumulated
/// in f32 for f16/bf16.
fn sum_prod(
    cx: &mut Lower,
    a: &Args,
    dims: Option<Vec<i64>>,
    keepdim: bool,
    kind: ReduceKind,
) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let out = a
        .opt_dtype("dtype")?
        .unwrap_or_else(|| int_to_i64(x.dtype()));
    let dims = reduce_dims(dims.as_deref(), x.rank())?;
    let x = cast(cx, &x, out)?;
    let x = to_acc(cx, &x)?;
    let r = reduce(cx, &x, kind, &dims, keepdim)?;
    one(cast(cx, &r, out)?)
}

pub(super) fn sum(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    sum_prod(cx, a, None, false, ReduceKind::Sum)
}

pub(super) fn sum_dim(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    sum_prod(
        cx,
        a,
        a.opt_int_list("dim")?,
        a.bool("keepdim")?,
        ReduceKind::Sum,
    )
}

pub(super) fn prod(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    sum_prod(cx, a, None, false, ReduceKind::Product)
}

pub(super) fn prod_dim(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    sum_prod(
        cx,
        a,
        Some(vec![a.int("dim")?]),
        a.bool("keepdim")?,
        ReduceKind::Product,
    )
}

/// Mean over `dims` (float or complex, as in PyTorch; `dtype` converts first).
pub(crate) fn mean_of(
    cx: &mut Lower,
    x: &Value,
    dtype: Option<DType>,
    dims: &[usize],
    keepdim: bool,
) -> LowerResult<Value> {
    match dtype {
        Some(d) if !d.is_float() && !d.is_complex() => {
            return Err(LowerError::dtype(
                d,
                format!(
                    "mean(): could not infer output dtype. Optional dtype must be either a floating point or complex dtype. Got: {}",
                    torch_name(d)
                ),
            ))
        }
        None if !x.dtype().is_float() && !x.dtype().is_complex() => {
            return Err(LowerError::dtype(
                x.dtype(),
                format!(
                    "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}",
                    torch_name(x.dtype())
                ),
            ))
        }
        _ => {}
    }
    let out = dtype.unwrap_or(x.dtype());
    let x = cast(cx, x, out)?;
    let x = to_acc(cx, &x)?;
    let n = super::count(x.shape(), dims) as f64;
    let s = reduce(cx, &x, ReduceKind::Sum, dims, keepdim)?;
    let m = super::with_const(cx, BinaryOp::Divide, &s, n)?;
    cast(cx, &m, out)
}

pub(super) fn mean(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims: Vec<usize> = (0..x.rank()).collect();
    one(mean_of(cx, &x, a.opt_dtype("dtype")?, &dims, false)?)
}

pub(super) fn mean_dim(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims = reduce_dims(a.opt_int_list("dim")?.as_deref(), x.rank())?;
    one(mean_of(
        cx,
        &x,
        a.opt_dtype("dtype")?,
        &dims,
        a.bool("keepdim")?,
    )?)
}

/// Refuses reducing a zero-size dim (or, with every dim reduced, an empty tensor) for ops
/// without an identity.
fn check_nonempty(name: &str, x: &Value, dims: &[usize], all: bool) -> LowerResult<()> {
    if all {
        if x.shape().iter().product::<usize>() == 0 {
            return Err(LowerError::invalid(format!(
                "{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."
            )));
        }
        return Ok(());
    }
    for &d in dims {
        if x.shape()[d] == 0 {
            return Err(LowerError::invalid(format!(
                "{name}(): Expected reduction dim {d} to have non-zero size."
            )));
        }
    }
    Ok(())
}

/// Max or min over `dims`, NaN-propagating (a NaN anywhere in a slice makes its result NaN).
pub(crate) fn max_min(
    cx: &mut Lower,
    x: &Value,
    dims: &[usize],
    keepdim: bool,
    is_max: bool,
) -> LowerResult<Value> {
    let kind = if is_max {
        ReduceKind::Max
    } else {
        ReduceKind::Min
    };
    if !x.dtype().is_float() || dims.is_empty() {
        return reduce(cx, x, kind, dims, keepdim);
    }
    // Explicit NaN handling in the combiner, so the result doesn't depend on how the backend's
    // maximum treats NaN.
    let init = kind.identity(&mut cx.f, x.dtype())?;
    let op = if is_max {
        BinaryOp::Maximum
    } else {
        BinaryOp::Minimum
    };
    let mut r = cx.reduce(&[x], &[&init], dims, |f, v| {
        let m = f.binary(op, &v[0], &v[1])?;
        let a_nan = f.compare(Comparison::Ne, &v[0], &v[0])?;
        let b_nan = f.compare(Comparison::Ne, &v[1], &v[1])?;
        let m = f.select(&b_nan, &v[1], &m)?;
        Ok::<_, LowerError>(vec![f.select(&a_nan, &v[0], &m)?])
    })?;
    let r = r.remove(0);
    if keepdim {
        Ok(cx.reshape(&r, &kept_shape(x.shape(), dims))?)
    } else {
        Ok(r)
    }
}

pub(super) fn amax_amin(cx: &mut Lower, a: &Args, is_max: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let list = a.int_list("dim")?;
    let dims = reduce_dims(Some(&list), x.rank())?;
    let name = if is_max { "amax" } else { "amin" };
    check_nonempty(name, &x, &[], list.is_empty())?;
    // PyTorch names the dim as given (`-1`), not wrapped.
    for &d in &list {
        if x.rank() > 0 && x.shape()[wrap_dim(d, x.rank())?] == 0 {
            return Err(LowerError::invalid(format!(
                "{name}(): Expected reduction dim {d} to have non-zero size."
            )));
        }
    }
    one(max_min(cx, &x, &dims, a.bool("keepdim")?, is_max)?)
}

pub(super) fn max_min_all(cx: &mut Lower, a: &Args, is_max: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims: Vec<usize> = (0..x.rank()).collect();
    check_nonempty(if is_max { "max" } else { "min" }, &x, &dims, true)?;
    one(max_min(cx, &x, &dims, false, is_max)?)
}

pub(super) fn any_all(
    cx: &mut Lower,
    a: &Args,
    is_any: bool,
    how: DimsArg,
) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    // `any.dims` with an empty list reduces nothing (unlike `sum`).
    let dims = match (how, a.opt_int_list("dim").ok().flatten()) {
        (DimsArg::List, Some(l)) if l.is_empty() => Vec::new(),
        _ => dims_of(a, &x, how)?,
    };
    let keepdim = if how == DimsArg::All {
        false
    } else {
        a.bool("keepdim")?
    };
    let b = if x.dtype() == DType::Bool {
        x.clone()
    } else {
        let z = cx.zeros(x.ty().clone())?;
        cx.compare(Comparison::Ne, &x, &z)?
    };
    let kind = if is_any {
        ReduceKind::Or
    } else {
        ReduceKind::And
    };
    let r = reduce(cx, &b, kind, &dims, keepdim)?;
    // uint8 inputs give uint8 results (PyTorch's legacy behaviour).
    let out = if x.dtype() == DType::U8 {
        DType::U8
    } else {
        DType::Bool
    };
    one(cast(cx, &r, out)?)
}

/// Values and (first) indices of the max or min of `x` along `dim` (`x` of rank >= 1).
/// NaN counts as larger (argmax) or smaller (argmin) than everything, and the first NaN wins.
pub(crate) fn arg_reduce(
    cx: &mut Lower,
    x: &Value,
    dim: usize,
    is_max: bool,
) -> LowerResult<(Value, Value)> {
    let idx = cx.iota(TensorType::new(x.shape(), DType::I64), dim)?;
    let kind = if is_max {
        ReduceKind::Max
    } else {
        ReduceKind::Min
    };
    let init_v = kind.identity(&mut cx.f, x.dtype())?;
    let init_i = cx.full_int(TensorType::scalar(DType::I64), i64::MAX as i128)?;
    let float = x.dtype().is_float();
    let better = if is_max {
        Comparison::Gt
    } else {
        Comparison::Lt
    };
    let mut r = cx.reduce(&[x, &idx], &[&init_v, &init_i], &[dim], |f, v| {
        let (a, ia, b, ib) = (&v[0], &v[1], &v[2], &v[3]);
        let mut a_better = f.compare(better, a, b)?;
        let mut equal = f.compare(Comparison::Eq, a, b)?;
        if float {
            let an = f.compare(Comparison::Ne, a, a)?;
            let bn = f.compare(Comparison::Ne, b, b)?;
            let not_bn = f.unary(UnaryOp::Not, &bn)?;
            let nan_wins = f.binary(BinaryOp::And, &an, &not_bn)?;
            a_better = f.binary(BinaryOp::Or, &a_better, &nan_wins)?;
            let both_nan = f.binary(BinaryOp::And, &an, &bn)?;
            equal = f.binary(BinaryOp::Or, &equal, &both_nan)?;
        }
        let first = f.compare(Comparison::Lt, ia, ib)?;
        let tie = f.binary(BinaryOp::And, &equal, &first)?;
        let take_a = f.binary(BinaryOp::Or, &a_better, &tie)?;
        Ok::<_, LowerError>(vec![f.select(&take_a, a, b)?, f.select(&take_a, ia, ib)?])
    })?;
    let i = r.remove(1);
    Ok((r.remove(0), i))
}

pub(super) fn argmax_argmin(cx: &mut Lower, a: &Args, is_max: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let name = if is_max { "argmax" } else { "argmin" };
    if x.dtype() == DType::Bool {
        return Err(LowerError::dtype(
            DType::Bool,
            format!("{name}(): does not support bool input"),
        ));
    }
    let keepdim = a.bool("keepdim")?;
    match a.opt_int("dim")? {
        None => {
            check_nonempty(name, &x, &[], true)?;
            let n = x.shape().iter().product::<usize>();
            let flat = cx.reshape(&x, &[n])?;
            let (_, i) = arg_reduce(cx, &flat, 0, is_max)?;
            let shape = if keepdim {
                vec![1; x.rank()]
            } else {
                Vec::new()
            };
            one(cx.reshape(&i, &shape)?)
        }
        Some(d) => {
            let d = wrap_dim(d, x.rank())?;
            if x.rank() == 0 {
                return one(cx.zeros(TensorType::scalar(DType::I64))?);
            }
            check_nonempty(name, &x, &[d], false)?;
            let (_, i) = arg_reduce(cx, &x, d, is_max)?;
            let i = if keepdim {
                cx.reshape(&i, &kept_shape(x.shape(), &[d]))?
            } else {
                i
            };
            one(i)
        }
    }
}

pub(super) fn max_min_dim(cx: &mut Lower, a: &Args, is_max: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    if x.rank() == 0 {
        let z = cx.zeros(TensorType::scalar(DType::I64))?;
        return Ok(vec![Out::Tensor(x), Out::Tensor(z)]);
    }
    check_nonempty(if is_max { "max" } else { "min" }, &x, &[d], false)?;
    let (v, i) = arg_reduce(cx, &x, d, is_max)?;
    let (v, i) = if a.bool("keepdim")? {
        let s = kept_shape(x.shape(), &[d]);
        (cx.reshape(&v, &s)?, cx.reshape(&i, &s)?)
    } else {
        (v, i)
    };
    Ok(vec![Out::Tensor(v), Out::Tensor(i)])
}

/// `log(sum(exp(x)))` over `dims`, stabilised by the (finite) max; integers compute in f32.
pub(crate) fn logsumexp_of(
    cx: &mut Lower,
    x: &Value,
    dims: &[usize],
    keepdim: bool,
) -> LowerResult<Value> {
    let out = to_float(x.dtype());
    let xa = cast(cx, x, acc_dtype(out))?;
    if dims.is_empty() {
        return cast(cx, &xa, out);
    }
    let m = max_min(cx, &xa, dims, true, true)?;
    let am = cx.unary(UnaryOp::Abs, &m)?;
    let inf = cx.full(m.ty().clone(), f64::INFINITY)?;
    let is_inf = cx.compare(Comparison::Eq, &am, &inf)?;
    let zero = cx.zeros(m.ty().clone())?;
    let m = cx.select(&is_inf, &zero, &m)?;
    let mb = cx.broadcast_to(&m, xa.shape())?;
    let z = cx.sub(&xa, &mb)?;
    let e = cx.exp(&z)?;
    let s = reduce(cx, &e, ReduceKind::Sum, dims, keepdim)?;
    let l = cx.unary(UnaryOp::Log, &s)?;
    let m = cx.reshape(&m, l.shape())?;
    let r = cx.add(&l, &m)?;
    cast(cx, &r, out)
}

pub(super) fn logsumexp(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims = reduce_dims(Some(&a.int_list("dim")?), x.rank())?;
    one(logsumexp_of(cx, &x, &dims, a.bool("keepdim")?)?)
}
