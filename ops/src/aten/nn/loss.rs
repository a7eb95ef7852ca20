//! Losses: `mse_loss`, `binary_cross_entropy`, `nll_loss_forward` and the composite
//! `cross_entropy_loss` (class indices with ignore_index and label smoothing, or class
//! probabilities). Reduction codes: 0 none, 1 mean, 2 sum.

use super::common::*;
use crate::args::Args;
use crate::check::CheckKind;
use crate::aten::promote::{result_type, Operand};
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, TensorType, UnaryOp, Value};
use tessera_lowering::DType;

/// Elementwise losses are rounded to the input dtype before the reduction, as PyTorch
/// materializes them; the reduction accumulates in opmath.
pub(super) fn reduce_elementwise(cx: &mut Lower, loss: &Value, dt: DType, r: i64) -> LowerResult<Value> {
    let l = cast(cx, loss, dt)?;
    if r == 0 {
        return Ok(l);
    }
    let lc = up(cx, &l)?;
    let v = apply_reduction(cx, &lc, r)?;
    cast(cx, &v, dt)
}

pub(crate) fn mse_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let t = a.tensor("target")?;
    let r = reduction(a)?;
    let dt = result_type(&[Operand::Tensor(x.clone()), Operand::Tensor(t.clone())]);
    dtype_check(dt.is_float(), dt, "mse_cpu")?;
    let ct = opmath(dt);
    let xc = cast(cx, &x, ct)?;
    let tc = cast(cx, &t, ct)?;
    let d = cx.broadcast_binary(BinaryOp::Subtract, &xc, &tc).map_err(|_| {
        crate::error::LowerError::invalid(format!(
            "The size of tensor a ({:?}) must match the size of tensor b ({:?}) at non-singleton dimensions",
            x.shape(),
            t.shape()
        ))
    })?;
    // PyTorch rounds the difference to the dtype before squaring it.
    let d = cast(cx, &d, dt)?;
    let d = cast(cx, &d, ct)?;
    let sq = cx.mul(&d, &d)?;
    Ok(vec![Out::Tensor(reduce_elementwise(cx, &sq, dt, r)?)])
}

pub(crate) fn binary_cross_entropy(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let t = a.tensor("target")?;
    let w = a.opt_tensor("weight")?;
    let r = reduction(a)?;
    let dt = x.dtype();
    dtype_check(dt.is_float(), dt, "binary_cross_entropy")?;
    if t.shape() != x.shape() {
        return invalid(format!(
            "Using a target size ({}) that is different to the input size ({}) is deprecated. Please ensure they have the same size.",
            shape_str(t.shape()),
            shape_str(x.shape())
        ));
    }
    if t.dtype() != dt || w.as_ref().is_some_and(|w| w.dtype() != dt) {
        return invalid(format!("expected scalar type {} for target and weight", torch_name(dt)));
    }
    let ct = opmath(dt);
    let xc = cast(cx, &x, ct)?;
    let tc = cast(cx, &t, ct)?;
    let floor = splat(cx, -100.0, ct, x.shape())?;
    let nx = cx.neg(&xc)?;
    let l1p = cx.unary(UnaryOp::LogPlusOne, &nx)?;
    let l1p = cx.max(&l1p, &floor)?;
    let lx = cx.unary(UnaryOp::Log, &xc)?;
    let lx = cx.max(&lx, &floor)?;
    // (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100)
    let tm1 = add_s(cx, &tc, -1.0)?;
    let p = cx.mul(&tm1, &l1p)?;
    let q = cx.mul(&tc, &lx)?;
    let mut loss = cx.sub(&p, &q)?;
    if let Some(w) = &w {
        let wc = cast(cx, w, ct)?;
        loss = bb(cx, BinaryOp::Multiply, &loss, &wc).map_err(|_| {
            crate::error::LowerError::invalid(format!(
                "weight of size {} does not broadcast to the input size {}",
                shape_str(w.shape()),
                shape_str(x.shape())
            ))
        })?;
        if loss.shape() != x.shape() {
            return invalid("weight must broadcast to the input's shape");
        }
    }
    Ok(vec![Out::Tensor(reduce_elementwise(cx, &loss, dt, r)?)])
}

