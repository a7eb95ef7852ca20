//! Elementwise losses and their backward ops: l1, smooth_l1 and huber (forward and
//! backward), soft_margin (forward and backward), binary_cross_entropy_with_logits, kl_div,
//! margin_ranking, hinge_embedding, poisson_nll, cosine_embedding, and the backward ops of
//! mse_loss and binary_cross_entropy. Reduction codes: 0 none,
//! 1 mean, 2 sum; f16/bf16 compute in f32.

use super::common::*;
use super::loss::reduce_elementwise;
use crate::args::Args;
use crate::aten::promote::{result_type, Operand};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{Comparison, UnaryOp, Value};
use tessera_lowering::DType;

/// The elementwise loss `l` reduced as the call's `reduction` says, in the result dtype `dt`.
fn reduced(cx: &mut Lower, a: &Args, l: &Value, dt: DType) -> LowerResult<Vec<Out>> {
    Ok(vec![Out::Tensor(reduce_elementwise(cx, l, dt, reduction(a)?)?)])
}

/// `self` and `target` promoted to their float result dtype, in opmath and broadcast; with
/// the result dtype.
fn operands(cx: &mut Lower, a: &Args, op: &str) -> LowerResult<(Value, Value, DType)> {
    let x = a.tensor("self")?;
    let t = a.tensor("target")?;
    let dt = result_type(&[Operand::Tensor(x.clone()), Operand::Tensor(t.clone())]);
    dtype_check(dt.is_float(), dt, op)?;
    let ct = opmath(dt);
    let (xc, tc) = (cast(cx, &x, ct)?, cast(cx, &t, ct)?);
    let (xc, tc) = cx.broadcast_pair(&xc, &tc).map_err(|_| {
        LowerError::invalid(format!(
            "The size of tensor a ({:?}) must match the size of tensor b ({:?}) at non-singleton dimensions",
            x.shape(),
            t.shape()
        ))
    })?;
    Ok((xc, tc, dt))
}

/// The scale a backward applies for `reduction` (1/N for mean over `n` elements), and
/// `grad_output` (opmath) broadcast to `shape`.
fn grad_scaled(cx: &mut Lower, a: &Args, shape: &[usize], ct: DType) -> LowerResult<Value> {
    let r = reduction(a)?;
    let g = a.tensor("grad_output")?;
    let g = cast(cx, &g, ct)?;
    let g = cx.broadcast_to(&g, shape).map_err(|_| {
        LowerError::invalid(format!(
            "grad_output of size {} does not broadcast to the input's size {}",
            shape_str(g.shape()),
            shape_str(shape)
        ))
    })?;
    if r == 1 {
        let n = shape.iter().product::<usize>() as f64;
        return mul_s(cx, &g, 1.0 / n);
    }
    Ok(g)
}

fn sel(cx: &mut Lower, c: &Value, a: &Value, b: &Value) -> LowerResult<Value> {
    Ok(cx.select(c, a, b)?)
}

fn cmp_s(cx: &mut Lower, dir: Comparison, x: &Value, v: f64) -> LowerResult<Value> {
    let k = splat(cx, v, x.dtype(), x.shape())?;
    Ok(cx.compare(dir, x, &k)?)
}

/// `l1_loss(self, target, reduction=Mean)`: `|self - target|`.
pub(crate) fn l1_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, t, dt) = operands(cx, a, "abs_cpu")?;
    let d = cx.sub(&x, &t)?;
    let l = cx.unary(UnaryOp::Abs, &d)?;
    reduced(cx, a, &l, dt)
}

