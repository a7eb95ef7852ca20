//! Normalization: layer norm, group norm, RMS norm, and the layer/group norm backward ops
//! (batch norm is in `batch_norm.rs`).
//!
//! Statistics (`mean`/`rstd`) have PyTorch CPU's shapes and dtypes: the input's dtype, or f32
//! when an f16/bf16 input comes with f32 parameters ("mixed type").

use super::common::*;
use crate::args::Args;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, UnaryOp, Value};
use tessera_lowering::DType;

/// The dtype of the statistics, after PyTorch's mixed-type check of the parameters.
pub(super) fn stats_dtype(x: DType, params: &[Option<&Value>]) -> LowerResult<DType> {
    let defined: Vec<&Value> = params.iter().flatten().copied().collect();
    let mixed = is_reduced_float(x) && defined.iter().any(|p| p.dtype() == DType::F32);
    for p in &defined {
        let ok = if mixed { p.dtype() == DType::F32 } else { p.dtype() == x };
        if !ok {
            return invalid("mixed dtype (CPU): all inputs must share same datatype.");
        }
    }
    Ok(if mixed { DType::F32 } else { x })
}

/// Mean and biased variance of `x` over `dims`, kept as size-1 dims.
pub(super) fn moments(cx: &mut Lower, x: &Value, dims: &[usize]) -> LowerResult<(Value, Value)> {
    let n: usize = dims.iter().map(|&d| x.shape()[d]).product();
    let s = sum(cx, x, dims, true)?;
    let nv = splat(cx, n as f64, x.dtype(), s.shape())?;
    let mean = cx.div(&s, &nv)?;
    let d = bb(cx, BinaryOp::Subtract, x, &mean)?;
    let d2 = cx.mul(&d, &d)?;
    let ss = sum(cx, &d2, dims, true)?;
    let var = cx.div(&ss, &nv)?;
    Ok((mean, var))
}

pub(super) fn rsqrt_eps(cx: &mut Lower, var: &Value, eps: f64) -> LowerResult<Value> {
    let v = add_s(cx, var, eps)?;
    Ok(cx.unary(UnaryOp::Rsqrt, &v)?)
}

pub(super) fn check_float(x: &Value, op: &str) -> LowerResult<()> {
    float_only(x, op)
}

pub(super) fn check_vec(v: &Option<Value>, c: usize, name: &str) -> LowerResult<()> {
    if let Some(v) = v {
        if v.rank() != 1 || v.shape()[0] != c {
            return invalid(format!(
                "{name} should contain {c} elements not {}",
                v.shape().iter().product::<usize>()
            ));
        }
    }
    Ok(())
}

/// Checks `normalized_shape` against the input and weight/bias; returns the first normalized dim.
fn ln_axis(x: &Value, ns: &[i64], w: &Option<Value>, b: &Option<Value>) -> LowerResult<usize> {
    if ns.is_empty() {
        return invalid("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got normalized_shape = []");
    }
    let r = x.rank();
    let ok = ns.len() <= r && x.shape()[r - ns.len()..].iter().zip(ns).all(|(&a, &b)| a as i64 == b);
    if !ok {
        return invalid(format!(
            "Given normalized_shape={ns:?}, expected input with shape [*, {}], but got input of size{}",
            ns.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "),
            shape_str(x.shape())
        ));
    }
    for (name, v) in [("weight", w), ("bias", b)] {
        if let Some(v) = v {
            if v.shape().len() != ns.len() || v.shape().iter().zip(ns).any(|(&a, &b)| a as i64 != b) {
                return invalid(format!(
                    "Expected {name} to be of same shape as normalized_shape, but got {name} of shape {} and normalized_shape = {ns:?}",
                    shape_str(v.shape())
                ));
            }
        }
    }
    Ok(r - ns.len())
}

