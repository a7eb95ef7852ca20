//! `_embedding_bag`: sum/mean/max bags given by offsets (include_last_offset), optional
//! per-sample weights (sum mode) and padding_idx. Returns PyTorch CPU's four results:
//! `(output, offset2bag, bag_size, max_indices)`, the last three as PyTorch fills them for
//! each mode (offset2bag is empty on the "fast path": sum mode, no padding_idx, f32/f16/bf16).
//!
//! Max mode keeps the first maximal row of a bag; a NaN counts as the smallest value (PyTorch
//! keeps a NaN only when it is the first entry of its bag).

use super::common::*;
use crate::args::Args;
use crate::check::CheckKind;
use crate::aten::promote::promote_types;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, GatherDims, ScatterDims, TensorType, Value};
use tessera_lowering::DType;

/// Scatter of `updates [L, *w]` into `operand [B, *w]` at rows `rows [L]` (i64; rows out of
/// range are dropped), combined by `body`.
fn scatter_rows(
    cx: &mut Lower,
    operands: &[&Value],
    rows: &Value,
    updates: &[&Value],
    body: impl FnOnce(&mut tessera_lowering::stablehlo::FuncBuilder, &[Value]) -> Result<Vec<Value>, LowerError>,
) -> LowerResult<Vec<Value>> {
    let l = rows.shape()[0];
    let idx = cx.reshape(rows, &[l, 1])?;
    let wr = operands[0].rank() - 1;
    let dims = ScatterDims {
        update_window_dims: (1..1 + wr).collect(),
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
    };
    cx.scatter(operands, &idx, updates, &dims, body)
}