/// `smooth_l1_loss(self, target, reduction=Mean, beta=1.0)`: `0.5 z^2 / beta` below `beta`,
/// `z - 0.5 beta` above (`z = |self - target|`; beta 0 is the l1 loss).
pub(crate) fn smooth_l1_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let beta = a.float("beta")?;
    if beta < 0.0 {
        return invalid("smooth_l1_loss does not support negative values for beta.");
    }
    let (x, t, dt) = operands(cx, a, "smooth_l1_cpu")?;
    let d = cx.sub(&x, &t)?;
    let z = cx.unary(UnaryOp::Abs, &d)?;
    let l = if beta == 0.0 {
        z
    } else {
        let z2 = cx.mul(&z, &z)?;
        let q = mul_s(cx, &z2, 0.5 / beta)?;
        let lin = add_s(cx, &z, -0.5 * beta)?;
        let small = cmp_s(cx, Comparison::Lt, &z, beta)?;
        sel(cx, &small, &q, &lin)?
    };
    reduced(cx, a, &l, dt)
}

/// `huber_loss(self, target, reduction=Mean, delta=1.0)`: `0.5 z^2` below `delta`,
/// `delta (z - 0.5 delta)` above.
pub(crate) fn huber_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let delta = a.float("delta")?;
    if delta <= 0.0 {
        return invalid("huber_loss does not support non-positive values for delta.");
    }
    let (x, t, dt) = operands(cx, a, "huber_cpu")?;
    let d = cx.sub(&x, &t)?;
    let z = cx.unary(UnaryOp::Abs, &d)?;
    let z2 = cx.mul(&z, &z)?;
    let q = mul_s(cx, &z2, 0.5)?;
    let lin = add_s(cx, &z, -0.5 * delta)?;
    let lin = mul_s(cx, &lin, delta)?;
    let small = cmp_s(cx, Comparison::Lt, &z, delta)?;
    let l = sel(cx, &small, &q, &lin)?;
    reduced(cx, a, &l, dt)
}

/// The backward of smooth_l1 (`huber: false`; slope 1, quadratic part scaled by 1/beta) and
/// huber (slope `delta`): `x = self - target`, `-k g` at or below `-b`, `k g` at or above `b`,
/// in between `x g / beta` (smooth_l1) or `x g` (huber).
pub(crate) fn smooth_backward(cx: &mut Lower, a: &Args, huber: bool) -> LowerResult<Vec<Out>> {
    let b = a.float(if huber { "delta" } else { "beta" })?;
    let (x, t, dt) = operands(
        cx,
        a,
        if huber {
            "huber_backward_cpu_out"
        } else {
            "smooth_l1_backward_cpu_out"
        },
    )?;
    let g = grad_scaled(cx, a, x.shape(), x.dtype())?;
    let d = cx.sub(&x, &t)?;
    let k = if huber { b } else { 1.0 };
    let pos = mul_s(cx, &g, k)?;
    let neg = cx.neg(&pos)?;
    let dg = cx.mul(&d, &g)?;
    let mid = if huber { dg } else { mul_s(cx, &dg, 1.0 / b)? };
    let le = cmp_s(cx, Comparison::Le, &d, -b)?;
    let ge = cmp_s(cx, Comparison::Ge, &d, b)?;
    let r = sel(cx, &ge, &pos, &mid)?;
    let r = sel(cx, &le, &neg, &r)?;
    Ok(vec![Out::Tensor(cast(cx, &r, dt)?)])
}

/// `soft_margin_loss(self, target, reduction=Mean)`: `log1p(exp(-target * self))`.
pub(crate) fn soft_margin_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, t, dt) = operands(cx, a, "soft_margin_loss")?;
    let p = cx.mul(&x, &t)?;
    let p = cx.neg(&p)?;
    let e = cx.exp(&p)?;
    let l = cx.unary(UnaryOp::LogPlusOne, &e)?;
    reduced(cx, a, &l, dt)
}

/// `soft_margin_loss_backward(grad_output, self, target, reduction)`:
/// `-target * z / (1 + z) * g`, `z = exp(-target * self)`.
pub(crate) fn soft_margin_loss_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, t, dt) = operands(cx, a, "soft_margin_loss_backward")?;
    let g = grad_scaled(cx, a, x.shape(), x.dtype())?;
    let p = cx.mul(&x, &t)?;
    let p = cx.neg(&p)?;
    let z = cx.exp(&p)?;
    let z1 = add_s(cx, &z, 1.0)?;
    let q = cx.div(&z, &z1)?;
    let r = cx.mul(&t, &q)?;
    let r = cx.neg(&r)?;
    let r = cx.mul(&r, &g)?;
    Ok(vec![Out::Tensor(cast(cx, &r, dt)?)])
}