/// `(out, mean, rstd)` of layer norm over the dims from `axis` on.
fn ln(cx: &mut Lower, x: &Value, axis: usize, w: &Option<Value>, b: &Option<Value>, eps: f64) -> LowerResult<Vec<Out>> {
    let sd = stats_dtype(x.dtype(), &[w.as_ref(), b.as_ref()])?;
    let xc = up(cx, x)?;
    let ct = xc.dtype();
    let shape = xc.shape().to_vec();
    let dims: Vec<usize> = (axis..x.rank()).collect();
    let (mean, var) = moments(cx, &xc, &dims)?;
    let rstd = rsqrt_eps(cx, &var, eps)?;
    // y = (x * rstd - mean * rstd) * w + b
    let mr = cx.mul(&mean, &rstd)?;
    let xr = bb(cx, BinaryOp::Multiply, &xc, &rstd)?;
    let mut y = bb(cx, BinaryOp::Subtract, &xr, &mr)?;
    let tail: Vec<usize> = (axis..x.rank()).collect();
    if let Some(w) = w {
        let wc = cast(cx, w, ct)?;
        let wb = bcast(cx, &wc, &shape, &tail)?;
        y = cx.mul(&y, &wb)?;
    }
    if let Some(b) = b {
        let bc = cast(cx, b, ct)?;
        let bv = bcast(cx, &bc, &shape, &tail)?;
        y = cx.add(&y, &bv)?;
    }
    let y = cast(cx, &y, x.dtype())?;
    Ok(vec![
        Out::Tensor(y),
        Out::Tensor(cast(cx, &mean, sd)?),
        Out::Tensor(cast(cx, &rstd, sd)?),
    ])
}

pub(crate) fn native_layer_norm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let ns = a.int_list("normalized_shape")?;
    let (w, b) = (a.opt_tensor("weight")?, a.opt_tensor("bias")?);
    check_float(&x, "native_layer_norm")?;
    let axis = ln_axis(&x, &ns, &w, &b)?;
    ln(cx, &x, axis, &w, &b, a.float("eps")?)
}

pub(crate) fn layer_norm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let mut r = native_layer_norm(cx, a)?;
    r.truncate(1);
    Ok(r)
}

pub(crate) fn native_layer_norm_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_out")?;
    let x = a.tensor("input")?;
    let ns = a.int_list("normalized_shape")?;
    let mean = a.tensor("mean")?;
    let rstd = a.tensor("rstd")?;
    let (w, b) = (a.opt_tensor("weight")?, a.opt_tensor("bias")?);
    let mask = a.bool_list("output_mask")?;
    check_float(&x, "native_layer_norm_backward")?;
    let axis = ln_axis(&x, &ns, &w, &b)?;
    if g.shape() != x.shape() {
        return invalid(format!(
            "native_layer_norm_backward: grad_out {} must match input {}",
            shape_str(g.shape()),
            shape_str(x.shape())
        ));
    }
    let mut sshape = x.shape()[..axis].to_vec();
    sshape.extend(std::iter::repeat_n(1, x.rank() - axis));
    let m: usize = x.shape()[..axis].iter().product();
    if mean.shape().iter().product::<usize>() != m || rstd.shape().iter().product::<usize>() != m {
        return invalid("native_layer_norm_backward: mean and rstd must have one element per normalized row");
    }
    let xc = up(cx, &x)?;
    let ct = xc.dtype();
    let shape = xc.shape().to_vec();
    let gc = cast(cx, &g, ct)?;
    let mc = cast(cx, &mean, ct)?;
    let mc = cx.reshape(&mc, &sshape)?;
    let rc = cast(cx, &rstd, ct)?;
    let rc = cx.reshape(&rc, &sshape)?;
    let tail: Vec<usize> = (axis..x.rank()).collect();
    let lead: Vec<usize> = (0..axis).collect();
    let xm = bb(cx, BinaryOp::Subtract, &xc, &mc)?;
    let xhat = bb(cx, BinaryOp::Multiply, &xm, &rc)?;
    let mut outs = Vec::new();
    if mask.first().copied().unwrap_or(false) {
        let gw = match &w {
            Some(w) => {
                let wc = cast(cx, w, ct)?;
                let wb = bcast(cx, &wc, &shape, &tail)?;
                cx.mul(&gc, &wb)?
            }
            None => gc.clone(),
        };
        let n: usize = x.shape()[axis..].iter().product();
        let s1 = sum(cx, &gw, &tail, true)?;
        let s1 = mul_s(cx, &s1, 1.0 / n as f64)?;
        let gx = cx.mul(&gw, &xhat)?;
        let s2 = sum(cx, &gx, &tail, true)?;
        let s2 = mul_s(cx, &s2, 1.0 / n as f64)?;
        let t = bb(cx, BinaryOp::Subtract, &gw, &s1)?;
        let u = bb(cx, BinaryOp::Multiply, &xhat, &s2)?;
        let t = cx.sub(&t, &u)?;
        let dx = bb(cx, BinaryOp::Multiply, &t, &rc)?;
        outs.push(Out::Tensor(cast(cx, &dx, x.dtype())?));
    } else {
        outs.push(Out::None);
    }
    match (&w, mask.get(1).copied().unwrap_or(false)) {
        (Some(w), true) => {
            let gx = cx.mul(&gc, &xhat)?;
            let dw = sum(cx, &gx, &lead, false)?;
            outs.push(Out::Tensor(cast(cx, &dw, w.dtype())?));
        }
        _ => outs.push(Out::None),
    }
    match (&b, mask.get(2).copied().unwrap_or(false)) {
        (Some(b), true) => {
            let db = sum(cx, &gc, &lead, false)?;
            outs.push(Out::Tensor(cast(cx, &db, b.dtype())?));
        }
        _ => outs.push(Out::None),
    }
    Ok(outs)
}

