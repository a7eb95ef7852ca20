//! Backward ops of the activations (the formulas of PyTorch's CPU kernels), and the shrink /
//! log-sigmoid / logit / prelu pairs whose forward and backward autograd calls. Float-only;
//! f16/bf16 compute in f32 and round once.

use super::super::promote::{result_type, Operand};
use super::activation::two;
use super::common::*;
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, UnaryOp, Value};

/// `f(grad, x)` over `grad_output` and the tensor argument `x_name`, float-only (`kernel`
/// names PyTorch's kernel in the dtype error).
fn grad_map(
    cx: &mut Lower,
    a: &Args,
    x_name: &str,
    kernel: &str,
    f: impl FnOnce(&mut Lower, &Value, &Value) -> LowerResult<Value>,
) -> LowerResult<Vec<Out>> {
    // The gradient is the first argument (`grad_output`, or `grad_out` for hardshrink).
    let (v, d) = two(cx, a, a.schema.args[0].name, x_name, kernel)?;
    out(compute_in(cx, &v, d, |cx, v| f(cx, &v[0], &v[1]))?)
}

/// `lo < x < hi` (strict), as a bool tensor.
fn inside(cx: &mut Lower, x: &Value, lo: f64, hi: f64) -> LowerResult<Value> {
    let a = cmp_k(cx, Comparison::Gt, x, lo)?;
    let b = cmp_k(cx, Comparison::Lt, x, hi)?;
    Ok(cx.binary(BinaryOp::And, &a, &b)?)
}

/// `c ? 0 : g`.
fn zero_where(cx: &mut Lower, c: &Value, g: &Value) -> LowerResult<Value> {
    let z = splat(cx, g, 0.0)?;
    sel(cx, c, &z, g)
}

pub(super) fn hardswish_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    grad_map(cx, a, "self", "hardswish_backward_cpu", |cx, g, x| {
        // x <= -3: 0; x < 3: g * (x / 3 + 0.5); else g (torch 2.15's kernel: both ends
        // exclusive, so x = -3 gives 0 and x = 3 gives g; bf16 samples land on them).
        let third = splat(cx, x, 3.0)?;
        let s = cx.div(x, &third)?;
        let s = add_k(cx, &s, 0.5)?;
        let mid = cx.mul(g, &s)?;
        let lt3 = cmp_k(cx, Comparison::Lt, x, 3.0)?;
        let r = sel(cx, &lt3, &mid, g)?;
        let le = cmp_k(cx, Comparison::Le, x, -3.0)?;
        zero_where(cx, &le, &r)
    })
}

pub(super) fn hardsigmoid_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    grad_map(cx, a, "self", "hardsigmoid_backward_cpu", |cx, g, x| {
        let inn = inside(cx, x, -3.0, 3.0)?;
        let six = splat(cx, g, 6.0)?;
        let q = cx.div(g, &six)?;
        let z = splat(cx, g, 0.0)?;
        sel(cx, &inn, &q, &z)
    })
}

pub(super) fn silu_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    grad_map(cx, a, "self", "silu_backward_cpu", |cx, g, x| {
        // g * s * (1 + x * (1 - s)), s = sigmoid(x).
        let s = cx.unary(UnaryOp::Logistic, x)?;
        let oms = rsub_k(cx, 1.0, &s)?;
        let t = cx.mul(x, &oms)?;
        let t = add_k(cx, &t, 1.0)?;
        let gs = cx.mul(g, &s)?;
        Ok(cx.mul(&gs, &t)?)
    })
}

pub(super) fn mish_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    grad_map(cx, a, "self", "mish_backward_cpu", |cx, g, x| {
        // g * (tanh(sp) + x * sigmoid(x) * (1 - tanh(sp)^2)), sp = log1p(exp(x)).
        let s = cx.unary(UnaryOp::Logistic, x)?;
        let e = cx.exp(x)?;
        let sp = cx.unary(UnaryOp::LogPlusOne, &e)?;
        let t = cx.unary(UnaryOp::Tanh, &sp)?;
        let t2 = cx.mul(&t, &t)?;
        let omt = rsub_k(cx, 1.0, &t2)?;
        let xs = cx.mul(x, &s)?;
        let xs = cx.mul(&xs, &omt)?;
        let d = cx.add(&t, &xs)?;
        Ok(cx.mul(g, &d)?)
    })
}

