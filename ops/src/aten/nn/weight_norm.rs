//! Weight normalization: `_weight_norm_interface` (`w = g * v / |v|`, the norm over every dim
//! but `dim`), its backward, and the composite `_weight_norm`. The norms are kept in opmath
//! (f32 for f16/bf16), as PyTorch's CPU kernel returns them.

use super::common::*;
use crate::args::Args;
use crate::aten::util::wrap_dim;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, UnaryOp, Value};

/// The dims reduced for `dim` of a rank-`r` tensor, and the kept shape of the norms.
fn norm_dims(shape: &[usize], dim: usize) -> (Vec<usize>, Vec<usize>) {
    let dims: Vec<usize> = (0..shape.len()).filter(|&d| d != dim).collect();
    let kept = shape
        .iter()
        .enumerate()
        .map(|(d, &s)| if d == dim { s } else { 1 })
        .collect();
    (dims, kept)
}

fn checked_dim(a: &Args, v: &Value) -> LowerResult<usize> {
    let r = v.rank();
    let d = a.int("dim")?;
    // PyTorch passes -1 for "every dim" (the norm of the whole tensor) through `_weight_norm`.
    if d == -1 && r > 0 {
        return Ok(r - 1);
    }
    wrap_dim(d, r)
}

/// `(w, norms)` of `v` and `g` in opmath.
fn weight_norm(cx: &mut Lower, v: &Value, g: &Value, dim: usize) -> LowerResult<(Value, Value)> {
    let (dims, kept) = norm_dims(v.shape(), dim);
    let vc = up(cx, v)?;
    let gc = cast(cx, g, vc.dtype())?;
    let sq = cx.mul(&vc, &vc)?;
    let s = sum(cx, &sq, &dims, true)?;
    let n = cx.unary(UnaryOp::Sqrt, &s)?;
    let n = cx.reshape(&n, &kept)?;
    let gb = cx.broadcast_to(&gc, &kept).map_err(|_| {
        crate::error::LowerError::invalid(format!(
            "_weight_norm_interface: g of size {} must match the norms' size {}",
            shape_str(g.shape()),
            shape_str(&kept)
        ))
    })?;
    let scale = cx.div(&gb, &n)?;
    let w = bb(cx, BinaryOp::Multiply, &vc, &scale)?;
    Ok((w, n))
}

/// `_weight_norm_interface(v, g, dim=0) -> (w, norms)`.
pub(crate) fn weight_norm_interface(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let v = a.tensor("v")?;
    let g = a.tensor("g")?;
    float_only(&v, "weight_norm_fwd_first_dim_kernel")?;
    let dim = checked_dim(a, &v)?;
    let (w, n) = weight_norm(cx, &v, &g, dim)?;
    Ok(vec![Out::Tensor(cast(cx, &w, v.dtype())?), Out::Tensor(n)])
}

/// `_weight_norm(v, g, dim=0)`: `w`.
pub(crate) fn weight_norm_op(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let mut r = weight_norm_interface(cx, a)?;
    r.truncate(1);
    Ok(r)
}

/// `_weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim) ->
/// (grad_v, grad_g)`: with `s = sum(grad_w * v)` over the normalized dims,
/// `grad_g = s / n` and `grad_v = g / n * (grad_w - v * s / n^2)`.
pub(crate) fn weight_norm_interface_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let gw = a.tensor("grad_w")?;
    let v = a.tensor("saved_v")?;
    let g = a.tensor("saved_g")?;
    let n = a.tensor("saved_norms")?;
    float_only(&v, "weight_norm_bwd_first_dim_kernel")?;
    if gw.shape() != v.shape() {
        return invalid(format!(
            "_weight_norm_interface_backward: grad_w of size {} must match saved_v's {}",
            shape_str(gw.shape()),
            shape_str(v.shape())
        ));
    }
    let dim = checked_dim(a, &v)?;
    let (dims, kept) = norm_dims(v.shape(), dim);
    let vc = up(cx, &v)?;
    let ct = vc.dtype();
    let gwc = cast(cx, &gw, ct)?;
    let nc = cast(cx, &n, ct)?;
    let nc = cx.reshape(&nc, &kept)?;
    let gc = cast(cx, &g, ct)?;
    let gc = cx.reshape(&gc, &kept)?;
    let p = cx.mul(&gwc, &vc)?;
    let s = sum(cx, &p, &dims, true)?;
    let s = cx.reshape(&s, &kept)?;
    let grad_g = cx.div(&s, &nc)?;
    let n2 = cx.mul(&nc, &nc)?;
    let k = cx.div(&s, &n2)?;
    let vk = bb(cx, BinaryOp::Multiply, &vc, &k)?;
    let t = cx.sub(&gwc, &vk)?;
    let scale = cx.div(&gc, &nc)?;
    let grad_v = bb(cx, BinaryOp::Multiply, &t, &scale)?;
    let grad_g = cx.reshape(&grad_g, g.shape())?;
    Ok(vec![
        Out::Tensor(cast(cx, &grad_v, v.dtype())?),
        Out::Tensor(cast(cx, &grad_g, g.dtype())?),
    ])
}
