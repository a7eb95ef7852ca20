//! `scaled_dot_product_attention` (the math form): causal or explicit bool/float masks, a
//! custom scale, grouped-query attention; fully masked rows give zeros, as PyTorch's CPU
//! kernel does. Dropout is not supported (dropout_p must be 0).

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
    let ct = opmath(dt);
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
    let bd: Vec<usize> = (0..nb).collect();
    let dd = DotDims {
        lhs_batch: bd.clone(),
        rhs_batch: bd.clone(),
        lhs_contract: vec![nb + 1],
        rhs_contract: vec![nb + 1],
    };
    let sc = cx.dot_general(&qc, &kc, &dd, Precision::Highest)?;
    let mut sc = mul_s(cx, &sc, scale)?;
    let sshape = with(&[l, s]);
    let ninf = splat(cx, f64::NEG_INFINITY, ct, &sshape)?;
    if causal {
        let rows = cx.iota(TensorType::new([l, s], DType::I64), 0)?;
        let cols = cx.iota(TensorType::new([l, s], DType::I64), 1)?;
        let keep = cx.compare(Comparison::Le, &cols, &rows)?;
        let keep = cx.broadcast_to(&keep, &sshape)?;
        sc = cx.select(&keep, &sc, &ninf)?;
    }
    if let Some(m) = &mask {
        let bad = |_| {
            LowerError::invalid(format!(
                "attn_mask of size {} does not broadcast to {}",
                shape_str(m.shape()),
                shape_str(&sshape)
            ))
        };
        if broadcast_shapes(m.shape(), &sshape).map_err(bad)? != sshape {
            return invalid(format!(
                "attn_mask of size {} does not broadcast to {}",
                shape_str(m.shape()),
                shape_str(&sshape)
            ));
        }
        if m.dtype() == DType::Bool {
            let mb = cx.broadcast_to(m, &sshape)?;
            sc = cx.select(&mb, &sc, &ninf)?;
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
    // Safe softmax over the last dim: a row with no finite score gives zeros.
    let last = nb + 1;
    let mx = cx.reduce_max(&sc, &[last], true)?;
    let ninf1 = splat(cx, f64::NEG_INFINITY, ct, mx.shape())?;
    let z1 = splat(cx, 0.0, ct, mx.shape())?;
    let is_ninf = cx.compare(Comparison::Eq, &mx, &ninf1)?;
    let mx = cx.select(&is_ninf, &z1, &mx)?;
    let sh = bb(cx, BinaryOp::Subtract, &sc, &mx)?;
    let ex = cx.exp(&sh)?;
    let den = sum(cx, &ex, &[last], true)?;
    let zero_den = cx.compare(Comparison::Eq, &den, &z1)?;
    let one = splat(cx, 1.0, ct, den.shape())?;
    let den = cx.select(&zero_den, &one, &den)?;
    let attn = bb(cx, BinaryOp::Divide, &ex, &den)?;
    let dd2 = DotDims {
        lhs_batch: bd.clone(),
        rhs_batch: bd,
        lhs_contract: vec![nb + 1],
        rhs_contract: vec![nb],
    };
    let o = cx.dot_general(&attn, &vc, &dd2, Precision::Highest)?;
    Ok(vec![Out::Tensor(cast(cx, &o, dt)?)])
}
