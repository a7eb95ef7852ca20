//! `scaled_dot_product_attention` (the math form): causal or explicit bool/float masks, a
//! custom scale, grouped-query attention; fully masked rows give zeros, as PyTorch's CPU
//! kernel does. Dropout is not supported (dropout_p must be 0). Also the CPU flash-attention
//! entry points sdpa dispatches to (forward with its logsumexp, and backward) and the native
//! multi-head attention of `nn.MultiheadAttention`'s inference path.

use super::common::*;
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{broadcast_shapes, BinaryOp, Comparison, DotDims, Precision, TensorType, Value};
use tessera_lowering::DType;

/// `k [.., Hk, S, E]` with each head repeated `r` times (`repeat_interleave` on dim -3).
fn repeat_heads(cx: &mut Lower, k: &Value, r: usize) -> LowerResult<Value> {
    if r == 1 {
        return Ok(k.clone());
    }
    let rank = k.rank();
    let mut sh = k.shape()[..rank - 2].to_vec();
    sh.push(r);
    sh.extend_from_slice(&k.shape()[rank - 2..]);
    let mut dims: Vec<usize> = (0..rank - 2).collect();
    dims.push(rank - 1);
    dims.push(rank);
    let b = bcast(cx, k, &sh, &dims)?;
    let mut out = k.shape().to_vec();
    out[rank - 3] *= r;
    Ok(cx.reshape(&b, &out)?)
}

pub(crate) fn sdpa(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let q = a.tensor("query")?;
    let mut k = a.tensor("key")?;
    let mut v = a.tensor("value")?;
    let mask = a.opt_tensor("attn_mask")?;
    let p = a.float("dropout_p")?;
    let causal = a.bool("is_causal")?;
    let scale = a.opt_float("scale")?;
    let gqa = a.bool("enable_gqa")?;
    float_only(&q, "scaled_dot_product_attention")?;
    if k.dtype() != q.dtype() || v.dtype() != q.dtype() {
        return invalid(format!(
            "Expected query, key, and value to have the same dtype, but got query.dtype: {} key.dtype: {} and value.dtype: {} instead.",
            q.dtype(),
            k.dtype(),
            v.dtype()
        ));
    }
    if p != 0.0 {
        return Err(LowerError::Unsupported(
            "scaled_dot_product_attention with dropout_p > 0".into(),
        ));
    }
    if q.rank() < 2 || k.rank() < 2 || v.rank() < 2 {
        return invalid("scaled_dot_product_attention: query, key and value must have at least 2 dims");
    }
    if causal && mask.is_some() {
        return invalid("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
    }
    let (l, e) = (q.shape()[q.rank() - 2], q.shape()[q.rank() - 1]);
    let (s, ek) = (k.shape()[k.rank() - 2], k.shape()[k.rank() - 1]);
    let ev = v.shape()[v.rank() - 1];
    if ek != e || v.shape()[v.rank() - 2] != s {
        return invalid(format!(
            "scaled_dot_product_attention: shapes do not match: query {}, key {}, value {}",
            shape_str(q.shape()),
            shape_str(k.shape()),
            shape_str(v.shape())
        ));
    }
    if q.rank() >= 3 && k.rank() >= 3 && q.shape()[q.rank() - 3] != k.shape()[k.rank() - 3] {
        let (hq, hk) = (q.shape()[q.rank() - 3], k.shape()[k.rank() - 3]);
        let hv = v.shape()[v.rank() - 3];
        if gqa && hk > 0 && hq % hk == 0 && hv == hk {
            k = repeat_heads(cx, &k, hq / hk)?;
            v = repeat_heads(cx, &v, hq / hk)?;
        } else if !(hk == 1 || hq == 1) || gqa {
            return invalid(format!(
                "Number of heads in key and value must divide the number of heads in query (query heads {hq}, key heads {hk}, value heads {hv})"
            ));
        }
    }
    let bq = &q.shape()[..q.rank() - 2];
    let bk = &k.shape()[..k.rank() - 2];
    let bv = &v.shape()[..v.rank() - 2];
    let bad =
        |_| LowerError::invalid("scaled_dot_product_attention: batch dims of query, key and value do not broadcast");
    let batch = broadcast_shapes(&broadcast_shapes(bq, bk).map_err(bad)?, bv).map_err(bad)?;
    let nb = batch.len();
    let dt = q.dtype();
    let with = |tail: &[usize]| -> Vec<usize> {
        let mut s = batch.clone();
        s.extend_from_slice(tail);
        s
    };
    let qc = up(cx, &q)?;
    let qc = cx.broadcast_to(&qc, &with(&[l, e]))?;
    let kc = up(cx, &k)?;
    let kc = cx.broadcast_to(&kc, &with(&[s, e]))?;
    let vc = up(cx, &v)?;
    let vc = cx.broadcast_to(&vc, &with(&[s, ev]))?;
    let scale = scale.unwrap_or(1.0 / (e as f64).sqrt());
    let sc = masked_scores(cx, &qc, &kc, scale, causal, mask.as_ref(), Masked::Where)?;
    let (attn, _) = softmax_lse(cx, &sc)?;
    let o = bdot(cx, &attn, &vc, nb + 1, nb)?;
    Ok(vec![Out::Tensor(cast(cx, &o, dt)?)])
}

/// How a bool mask reads: `Where` keeps the True positions (sdpa); `Out` drops them (the
/// native multi-head attention's masks).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Masked {
    Where,
    Out,
}

