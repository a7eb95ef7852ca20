//! More products: addmv, addbmm, addr, vdot, inner, kron, linalg_cross / cross, trace.

use super::{add_scaled, check_same, contract, dims, mat_vec, one, vector_dot};
use crate::args::Args;
use crate::aten::promote::Operand;
use crate::aten::reduction::{acc_dtype, int_to_i64};
use crate::aten::shape::views::diagonal_value;
use crate::aten::util::{cast, promote_broadcast, wrap_dim};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, ReduceKind, Value};
use tessera_lowering::DType;

/// `addmv(self, mat, vec, *, beta=1, alpha=1)`: `beta * self + alpha * (mat @ vec)`.
pub(super) fn addmv(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let (p, out) = mat_vec(cx, &a.tensor("mat")?, &a.tensor("vec")?, x.rank())?;
    one(add_scaled(cx, a, &x, p, out)?)
}

/// `addbmm(self, batch1, batch2, *, beta=1, alpha=1)`: the batch of products summed.
pub(super) fn addbmm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let b1 = a.tensor("batch1")?;
    let b2 = a.tensor("batch2")?;
    if b1.rank() != 3 || b2.rank() != 3 {
        return Err(LowerError::invalid(format!(
            "batch1 must be a 3D tensor, batch2 must be a 3D tensor (got {}D and {}D)",
            b1.rank(),
            b2.rank()
        )));
    }
    let out = check_same(
        &b1,
        &b2,
        "expected batch1 and batch2 to have the same dtype",
    )?;
    if b1.shape()[0] != b2.shape()[0] || b1.shape()[2] != b2.shape()[1] {
        return Err(LowerError::invalid(format!(
            "batch1 and batch2 must have same number of batches and matching inner dims, got {:?} and {:?}",
            b1.shape(),
            b2.shape()
        )));
    }
    let p = contract(cx, &b1, &b2, &dims(&[], &[], &[0, 2], &[0, 1]))?;
    one(add_scaled(cx, a, &a.tensor("self")?, p, out)?)
}

/// `addr(self, vec1, vec2, *, beta=1, alpha=1)`: `beta * self + alpha * outer(vec1, vec2)`;
/// for bool, `(beta and self) or (alpha and outer)`.
pub(super) fn addr(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (x, y) = (a.tensor("vec1")?, a.tensor("vec2")?);
    if x.rank() != 1 || y.rank() != 1 {
        return Err(LowerError::invalid(format!(
            "addr: Expected 1-D argument vec1 and vec2, but got {}-D and {}-D",
            x.rank(),
            y.rank()
        )));
    }
    let out = x.dtype();
    if y.dtype() != out {
        return Err(LowerError::invalid(
            "addr: expected vec1 and vec2 to have the same dtype",
        ));
    }
    let (n, m) = (x.shape()[0], y.shape()[0]);
    let xc = cx.reshape(&x, &[n, 1])?;
    let yr = cx.reshape(&y, &[1, m])?;
    let xc = cx.broadcast_to(&xc, &[n, m])?;
    let yr = cx.broadcast_to(&yr, &[n, m])?;
    if out == DType::Bool {
        let s = a.tensor("self")?;
        let (alpha, beta) = (
            a.scalar("alpha")?.as_f64() != 0.0,
            a.scalar("beta")?.as_f64() != 0.0,
        );
        let mut r = cx.binary(BinaryOp::And, &xc, &yr)?;
        if !alpha {
            r = cx.zeros(r.ty().clone())?;
        }
        if beta {
            let s = cast(cx, &s, DType::Bool)?;
            let s = cx.broadcast_to(&s, &[n, m])?;
            r = cx.binary(BinaryOp::Or, &r, &s)?;
        }
        return one(r);
    }
    let acc = acc_dtype(out);
    let xa = cast(cx, &xc, acc)?;
    let ya = cast(cx, &yr, acc)?;
    let p = cx.mul(&xa, &ya)?;
    one(add_scaled(cx, a, &a.tensor("self")?, p, out)?)
}

/// `vdot(self, other)`: the dot product of two 1-D tensors of one dtype (real: no conjugate).
pub(super) fn vdot(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    vector_dot(cx, &a.tensor("self")?, &a.tensor("other")?, "vdot")
}

/// `inner(self, other)`: contraction of the last dims (a product when either is 0-d).
pub(super) fn inner(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let y = a.tensor("other")?;
    if x.rank() == 0 || y.rank() == 0 {
        return kron_like_mul(cx, &x, &y);
    }
    let (ra, rb) = (x.rank(), y.rank());
    if x.shape()[ra - 1] != y.shape()[rb - 1] {
        return Err(LowerError::invalid(format!(
            "inner() the last dimension must match on both input tensors but got shapes {:?} and {:?}",
            x.shape(),
            y.shape()
        )));
    }
    let out = check_same(
        &x,
        &y,
        "inner: expected both tensors to have the same dtype",
    )?;
    let r = contract(cx, &x, &y, &dims(&[], &[], &[ra - 1], &[rb - 1]))?;
    one(cast(cx, &r, out)?)
}