/// `mse_loss_backward(grad_output, self, target, reduction)`: `2 (self - target) g`.
pub(crate) fn mse_loss_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, t, dt) = operands(cx, a, "mse_backward_cpu")?;
    let g = grad_scaled(cx, a, x.shape(), x.dtype())?;
    let d = cx.sub(&x, &t)?;
    let d = mul_s(cx, &d, 2.0)?;
    let r = cx.mul(&d, &g)?;
    Ok(vec![Out::Tensor(cast(cx, &r, dt)?)])
}

/// `binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=Mean)`:
/// `(self - target) / max((1 - self) self, 1e-12) * g (* weight)`.
pub(crate) fn binary_cross_entropy_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, t, dt) = operands(cx, a, "binary_cross_entropy_backward")?;
    let g = grad_scaled(cx, a, x.shape(), x.dtype())?;
    let omx = splat(cx, 1.0, x.dtype(), x.shape())?;
    let omx = cx.sub(&omx, &x)?;
    let den = cx.mul(&omx, &x)?;
    let eps = splat(cx, 1e-12, x.dtype(), x.shape())?;
    let den = cx.max(&den, &eps)?;
    let num = cx.sub(&x, &t)?;
    let r = cx.div(&num, &den)?;
    let mut r = cx.mul(&r, &g)?;
    if let Some(w) = a.opt_tensor("weight")? {
        let wc = cast(cx, &w, x.dtype())?;
        let wb = cx.broadcast_to(&wc, x.shape()).map_err(|_| {
            LowerError::invalid(format!(
                "weight of size {} does not broadcast to the input",
                shape_str(w.shape())
            ))
        })?;
        r = cx.mul(&r, &wb)?;
    }
    Ok(vec![Out::Tensor(cast(cx, &r, dt)?)])
}

/// `binary_cross_entropy_with_logits(self, target, weight=None, pos_weight=None,
/// reduction=Mean)`: `(1 - t) x - log_sigmoid(x) * (1 + (pos_weight - 1) t)`, times weight.
pub(crate) fn bce_with_logits(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, t, dt) = operands(cx, a, "binary_cross_entropy_with_logits")?;
    let ct = x.dtype();
    let shape = x.shape().to_vec();
    // log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|))
    let zero = splat(cx, 0.0, ct, &shape)?;
    let mn = cx.min(&x, &zero)?;
    let ax = cx.unary(UnaryOp::Abs, &x)?;
    let nax = cx.neg(&ax)?;
    let e = cx.exp(&nax)?;
    let l1 = cx.unary(UnaryOp::LogPlusOne, &e)?;
    let mut ls = cx.sub(&mn, &l1)?;
    let bcast_to = |cx: &mut Lower, v: &Value, name: &str| -> LowerResult<Value> {
        let vc = cast(cx, v, ct)?;
        cx.broadcast_to(&vc, &shape).map_err(|_| {
            LowerError::invalid(format!(
                "{name} of size {} does not broadcast to the input",
                shape_str(v.shape())
            ))
        })
    };
    if let Some(pw) = a.opt_tensor("pos_weight")? {
        let pw = bcast_to(cx, &pw, "pos_weight")?;
        let pm = add_s(cx, &pw, -1.0)?;
        let lw = cx.mul(&pm, &t)?;
        let lw = add_s(cx, &lw, 1.0)?;
        ls = cx.mul(&ls, &lw)?;
    }
    let one = splat(cx, 1.0, ct, &shape)?;
    let omt = cx.sub(&one, &t)?;
    let p = cx.mul(&omt, &x)?;
    let mut l = cx.sub(&p, &ls)?;
    if let Some(w) = a.opt_tensor("weight")? {
        let w = bcast_to(cx, &w, "weight")?;
        l = cx.mul(&l, &w)?;
    }
    reduced(cx, a, &l, dt)
}