/// The batched product of `a [b.., m, k]` and `b`, contracting dim `lc` of `a` with dim `rc`
/// of `b` (the leading batch dims shared), at full precision.
fn bdot(cx: &mut Lower, a: &Value, b: &Value, lc: usize, rc: usize) -> LowerResult<Value> {
    let bd: Vec<usize> = (0..a.rank() - 2).collect();
    let dd = DotDims {
        lhs_batch: bd.clone(),
        rhs_batch: bd,
        lhs_contract: vec![lc],
        rhs_contract: vec![rc],
    };
    Ok(cx.dot_general(a, b, &dd, Precision::Highest)?)
}

/// `scale * q k^T` (`q [b.., L, E]`, `k [b.., S, E]`, opmath) with the causal mask (top-left
/// aligned) and `mask` applied: a bool mask as `-inf` where it excludes, a float mask added.
fn masked_scores(
    cx: &mut Lower,
    qc: &Value,
    kc: &Value,
    scale: f64,
    causal: bool,
    mask: Option<&Value>,
    how: Masked,
) -> LowerResult<Value> {
    let nb = qc.rank() - 2;
    let sc = bdot(cx, qc, kc, nb + 1, nb + 1)?;
    let mut sc = mul_s(cx, &sc, scale)?;
    let ct = sc.dtype();
    let sshape = sc.shape().to_vec();
    let (l, s) = (sshape[nb], sshape[nb + 1]);
    let ninf = splat(cx, f64::NEG_INFINITY, ct, &sshape)?;
    if causal {
        let rows = cx.iota(TensorType::new([l, s], DType::I64), 0)?;
        let cols = cx.iota(TensorType::new([l, s], DType::I64), 1)?;
        let keep = cx.compare(Comparison::Le, &cols, &rows)?;
        let keep = cx.broadcast_to(&keep, &sshape)?;
        sc = cx.select(&keep, &sc, &ninf)?;
    }
    if let Some(m) = mask {
        let bad = || {
            LowerError::invalid(format!(
                "attn_mask of size {} does not broadcast to {}",
                shape_str(m.shape()),
                shape_str(&sshape)
            ))
        };
        if broadcast_shapes(m.shape(), &sshape).map_err(|_| bad())? != sshape {
            return Err(bad());
        }
        if m.dtype() == DType::Bool {
            let mb = cx.broadcast_to(m, &sshape)?;
            sc = match how {
                Masked::Where => cx.select(&mb, &sc, &ninf)?,
                Masked::Out => cx.select(&mb, &ninf, &sc)?,
            };
        } else if m.dtype().is_float() {
            let mc = cast(cx, m, ct)?;
            let mb = cx.broadcast_to(&mc, &sshape)?;
            sc = cx.add(&sc, &mb)?;
        } else {
            return invalid(format!(
                "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: {}",
                m.dtype()
            ));
        }
    }
    Ok(sc)
}

