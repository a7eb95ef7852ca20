//! Activations and their backward ops: relu, gelu, elu, hardtanh, leaky_relu, silu, hardswish,
//! hardsigmoid, mish, softplus, and the *_backward pointwise ops. Float math in f16/bf16
//! computes in f32.

use super::common::*;
use super::compare::clamp_scalars;
use super::super::promote::{result_type, Operand};
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{Comparison, UnaryOp, Value};
use crate::value::Scalar;
use tessera_lowering::DType;

const SQRT1_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
/// sqrt(2 / pi).
const KBETA: f64 = std::f64::consts::SQRT_2 * std::f64::consts::FRAC_2_SQRT_PI * 0.5;
const KKAPPA: f64 = 0.044715;

/// `f(self)` for a float-only activation.
fn float_act(
    cx: &mut Lower,
    a: &Args,
    kernel: &str,
    f: impl FnOnce(&mut Lower, &Value) -> LowerResult<Value>,
) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    require_float(kernel, x.dtype())?;
    out(compute_in(cx, &[x.clone()], x.dtype(), |cx, v| f(cx, &v[0]))?)
}

pub(super) fn relu(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.dtype() == DType::Bool {
        return Err(LowerError::dtype(DType::Bool, "Boolean inputs not supported for relu"));
    }
    if x.dtype().is_unsigned_int() {
        return out(x);
    }
    let neg = cmp_k(cx, Comparison::Lt, &x, 0.0)?;
    let zero = splat(cx, &x, 0.0)?;
    out(sel(cx, &neg, &zero, &x)?)
}

fn approximate(a: &Args) -> LowerResult<bool> {
    match a.str("approximate")?.as_str() {
        "none" => Ok(false),
        "tanh" => Ok(true),
        _ => Err(LowerError::invalid("approximate argument must be either none or tanh.")),
    }
}

/// `kBeta * (x + kKappa * x^3)`.
fn gelu_inner(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    let x2 = cx.mul(x, x)?;
    let x3 = cx.mul(&x2, x)?;
    let k = mul_k(cx, &x3, KKAPPA)?;
    let s = cx.add(x, &k)?;
    mul_k(cx, &s, KBETA)
}

pub(super) fn gelu(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let tanh = approximate(a)?;
    // gelu(-inf) is NaN in torch (-inf * erfc(inf) = -inf * 0, on every path). At +inf torch's
    // vectorised f32/bf16 erf gives NaN or +inf depending on the CPU's vector width and the
    // element's position (python/tools/known_differences.py); Tessera gives +inf, as torch's
    // float64 kernel does.
    float_act(cx, a, "GeluKernelImpl", |cx, x| {
        let half_x = mul_k(cx, x, 0.5)?;
        if tanh {
            let inner = gelu_inner(cx, x)?;
            let t = cx.unary(UnaryOp::Tanh, &inner)?;
            let one_p = add_k(cx, &t, 1.0)?;
            return Ok(cx.mul(&half_x, &one_p)?);
        }
        // x/2 * erfc(-x/sqrt(2)) = x/2 * (1 + erf(x/sqrt(2))), without the cancellation of
        // 1 + erf in the negative tail (gelu(-1e30) is -0, not -1e30 * ulp).
        let s = mul_k(cx, x, -SQRT1_2)?;
        let t = cx.unary(UnaryOp::Erfc, &s)?;
        let r = cx.mul(&half_x, &t)?;
        let inf = cmp_k(cx, Comparison::Eq, x, f64::NEG_INFINITY)?;
        let nan = splat(cx, x, f64::NAN)?;
        sel(cx, &inf, &nan, &r)
    })
}

/// Promotes two tensor arguments to their common dtype; float-only kernels refuse others.
pub(super) fn two(cx: &mut Lower, a: &Args, n1: &str, n2: &str, kernel: &str) -> LowerResult<(Vec<Value>, DType)> {
    let ops = [Operand::Tensor(a.tensor(n1)?), Operand::Tensor(a.tensor(n2)?)];
    let d = result_type(&ops);
    require_float(kernel, d)?;
    promote(cx, &ops, None)
}