pub(crate) fn embedding_bag(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let w = a.tensor("weight")?;
    let ind = a.tensor("indices")?;
    let off = a.tensor("offsets")?;
    let mode = a.int("mode")?;
    let psw = a.opt_tensor("per_sample_weights")?;
    let ilo = a.bool("include_last_offset")?;
    let pad = a.int("padding_idx")?;
    float_only(&w, "embedding_bag")?;
    if w.rank() != 2 {
        return invalid(format!(
            "weight has to be a 2D Tensor, but got Tensor of dimension {}",
            w.rank()
        ));
    }
    if ind.rank() != 1 || off.rank() != 1 {
        return invalid(format!(
            "input has to be a 1D Tensor with 1D offsets, but got input of dimension {} and offsets of dimension {}",
            ind.rank(),
            off.rank()
        ));
    }
    for t in [&ind, &off] {
        if !matches!(t.dtype(), DType::I32 | DType::I64) {
            return invalid(format!(
                "expected indices and offsets of type Int or Long, got {}",
                torch_name(t.dtype())
            ));
        }
    }
    if !(0..=2).contains(&mode) {
        return invalid(format!("embedding_bag: unknown mode {mode}"));
    }
    let rows = w.shape()[0] as i64;
    cx.check_range(&ind, 0, rows, None, CheckKind::Bag { size: rows })?;
    if let Some(p) = &psw {
        if mode != 0 {
            let m = if mode == 1 { "mean" } else { "max" };
            return invalid(format!(
                "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' (got mode='{m}'). Please open a feature request on GitHub."
            ));
        }
        if p.shape() != ind.shape() || p.dtype() != w.dtype() {
            return invalid(format!(
                "embedding_bag: per_sample_weights must have the shape and dtype of indices' {} and weight's {}, got {} of {}",
                shape_str(ind.shape()),
                w.dtype(),
                shape_str(p.shape()),
                p.dtype()
            ));
        }
    }
    let it = promote_types(ind.dtype(), off.dtype());
    let (v, d) = (w.shape()[0], w.shape()[1]);
    let l = ind.shape()[0];
    let nb = off.shape()[0] as i64 - ilo as i64;
    if nb < 0 || (ilo && off.shape()[0] == 0) {
        return invalid("include_last_offset: number of offsets should be at least 1");
    }
    let b = nb as usize;
    let dt = w.dtype();
    let ct = opmath(dt);
    let pad = if pad >= 0 && (pad as usize) < v {
        Some(pad)
    } else {
        None
    };

    // The bag of each index: (number of the first b offsets <= j) - 1, or b when outside.
    let ind64 = cast(cx, &ind, DType::I64)?;
    let off64 = cast(cx, &off, DType::I64)?;
    let bag = if l == 0 || b == 0 {
        splat(cx, 0.0, DType::I64, &[l])?
    } else {
        let offs = cx.slice(&off64, &[0], &[b], &[1])?;
        let pos = cx.iota(TensorType::new([l, b], DType::I64), 0)?;
        let ob = bcast(cx, &offs, &[l, b], &[1])?;
        let le = cx.compare(Comparison::Le, &ob, &pos)?;
        let cnt = cx.convert(&le, DType::I64)?;
        let cnt = sum(cx, &cnt, &[1], false)?;
        let one = cx.full_int(TensorType::new([l], DType::I64), 1)?;
        cx.sub(&cnt, &one)?
    };
    // Entries that count: inside a bag (and before the last offset), not padding.
    let mut valid = if l == 0 {
        splat(cx, 1.0, DType::Bool, &[l])?
    } else {
        let zero = cx.full_int(TensorType::new([l], DType::I64), 0)?;
        cx.compare(Comparison::Ge, &bag, &zero)?
    };
    if ilo && l > 0 {
        let last = cx.slice(&off64, &[b], &[b + 1], &[1])?;
        let last = cx.reshape(&last, &[])?;
        let lb = cx.broadcast_to(&last, &[l])?;
        let pos = cx.iota(TensorType::new([l], DType::I64), 0)?;
        let before = cx.compare(Comparison::Lt, &pos, &lb)?;
        valid = cx.binary(BinaryOp::And, &valid, &before)?;
    }
    if let Some(p) = pad {
        let pv = cx.full_int(TensorType::new([l], DType::I64), p as i128)?;
        let np = cx.compare(Comparison::Ne, &ind64, &pv)?;
        valid = cx.binary(BinaryOp::And, &valid, &np)?;
    }
    let oob = cx.full_int(TensorType::new([l], DType::I64), b as i128)?;
    let target = cx.select(&valid, &bag, &oob)?;

    // The rows of the indices, [L, D].
    let rows = if l == 0 || v == 0 {
        splat(cx, 0.0, ct, &[l, d])?
    } else {
        let lo = cx.full_int(TensorType::scalar(DType::I64), 0)?;
        let hi = cx.full_int(TensorType::scalar(DType::I64), v as i128 - 1)?;
        let lo = cx.broadcast_to(&lo, &[l])?;
        let hi = cx.broadcast_to(&hi, &[l])?;
        let ci = cx.clamp(&lo, &ind64, &hi)?;
        let ci = cx.reshape(&ci, &[l, 1])?;
        let dims = GatherDims {
            offset_dims: vec![1],
            collapsed_slice_dims: vec![0],
            start_index_map: vec![0],
            index_vector_dim: 1,
        };
        let wc = up(cx, &w)?;
        cx.gather(&wc, &ci, &dims, &[1, d])?
    };

    // Entries per bag.
    let counts = if l == 0 || b == 0 {
        splat(cx, 0.0, DType::I64, &[b])?
    } else {
        let z = splat(cx, 0.0, DType::I64, &[b])?;
        let ones = cx.full_int(TensorType::new([l], DType::I64), 1)?;
        scatter_rows(cx, &[&z], &target, &[&ones], |f, a| Ok(vec![f.add(&a[0], &a[1])?]))?.remove(0)
    };

    let out = if b == 0 || d == 0 || l == 0 {
        splat(cx, 0.0, ct, &[b, d])?
    } else if mode == 2 {
        max_bags(cx, &rows, &target, b, d, &counts)?
    } else {
        let upd = match &psw {
            Some(p) => {
                let pc = up(cx, p)?;
                let pb = bcast(cx, &pc, &[l, d], &[0])?;
                cx.mul(&rows, &pb)?
            }
            None => rows.clone(),
        };
        let z = splat(cx, 0.0, ct, &[b, d])?;
        let s = scatter_rows(cx, &[&z], &target, &[&upd], |f, a| Ok(vec![f.add(&a[0], &a[1])?]))?.remove(0);
        if mode == 1 {
            let cf = cx.convert(&counts, ct)?;
            let one = splat(cx, 1.0, ct, &[b])?;
            let zero = splat(cx, 0.0, ct, &[b])?;
            let empty = cx.compare(Comparison::Eq, &cf, &zero)?;
            let cf = cx.select(&empty, &one, &cf)?;
            let cb = bcast(cx, &cf, &[b, d], &[0])?;
            cx.div(&s, &cb)?
        } else {
            s
        }
    };
    let out = cast(cx, &out, dt)?;

    let fast_sum = mode == 0 && pad.is_none() && matches!(dt, DType::F32 | DType::F16 | DType::BF16);
    let o2b = if fast_sum {
        splat(cx, 0.0, it, &[0])?
    } else {
        cast(cx, &bag, it)?
    };
    let bag_size = if mode == 0 {
        splat(cx, 0.0, it, &[b])?
    } else {
        cast(cx, &counts, it)?
    };
    let max_ind = match mode {
        0 => splat(cx, 0.0, it, &[b])?,
        1 => bag_size.clone(),
        _ => {
            let mi = out_max_indices(cx, &rows, &target, &ind64, b, d, &counts, l)?;
            cast(cx, &mi, it)?
        }
    };
    Ok(vec![
        Out::Tensor(out),
        Out::Tensor(o2b),
        Out::Tensor(bag_size),
        Out::Tensor(max_ind),
    ])
}