/// `x * y` with promotion (bool: and).
fn kron_like_mul(cx: &mut Lower, x: &Value, y: &Value) -> LowerResult<Vec<Out>> {
    let (v, d) = promote_broadcast(
        cx,
        &[Operand::Tensor(x.clone()), Operand::Tensor(y.clone())],
        None,
    )?;
    let op = if d == DType::Bool {
        BinaryOp::And
    } else {
        BinaryOp::Multiply
    };
    one(cx.binary(op, &v[0], &v[1])?)
}

/// `kron(self, other)`: the Kronecker product (shapes padded with leading 1s to one rank;
/// result dim `i` has size `a_i * b_i`).
pub(super) fn kron(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let y = a.tensor("other")?;
    let r = x.rank().max(y.rank());
    let pad = |s: &[usize]| -> Vec<usize> {
        let mut v = vec![1; r - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (sa, sb) = (pad(x.shape()), pad(y.shape()));
    let mut ia = Vec::with_capacity(2 * r);
    let mut ib = Vec::with_capacity(2 * r);
    for i in 0..r {
        ia.extend([sa[i], 1]);
        ib.extend([1, sb[i]]);
    }
    let xa = cx.reshape(&x, &ia)?;
    let yb = cx.reshape(&y, &ib)?;
    let (v, d) = promote_broadcast(cx, &[Operand::Tensor(xa), Operand::Tensor(yb)], None)?;
    let op = if d == DType::Bool {
        BinaryOp::And
    } else {
        BinaryOp::Multiply
    };
    let p = cx.binary(op, &v[0], &v[1])?;
    let shape: Vec<usize> = (0..r).map(|i| sa[i] * sb[i]).collect();
    one(cx.reshape(&p, &shape)?)
}

/// `linalg_cross(self, other, *, dim=-1)` and `cross(self, other, dim=None)` (None: the
/// first dim of size 3): the 3-vector cross product along `dim`, operands broadcast.
pub(super) fn cross(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let y = a.tensor("other")?;
    if x.rank() != y.rank() {
        return Err(LowerError::invalid(format!(
            "linalg.cross: inputs must have the same number of dimensions, but got {} and {}",
            x.rank(),
            y.rank()
        )));
    }
    // With a dim, torch checks the inputs' lengths before broadcasting them.
    if let Some(dm) = a.opt_int("dim")? {
        let w = wrap_dim(dm, x.rank())?;
        let (lx, ly) = (x.shape().get(w).copied(), y.shape().get(w).copied());
        if lx != Some(3) || ly != Some(3) {
            return Err(LowerError::invalid(format!(
                "linalg.cross: inputs dimension {dm} must have length 3. Got {} and {}",
                lx.unwrap_or(1),
                ly.unwrap_or(1)
            )));
        }
    }
    let (v, d) = promote_broadcast(cx, &[Operand::Tensor(x), Operand::Tensor(y)], None)?;
    if d == DType::Bool {
        return Err(LowerError::dtype(d, "\"cross\" not implemented for 'Bool'"));
    }
    let shape = v[0].shape().to_vec();
    let dim = match a.opt_int("dim")? {
        Some(dm) => wrap_dim(dm, shape.len())?,
        None => shape.iter().position(|&s| s == 3).ok_or_else(|| {
            LowerError::invalid(format!("no dimension of size 3 in input {shape:?}"))
        })?,
    };
    if shape.get(dim) != Some(&3) {
        return Err(LowerError::invalid(format!(
            "linalg.cross: inputs dimension {dim} must have length 3. Got {} and {}",
            shape.get(dim).copied().unwrap_or(0),
            shape.get(dim).copied().unwrap_or(0)
        )));
    }
    let acc = acc_dtype(d);
    let comp = |cx: &mut Lower, t: &Value, i: usize| -> LowerResult<Value> {
        let s = cx.slice_axis(t, dim, i, 1)?;
        cast(cx, &s, acc)
    };
    let (a0, a1, a2) = (
        comp(cx, &v[0], 0)?,
        comp(cx, &v[0], 1)?,
        comp(cx, &v[0], 2)?,
    );
    let (b0, b1, b2) = (
        comp(cx, &v[1], 0)?,
        comp(cx, &v[1], 1)?,
        comp(cx, &v[1], 2)?,
    );
    let term = |cx: &mut Lower, p: &Value, q: &Value, r: &Value, s: &Value| -> LowerResult<Value> {
        let l = cx.mul(p, q)?;
        let m = cx.mul(r, s)?;
        Ok(cx.sub(&l, &m)?)
    };
    let c0 = term(cx, &a1, &b2, &a2, &b1)?;
    let c1 = term(cx, &a2, &b0, &a0, &b2)?;
    let c2 = term(cx, &a0, &b1, &a1, &b0)?;
    let c = cx.concatenate(&[&c0, &c1, &c2], dim)?;
    one(cast(cx, &c, d)?)
}

/// `trace(self)`: the sum of a matrix's diagonal (integers and bool sum to i64).
pub(super) fn trace(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.rank() != 2 {
        return Err(LowerError::invalid(format!(
            "trace: expected a matrix, but got tensor with dim {}",
            x.rank()
        )));
    }
    let out = int_to_i64(x.dtype());
    let dg = diagonal_value(cx, &x, 0, 0, 1)?;
    let dg = cast(cx, &dg, out)?;
    let dg = cast(cx, &dg, acc_dtype(out))?;
    let s = cx.reduce_kind(&dg, ReduceKind::Sum, &[0], false)?;
    one(cast(cx, &s, out)?)
}