pub(super) fn gelu_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let tanh = approximate(a)?;
    let (v, d) = two(cx, a, "grad_output", "self", "GeluBackwardKernelImpl")?;
    out(compute_in(cx, &v, d, |cx, v| {
        let (dy, x) = (&v[0], &v[1]);
        let g = if tanh {
            let x2 = cx.mul(x, x)?;
            let inner = gelu_inner(cx, x)?;
            let t = cx.unary(UnaryOp::Tanh, &inner)?;
            let left = mul_k(cx, x, 0.5)?;
            let right = add_k(cx, &t, 1.0)?;
            let left_d = mul_k(cx, &right, 0.5)?;
            let t2 = cx.mul(&t, &t)?;
            let sech2 = rsub_k(cx, 1.0, &t2)?;
            let inner_d = mul_k(cx, &x2, 3.0 * KKAPPA)?;
            let inner_d = add_k(cx, &inner_d, 1.0)?;
            let inner_d = mul_k(cx, &inner_d, KBETA)?;
            let right_d = cx.mul(&left, &sech2)?;
            let right_d = cx.mul(&right_d, &inner_d)?;
            cx.add(&left_d, &right_d)?
        } else {
            let s = mul_k(cx, x, SQRT1_2)?;
            let e = cx.unary(UnaryOp::Erf, &s)?;
            let cdf = add_k(cx, &e, 1.0)?;
            let cdf = mul_k(cx, &cdf, 0.5)?;
            let x2 = cx.mul(x, x)?;
            let ex = mul_k(cx, &x2, -0.5)?;
            let pdf = cx.exp(&ex)?;
            let pdf = mul_k(cx, &pdf, std::f64::consts::FRAC_2_SQRT_PI * SQRT1_2 * 0.5)?;
            let xp = cx.mul(x, &pdf)?;
            cx.add(&cdf, &xp)?
        };
        Ok(cx.mul(dy, &g)?)
    })?)
}

pub(super) fn elu(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let alpha = a.scalar("alpha")?.as_f64();
    let scale = a.scalar("scale")?.as_f64();
    let input_scale = a.scalar("input_scale")?.as_f64();
    elu_with(cx, a, alpha, scale, input_scale)
}

/// `celu(self, alpha)`: `elu(x, alpha, 1, 1 / alpha)`.
pub(super) fn celu(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let alpha = a.scalar("alpha")?.as_f64();
    if alpha == 0.0 {
        return Err(LowerError::invalid("ZeroDivisionError"));
    }
    elu_with(cx, a, alpha, 1.0, 1.0 / alpha)
}

/// `selu(self)`: `elu` with the self-normalizing constants.
pub(super) fn selu(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    elu_with(cx, a, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0)
}

fn elu_with(cx: &mut Lower, a: &Args, alpha: f64, scale: f64, input_scale: f64) -> LowerResult<Vec<Out>> {
    float_act(cx, a, "elu_cpu", |cx, x| {
        let xi = mul_k(cx, x, input_scale)?;
        let e = cx.unary(UnaryOp::ExponentialMinusOne, &xi)?;
        let neg = mul_k(cx, &e, alpha * scale)?;
        let pos = mul_k(cx, x, scale)?;
        let le = cmp_k(cx, Comparison::Le, x, 0.0)?;
        sel(cx, &le, &neg, &pos)
    })
}

/// `hardtanh(self, min_val, max_val)`: a clamp that keeps integer dtypes (bounds truncated).
pub(super) fn hardtanh(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.dtype() == DType::Bool {
        return Err(LowerError::dtype(DType::Bool, "Bool inputs not supported for hardtanh"));
    }
    let lo = a.scalar("min_val")?;
    let hi = a.scalar("max_val")?;
    out(clamp_scalars(cx, &x, Some(lo), Some(hi), true)?)
}

/// `relu6(self)`: `hardtanh(x, 0, 6)` (integer dtypes too).
pub(super) fn relu6(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.dtype() == DType::Bool {
        return Err(LowerError::dtype(DType::Bool, "Bool inputs not supported for hardtanh"));
    }
    out(clamp_scalars(cx, &x, Some(Scalar::Int(0)), Some(Scalar::Int(6)), true)?)
}

/// The two halves of `x` along `dim` (GLU's split), with PyTorch's checks.
fn glu_halves(cx: &mut Lower, x: &Value, dim: i64) -> LowerResult<(usize, Value, Value)> {
    if x.rank() == 0 {
        return Err(LowerError::invalid("glu does not support scalars because halving size must be even"));
    }
    let d = crate::aten::util::wrap_dim(dim, x.rank())?;
    let n = x.shape()[d];
    if n % 2 != 0 {
        return Err(LowerError::invalid(format!(
            "Halving dimension must be even, but dimension {d} is size {n}"
        )));
    }
    let first = cx.slice_axis(x, d, 0, n / 2)?;
    let second = cx.slice_axis(x, d, n / 2, n / 2)?;
    Ok((d, first, second))
}

/// `glu(self, dim)`: `a * sigmoid(b)` of the two halves along `dim`.
pub(super) fn glu(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    require_float("glu_cpu", x.dtype())?;
    let d = x.dtype();
    let xc = cast(cx, &x, compute_dtype(d))?;
    let (_, first, second) = glu_halves(cx, &xc, a.int("dim")?)?;
    let s = sigmoid(cx, &second)?;
    let r = cx.mul(&first, &s)?;
    out(cast(cx, &r, d)?)
}