pub(super) fn leaky_relu_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let slope = a.scalar("negative_slope")?.as_f64();
    if a.bool("self_is_result")? && slope < 0.0 {
        return Err(LowerError::invalid(
            "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. This is caused by calling in-place forward function with a negative slope, please call out-of-place version instead. File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu backward calculation with negative slope",
        ));
    }
    grad_map(cx, a, "self", "leaky_relu_backward_cpu", |cx, g, x| {
        let pos = cmp_k(cx, Comparison::Gt, x, 0.0)?;
        let n = mul_k(cx, g, slope)?;
        sel(cx, &pos, g, &n)
    })
}

pub(super) fn elu_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let alpha = a.scalar("alpha")?.as_f64();
    let scale = a.scalar("scale")?.as_f64();
    let input_scale = a.scalar("input_scale")?.as_f64();
    let is_result = a.bool("is_result")?;
    if is_result && alpha < 0.0 {
        return Err(LowerError::invalid(
            "In-place elu backward calculation is triggered with a negative slope which is not supported. This is caused by calling in-place forward function with a negative slope, please call out-of-place version instead.",
        ));
    }
    let (negcoef, poscoef, negiptcoef) = (alpha * scale, scale, input_scale);
    grad_map(cx, a, "self_or_result", "elu_backward_cpu", |cx, g, x| {
        let neg = if is_result {
            // g * negiptcoef * (y + negcoef)
            let t = add_k(cx, x, negcoef)?;
            let t = mul_k(cx, &t, negiptcoef)?;
            cx.mul(g, &t)?
        } else {
            // g * negiptcoef * negcoef * exp(x * negiptcoef)
            let xs = mul_k(cx, x, negiptcoef)?;
            let e = cx.exp(&xs)?;
            let e = mul_k(cx, &e, negiptcoef * negcoef)?;
            cx.mul(g, &e)?
        };
        let pos = mul_k(cx, g, poscoef)?;
        let le = cmp_k(cx, Comparison::Le, x, 0.0)?;
        sel(cx, &le, &neg, &pos)
    })
}

pub(super) fn softplus_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let beta = a.scalar("beta")?.as_f64();
    let threshold = a.scalar("threshold")?.as_f64();
    grad_map(cx, a, "self", "softplus_backward_cpu", |cx, g, x| {
        // x * beta > threshold ? g : g * z / (z + 1), z = exp(x * beta).
        let xb = mul_k(cx, x, beta)?;
        let z = cx.exp(&xb)?;
        let z1 = add_k(cx, &z, 1.0)?;
        let q = cx.div(&z, &z1)?;
        let gq = cx.mul(g, &q)?;
        let big = cmp_k(cx, Comparison::Gt, &xb, threshold)?;
        sel(cx, &big, g, &gq)
    })
}

/// `(x <= min || x >= max) ? 0 : g`; integer dtypes too (hardtanh takes them).
pub(super) fn hardtanh_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let ops = [
        Operand::Tensor(a.tensor("grad_output")?),
        Operand::Tensor(a.tensor("self")?),
    ];
    let (v, d) = promote(cx, &ops, None)?;
    refuse_bool("hardtanh_backward_cpu", d)?;
    let lo = konst(cx, a.scalar("min_val")?, d)?;
    let lo = like(cx, &lo, &v[1])?;
    let hi = konst(cx, a.scalar("max_val")?, d)?;
    let hi = like(cx, &hi, &v[1])?;
    let below = cmp(cx, Comparison::Le, &v[1], &lo)?;
    let above = cmp(cx, Comparison::Ge, &v[1], &hi)?;
    let outside = cx.binary(BinaryOp::Or, &below, &above)?;
    out(zero_where(cx, &outside, &v[0])?)
}

/// `log_sigmoid_forward(self) -> (output, buffer)`: `min(x, 0) - log1p(exp(-|x|))` and the
/// `exp(-|x|)` buffer PyTorch's CPU kernel saves for the backward.
pub(super) fn log_sigmoid_forward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    require_float("log_sigmoid_cpu", x.dtype())?;
    let d = x.dtype();
    let xc = cast(cx, &x, compute_dtype(d))?;
    let zero = splat(cx, &xc, 0.0)?;
    let m = max_min_nan(cx, &xc, &zero, false)?;
    let ab = cx.unary(UnaryOp::Abs, &xc)?;
    let nab = cx.neg(&ab)?;
    let z = cx.exp(&nab)?;
    let l = cx.unary(UnaryOp::LogPlusOne, &z)?;
    let y = cx.sub(&m, &l)?;
    Ok(vec![
        Out::Tensor(cast(cx, &y, d)?),
        Out::Tensor(cast(cx, &z, d)?),
    ])
}