/// Safe softmax of the scores over the last dim, and the log-sum-exp per row (`[b.., L]`): a
/// row with no finite score gives zeros and a log-sum-exp of 0, as PyTorch's CPU kernels do.
fn softmax_lse(cx: &mut Lower, sc: &Value) -> LowerResult<(Value, Value)> {
    let last = sc.rank() - 1;
    let ct = sc.dtype();
    let mx = cx.reduce_max(sc, &[last], true)?;
    let ninf1 = splat(cx, f64::NEG_INFINITY, ct, mx.shape())?;
    let z1 = splat(cx, 0.0, ct, mx.shape())?;
    let is_ninf = cx.compare(Comparison::Eq, &mx, &ninf1)?;
    let mx = cx.select(&is_ninf, &z1, &mx)?;
    let sh = bb(cx, BinaryOp::Subtract, sc, &mx)?;
    let ex = cx.exp(&sh)?;
    let den = sum(cx, &ex, &[last], true)?;
    let zero_den = cx.compare(Comparison::Eq, &den, &z1)?;
    let one = splat(cx, 1.0, ct, den.shape())?;
    let den = cx.select(&zero_den, &one, &den)?;
    let attn = bb(cx, BinaryOp::Divide, &ex, &den)?;
    let ld = cx.unary(tessera_lowering::stablehlo::UnaryOp::Log, &den)?;
    let lse = cx.add(&mx, &ld)?;
    let lse = cx.reshape(&lse, &sc.shape()[..last])?;
    Ok((attn, lse))
}

/// The checked arguments of the CPU flash-attention entry points: `q [B, Hq, L, E]`,
/// `k [B, Hk, S, E]`, `v [B, Hk, S, E]` of one float dtype, no dropout, a mask of the query's
/// dtype. Returns them in opmath with the scale and the group size `Hq / Hk` (grouped-query
/// attention: query head `h` reads key/value head `h / (Hq / Hk)`, as PyTorch's kernel does).
fn flash_args(cx: &mut Lower, a: &Args) -> LowerResult<([Value; 3], f64, Option<Value>, usize)> {
    const OP: &str = "scaled_dot_product_attention_flash_attention";
    let (q, k, v) = (a.tensor("query")?, a.tensor("key")?, a.tensor("value")?);
    float_only(&q, OP)?;
    if q.rank() != 4 || k.rank() != 4 || v.rank() != 4 {
        return invalid(format!("{OP}: Accept only 4 dims inputs shape of {{B, H, T, K}}"));
    }
    if k.dtype() != q.dtype() || v.dtype() != q.dtype() {
        return invalid(format!("{OP}: Q/K/V should have the same data type"));
    }
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if qs[0] != ks[0] || qs[0] != vs[0] {
        return invalid(format!("{OP}: Q/K/V should have the same batch size"));
    }
    // PyTorch's kernel checks no head counts: it divides by `Hq / Hk` (a crash when Hk > Hq) and
    // indexes key and value with the same head, out of bounds unless K and V have the same count
    // and it divides Hq's. Those ill-defined calls are refused here.
    let (hq, hk, hv) = (qs[1], ks[1], vs[1]);
    if hv != hk || (hq != hk && (hk == 0 || hq % hk != 0)) {
        return invalid(format!(
            "{OP}: key and value must have the same number of heads, dividing the query's (query heads {hq}, key heads {hk}, value heads {hv})"
        ));
    }
    let group = hq.checked_div(hk).unwrap_or(1); // no heads at all: no groups to repeat
    if ks[2] != vs[2] {
        return invalid(format!("{OP}: K/V should have the same sequence length"));
    }
    if qs[3] != ks[3] || qs[3] != vs[3] {
        return invalid(format!("{OP}: Q/K/V should have the same head size"));
    }
    if a.float("dropout_p")? != 0.0 {
        return invalid(format!("{OP}: Currently do not support dropout > 0"));
    }
    let mask = a.opt_tensor("attn_mask")?;
    if let Some(m) = &mask {
        if m.dtype() != q.dtype() {
            return invalid(format!("{OP}: Attention mask is the same data type as query"));
        }
    }
    let scale = a.opt_float("scale")?.unwrap_or(1.0 / (qs[3] as f64).sqrt());
    let (kc, vc) = (up(cx, &k)?, up(cx, &v)?);
    let (kc, vc) = (repeat_heads(cx, &kc, group)?, repeat_heads(cx, &vc, group)?);
    Ok(([up(cx, &q)?, kc, vc], scale, mask, group))
}