/// `x [M, C]` (opmath), `t [M]` (integer): the per-row negative log-likelihood `[M]` (zero
/// where ignored) and per-row weights `[M]` (zero where ignored).
fn nll_rows(cx: &mut Lower, x: &Value, t: &Value, w: &Option<Value>, ignore: i64) -> LowerResult<(Value, Value)> {
    let (m, c) = (x.shape()[0], x.shape()[1]);
    cx.check_range(t, 0, c as i64, Some(ignore), CheckKind::Target)?;
    let ct = x.dtype();
    let ti = cast(cx, t, DType::I64)?;
    let cls = cx.iota(TensorType::new([m, c], DType::I64), 1)?;
    let tb = bcast(cx, &ti, &[m, c], &[0])?;
    let onehot = cx.compare(Comparison::Eq, &cls, &tb)?;
    let zero = splat(cx, 0.0, ct, &[m, c])?;
    let picked = cx.select(&onehot, x, &zero)?;
    let xt = sum(cx, &picked, &[1], false)?;
    let ign = cx.full_int(TensorType::new([m], DType::I64), ignore as i128)?;
    let keep = cx.compare(Comparison::Ne, &ti, &ign)?;
    let wt = match w {
        Some(w) => {
            let wc = cast(cx, w, ct)?;
            let wb = bcast(cx, &wc, &[m, c], &[1])?;
            let pw = cx.select(&onehot, &wb, &zero)?;
            sum(cx, &pw, &[1], false)?
        }
        None => splat(cx, 1.0, ct, &[m])?,
    };
    let z = splat(cx, 0.0, ct, &[m])?;
    let wt = cx.select(&keep, &wt, &z)?;
    let l = cx.mul(&xt, &wt)?;
    let l = cx.neg(&l)?;
    Ok((l, wt))
}

fn check_weight(w: &Option<Value>, c: usize, dt: DType) -> LowerResult<()> {
    if let Some(w) = w {
        if w.shape().iter().product::<usize>() != c {
            return invalid(format!(
                "weight tensor should be defined either for all {c} classes or no classes but got weight tensor of shape: {}",
                shape_str(w.shape())
            ));
        }
        if w.dtype() != dt {
            return invalid(format!(
                "expected scalar type {} but found {}",
                torch_name(dt),
                torch_name(w.dtype())
            ));
        }
    }
    Ok(())
}

/// nll_loss's (forward and backward) checks of `self` [C] or [N, C] and `target`.
fn check_nll_args(x: &Value, t: &Value, frame: &str) -> LowerResult<()> {
    float_only(x, frame)?;
    if x.rank() < 1 || x.rank() > 2 {
        return invalid("input tensor should be 1D or 2D");
    }
    if t.rank() > 1 {
        return invalid("0D or 1D target tensor expected, multi-target not supported");
    }
    check_target(t, false)
}

/// Class-index targets are int64 or uint8 (int64 only for K-dimensional inputs).
fn check_target(t: &Value, kdim: bool) -> LowerResult<()> {
    let d = t.dtype();
    if kdim && d == DType::U8 {
        return invalid("expected scalar type Long but found Byte");
    }
    if !matches!(d, DType::I64 | DType::U8) {
        return invalid(format!(
            "expected target dtype to be Long or Byte, but got {}",
            torch_name(d)
        ));
    }
    Ok(())
}

pub(crate) fn nll_loss_forward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let t = a.tensor("target")?;
    let w = a.opt_tensor("weight")?;
    let r = reduction(a)?;
    let ignore = a.int("ignore_index")?;
    let dt = x.dtype();
    check_nll_args(&x, &t, "nll_loss_forward_out_frame")?;
    let no_batch = x.rank() == 1;
    if no_batch && t.rank() == 1 && t.shape()[0] != 1 {
        return invalid(format!(
            "For 1D input, 1D target must have size 1, but got target size: {}",
            t.shape()[0]
        ));
    }
    if x.rank() == 2 && t.rank() == 0 {
        return invalid("Dimension specified as 0 but tensor has no dimensions");
    }
    if !no_batch && x.shape()[0] != t.shape()[0] {
        return invalid(format!(
            "Expected input batch_size ({}) to match target batch_size ({}).",
            x.shape()[0],
            t.shape().first().copied().unwrap_or(0)
        ));
    }
    let c = *x.shape().last().expect("rank >= 1");
    check_weight(&w, c, dt)?;
    let ct = opmath(dt);
    let x2 = if no_batch { vec![1, c] } else { x.shape().to_vec() };
    let m = x2[0];
    let xc = up(cx, &x)?;
    let xc = cx.reshape(&xc, &x2)?;
    let tc = cx.reshape(&t, &[m])?;
    let w1 = match &w {
        Some(w) => Some(cx.reshape(w, &[c])?),
        None => None,
    };
    let (l, wt) = nll_rows(cx, &xc, &tc, &w1, ignore)?;
    let (out, tw) = match r {
        // A 1-D input reports its target's weight even unreduced; a batch reports 0.
        0 if no_batch => (cx.reshape(&l, &[])?, cx.reshape(&wt, &[])?),
        0 => (l, splat(cx, 0.0, ct, &[])?),
        _ => {
            let s = sum(cx, &l, &[0], false)?;
            let tw = sum(cx, &wt, &[0], false)?;
            if r == 1 {
                (cx.div(&s, &tw)?, tw)
            } else {
                (s, tw)
            }
        }
    };
    Ok(vec![Out::Tensor(cast(cx, &out, dt)?), Out::Tensor(cast(cx, &tw, dt)?)])
}