/// `(max_deriv - sign * z / (1 + z)) * g` with `max_deriv = x < 0`, `sign = x < 0 ? 1 : -1`.
pub(super) fn log_sigmoid_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (v, d) = two(cx, a, "grad_output", "self", "log_sigmoid_backward_cpu")?;
    let buf = a.tensor("buffer")?;
    let buf = cx.broadcast_to(&buf, v[0].shape())?;
    out(compute_in(
        cx,
        &[v[0].clone(), v[1].clone(), buf],
        d,
        |cx, v| {
            let (g, x, z) = (&v[0], &v[1], &v[2]);
            let neg = cmp_k(cx, Comparison::Lt, x, 0.0)?;
            let one = splat(cx, x, 1.0)?;
            let zero = splat(cx, x, 0.0)?;
            let mone = splat(cx, x, -1.0)?;
            let max_deriv = sel(cx, &neg, &one, &zero)?;
            let sign = sel(cx, &neg, &one, &mone)?;
            let z1 = add_k(cx, z, 1.0)?;
            let q = cx.div(z, &z1)?;
            let sq = cx.mul(&sign, &q)?;
            let dd = cx.sub(&max_deriv, &sq)?;
            Ok(cx.mul(&dd, g)?)
        },
    )?)
}

/// `-lambd <= x <= lambd` for `x` and a number.
fn within(cx: &mut Lower, x: &Value, l: f64) -> LowerResult<Value> {
    let a = cmp_k(cx, Comparison::Ge, x, -l)?;
    let b = cmp_k(cx, Comparison::Le, x, l)?;
    Ok(cx.binary(BinaryOp::And, &a, &b)?)
}

/// `softshrink(self, lambd)`: `x - l` above `l`, `x + l` below `-l`, else `x * 0`.
pub(super) fn softshrink(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let l = a.scalar("lambd")?.as_f64();
    if l < 0.0 {
        return Err(LowerError::invalid(format!(
            "lambda must be greater or equal to 0, but found to be {l}."
        )));
    }
    let x = a.tensor("self")?;
    require_float("softshrink_cpu", x.dtype())?;
    out(compute_in(cx, &[x.clone()], x.dtype(), |cx, v| {
        let x = &v[0];
        let hi = cmp_k(cx, Comparison::Gt, x, l)?;
        let lo = cmp_k(cx, Comparison::Lt, x, -l)?;
        let xm = add_k(cx, x, -l)?;
        let xp = add_k(cx, x, l)?;
        let z = mul_k(cx, x, 0.0)?;
        let r = sel(cx, &lo, &xp, &z)?;
        sel(cx, &hi, &xm, &r)
    })?)
}

/// `hardshrink(self, lambd)`: `x` outside `[-l, l]`, else 0.
pub(super) fn hardshrink(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let l = a.scalar("lambd")?.as_f64();
    let x = a.tensor("self")?;
    require_float("hardshrink_cpu", x.dtype())?;
    out(compute_in(cx, &[x.clone()], x.dtype(), |cx, v| {
        let w = within(cx, &v[0], l)?;
        zero_where(cx, &w, &v[0])
    })?)
}

/// `softshrink_backward` / `hardshrink_backward`: `g` outside `[-l, l]`, else 0.
pub(super) fn shrink_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let l = a.scalar("lambd")?.as_f64();
    let kernel = format!("{}_cpu", a.schema.name);
    grad_map(cx, a, "self", &kernel, |cx, g, x| {
        let w = within(cx, x, l)?;
        zero_where(cx, &w, g)
    })
}

