//! Batch norm: `_native_batch_norm_legit` (training or eval), `.no_stats`,
//! `_native_batch_norm_legit_no_training` and the composite `batch_norm`.
//!
//! Also `native_batch_norm` and `native_batch_norm_backward`.
//!
//! `save_mean`/`save_invstd` have PyTorch CPU's shapes and dtypes (`[C]` in training, `[0]` in
//! eval; the input's dtype, or f32 for an f16/bf16 input with f32 parameters). In training mode
//! `_native_batch_norm_legit` writes `running_mean`/`running_var` (`Tensor(a!)`): their new
//! values follow the schema's three results (see `call::unreturned_writes`). The composite
//! `batch_norm`, whose schema marks nothing written, returns its output only.

use super::common::*;
use super::norm::{check_float, check_vec, stats_dtype};
use crate::args::Args;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, UnaryOp, Value};
use tessera_lowering::DType;

fn bn_mean(cx: &mut Lower, xc: &Value, dims: &[usize]) -> LowerResult<Value> {
    let n: usize = dims.iter().map(|&d| xc.shape()[d]).product();
    let s = sum(cx, xc, dims, true)?;
    let nv = splat(cx, n as f64, xc.dtype(), s.shape())?;
    Ok(cx.div(&s, &nv)?)
}

/// The batch statistics over `dims` (kept, in `xc`'s dtype): the mean, the sum of squared
/// deviations from it, and the count `n` of elements per channel.
struct Moments {
    mean: Value,
    ss: Value,
    n: usize,
}

fn bn_moments(cx: &mut Lower, xc: &Value, dims: &[usize]) -> LowerResult<Moments> {
    let n: usize = dims.iter().map(|&d| xc.shape()[d]).product();
    let mean = bn_mean(cx, xc, dims)?;
    let d = bb(cx, BinaryOp::Subtract, xc, &mean)?;
    let d2 = cx.mul(&d, &d)?;
    let ss = sum(cx, &d2, dims, true)?;
    Ok(Moments { mean, ss, n })
}

/// `1 / sqrt(var + eps)` as PyTorch's CPU batch norm computes it: the sum of squared
/// deviations is kept in the statistics' dtype (so rounded for bf16, and divided by N in
/// bf16), the inverse square root in f64.
fn bn_invstd(cx: &mut Lower, m: &Moments, sd: DType, eps: f64) -> LowerResult<Value> {
    let (ss, n) = (&m.ss, m.n);
    let ct = ss.dtype();
    let var = if sd == DType::BF16 {
        let rd = Rounding::new(DType::BF16);
        let ssr = rd.r(cx, ss)?;
        rd.bin_s(cx, BinaryOp::Divide, &ssr, n as f64)?
    } else {
        let nv = splat(cx, n as f64, ct, ss.shape())?;
        cx.div(ss, &nv)?
    };
    let v64 = cast(cx, &var, DType::F64)?;
    let v64 = add_s(cx, &v64, eps)?;
    let sq = cx.unary(UnaryOp::Sqrt, &v64)?;
    let one = splat(cx, 1.0, DType::F64, sq.shape())?;
    let inv = cx.div(&one, &sq)?;
    cast(cx, &inv, ct)
}