/// Group norm of `x [N, C, *]`: `(out, mean [N, G], rstd [N, G])`.
fn gn(cx: &mut Lower, x: &Value, w: &Option<Value>, b: &Option<Value>, groups: i64, eps: f64) -> LowerResult<Vec<Out>> {
    check_float(x, "native_group_norm")?;
    if x.rank() < 2 {
        return invalid(format!(
            "group_norm: expected an input with at least 2 dims, got {}",
            shape_str(x.shape())
        ));
    }
    let (n, c) = (x.shape()[0], x.shape()[1]);
    if groups <= 0 || c as i64 % groups != 0 {
        return invalid(format!(
            "Expected number of channels in input to be divisible by num_groups, but got input of shape {} and num_groups={groups}",
            shape_str(x.shape())
        ));
    }
    let gr = groups as usize;
    // torch's native_group_norm refuses empty groups (its kernel would divide by zero).
    let hw: usize = x.shape()[2..].iter().product();
    if c == 0 {
        return invalid("Expected number of channels to be greater than 0, got 0");
    }
    if hw == 0 {
        return invalid("Expected HxW to be greater than 0, got 0");
    }
    check_vec(w, c, "weight")?;
    check_vec(b, c, "bias")?;
    let sd = stats_dtype(x.dtype(), &[w.as_ref(), b.as_ref()])?;
    let hw: usize = x.shape()[2..].iter().product();
    let d = c / gr;
    let xc = up(cx, x)?;
    let ct = xc.dtype();
    let x4 = cx.reshape(&xc, &[n, gr, d, hw])?;
    let (mean, var) = moments(cx, &x4, &[2, 3])?;
    let rstd = rsqrt_eps(cx, &var, eps)?;
    // scale[n, g, c] = rstd * w[c]; bias = b[c] - scale * mean; y = x * scale + bias.
    let s4 = [n, gr, d, 1];
    let rs = bcast(cx, &rstd, &s4, &[0, 1, 2, 3])?;
    let scale = match w {
        Some(w) => {
            let wc = cast(cx, w, ct)?;
            let wc = cx.reshape(&wc, &[gr, d])?;
            let wb = bcast(cx, &wc, &s4, &[1, 2])?;
            cx.mul(&rs, &wb)?
        }
        None => rs,
    };
    let mb = bcast(cx, &mean, &s4, &[0, 1, 2, 3])?;
    let sm = cx.mul(&scale, &mb)?;
    let bias = match b {
        Some(b) => {
            let bc = cast(cx, b, ct)?;
            let bc = cx.reshape(&bc, &[gr, d])?;
            let bv = bcast(cx, &bc, &s4, &[1, 2])?;
            cx.sub(&bv, &sm)?
        }
        None => cx.neg(&sm)?,
    };
    let y = bb(cx, BinaryOp::Multiply, &x4, &scale)?;
    let y = bb(cx, BinaryOp::Add, &y, &bias)?;
    let y = cx.reshape(&y, x.shape())?;
    let y = cast(cx, &y, x.dtype())?;
    let mean = cx.reshape(&mean, &[n, gr])?;
    let rstd = cx.reshape(&rstd, &[n, gr])?;
    Ok(vec![
        Out::Tensor(y),
        Out::Tensor(cast(cx, &mean, sd)?),
        Out::Tensor(cast(cx, &rstd, sd)?),
    ])
}