/// `logit(self, eps)`: `log(z / (1 - z))`, `z` clamped to `[eps, 1 - eps]` when eps is given
/// and not negative.
pub(super) fn logit(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let eps = a.opt_float("eps")?.filter(|&e| e >= 0.0);
    out(float_map(cx, &x, |cx, x| {
        // PyTorch's clamp: `x < eps ? eps : (x > 1 - eps ? 1 - eps : x)` (for eps > 0.5 the
        // bounds cross; NaN passes through).
        let z = match eps {
            Some(e) => {
                let lo = splat(cx, x, e)?;
                let hi = splat(cx, x, 1.0 - e)?;
                let above = cmp_k(cx, Comparison::Gt, x, 1.0 - e)?;
                let z = sel(cx, &above, &hi, x)?;
                let below = cmp_k(cx, Comparison::Lt, x, e)?;
                sel(cx, &below, &lo, &z)?
            }
            None => x.clone(),
        };
        let omz = rsub_k(cx, 1.0, &z)?;
        let q = cx.div(&z, &omz)?;
        Ok(cx.unary(UnaryOp::Log, &q)?)
    })?)
}

/// `logit_backward(grad_output, self, eps)`: `g / (x (1 - x))` inside the domain; outside it
/// NaN without eps (or eps < 0), 0 with eps.
pub(super) fn logit_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let eps = a.opt_float("eps")?.filter(|&e| e >= 0.0);
    grad_map(cx, a, "self", "logit_backward_cpu", |cx, g, x| {
        let omx = rsub_k(cx, 1.0, x)?;
        let den = cx.mul(x, &omx)?;
        let q = cx.div(g, &den)?;
        let (lo, hi, fill) = match eps {
            Some(e) => (e, 1.0 - e, 0.0),
            None => (0.0, 1.0, f64::NAN),
        };
        let below = cmp_k(cx, Comparison::Lt, x, lo)?;
        let above = cmp_k(cx, Comparison::Gt, x, hi)?;
        let outside = cx.binary(BinaryOp::Or, &below, &above)?;
        let f = splat(cx, x, fill)?;
        sel(cx, &outside, &f, &q)
    })
}

/// `_prelu_kernel(self, weight)`: `x > 0 ? x : w * x`, broadcast together.
pub(super) fn prelu_kernel(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (v, d) = two(cx, a, "self", "weight", "prelu_cpu")?;
    out(compute_in(cx, &v, d, |cx, v| {
        let pos = cmp_k(cx, Comparison::Gt, &v[0], 0.0)?;
        let wx = cx.mul(&v[1], &v[0])?;
        sel(cx, &pos, &v[0], &wx)
    })?)
}

/// `_prelu_kernel_backward(grad_output, self, weight) -> (grad_input, grad_weight)`: the
/// elementwise gradients, both of the broadcast shape (autograd sums `grad_weight` down to the
/// weight's shape itself).
pub(super) fn prelu_kernel_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let w = a.tensor("weight")?;
    let ops = [
        Operand::Tensor(a.tensor("grad_output")?),
        Operand::Tensor(a.tensor("self")?),
        Operand::Tensor(w.clone()),
    ];
    let d = result_type(&ops);
    require_float("prelu_backward_cpu", d)?;
    let c = compute_dtype(d);
    let (v, _) = promote(cx, &ops, Some(c))?;
    let (g, x, wb) = (&v[0], &v[1], &v[2]);
    let pos = cmp_k(cx, Comparison::Gt, x, 0.0)?;
    let wg = cx.mul(wb, g)?;
    let gi = sel(cx, &pos, g, &wg)?;
    let xg = cx.mul(x, g)?;
    let z = splat(cx, &xg, 0.0)?;
    let gw = sel(cx, &pos, &z, &xg)?;
    Ok(vec![
        Out::Tensor(cast(cx, &gi, a.tensor("self")?.dtype())?),
        Out::Tensor(cast(cx, &gw, w.dtype())?),
    ])
}

/// `native_dropout_backward(grad_output, mask, scale)`: `grad * mask * scale`, typed as
/// PyTorch's `grad_output * mask * scale` (integer and bool gradients give f32: the float
/// scale is a wrapped number).
pub(super) fn native_dropout_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_output")?;
    let m = a.tensor("mask")?;
    let scale = a.float("scale")?;
    let d = result_type(&[Operand::Tensor(g.clone()), Operand::Tensor(m.clone())]);
    let d = super::super::promote::to_float(d);
    let v = broadcast_vals(cx, &[g, m])?;
    out(compute_in(cx, &v, d, |cx, v| {
        let r = cx.mul(&v[0], &v[1])?;
        mul_k(cx, &r, scale)
    })?)
}