/// `log_softmax` over `dim`.
fn log_softmax(cx: &mut Lower, x: &Value, dim: usize) -> LowerResult<Value> {
    let m = cx.reduce_max(x, &[dim], true)?;
    // A row of -inf would give NaN from (-inf) - (-inf); PyTorch gives NaN as well.
    let s = bb(cx, BinaryOp::Subtract, x, &m)?;
    let e = cx.exp(&s)?;
    let se = sum(cx, &e, &[dim], true)?;
    let lse = cx.unary(UnaryOp::Log, &se)?;
    bb(cx, BinaryOp::Subtract, &s, &lse)
}

pub(crate) fn cross_entropy_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let t = a.tensor("target")?;
    let w = a.opt_tensor("weight")?;
    let r = reduction(a)?;
    let ignore = a.int("ignore_index")?;
    let ls = a.float("label_smoothing")?;
    let dt = x.dtype();
    float_only(&x, "log_softmax")?;
    if !(0.0..=1.0).contains(&ls) {
        return invalid(format!("label_smoothing must be between 0.0 and 1.0. Got: {ls}"));
    }
    if x.rank() == 0 {
        return invalid("cross_entropy: input must have at least one dimension");
    }
    let cd = if x.rank() >= 2 { 1 } else { 0 };
    let c = x.shape()[cd];
    check_weight(&w, c, dt)?;
    let ct = opmath(dt);
    let xc = up(cx, &x)?;
    let logp = log_softmax(cx, &xc, cd)?;
    let shape = logp.shape().to_vec();
    let wv = match &w {
        Some(w) => {
            let wc = cast(cx, w, ct)?;
            let wc = cx.reshape(&wc, &[c])?;
            Some(wc)
        }
        None => None,
    };
    if t.dtype().is_float() {
        // Class probabilities.
        if t.shape() != x.shape() {
            return invalid(format!(
                "Expected target size {}, got {}",
                shape_str(x.shape()),
                shape_str(t.shape())
            ));
        }
        if t.dtype() != dt {
            return invalid(format!(
                "expected scalar type {} but found {}",
                torch_name(dt),
                torch_name(t.dtype())
            ));
        }
        let mut tc = cast(cx, &t, ct)?;
        if ls > 0.0 {
            tc = mul_s(cx, &tc, 1.0 - ls)?;
            tc = add_s(cx, &tc, ls / c as f64)?;
        }
        let mut p = cx.mul(&logp, &tc)?;
        if let Some(wv) = &wv {
            let wb = bcast_vec(cx, wv, &shape, cd)?;
            p = cx.mul(&p, &wb)?;
        }
        let out = match r {
            0 => {
                let s = sum(cx, &p, &[cd], false)?;
                cx.neg(&s)?
            }
            _ => {
                let dims: Vec<usize> = (0..p.rank()).collect();
                let s = sum(cx, &p, &dims, false)?;
                let s = cx.neg(&s)?;
                if r == 1 {
                    let n = x.shape().iter().product::<usize>() / c.max(1);
                    let nv = splat(cx, if x.shape().contains(&0) { f64::NAN } else { n as f64 }, ct, &[])?;
                    cx.div(&s, &nv)?
                } else {
                    s
                }
            }
        };
        return Ok(vec![Out::Tensor(cast(cx, &out, dt)?)]);
    }
    // Class indices.
    check_target(&t, x.rank() > 2)?;
    let mut want = x.shape().to_vec();
    want.remove(cd);
    if t.shape() != want.as_slice() {
        return invalid(format!(
            "Expected target size {}, got {}",
            shape_str(&want),
            shape_str(t.shape())
        ));
    }
    // logp with the class dim last, flattened to [M, C].
    let mut perm: Vec<usize> = (0..x.rank()).filter(|&d| d != cd).collect();
    perm.push(cd);
    let lt = cx.transpose(&logp, &perm)?;
    let m: usize = want.iter().product();
    let l2 = cx.reshape(&lt, &[m, c])?;
    let t1 = cx.reshape(&t, &[m])?;
    let (l, wt) = nll_rows(cx, &l2, &t1, &wv, ignore)?;
    let nll = match r {
        0 => cx.reshape(&l, &want)?,
        _ => {
            let s = sum(cx, &l, &[0], false)?;
            if r == 1 {
                let tw = sum(cx, &wt, &[0], false)?;
                cx.div(&s, &tw)?
            } else {
                s
            }
        }
    };
    if ls <= 0.0 {
        return Ok(vec![Out::Tensor(cast(cx, &nll, dt)?)]);
    }
    // Label smoothing: (1 - ls) * nll + ls / C * smooth, smooth = -sum_c(logp * w), masked.
    let p = match &wv {
        Some(wv) => {
            let wb = bcast(cx, wv, &[m, c], &[1])?;
            cx.mul(&l2, &wb)?
        }
        None => l2.clone(),
    };
    let sm = sum(cx, &p, &[1], false)?;
    let sm = cx.neg(&sm)?;
    let ti = cast(cx, &t1, DType::I64)?;
    let ign = cx.full_int(TensorType::new([m], DType::I64), ignore as i128)?;
    let keep = cx.compare(Comparison::Ne, &ti, &ign)?;
    let z = splat(cx, 0.0, ct, &[m])?;
    let sm = cx.select(&keep, &sm, &z)?;
    let ret = match r {
        0 => cx.reshape(&sm, &want)?,
        _ => {
            let s = sum(cx, &sm, &[0], false)?;
            if r == 1 {
                let denom = match &wv {
                    Some(_) => sum(cx, &wt, &[0], false)?,
                    None => {
                        let one = splat(cx, 1.0, ct, &[m])?;
                        let k = cx.select(&keep, &one, &z)?;
                        sum(cx, &k, &[0], false)?
                    }
                };
                cx.div(&s, &denom)?
            } else {
                s
            }
        }
    };
    let a1 = mul_s(cx, &nll, 1.0 - ls)?;
    let a2 = mul_s(cx, &ret, ls / c as f64)?;
    let out = cx.add(&a1, &a2)?;
    Ok(vec![Out::Tensor(cast(cx, &out, dt)?)])
}