/// The gradient `[B, Hq, S, E]` of the repeated key/value heads as one of `[B, Hk, S, E]`: each
/// head's summed over its group of `group` query heads (the adjoint of `repeat_heads`). `Hk` is
/// passed, not derived: with no query heads the group is 0 and the gradients are zeros.
fn sum_groups(cx: &mut Lower, g: &Value, hk: usize, group: usize, rd: Rounding) -> LowerResult<Value> {
    if group == 1 {
        return Ok(g.clone());
    }
    let s = g.shape().to_vec();
    let grouped = cx.reshape(g, &[s[0], hk, group, s[2], s[3]])?;
    if rd.dt == rd.ct || group == 0 {
        return sum(cx, &grouped, &[2], false);
    }
    // For f16/bf16, PyTorch's kernel accumulates grad_key/grad_value in the input dtype, one query
    // head of the group after the other (each added in f32, then rounded); so does this (a sum in
    // f32 rounded once differs from torch's in the last bit of about a quarter of the elements).
    let member = |cx: &mut Lower, i: usize| -> LowerResult<Value> {
        let part = cx.slice_axis(&grouped, 2, i, 1)?;
        Ok(cx.reshape(&part, &[s[0], hk, s[2], s[3]])?)
    };
    let first = member(cx, 0)?;
    let mut acc = rd.r(cx, &first)?;
    for i in 1..group {
        let part = member(cx, i)?;
        acc = rd.add(cx, &acc, &part)?;
    }
    Ok(acc)
}

/// `_scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p=0, is_causal=False,
/// *, attn_mask=None, scale=None) -> (output, logsumexp)`: the logsumexp `[B, H, L]` in opmath.
pub(crate) fn flash_cpu(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let dt = a.tensor("query")?.dtype();
    let ([qc, kc, vc], scale, mask, _) = flash_args(cx, a)?;
    let sc = masked_scores(cx, &qc, &kc, scale, a.bool("is_causal")?, mask.as_ref(), Masked::Where)?;
    let (attn, lse) = softmax_lse(cx, &sc)?;
    let o = bdot(cx, &attn, &vc, 3, 2)?;
    Ok(vec![Out::Tensor(cast(cx, &o, dt)?), Out::Tensor(lse)])
}