/// The running statistics after a training step, as PyTorch's CPU kernel updates them:
/// `momentum * batch + (1 - momentum) * running`, with the unbiased batch variance; for bf16
/// statistics (`sd`) the batch mean and sum of squared deviations rounded to bf16 first (as
/// `bn_invstd`; f16 keeps them in f32), the update in the compute dtype, the results in the
/// running statistics' dtypes.
fn updated_stats(
    cx: &mut Lower,
    moments: &Moments,
    sd: DType,
    running: [&Value; 2],
    momentum: f64,
) -> LowerResult<[Value; 2]> {
    let Moments { mean, ss, n } = moments;
    let ct = ss.dtype();
    let c = ss.ty().num_elements();
    let (mean, ss) = if sd == DType::BF16 {
        let rd = Rounding::new(DType::BF16);
        (rd.r(cx, mean)?, rd.r(cx, ss)?)
    } else {
        (mean.clone(), ss.clone())
    };
    let denom = splat(cx, *n as f64 - 1.0, ct, ss.shape())?;
    let var = cx.div(&ss, &denom)?;
    let m = splat(cx, momentum, ct, &[c])?;
    let keep = splat(cx, 1.0 - momentum, ct, &[c])?;
    let mut out = Vec::new();
    for (batch, run) in [mean, var].iter().zip(running) {
        let batch = cx.reshape(batch, &[c])?;
        let run_c = cast(cx, run, ct)?;
        let a = cx.mul(&m, &batch)?;
        let b = cx.mul(&keep, &run_c)?;
        let new = cx.add(&a, &b)?;
        out.push(cast(cx, &new, run.dtype())?);
    }
    let [m, v]: [Value; 2] = out.try_into().expect("two statistics");
    Ok([m, v])
}

/// Batch norm: `(out, save_mean, save_invstd)`; stats empty (`[0]`) in eval mode. With a
/// `momentum` in training mode, also the new running mean and variance.
#[allow(clippy::too_many_arguments)]
fn bn(
    cx: &mut Lower,
    x: &Value,
    w: Option<Value>,
    b: Option<Value>,
    rm: Option<Value>,
    rv: Option<Value>,
    training: bool,
    momentum: Option<f64>,
    eps: f64,
) -> LowerResult<Vec<Out>> {
    check_float(x, "batch_norm")?;
    if x.rank() < 2 {
        return invalid(format!(
            "batch_norm: expected an input with at least 2 dims, got {}",
            shape_str(x.shape())
        ));
    }
    let c = x.shape()[1];
    check_vec(&w, c, "weight")?;
    check_vec(&b, c, "bias")?;
    check_vec(&rm, c, "running_mean")?;
    check_vec(&rv, c, "running_var")?;
    let sd = stats_dtype(x.dtype(), &[w.as_ref(), b.as_ref(), rm.as_ref(), rv.as_ref()])?;
    if !training && (rm.is_none() || rv.is_none()) {
        return invalid("running_mean must be defined in evaluation mode");
    }
    if training && x.shape().iter().product::<usize>() == 0 {
        return invalid(format!(
            "input tensor must have at least one element, but got input_sizes = {}",
            shape_str(x.shape())
        ));
    }
    let xc = up(cx, x)?;
    let ct = xc.dtype();
    let shape = xc.shape().to_vec();
    let dims: Vec<usize> = (0..x.rank()).filter(|&d| d != 1).collect();
    let moments = if training {
        Some(bn_moments(cx, &xc, &dims)?)
    } else {
        None
    };
    let (mean, invstd) = if let Some(moments) = &moments {
        let is = bn_invstd(cx, moments, sd, eps)?;
        // PyTorch normalizes with the saved statistics, rounded to their dtype.
        let m = cast(cx, &moments.mean, sd)?;
        let m = cast(cx, &m, ct)?;
        let is = cast(cx, &is, sd)?;
        let is = cast(cx, &is, ct)?;
        (cx.reshape(&m, &[c])?, cx.reshape(&is, &[c])?)
    } else {
        let m = cast(cx, rm.as_ref().expect("checked"), ct)?;
        let v = cast(cx, rv.as_ref().expect("checked"), ct)?;
        let v = add_s(cx, &v, eps)?;
        let sq = cx.unary(UnaryOp::Sqrt, &v)?;
        let one = splat(cx, 1.0, ct, &[c])?;
        (m, cx.div(&one, &sq)?)
    };
    // y = x * alpha + beta, alpha = invstd * w, beta = b - mean * alpha (PyTorch's form).
    let alpha = match &w {
        Some(w) => {
            let wc = cast(cx, w, ct)?;
            cx.mul(&invstd, &wc)?
        }
        None => invstd.clone(),
    };
    let ma = cx.mul(&mean, &alpha)?;
    let beta = match &b {
        Some(b) => {
            let bc = cast(cx, b, ct)?;
            cx.sub(&bc, &ma)?
        }
        None => cx.neg(&ma)?,
    };
    let ab = bcast_vec(cx, &alpha, &shape, 1)?;
    let bb_ = bcast_vec(cx, &beta, &shape, 1)?;
    let y = cx.mul(&xc, &ab)?;
    let y = cx.add(&y, &bb_)?;
    let y = cast(cx, &y, x.dtype())?;
    let (sm, si) = if training {
        (cast(cx, &mean, sd)?, cast(cx, &invstd, sd)?)
    } else {
        (splat(cx, 0.0, sd, &[0])?, splat(cx, 0.0, sd, &[0])?)
    };
    let mut outs = vec![Out::Tensor(y), Out::Tensor(sm), Out::Tensor(si)];
    if let (Some(moments), Some(m), Some(rm), Some(rv)) = (&moments, momentum, &rm, &rv) {
        let [new_mean, new_var] = updated_stats(cx, moments, sd, [rm, rv], m)?;
        outs.extend([Out::Tensor(new_mean), Out::Tensor(new_var)]);
    }
    Ok(outs)
}