/// `nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index,
/// total_weight)`: `-w[t] * g` at each row's target class (`g / total_weight` for mean),
/// zero elsewhere and on ignored rows.
pub(crate) fn nll_loss_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_output")?;
    let x = a.tensor("self")?;
    let t = a.tensor("target")?;
    let w = a.opt_tensor("weight")?;
    let r = reduction(a)?;
    let ignore = a.int("ignore_index")?;
    let tw = a.tensor("total_weight")?;
    let dt = x.dtype();
    check_nll_args(&x, &t, "nll_loss_backward_out_frame")?;
    let no_batch = x.rank() == 1;
    let c = *x.shape().last().expect("rank >= 1");
    let m = if no_batch { 1 } else { x.shape()[0] };
    if t.shape().iter().product::<usize>() != m {
        return invalid(format!(
            "Expected input batch_size ({m}) to match target batch_size ({}).",
            t.shape().first().copied().unwrap_or(1)
        ));
    }
    check_weight(&w, c, dt)?;
    let ct = opmath(dt);
    let xc = splat(cx, 0.0, ct, &[m, c])?;
    let tc = cx.reshape(&t, &[m])?;
    let w1 = match &w {
        Some(w) => Some(cx.reshape(w, &[c])?),
        None => None,
    };
    // The per-row weights (zero where ignored), from the same one-hot selection as the forward.
    let (_, wt) = nll_rows(cx, &xc, &tc, &w1, ignore)?;
    let gc = cast(cx, &g, ct)?;
    let gr = if r == 0 && !no_batch {
        if g.shape() != [m] {
            return invalid(format!("Expected a tensor of dimension 1 and tensor.size[0] == {m} but got: dimension {} and tensor.size[0] == {}", g.rank(), g.shape().first().copied().unwrap_or(0)));
        }
        gc
    } else {
        if g.ty().num_elements() != 1 {
            return invalid(format!("Expected a single element grad_output tensor, but got: {}", shape_str(g.shape())));
        }
        let g1 = cx.reshape(&gc, &[])?;
        let g1 = if r == 1 {
            let twc = cast(cx, &tw, ct)?;
            let twc = cx.reshape(&twc, &[])?;
            cx.div(&g1, &twc)?
        } else {
            g1
        };
        cx.broadcast_to(&g1, &[m])?
    };
    let rowg = cx.mul(&wt, &gr)?;
    let rowg = cx.neg(&rowg)?;
    let ti = cast(cx, &tc, DType::I64)?;
    let cls = cx.iota(TensorType::new([m, c], DType::I64), 1)?;
    let tb = bcast(cx, &ti, &[m, c], &[0])?;
    let onehot = cx.compare(Comparison::Eq, &cls, &tb)?;
    let rb = bcast(cx, &rowg, &[m, c], &[0])?;
    let zero = splat(cx, 0.0, ct, &[m, c])?;
    let gi = cx.select(&onehot, &rb, &zero)?;
    let gi = cx.reshape(&gi, x.shape())?;
    Ok(vec![Out::Tensor(cast(cx, &gi, dt)?)])
}