/// `kl_div(self, target, reduction=Mean, log_target=False)`: `exp(t) (t - x)` for log
/// targets, else `xlogy(t, t) - t x`.
pub(crate) fn kl_div(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, t, dt) = operands(cx, a, "kl_div")?;
    let l = if a.bool("log_target")? {
        let e = cx.exp(&t)?;
        let d = cx.sub(&t, &x)?;
        cx.mul(&e, &d)?
    } else {
        let lt = cx.unary(UnaryOp::Log, &t)?;
        let tl = cx.mul(&t, &lt)?;
        let z = cmp_s(cx, Comparison::Eq, &t, 0.0)?;
        let zero = splat(cx, 0.0, t.dtype(), t.shape())?;
        let tl = sel(cx, &z, &zero, &tl)?;
        let tn = cx.compare(Comparison::Ne, &t, &t)?;
        let tl = sel(cx, &tn, &t, &tl)?;
        let tx = cx.mul(&t, &x)?;
        cx.sub(&tl, &tx)?
    };
    reduced(cx, a, &l, dt)
}

/// Tensor arguments `names` promoted to their float result dtype, in opmath and broadcast.
fn promoted(
    cx: &mut Lower,
    a: &Args,
    names: &[&str],
    op: &str,
) -> LowerResult<(Vec<Value>, DType)> {
    let ts = names
        .iter()
        .map(|n| a.tensor(n))
        .collect::<LowerResult<Vec<_>>>()?;
    let dt = result_type(&ts.iter().cloned().map(Operand::Tensor).collect::<Vec<_>>());
    dtype_check(dt.is_float(), dt, op)?;
    let ct = opmath(dt);
    let vs = ts
        .iter()
        .map(|t| cast(cx, t, ct))
        .collect::<LowerResult<Vec<_>>>()?;
    let shape = crate::aten::util::broadcast_all(&vs)?;
    let vs = vs
        .iter()
        .map(|v| Ok(cx.broadcast_to(v, &shape)?))
        .collect::<LowerResult<Vec<_>>>()?;
    Ok((vs, dt))
}

/// `margin_ranking_loss(input1, input2, target, margin=0, reduction=Mean)`:
/// `max(0, -target (input1 - input2) + margin)`.
pub(crate) fn margin_ranking_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (v, dt) = promoted(
        cx,
        a,
        &["input1", "input2", "target"],
        "margin_ranking_loss",
    )?;
    let d = cx.sub(&v[0], &v[1])?;
    let p = cx.mul(&v[2], &d)?;
    let p = cx.neg(&p)?;
    let p = add_s(cx, &p, a.float("margin")?)?;
    let z = splat(cx, 0.0, p.dtype(), p.shape())?;
    let l = cx.max(&p, &z)?;
    reduced(cx, a, &l, dt)
}

/// `hinge_embedding_loss(self, target, margin=1, reduction=Mean)`: `self` where target is
/// not -1, plus `max(0, margin - self)` where target is not 1.
pub(crate) fn hinge_embedding_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (v, dt) = promoted(cx, a, &["self", "target"], "hinge_embedding_loss")?;
    let (x, t) = (&v[0], &v[1]);
    let z = splat(cx, 0.0, x.dtype(), x.shape())?;
    let mx = cx.neg(x)?;
    let mx = add_s(cx, &mx, a.float("margin")?)?;
    let mx = cx.max(&mx, &z)?;
    let not_one = cmp_s(cx, Comparison::Ne, t, 1.0)?;
    let om = sel(cx, &not_one, &mx, &z)?;
    let not_neg = cmp_s(cx, Comparison::Ne, t, -1.0)?;
    let os = sel(cx, &not_neg, x, &z)?;
    let l = cx.add(&om, &os)?;
    reduced(cx, a, &l, dt)
}