/// `_scaled_dot_product_flash_attention_for_cpu_backward(grad_out, query, key, value, out,
/// logsumexp, dropout_p, is_causal, *, attn_mask=None, scale=None) -> (dq, dk, dv)`, from the
/// recomputed probabilities `P = exp(scores - logsumexp)`: `dv = P^T dO`,
/// `dS = P * (dO V^T - rowsum(dO * O))`, `dq = scale dS K`, `dk = scale dS^T Q`; with fewer
/// key/value heads than query heads, dk and dv have the key's heads, summed over each group.
pub(crate) fn flash_cpu_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let dt = a.tensor("query")?.dtype();
    let ([qc, kc, vc], scale, mask, group) = flash_args(cx, a)?;
    let g = a.tensor("grad_out")?;
    let o = a.tensor("out")?;
    let lse = a.tensor("logsumexp")?;
    let qs = qc.shape().to_vec();
    if g.shape() != qs.as_slice() || o.shape() != qs.as_slice() || lse.shape() != &qs[..3] {
        return invalid(format!(
            "_scaled_dot_product_flash_attention_for_cpu_backward: grad_out and out must have the query's shape {} and logsumexp {}",
            shape_str(&qs),
            shape_str(&qs[..3])
        ));
    }
    let ct = qc.dtype();
    let (gc, oc, lc) = (cast(cx, &g, ct)?, cast(cx, &o, ct)?, cast(cx, &lse, ct)?);
    let sc = masked_scores(cx, &qc, &kc, scale, a.bool("is_causal")?, mask.as_ref(), Masked::Where)?;
    let lb = bcast(cx, &lc, sc.shape(), &[0, 1, 2])?;
    let sh = cx.sub(&sc, &lb)?;
    let p = cx.exp(&sh)?;
    // For f16/bf16, PyTorch's kernel rounds P and dS to the input dtype before the products
    // that use them (the products accumulate in f32, scaled after); so does this.
    let rd = Rounding::new(dt);
    let pr = rd.r(cx, &p)?;
    let dv = bdot(cx, &pr, &gc, 2, 2)?;
    let dp = bdot(cx, &gc, &vc, 3, 3)?;
    let go = cx.mul(&gc, &oc)?;
    let dsum = sum(cx, &go, &[3], true)?;
    let t = bb(cx, BinaryOp::Subtract, &dp, &dsum)?;
    let ds = cx.mul(&p, &t)?;
    let ds = rd.r(cx, &ds)?;
    let dq = bdot(cx, &ds, &kc, 3, 2)?;
    let dq = mul_s(cx, &dq, scale)?;
    let dk = bdot(cx, &ds, &qc, 2, 2)?;
    let dk = mul_s(cx, &dk, scale)?;
    let hk = a.tensor("key")?.shape()[1];
    let (dk, dv) = (sum_groups(cx, &dk, hk, group, rd)?, sum_groups(cx, &dv, hk, group, rd)?);
    Ok(vec![
        Out::Tensor(cast(cx, &dq, dt)?),
        Out::Tensor(cast(cx, &dk, dt)?),
        Out::Tensor(cast(cx, &dv, dt)?),
    ])
}

/// `x [B, T, E] @ w[rows]^T + b[rows]` for the `rows` block of a packed projection.
fn project(cx: &mut Lower, x: &Value, w: &Value, b: &Value, rows: std::ops::Range<usize>) -> LowerResult<Value> {
    let n = rows.len();
    let wr = cx.slice_axis(w, 0, rows.start, n)?;
    let br = cx.slice_axis(b, 0, rows.start, n)?;
    let dd = DotDims {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contract: vec![2],
        rhs_contract: vec![1],
    };
    let y = cx.dot_general(x, &wr, &dd, Precision::Highest)?;
    let bb_ = bcast(cx, &br, y.shape(), &[2])?;
    Ok(cx.add(&y, &bb_)?)
}

