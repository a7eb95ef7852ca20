//! `_cdist_forward` (batched pairwise p-distances between two sets of rows) and
//! `_pdist_forward` (distances between the rows of one matrix, upper triangle, row-major).

use super::contract;
use crate::args::Args;
use crate::aten::reduction::{acc_dtype, p_norm, reduce, torch_name, with_const};
use crate::aten::util::cast;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{
    broadcast_shapes, BinaryOp, DotDims, GatherDims, ReduceKind, TensorType, UnaryOp, Value,
};
use tessera_lowering::HostTensor;

fn float_only(x: &Value, what: &str) -> LowerResult<()> {
    if x.dtype().is_float() {
        Ok(())
    } else {
        Err(LowerError::dtype(
            x.dtype(),
            format!(
                "{what} only supports floating-point dtypes, X1 got: {}",
                torch_name(x.dtype())
            ),
        ))
    }
}

/// `‖x1_i - x2_j‖²` as PyTorch's `_euclidean_dist` computes it: one product of
/// `[-2·x1, |x1|², 1]` and `[x2, 1, |x2|²]`, clamped at 0, square-rooted.
fn euclid_mm(cx: &mut Lower, x1: &Value, x2: &Value, nb: usize) -> LowerResult<Value> {
    let r = x1.rank();
    let aug = |cx: &mut Lower, x: &Value, scale: f64, norm_first: bool| -> LowerResult<Value> {
        let sq = cx.mul(x, x)?;
        let n = reduce(cx, &sq, ReduceKind::Sum, &[r - 1], true)?;
        let ones = cx.full(n.ty().clone(), 1.0)?;
        let xs = if scale != 1.0 {
            with_const(cx, BinaryOp::Multiply, x, scale)?
        } else {
            x.clone()
        };
        let parts = if norm_first {
            [&xs, &n, &ones]
        } else {
            [&xs, &ones, &n]
        };
        Ok(cx.concatenate(&parts, r - 1)?)
    };
    let a = aug(cx, x1, -2.0, true)?;
    let b = aug(cx, x2, 1.0, false)?;
    let dims = DotDims {
        lhs_batch: (0..nb).collect(),
        rhs_batch: (0..nb).collect(),
        lhs_contract: vec![r - 1],
        rhs_contract: vec![r - 1],
    };
    let d = contract(cx, &a, &b, &dims)?;
    let z = cx.zeros(d.ty().clone())?;
    let d = cx.max(&d, &z)?;
    Ok(cx.unary(UnaryOp::Sqrt, &d)?)
}

pub(super) fn cdist(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x1 = a.tensor("x1")?;
    let x2 = a.tensor("x2")?;
    let p = a.float("p")?;
    for (x, n) in [(&x1, "X1"), (&x2, "X2")] {
        if x.rank() < 2 {
            return Err(LowerError::invalid(format!(
                "cdist only supports at least 2D tensors, {n} got: {}D",
                x.rank()
            )));
        }
    }
    float_only(&x1, "cdist")?;
    if x1.dtype() != x2.dtype() {
        return Err(LowerError::invalid(format!(
            "expected scalar type {} but found {}",
            torch_name(x1.dtype()),
            torch_name(x2.dtype())
        )));
    }
    let (r1, r2) = (x1.rank(), x2.rank());
    let (m1, m2) = (x1.shape()[r1 - 1], x2.shape()[r2 - 1]);
    if m1 != m2 {
        return Err(LowerError::invalid(format!(
            "X1 and X2 must have the same number of columns. X1: {m1} X2: {m2}"
        )));
    }
    if p < 0.0 || p.is_nan() {
        return Err(LowerError::invalid(
            "cdist only supports non-negative p values",
        ));
    }
    let (b1, b2) = (&x1.shape()[..r1 - 2], &x2.shape()[..r2 - 2]);
    let batch = broadcast_shapes(b1, b2).map_err(|_| {
        LowerError::invalid(format!("The size of tensor a ({b1:?}) must match the size of tensor b ({b2:?}) at non-singleton dimensions"))
    })?;
    let (pn, rn, m) = (x1.shape()[r1 - 2], x2.shape()[r2 - 2], m1);
    let out = x1.dtype();
    let acc = acc_dtype(out);
    let nb = batch.len();
    let mut s1 = batch.clone();
    s1.extend([pn, m]);
    let mut s2 = batch.clone();
    s2.extend([rn, m]);
    let mut so = batch.clone();
    so.extend([pn, rn]);
    if m == 0 {
        return Ok(vec![Out::Tensor(cx.zeros(TensorType::new(so, out))?)]);
    }
    let x1 = cast(cx, &x1, acc)?;
    let x2 = cast(cx, &x2, acc)?;
    let x1 = cx.broadcast_to(&x1, &s1)?;
    let x2 = cx.broadcast_to(&x2, &s2)?;
    let mode = a.opt_int("compute_mode")?.unwrap_or(0);
    let use_mm = p == 2.0 && (mode == 1 || (mode == 0 && (pn > 25 || rn > 25)));
    let r = if use_mm {
        euclid_mm(cx, &x1, &x2, nb)?
    } else {
        // [..., P, 1, M] - [..., 1, R, M], then the p-norm over M.
        let mut full = batch.clone();
        full.extend([pn, rn, m]);
        let lead: Vec<usize> = (0..nb).collect();
        let d1: Vec<usize> = lead.iter().copied().chain([nb, nb + 2]).collect();
        let d2: Vec<usize> = lead.iter().copied().chain([nb + 1, nb + 2]).collect();
        let e1 = cx.broadcast_in_dim(&x1, &full, &d1)?;
        let e2 = cx.broadcast_in_dim(&x2, &full, &d2)?;
        let diff = cx.sub(&e1, &e2)?;
        p_norm(cx, &diff, p, &[nb + 2], false)?
    };
    Ok(vec![Out::Tensor(cast(cx, &r, out)?)])
}

/// Rows `rows` (i64 indices) of the matrix `x`.
fn take_rows(cx: &mut Lower, x: &Value, rows: &[i64]) -> LowerResult<Value> {
    let idx = cx.constant(&HostTensor::from_vec(vec![rows.len()], rows.to_vec()))?;
    let dims = GatherDims {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        index_vector_dim: 1,
    };
    Ok(cx.gather(x, &idx, &dims, &[1, x.shape()[1]])?)
}

pub(super) fn pdist(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let p = a.float("p")?;
    if x.rank() != 2 {
        return Err(LowerError::invalid(format!(
            "pdist only supports 2D tensors, got: {}D",
            x.rank()
        )));
    }
    float_only(&x, "pdist")?;
    let (n, m) = (x.shape()[0], x.shape()[1]);
    let out = x.dtype();
    let k = n * n.saturating_sub(1) / 2;
    if k == 0 || m == 0 {
        return Ok(vec![Out::Tensor(cx.zeros(TensorType::new([k], out))?)]);
    }
    let (mut is, mut js) = (Vec::with_capacity(k), Vec::with_capacity(k));
    for i in 0..n {
        for j in i + 1..n {
            is.push(i as i64);
            js.push(j as i64);
        }
    }
    let xa = cast(cx, &x, acc_dtype(out))?;
    let xi = take_rows(cx, &xa, &is)?;
    let xj = take_rows(cx, &xa, &js)?;
    let d = cx.sub(&xi, &xj)?;
    let r = p_norm(cx, &d, p, &[1], false)?;
    Ok(vec![Out::Tensor(cast(cx, &r, out)?)])
}