/// What a batch norm overload reads of its arguments: the running statistics or none, the
/// training flag (or `Some(fixed)`), the momentum or none.
#[derive(Clone, Copy)]
struct Variant {
    stats: bool,
    training: Option<bool>,
    momentum: bool,
}

/// The batch norm overloads' common call of [`bn`].
fn bn_variant(cx: &mut Lower, a: &Args, v: Variant) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let stat = |n: &str| if v.stats { a.opt_tensor(n) } else { Ok(None) };
    let training = match v.training {
        Some(t) => t,
        None => a.bool("training")?,
    };
    let momentum = if v.momentum { Some(a.float("momentum")?) } else { None };
    bn(
        cx,
        &x,
        a.opt_tensor("weight")?,
        a.opt_tensor("bias")?,
        stat("running_mean")?,
        stat("running_var")?,
        training,
        momentum,
        a.float("eps")?,
    )
}

pub(crate) fn batch_norm_legit(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    bn_variant(cx, a, Variant { stats: true, training: None, momentum: true })
}

pub(crate) fn batch_norm_legit_no_stats(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    bn_variant(cx, a, Variant { stats: false, training: None, momentum: false })
}

pub(crate) fn batch_norm_legit_no_training(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    bn_variant(cx, a, Variant { stats: true, training: Some(false), momentum: false })
}

pub(crate) fn batch_norm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let mut r = bn_variant(cx, a, Variant { stats: true, training: None, momentum: false })?;
    r.truncate(1);
    Ok(r)
}

/// `native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
/// eps) -> (out, save_mean, save_invstd)`: the running statistics are optional; in training
/// mode with them, their new values follow (PyTorch's CPU kernel updates them in place; the
/// op table marks them written).
pub(crate) fn native_batch_norm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    bn_variant(cx, a, Variant { stats: true, training: None, momentum: true })
}