/// `glu_backward(grad_output, self, dim)`: `[g * s, g * a * s * (1 - s)]`, `s = sigmoid(b)`.
pub(super) fn glu_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let g = a.tensor("grad_output")?;
    require_float("glu_backward_cpu", x.dtype())?;
    let d = x.dtype();
    let xc = cast(cx, &x, compute_dtype(d))?;
    let gc = cast(cx, &g, compute_dtype(d))?;
    let (dim, first, second) = glu_halves(cx, &xc, a.int("dim")?)?;
    if gc.shape() != first.shape() {
        return Err(LowerError::invalid(format!(
            "glu_backward: grad_output of shape {:?} must match the half of self {:?}",
            gc.shape(),
            first.shape()
        )));
    }
    let s = sigmoid(cx, &second)?;
    let ga = cx.mul(&gc, &s)?;
    let oms = rsub_k(cx, 1.0, &s)?;
    let t = cx.mul(&s, &oms)?;
    let t = cx.mul(&t, &first)?;
    let gb = cx.mul(&gc, &t)?;
    let r = cx.concatenate(&[&ga, &gb], dim)?;
    out(cast(cx, &r, d)?)
}

pub(super) fn leaky_relu(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let slope = a.scalar("negative_slope")?.as_f64();
    float_act(cx, a, "leaky_relu_cpu", |cx, x| {
        let gt = cmp_k(cx, Comparison::Gt, x, 0.0)?;
        let n = mul_k(cx, x, slope)?;
        sel(cx, &gt, x, &n)
    })
}

/// `1 / (1 + exp(-x))`.
fn sigmoid(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    Ok(cx.unary(UnaryOp::Logistic, x)?)
}

pub(super) fn silu(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    float_act(cx, a, "silu_cpu", |cx, x| {
        let s = sigmoid(cx, x)?;
        Ok(cx.mul(x, &s)?)
    })
}

/// `min(max(x + 3, 0), 6)`.
fn relu6_shift(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    let s = add_k(cx, x, 3.0)?;
    let zero = splat(cx, x, 0.0)?;
    let six = splat(cx, x, 6.0)?;
    let m = max_min_nan(cx, &s, &zero, true)?;
    max_min_nan(cx, &m, &six, false)
}

pub(super) fn hardswish(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    float_act(cx, a, "hardswish_cpu", |cx, x| {
        let r = relu6_shift(cx, x)?;
        let p = cx.mul(x, &r)?;
        let six = splat(cx, x, 6.0)?;
        Ok(cx.div(&p, &six)?)
    })
}

pub(super) fn hardsigmoid(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    float_act(cx, a, "hardsigmoid_cpu", |cx, x| {
        let r = relu6_shift(cx, x)?;
        let six = splat(cx, x, 6.0)?;
        Ok(cx.div(&r, &six)?)
    })
}

/// `log1p(exp(x))`, exact for large x.
fn softplus1(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    let e = cx.exp(x)?;
    Ok(cx.unary(UnaryOp::LogPlusOne, &e)?)
}

pub(super) fn mish(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    float_act(cx, a, "mish_cpu", |cx, x| {
        let sp = softplus1(cx, x)?;
        let t = cx.unary(UnaryOp::Tanh, &sp)?;
        Ok(cx.mul(x, &t)?)
    })
}

/// `x * beta > threshold ? x : log1p(exp(x * beta)) / beta`.
pub(super) fn softplus(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let beta = a.scalar("beta")?.as_f64();
    let threshold = a.scalar("threshold")?.as_f64();
    float_act(cx, a, "softplus_cpu", |cx, x| {
        let xb = mul_k(cx, x, beta)?;
        let big = cmp_k(cx, Comparison::Gt, &xb, threshold)?;
        let sp = softplus1(cx, &xb)?;
        let b = splat(cx, x, beta)?;
        let sp = cx.div(&sp, &b)?;
        sel(cx, &big, x, &sp)
    })
}

/// `self <= threshold ? 0 : grad_output`, in the common dtype (the threshold converted to it).
pub(super) fn threshold_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let ops = [Operand::Tensor(a.tensor("grad_output")?), Operand::Tensor(a.tensor("self")?)];
    let d = result_type(&ops);
    refuse_bool("threshold_cpu", d)?;
    let (v, _) = promote(cx, &ops, None)?;
    let t = konst(cx, a.scalar("threshold")?, d)?;
    let t = like(cx, &t, &v[1])?;
    let le = cmp(cx, Comparison::Le, &v[1], &t)?;
    let zero = splat(cx, &v[0], 0.0)?;
    out(sel(cx, &le, &zero, &v[0])?)
}

/// `grad * (1 - y) * y`.
pub(super) fn sigmoid_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (v, d) = two(cx, a, "grad_output", "output", "sigmoid_backward_cpu")?;
    out(compute_in(cx, &v, d, |cx, v| {
        let omy = rsub_k(cx, 1.0, &v[1])?;
        let g = cx.mul(&v[0], &omy)?;
        Ok(cx.mul(&g, &v[1])?)
    })?)
}

/// `grad * (1 - y^2)`.
pub(super) fn tanh_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (v, d) = two(cx, a, "grad_output", "output", "tanh_backward_cpu")?;
    out(compute_in(cx, &v, d, |cx, v| {
        let y2 = cx.mul(&v[1], &v[1])?;
        let omy = rsub_k(cx, 1.0, &y2)?;
        Ok(cx.mul(&v[0], &omy)?)
    })?)
}