/// `self [N, C, H, W]` as rows `[N H W, C]` and `target [N, H, W]` as `[N H W]`: the
/// per-pixel losses of `nll_loss2d_*` as the 1-d ones.
fn nll2d_rows(cx: &mut Lower, a: &Args) -> LowerResult<(Value, Value, [usize; 4])> {
    let x = a.tensor("self")?;
    let t = a.tensor("target")?;
    if x.rank() != 4 {
        return invalid(format!("only batches of spatial inputs supported (4D tensors), but got input of size: {}", shape_str(x.shape())));
    }
    let [n, c, h, w] = [x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]];
    if t.shape() != [n, h, w] {
        return invalid(format!(
            "only batches of spatial targets supported (3D tensors) but got targets of size: {}",
            shape_str(t.shape())
        ));
    }
    let xt = cx.transpose(&x, &[0, 2, 3, 1])?;
    let rows = cx.reshape(&xt, &[n * h * w, c])?;
    let tr = cx.reshape(&t, &[n * h * w])?;
    Ok((rows, tr, [n, c, h, w]))
}

/// `nll_loss2d_forward(self, target, weight, reduction, ignore_index) -> (output,
/// total_weight)`: `nll_loss_forward` over the pixels.
pub(crate) fn nll_loss2d_forward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (rows, tr, [n, _, h, w]) = nll2d_rows(cx, a)?;
    let set = vec![("self", crate::value::ArgValue::Tensor(rows)), ("target", crate::value::ArgValue::Tensor(tr))];
    let mut r = nll_loss_forward(cx, &crate::aten::util::rebind(a, "nll_loss_forward", set)?)?;
    if reduction(a)? == 0 {
        if let Some(Out::Tensor(l)) = r.first() {
            r[0] = Out::Tensor(cx.reshape(l, &[n, h, w])?);
        }
    }
    Ok(r)
}

/// `nll_loss2d_backward(grad_output, self, target, weight, reduction, ignore_index,
/// total_weight)`: `nll_loss_backward` over the pixels, back in `[N, C, H, W]`.
pub(crate) fn nll_loss2d_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (rows, tr, [n, c, h, w]) = nll2d_rows(cx, a)?;
    let mut g = a.tensor("grad_output")?;
    if reduction(a)? == 0 {
        if g.shape() != [n, h, w] {
            return invalid(format!("grad_output must have the target's shape [{n}, {h}, {w}], got {}", shape_str(g.shape())));
        }
        g = cx.reshape(&g, &[n * h * w])?;
    }
    use crate::value::ArgValue as V;
    let set = vec![("grad_output", V::Tensor(g)), ("self", V::Tensor(rows)), ("target", V::Tensor(tr))];
    let r = nll_loss_backward(cx, &crate::aten::util::rebind(a, "nll_loss_backward", set)?)?;
    let Some(Out::Tensor(gi)) = r.first() else {
        return invalid("nll_loss_backward gave no gradient");
    };
    let gi = cx.reshape(gi, &[n, h, w, c])?;
    Ok(vec![Out::Tensor(cx.transpose(&gi, &[0, 3, 1, 2])?)])
}
