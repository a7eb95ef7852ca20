//! `_grouped_mm(self, mat2, offs, bias, out_dtype)`: the grouped GEMM of MoE layers
//! (transformers' `grouped_mm` experts). `offs` (int32, cumulative ends) splits one operand
//! into groups:
//! - 2-d x 3-d: rows of `self` [M, K]; group g's rows times `mat2[g]` [K, N] -> [M, N];
//! - 3-d x 2-d: columns of `mat2` [K, N]; `self[g]` [M, K] times group g's columns -> [M, N];
//! - 2-d x 2-d: the shared K; group g's slice of both -> [G, M, N];
//! - 3-d x 3-d: no `offs`, a batched matmul -> [G, M, N].
//!
//! Every group's product is computed densely and the right one selected per row, column or
//! group (a mask, no data-dependent shapes); rows or columns past the last offset are 0
//! (torch leaves them uninitialised). f16/bf16 accumulate in f32 and round once.

use super::{check_same, contract, dims, one};
use crate::args::Args;
use crate::aten::util::{cast, torch_name};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{Comparison, ReduceKind, TensorType, Value};
use tessera_lowering::DType;

pub(super) fn grouped_mm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let w = a.tensor("mat2")?;
    let offs = a.opt_tensor("offs")?;
    if a.opt_tensor("bias")?.is_some() {
        return Err(LowerError::invalid("Bias not supported yet"));
    }
    let dt = check_same(&x, &w, "Expected mat_a and mat_b to have the same dtype")?;
    if !matches!(dt, DType::F32 | DType::BF16 | DType::F16) {
        return Err(LowerError::invalid(format!(
            "Expected mat_a to be Float32, BFloat16 or Float16 matrix, got {}",
            torch_name(dt)
        )));
    }
    if let Some(o) = a.opt_dtype("out_dtype")? {
        if o != dt {
            return Err(LowerError::invalid(
                "Grouped gemm output dtype must match `mat_a` dtype",
            ));
        }
    }
    let (rx, rw) = (x.rank(), w.rank());
    if !matches!((rx, rw), (2, 2) | (2, 3) | (3, 2) | (3, 3)) {
        return Err(LowerError::invalid(format!(
            "grouped gemm takes 2-d or 3-d matrices, got {rx}d and {rw}d"
        )));
    }
    let k = (x.shape()[rx - 1], w.shape()[rw - 2]);
    if k.0 != k.1 {
        return Err(LowerError::invalid(format!(
            "contraction dimension of mat_a and mat_b must match, got {} and {}",
            k.0, k.1
        )));
    }
    let r = match (&offs, rx, rw) {
        (None, 3, 3) => {
            if x.shape()[0] != w.shape()[0] {
                return Err(LowerError::invalid(format!(
                    "batch sizes of mat_a and mat_b must match, got {} and {}",
                    x.shape()[0],
                    w.shape()[0]
                )));
            }
            contract(cx, &x, &w, &dims(&[0], &[0], &[2], &[1]))?
        }
        (Some(offs), 2, 3) => {
            let gid = group_of(cx, offs, x.shape()[0], w.shape()[0])?;
            // [M, G, N]: every row times every group's matrix, then the row's group kept.
            let all = contract(cx, &x, &w, &dims(&[], &[], &[1], &[1]))?;
            pick(cx, &all, &gid, 1, 0)?
        }
        (Some(offs), 3, 2) => {
            let gid = group_of(cx, offs, w.shape()[1], x.shape()[0])?;
            // [G, M, N]: every group's matrix times every column, the column's group kept.
            let all = contract(cx, &x, &w, &dims(&[], &[], &[2], &[0]))?;
            pick(cx, &all, &gid, 0, 2)?
        }
        (Some(offs), 2, 2) => {
            let g = offs_len(offs)?;
            let gid = group_of(cx, offs, k.0, g)?;
            // self [M, K] masked per group along K -> [G, M, K], then times mat2.
            let (m, kk) = (x.shape()[0], k.0);
            let xb = cx.broadcast_in_dim(&x, &[g, m, kk], &[1, 2])?;
            let gb = cx.broadcast_in_dim(&gid, &[g, m, kk], &[2])?;
            let ids = cx.iota(TensorType::new(vec![g, m, kk], DType::I32), 0)?;
            let keep = cx.compare(Comparison::Eq, &gb, &ids)?;
            let zero = cx.full(TensorType::new(vec![g, m, kk], dt), 0.0)?;
            let xm = cx.select(&keep, &xb, &zero)?;
            contract(cx, &xm, &w, &dims(&[], &[], &[2], &[0]))?
        }
        _ => return Err(LowerError::invalid(
            "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d",
        )),
    };
    one(cast(cx, &r, dt)?)
}

fn offs_len(offs: &Value) -> LowerResult<usize> {
    if offs.dtype() != DType::I32 {
        return Err(LowerError::invalid("Offsets have to be int32"));
    }
    if offs.rank() != 1 {
        return Err(LowerError::invalid(format!(
            "offsets must be a 1-d tensor, got {}d",
            offs.rank()
        )));
    }
    Ok(offs.shape()[0])
}

/// The group of each of `n` positions: how many offsets are <= it (G past the last one),
/// as i32 [n]. `groups`: the group count the other operand has.
fn group_of(cx: &mut Lower, offs: &Value, n: usize, groups: usize) -> LowerResult<Value> {
    let g = offs_len(offs)?;
    if g != groups {
        return Err(LowerError::invalid(format!(
            "offsets must have one entry per group ({groups}), got {g}"
        )));
    }
    let pos = cx.iota(TensorType::new(vec![n, g], DType::I32), 0)?;
    let ob = cx.broadcast_in_dim(offs, &[n, g], &[1])?;
    let past = cx.compare(Comparison::Ge, &pos, &ob)?;
    let past = cx.convert(&past, DType::I32)?;
    Ok(cx.reduce_kind(&past, ReduceKind::Sum, &[1], false)?)
}

/// Of `all` (holding a group dim at `gdim`), for each position along `pdim` the entry of its
/// group (`gid`, i32 over `pdim`); the group dim is removed. A position past the last offset
/// picks nothing (0).
fn pick(cx: &mut Lower, all: &Value, gid: &Value, gdim: usize, pdim: usize) -> LowerResult<Value> {
    let shape = all.shape().to_vec();
    let ids = cx.iota(TensorType::new(shape.clone(), DType::I32), gdim)?;
    let gb = cx.broadcast_in_dim(gid, &shape, &[pdim])?;
    let keep = cx.compare(Comparison::Eq, &gb, &ids)?;
    let zero = cx.full(TensorType::new(shape, all.dtype()), 0.0)?;
    let kept = cx.select(&keep, all, &zero)?;
    Ok(cx.reduce_kind(&kept, ReduceKind::Sum, &[gdim], false)?)
}