pub(crate) fn native_group_norm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let (n, c, hw) = (a.int("N")?, a.int("C")?, a.int("HxW")?);
    let total = x.shape().iter().product::<usize>() as i64;
    if x.rank() < 2 || x.shape()[0] as i64 != n || x.shape()[1] as i64 != c || n * c * hw != total {
        return invalid(format!(
            "Expected input of size N x C x HxW = {n} x {c} x {hw}, but got input of size {}",
            shape_str(x.shape())
        ));
    }
    gn(
        cx,
        &x,
        &a.opt_tensor("weight")?,
        &a.opt_tensor("bias")?,
        a.int("group")?,
        a.float("eps")?,
    )
}

pub(crate) fn group_norm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let mut r = gn(
        cx,
        &x,
        &a.opt_tensor("weight")?,
        &a.opt_tensor("bias")?,
        a.int("num_groups")?,
        a.float("eps")?,
    )?;
    r.truncate(1);
    Ok(r)
}

pub(crate) fn native_group_norm_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_out")?;
    let x = a.tensor("input")?;
    let mean = a.tensor("mean")?;
    let rstd = a.tensor("rstd")?;
    let w = a.opt_tensor("weight")?;
    let (n, c, hw) = (a.int("N")?, a.int("C")?, a.int("HxW")?);
    let groups = a.int("group")?;
    let mask = a.bool_list("output_mask")?;
    check_float(&x, "native_group_norm_backward")?;
    let total = x.shape().iter().product::<usize>() as i64;
    if x.rank() < 2 || n < 0 || c < 0 || hw < 0 || n * c * hw != total || g.shape() != x.shape() {
        return invalid(format!(
            "native_group_norm_backward: expected input and grad_out of N x C x HxW = {n} x {c} x {hw}, got {} and {}",
            shape_str(x.shape()),
            shape_str(g.shape())
        ));
    }
    if groups <= 0 || c % groups != 0 {
        return invalid(format!("Expected number of channels in input to be divisible by num_groups, but got input of shape {} and num_groups={groups}", shape_str(x.shape())));
    }
    let (n, c, hw, gr) = (n as usize, c as usize, hw as usize, groups as usize);
    check_vec(&w, c, "weight")?;
    if mean.shape().iter().product::<usize>() != n * gr || rstd.shape().iter().product::<usize>() != n * gr {
        return invalid("native_group_norm_backward: mean and rstd must have N x group elements");
    }
    let d = c / gr;
    let xc = up(cx, &x)?;
    let ct = xc.dtype();
    let s4 = [n, gr, d, hw];
    let x4 = cx.reshape(&xc, &s4)?;
    let gc = cast(cx, &g, ct)?;
    let g4 = cx.reshape(&gc, &s4)?;
    let mc = cast(cx, &mean, ct)?;
    let mc = cx.reshape(&mc, &[n, gr])?;
    let mb = bcast(cx, &mc, &s4, &[0, 1])?;
    let rc = cast(cx, &rstd, ct)?;
    let rc = cx.reshape(&rc, &[n, gr])?;
    let rb = bcast(cx, &rc, &s4, &[0, 1])?;
    let xm = cx.sub(&x4, &mb)?;
    let xhat = cx.mul(&xm, &rb)?;
    let mut outs = Vec::new();
    if mask.first().copied().unwrap_or(false) {
        let gw = match &w {
            Some(w) => {
                let wc = cast(cx, w, ct)?;
                let wc = cx.reshape(&wc, &[gr, d])?;
                let wb = bcast(cx, &wc, &s4, &[1, 2])?;
                cx.mul(&g4, &wb)?
            }
            None => g4.clone(),
        };
        let cnt = (d * hw) as f64;
        let s1 = sum(cx, &gw, &[2, 3], true)?;
        let s1 = mul_s(cx, &s1, 1.0 / cnt)?;
        let gx = cx.mul(&gw, &xhat)?;
        let s2 = sum(cx, &gx, &[2, 3], true)?;
        let s2 = mul_s(cx, &s2, 1.0 / cnt)?;
        let t = bb(cx, BinaryOp::Subtract, &gw, &s1)?;
        let u = bb(cx, BinaryOp::Multiply, &xhat, &s2)?;
        let t = cx.sub(&t, &u)?;
        let dx = cx.mul(&t, &rb)?;
        let dx = cx.reshape(&dx, x.shape())?;
        outs.push(Out::Tensor(cast(cx, &dx, x.dtype())?));
    } else {
        outs.push(Out::None);
    }
    let pd = w.as_ref().map_or(x.dtype(), |w| w.dtype());
    if mask.get(1).copied().unwrap_or(false) {
        let gx = cx.mul(&g4, &xhat)?;
        let dw = sum(cx, &gx, &[0, 3], false)?;
        let dw = cx.reshape(&dw, &[c])?;
        outs.push(Out::Tensor(cast(cx, &dw, pd)?));
    } else {
        outs.push(Out::None);
    }
    if mask.get(2).copied().unwrap_or(false) {
        let db = sum(cx, &g4, &[0, 3], false)?;
        let db = cx.reshape(&db, &[c])?;
        outs.push(Out::Tensor(cast(cx, &db, pd)?));
    } else {
        outs.push(Out::None);
    }
    Ok(outs)
}