/// The winning entry position of each `(bag, feature)` of max mode (i64 `[B, D]`, `l` where
/// the bag is empty): the first maximal entry, NaN counting as smallest.
fn winners(cx: &mut Lower, rows: &Value, target: &Value, b: usize, d: usize) -> LowerResult<Value> {
    let l = rows.shape()[0];
    let ct = rows.dtype();
    let nan = cx.compare(Comparison::Ne, rows, rows)?;
    let ninf = splat(cx, f64::NEG_INFINITY, ct, &[l, d])?;
    let key = cx.select(&nan, &ninf, rows)?;
    let pos = cx.iota(TensorType::new([l, d], DType::I64), 0)?;
    let init_v = splat(cx, f64::NEG_INFINITY, ct, &[b, d])?;
    let init_p = cx.full_int(TensorType::new([b, d], DType::I64), l as i128)?;
    let r = scatter_rows(cx, &[&init_v, &init_p], target, &[&key, &pos], |f, a| {
        let (av, ap, bv, bp) = (&a[0], &a[1], &a[2], &a[3]);
        let gt = f.compare(Comparison::Gt, av, bv)?;
        let eq = f.compare(Comparison::Eq, av, bv)?;
        let lt = f.compare(Comparison::Lt, ap, bp)?;
        let tie = f.binary(BinaryOp::And, &eq, &lt)?;
        let pick = f.binary(BinaryOp::Or, &gt, &tie)?;
        Ok(vec![f.select(&pick, av, bv)?, f.select(&pick, ap, bp)?])
    })?;
    Ok(r[1].clone())
}

/// `[L, D]`-indexed gather: `src[win[b, d], d]` with `win` clamped into range.
fn pick(cx: &mut Lower, src: &Value, win: &Value, l: usize, b: usize, d: usize) -> LowerResult<Value> {
    let lo = cx.full_int(TensorType::new([b, d], DType::I64), 0)?;
    let hi = cx.full_int(TensorType::new([b, d], DType::I64), l as i128 - 1)?;
    let w = cx.clamp(&lo, win, &hi)?;
    let col = cx.iota(TensorType::new([b, d], DType::I64), 1)?;
    let w3 = cx.reshape(&w, &[b, d, 1])?;
    let c3 = cx.reshape(&col, &[b, d, 1])?;
    let ix = cx.concatenate(&[&w3, &c3], 2)?;
    let dims = GatherDims {
        offset_dims: vec![],
        collapsed_slice_dims: vec![0, 1],
        start_index_map: vec![0, 1],
        index_vector_dim: 2,
    };
    Ok(cx.gather(src, &ix, &dims, &[1, 1])?)
}

fn max_bags(cx: &mut Lower, rows: &Value, target: &Value, b: usize, d: usize, counts: &Value) -> LowerResult<Value> {
    let l = rows.shape()[0];
    let win = winners(cx, rows, target, b, d)?;
    let v = pick(cx, rows, &win, l, b, d)?;
    let zero_i = cx.full_int(TensorType::new([b], DType::I64), 0)?;
    let empty = cx.compare(Comparison::Eq, counts, &zero_i)?;
    let eb = bcast(cx, &empty, &[b, d], &[0])?;
    let z = splat(cx, 0.0, rows.dtype(), &[b, d])?;
    Ok(cx.select(&eb, &z, &v)?)
}

#[allow(clippy::too_many_arguments)]
fn out_max_indices(
    cx: &mut Lower,
    rows: &Value,
    target: &Value,
    ind: &Value,
    b: usize,
    d: usize,
    counts: &Value,
    l: usize,
) -> LowerResult<Value> {
    if b == 0 || d == 0 || l == 0 {
        return splat(cx, 0.0, DType::I64, &[b, d]);
    }
    let win = winners(cx, rows, target, b, d)?;
    let ib = bcast(cx, ind, &[l, d], &[0])?;
    let w = pick(cx, &ib, &win, l, b, d)?;
    let zero_i = cx.full_int(TensorType::new([b], DType::I64), 0)?;
    let empty = cx.compare(Comparison::Eq, counts, &zero_i)?;
    let eb = bcast(cx, &empty, &[b, d], &[0])?;
    let z = cx.full_int(TensorType::new([b, d], DType::I64), 0)?;
    Ok(cx.select(&eb, &z, &w)?)
}
