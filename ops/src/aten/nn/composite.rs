//! Composite nn ops, computed by the op they decompose into (bound with `util::rebind`):
//! conv1d/2d/3d, conv_transpose1d/2d/3d, `_convolution`, nll_loss, max_pool1d/2d/3d, pad,
//! embedding_backward, and cosine_similarity / pairwise_distance.

use super::common::*;
use crate::args::Args;
use crate::aten::util::rebind;
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use crate::value::ArgValue;
use tessera_lowering::stablehlo::{BinaryOp, UnaryOp, Value};

/// `conv{n}d(input, weight, bias, stride, padding, dilation, groups)` and
/// `conv_transpose{n}d.input(..., output_padding, groups, dilation)`: `convolution`, with an
/// unbatched input (one dim fewer than the weight) given a batch of one.
pub(crate) fn conv_nd(
    cx: &mut Lower,
    a: &Args,
    n: usize,
    transposed: bool,
) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let w = a.tensor("weight")?;
    let unbatched = x.rank() + 1 == w.rank() && x.rank() == n + 1;
    let x = if unbatched { unsqueeze0(cx, &x)? } else { x };
    let mut set = vec![
        ("input", ArgValue::Tensor(x)),
        ("transposed", ArgValue::Bool(transposed)),
    ];
    if !transposed {
        set.push(("output_padding", ArgValue::IntList(vec![0; n])));
    }
    let b = rebind(a, "convolution", set)?;
    let mut r = super::conv::convolution(cx, &b)?;
    if unbatched {
        if let Some(Out::Tensor(y)) = r.first() {
            r[0] = Out::Tensor(squeeze0(cx, y)?);
        }
    }
    Ok(r)
}

/// `_convolution(...)`: `convolution` (the backend flags ignored).
pub(crate) fn convolution_flags(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    super::conv::convolution(cx, &rebind(a, "convolution", vec![])?)
}

/// `nll_loss(self, target, weight, reduction, ignore_index)`: the loss of `nll_loss_forward`.
pub(crate) fn nll_loss(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let mut r = super::loss::nll_loss_forward(cx, &rebind(a, "nll_loss_forward", vec![])?)?;
    r.truncate(1);
    Ok(r)
}

/// `max_pool{2,3}d(self, kernel_size, stride, padding, dilation, ceil_mode)`: the values of
/// `max_pool{2,3}d_with_indices`; `max_pool1d` pools a 2-d view (a unit first spatial dim).
pub(crate) fn max_pool(cx: &mut Lower, a: &Args, n: usize) -> LowerResult<Vec<Out>> {
    let mut r = if n == 1 {
        let x = a.tensor("self")?;
        let at = x.rank().saturating_sub(1);
        let mut shape = x.shape().to_vec();
        shape.insert(at, 1);
        let x2 = cx.reshape(&x, &shape)?;
        let widen = |name: &str, fill: i64| -> LowerResult<ArgValue<Value>> {
            let v = a.int_list(name)?;
            Ok(ArgValue::IntList(if v.is_empty() {
                v
            } else {
                vec![fill, v[0]]
            }))
        };
        let set = vec![
            ("self", ArgValue::Tensor(x2)),
            ("kernel_size", widen("kernel_size", 1)?),
            ("stride", widen("stride", 1)?),
            ("padding", widen("padding", 0)?),
            ("dilation", widen("dilation", 1)?),
        ];
        let mut r =
            super::pool::max_pool2d_with_indices(cx, &rebind(a, "max_pool2d_with_indices", set)?)?;
        if let Some(Out::Tensor(y)) = r.first() {
            let mut s = y.shape().to_vec();
            s.remove(at);
            r[0] = Out::Tensor(cx.reshape(y, &s)?);
        }
        r
    } else if n == 2 {
        super::pool::max_pool2d_with_indices(cx, &rebind(a, "max_pool2d_with_indices", vec![])?)?
    } else {
        super::pool::max_pool3d_with_indices(cx, &rebind(a, "max_pool3d_with_indices", vec![])?)?
    };
    r.truncate(1);
    Ok(r)
}