/// `poisson_nll_loss(input, target, log_input, full, eps, reduction)`: `exp(x) - t x` for log
/// inputs, else `x - t log(x + eps)`; with `full`, Stirling's term where `t > 1`.
pub(crate) fn poisson_nll_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (v, dt) = promoted(cx, a, &["input", "target"], "poisson_nll_loss")?;
    let (x, t) = (&v[0], &v[1]);
    let mut l = if a.bool("log_input")? {
        let e = cx.exp(x)?;
        let tx = cx.mul(t, x)?;
        cx.sub(&e, &tx)?
    } else {
        let xe = add_s(cx, x, a.float("eps")?)?;
        let lg = cx.unary(UnaryOp::Log, &xe)?;
        let tl = cx.mul(t, &lg)?;
        cx.sub(x, &tl)?
    };
    if a.bool("full")? {
        // t log t - t + log(2 pi t) / 2, where t > 1.
        let lt = cx.unary(UnaryOp::Log, t)?;
        let s = cx.mul(t, &lt)?;
        let s = cx.sub(&s, t)?;
        let tp = mul_s(cx, t, 2.0 * std::f64::consts::PI)?;
        let lp = cx.unary(UnaryOp::Log, &tp)?;
        let lp = mul_s(cx, &lp, 0.5)?;
        let s = cx.add(&s, &lp)?;
        let big = cmp_s(cx, Comparison::Gt, t, 1.0)?;
        let z = splat(cx, 0.0, s.dtype(), s.shape())?;
        let s = sel(cx, &big, &s, &z)?;
        l = cx.add(&l, &s)?;
    }
    reduced(cx, a, &l, dt)
}

/// `cosine_embedding_loss(input1, input2, target, margin=0, reduction=Mean)`: with the
/// cosine over the last dim (eps 1e-12 on the squared norms), `1 - cos` where target is 1,
/// `max(0, cos - margin)` where it is -1.
pub(crate) fn cosine_embedding_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x1, x2, t) = (
        a.tensor("input1")?,
        a.tensor("input2")?,
        a.tensor("target")?,
    );
    if x1.shape() != x2.shape() || x1.rank() == 0 || x1.rank() > 2 || t.rank() + 1 != x1.rank() {
        return invalid(format!(
            "cosine_embedding_loss: expected 1-D or 2-D inputs of one shape and a target of one dim less, got {}, {} and {}",
            shape_str(x1.shape()),
            shape_str(x2.shape()),
            shape_str(t.shape())
        ));
    }
    let dt = result_type(&[
        Operand::Tensor(x1.clone()),
        Operand::Tensor(x2.clone()),
        Operand::Tensor(t.clone()),
    ]);
    dtype_check(dt.is_float(), dt, "cosine_embedding_loss")?;
    let ct = opmath(dt);
    let (p, q, tc) = (cast(cx, &x1, ct)?, cast(cx, &x2, ct)?, cast(cx, &t, ct)?);
    let d = x1.rank() - 1;
    let pq = cx.mul(&p, &q)?;
    let prod = sum(cx, &pq, &[d], false)?;
    let pp = cx.mul(&p, &p)?;
    let m1 = sum(cx, &pp, &[d], false)?;
    let m1 = add_s(cx, &m1, 1e-12)?;
    let qq = cx.mul(&q, &q)?;
    let m2 = sum(cx, &qq, &[d], false)?;
    let m2 = add_s(cx, &m2, 1e-12)?;
    let mm = cx.mul(&m1, &m2)?;
    let den = cx.unary(UnaryOp::Sqrt, &mm)?;
    let cos = cx.div(&prod, &den)?;
    let one = splat(cx, 1.0, ct, cos.shape())?;
    let z = splat(cx, 0.0, ct, cos.shape())?;
    let pos = cx.sub(&one, &cos)?;
    let neg = add_s(cx, &cos, -a.float("margin")?)?;
    let neg = cx.max(&neg, &z)?;
    let is_pos = cmp_s(cx, Comparison::Eq, &tc, 1.0)?;
    let is_neg = cmp_s(cx, Comparison::Eq, &tc, -1.0)?;
    let op = sel(cx, &is_pos, &pos, &z)?;
    let on = sel(cx, &is_neg, &neg, &z)?;
    let l = cx.add(&op, &on)?;
    reduced(cx, a, &l, dt)
}