/// `_native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
/// proj_weight, proj_bias, mask=None, need_weights=True, average_attn_weights=True,
/// mask_type=None) -> (out, weights)`: batch-first `[B, T, E]` inputs of one shape, a bool
/// mask that excludes its True positions (`mask_type` 0: `[L, S]`, 1: key padding `[B, S]`,
/// 2: broadcast to `[B, H, L, S]`; a fully masked row gives NaN, as in PyTorch). Without
/// `need_weights` the weights are a zero-size tensor (PyTorch returns None).
pub(crate) fn native_mha(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (q, k, v) = (a.tensor("query")?, a.tensor("key")?, a.tensor("value")?);
    float_only(&q, "native_multi_head_attention")?;
    if q.rank() != 3 || k.shape() != q.shape() || v.shape() != q.shape() {
        return invalid("expected `query`/`key`/`value` shapes to match");
    }
    let e = a.int("embed_dim")? as usize;
    let h = a.int("num_head")?;
    let (bsz, t) = (q.shape()[0], q.shape()[1]);
    if q.shape()[2] != e {
        return invalid(format!("query's embedding dim {} must be embed_dim {e}", q.shape()[2]));
    }
    if h <= 0 || e % h as usize != 0 {
        return invalid("embed_dim must be divisible by num_heads");
    }
    let h = h as usize;
    let d = e / h;
    let (w, b) = (a.tensor("qkv_weight")?, a.tensor("qkv_bias")?);
    let (pw, pb) = (a.tensor("proj_weight")?, a.tensor("proj_bias")?);
    if w.shape() != [3 * e, e] || b.shape() != [3 * e] || pw.shape() != [e, e] || pb.shape() != [e] {
        return invalid("_native_multi_head_attention: qkv_weight must be [3E, E], qkv_bias [3E], proj_weight [E, E], proj_bias [E]");
    }
    for p in [&k, &v, &w, &b, &pw, &pb] {
        if p.dtype() != q.dtype() {
            return invalid("_native_multi_head_attention: expected all inputs to have the query's dtype");
        }
    }
    let dt = q.dtype();
    let [qc, kc, vc, wc, bc, pwc, pbc] = [&q, &k, &v, &w, &b, &pw, &pb].map(|x| up(cx, x));
    let (wc, bc) = (wc?, bc?);
    let heads = |cx: &mut Lower, x: Value| -> LowerResult<Value> {
        let r = cx.reshape(&x, &[bsz, t, h, d])?;
        Ok(cx.transpose(&r, &[0, 2, 1, 3])?)
    };
    let qp = project(cx, &qc?, &wc, &bc, 0..e)?;
    let kp = project(cx, &kc?, &wc, &bc, e..2 * e)?;
    let vp = project(cx, &vc?, &wc, &bc, 2 * e..3 * e)?;
    let (qh, kh, vh) = (heads(cx, qp)?, heads(cx, kp)?, heads(cx, vp)?);
    let mask = match a.opt_tensor("mask")? {
        None => None,
        Some(m) => {
            let mt = a.opt_int("mask_type")?.ok_or_else(|| LowerError::invalid("Mask Type should be defined"))?;
            Some(match (mt, m.rank()) {
                (1, 2) => cx.reshape(&m, &[m.shape()[0], 1, 1, m.shape()[1]])?,
                _ => m,
            })
        }
    };
    let sc = masked_scores(cx, &qh, &kh, 1.0 / (d as f64).sqrt(), false, mask.as_ref(), Masked::Out)?;
    // A plain softmax: a fully masked row gives NaN here, as PyTorch's kernel does.
    let mx = cx.reduce_max(&sc, &[3], true)?;
    let sh = bb(cx, BinaryOp::Subtract, &sc, &mx)?;
    let ex = cx.exp(&sh)?;
    let den = sum(cx, &ex, &[3], true)?;
    let attn = bb(cx, BinaryOp::Divide, &ex, &den)?;
    let o = bdot(cx, &attn, &vh, 3, 2)?;
    let o = cx.transpose(&o, &[0, 2, 1, 3])?;
    let o = cx.reshape(&o, &[bsz, t, e])?;
    let y = project(cx, &o, &pwc?, &pbc?, 0..e)?;
    let weights = if !a.bool("need_weights")? {
        splat(cx, 0.0, dt, &[0])?
    } else if a.bool("average_attn_weights")? {
        let s = sum(cx, &attn, &[1], false)?;
        let s = mul_s(cx, &s, 1.0 / h as f64)?;
        cast(cx, &s, dt)?
    } else {
        cast(cx, &attn, dt)?
    };
    Ok(vec![Out::Tensor(cast(cx, &y, dt)?), Out::Tensor(weights)])
}