/// `pad(self, pad, mode="constant", value=None)`: constant_pad_nd, or the reflection /
/// replication pads of `pad.len() / 2` dims.
pub(crate) fn pad(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let mode = a.str("mode")?;
    let n = a.int_list("pad")?.len() / 2;
    let padding = ArgValue::IntList(a.int_list("pad")?);
    match mode.as_str() {
        "constant" => {
            let value = ArgValue::Float(a.opt_float("value")?.unwrap_or(0.0));
            crate::aten::shape::constant_pad_nd(cx, &rebind(a, "constant_pad_nd", vec![("value", value)])?)
        }
        "reflect" | "replicate" if (1..=3).contains(&n) => {
            if a.opt_float("value")?.is_some_and(|v| v != 0.0) {
                return invalid(format!("Padding mode \"{mode}\" doesn't take in value argument"));
            }
            let (op, m) = if mode == "reflect" {
                (format!("reflection_pad{n}d"), super::pad::Mode::Reflect)
            } else {
                (format!("replication_pad{n}d"), super::pad::Mode::Replicate)
            };
            let b = rebind(a, &op, vec![("padding", padding)])?;
            super::pad::pad(cx, &b, n, m)
        }
        "reflect" | "replicate" => invalid(format!(
            "Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now (pad of length {})",
            2 * n
        )),
        other => Err(crate::error::LowerError::Unsupported(format!("pad mode \"{other}\""))),
    }
}

/// `embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq, sparse)`:
/// `embedding_dense_backward` (sparse gradients are refused).
pub(crate) fn embedding_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    if a.bool("sparse")? {
        return Err(crate::error::LowerError::Unsupported(
            "sparse embedding gradients".into(),
        ));
    }
    let g = a.get("grad")?.clone();
    crate::aten::indexing::embedding_dense_backward(
        cx,
        &rebind(a, "embedding_dense_backward", vec![("grad_output", g)])?,
    )
}

/// `x1`, `x2` broadcast together in opmath, with their float dtype.
fn pair(
    cx: &mut Lower,
    a: &Args,
    op: &str,
) -> LowerResult<(Value, Value, tessera_lowering::DType)> {
    let (x1, x2) = (a.tensor("x1")?, a.tensor("x2")?);
    let dt = crate::aten::promote::promote_types(x1.dtype(), x2.dtype());
    dtype_check(dt.is_float(), dt, op)?;
    let (c1, c2) = (cast(cx, &x1, opmath(dt))?, cast(cx, &x2, opmath(dt))?);
    let (c1, c2) = cx.broadcast_pair(&c1, &c2).map_err(|_| {
        crate::error::LowerError::invalid(format!(
            "{op}: the shapes {:?} and {:?} do not broadcast",
            x1.shape(),
            x2.shape()
        ))
    })?;
    Ok((c1, c2, dt))
}

/// `cosine_similarity(x1, x2, dim=1, eps=1e-8)`: `sum(x1 x2) / sqrt(max(|x1|^2 |x2|^2, eps^2))`.
pub(crate) fn cosine_similarity(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x1, x2, dt) = pair(cx, a, "cosine_similarity")?;
    let d = crate::aten::util::wrap_dim(a.int("dim")?, x1.rank())?;
    let scalar = x1.rank() == 0;
    let (x1, x2) = if scalar {
        (cx.reshape(&x1, &[1])?, cx.reshape(&x2, &[1])?)
    } else {
        (x1, x2)
    };
    let eps = a.float("eps")?;
    let p = cx.mul(&x1, &x2)?;
    let dot = sum(cx, &p, &[d], false)?;
    let s1 = cx.mul(&x1, &x1)?;
    let n1 = sum(cx, &s1, &[d], false)?;
    let s2 = cx.mul(&x2, &x2)?;
    let n2 = sum(cx, &s2, &[d], false)?;
    let nn = cx.mul(&n1, &n2)?;
    let e2 = splat(cx, eps * eps, nn.dtype(), nn.shape())?;
    let nn = cx.binary(BinaryOp::Maximum, &nn, &e2)?;
    let den = cx.unary(UnaryOp::Sqrt, &nn)?;
    let r = cx.div(&dot, &den)?;
    let r = if scalar { cx.reshape(&r, &[])? } else { r };
    Ok(vec![Out::Tensor(cast(cx, &r, dt)?)])
}

/// `pairwise_distance(x1, x2, p=2, eps=1e-6, keepdim=False)`: the p-norm of `x1 - x2 + eps`
/// over the last dim.
pub(crate) fn pairwise_distance(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x1, x2, dt) = pair(cx, a, "pairwise_distance")?;
    let p = a.float("p")?;
    let diff = cx.sub(&x1, &x2)?;
    let diff = add_s(cx, &diff, a.float("eps")?)?;
    let last = diff.rank().saturating_sub(1);
    let diff = if diff.rank() == 0 {
        cx.reshape(&diff, &[1])?
    } else {
        diff
    };
    let r = crate::aten::reduction::p_norm(cx, &diff, p, &[last], a.bool("keepdim")?)?;
    Ok(vec![Out::Tensor(cast(cx, &r, dt)?)])
}