/// `native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
/// save_invstd, train, eps, output_mask) -> (grad_input, grad_weight, grad_bias)`.
///
/// Training: `gi = (g - mean(g) - (x - mean) * invstd^2 * mean(g * (x - mean))) * invstd * w`
/// with the saved statistics; eval: `gi = g * w / sqrt(running_var + eps)`. Per channel
/// `grad_weight = sum(g * (x - mean)) * invstd`, `grad_bias = sum(g)`.
pub(crate) fn native_batch_norm_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_out")?;
    let x = a.tensor("input")?;
    let w = a.opt_tensor("weight")?;
    let train = a.bool("train")?;
    let mask = a.bool_list("output_mask")?;
    check_float(&x, "batch_norm_backward_cpu")?;
    if x.rank() < 2 || g.shape() != x.shape() {
        return invalid(format!(
            "batch_norm_backward: grad_out {} must match input {} (at least 2 dims)",
            shape_str(g.shape()),
            shape_str(x.shape())
        ));
    }
    let c = x.shape()[1];
    let (rm, rv) = (a.opt_tensor("running_mean")?, a.opt_tensor("running_var")?);
    let (sm, si) = (a.opt_tensor("save_mean")?, a.opt_tensor("save_invstd")?);
    check_vec(&w, c, "weight")?;
    let xc = up(cx, &x)?;
    let ct = xc.dtype();
    let shape = xc.shape().to_vec();
    let gc = cast(cx, &g, ct)?;
    let (mean, invstd) = if train {
        let (Some(sm), Some(si)) = (sm, si) else {
            return invalid("batch_norm_backward: save_mean and save_invstd must be defined in training mode");
        };
        check_vec(&Some(sm.clone()), c, "save_mean")?;
        check_vec(&Some(si.clone()), c, "save_invstd")?;
        (cast(cx, &sm, ct)?, cast(cx, &si, ct)?)
    } else {
        let (Some(rm), Some(rv)) = (rm, rv) else {
            return invalid("batch_norm_backward: running_mean and running_var must be defined in evaluation mode");
        };
        check_vec(&Some(rm.clone()), c, "running_mean")?;
        check_vec(&Some(rv.clone()), c, "running_var")?;
        let v = cast(cx, &rv, ct)?;
        let v = add_s(cx, &v, a.float("eps")?)?;
        let sq = cx.unary(UnaryOp::Sqrt, &v)?;
        let one = splat(cx, 1.0, ct, &[c])?;
        (cast(cx, &rm, ct)?, cx.div(&one, &sq)?)
    };
    let dims: Vec<usize> = (0..x.rank()).filter(|&d| d != 1).collect();
    let n: usize = dims.iter().map(|&d| shape[d]).product();
    let mb = bcast_vec(cx, &mean, &shape, 1)?;
    let xm = cx.sub(&xc, &mb)?;
    let gxm = cx.mul(&gc, &xm)?;
    let dot_p = sum(cx, &gxm, &dims, false)?;
    let gsum = sum(cx, &gc, &dims, false)?;
    let wc = match &w {
        Some(w) => cast(cx, w, ct)?,
        None => splat(cx, 1.0, ct, &[c])?,
    };
    let pdt = w.as_ref().map_or(x.dtype(), |w| w.dtype());
    let mut outs = Vec::with_capacity(3);
    if mask.first().copied().unwrap_or(true) {
        let ib = bcast_vec(cx, &invstd, &shape, 1)?;
        let wb = bcast_vec(cx, &wc, &shape, 1)?;
        let gi = if train {
            let nn = splat(cx, n as f64, ct, &[c])?;
            let i2 = cx.mul(&invstd, &invstd)?;
            let proj = cx.mul(&dot_p, &i2)?;
            let proj = cx.div(&proj, &nn)?;
            let gmean = cx.div(&gsum, &nn)?;
            let pb = bcast_vec(cx, &proj, &shape, 1)?;
            let gmb = bcast_vec(cx, &gmean, &shape, 1)?;
            let dx = cx.mul(&xm, &pb)?;
            let t = cx.sub(&gc, &gmb)?;
            cx.sub(&t, &dx)?
        } else {
            gc.clone()
        };
        let gi = cx.mul(&gi, &ib)?;
        let gi = cx.mul(&gi, &wb)?;
        outs.push(Out::Tensor(cast(cx, &gi, x.dtype())?));
    } else {
        outs.push(Out::None);
    }
    if mask.get(1).copied().unwrap_or(true) {
        let gw = cx.mul(&dot_p, &invstd)?;
        outs.push(Out::Tensor(cast(cx, &gw, pdt)?));
    } else {
        outs.push(Out::None);
    }
    if mask.get(2).copied().unwrap_or(true) {
        outs.push(Out::Tensor(cast(cx, &gsum, pdt)?));
    } else {
        outs.push(Out::None);
    }
    Ok(outs)
}