pub(crate) fn rms_norm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let ns = a.int_list("normalized_shape")?;
    let w = a.opt_tensor("weight")?;
    dtype_check(x.dtype().is_float(), x.dtype(), "rms_norm")?;
    let axis = ln_axis(&x, &ns, &w, &None)?;
    let xc = up(cx, &x)?;
    let ct = xc.dtype();
    let eps = match a.opt_float("eps")? {
        Some(e) => e,
        None if ct == DType::F64 => f64::EPSILON,
        None => f32::EPSILON as f64,
    };
    let dims: Vec<usize> = (axis..x.rank()).collect();
    let n: usize = x.shape()[axis..].iter().product();
    let sq = cx.mul(&xc, &xc)?;
    let ms = sum(cx, &sq, &dims, true)?;
    let nv = splat(cx, n as f64, ct, ms.shape())?;
    let ms = cx.div(&ms, &nv)?;
    let r = rsqrt_eps(cx, &ms, eps)?;
    let mut y = bb(cx, BinaryOp::Multiply, &xc, &r)?;
    if let Some(w) = &w {
        let wc = cast(cx, w, ct)?;
        let shape = y.shape().to_vec();
        let wb = bcast(cx, &wc, &shape, &dims)?;
        y = cx.mul(&y, &wb)?;
    }
    Ok(vec![Out::Tensor(cast(cx, &y, x.dtype())?)])
}
