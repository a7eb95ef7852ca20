//! Default lowerings: products of matrices and vectors (mm, bmm, addmm, baddbmm, matmul,
//! linear, dot, mv, outer; addmv, addbmm, addr, vdot, inner, kron, cross, trace in
//! [`products`]), einsum, and pairwise distances (cdist, pdist).
//!
//! Float products run `dot_general` at `Precision::Highest` (full f32 on TPU); f16/bf16
//! operands are converted to f32 and the result rounded once, like PyTorch's CPU kernels that
//! accumulate in f32. Integer products keep their dtype; bool is refused as on PyTorch CPU.

mod dist;
mod einsum;
mod grouped;
mod products;

use super::promote::Operand;
use super::reduction::{acc_dtype, torch_name};
use super::util::{cast, promote_broadcast, scalar_const};
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Lowering, Out};
use crate::lowerings;
use tessera_lowering::stablehlo::{broadcast_shapes, BinaryOp, DotDims, Precision, Value};
use tessera_lowering::DType;

pub(super) const LOWERINGS: &[Lowering] = lowerings![
    ("mm", mm),
    ("bmm", bmm),
    ("_grouped_mm", grouped::grouped_mm),
    ("addmm", addmm),
    ("baddbmm", baddbmm),
    ("matmul", |cx, a| one(matmul_of(
        cx,
        &a.tensor("self")?,
        &a.tensor("other")?
    )?)),
    ("linear", linear),
    ("dot", dot),
    ("mv", mv),
    ("outer", outer),
    ("ger", outer),
    ("einsum", einsum::einsum),
    ("addmv", products::addmv),
    ("addbmm", products::addbmm),
    ("addr", products::addr),
    ("vdot", products::vdot),
    ("inner", products::inner),
    ("kron", products::kron),
    ("linalg_cross", products::cross),
    ("cross", products::cross),
    ("trace", products::trace),
    ("_cdist_forward", dist::cdist),
    ("_pdist_forward", dist::pdist),
];

fn one(v: Value) -> LowerResult<Vec<Out>> {
    Ok(vec![Out::Tensor(v)])
}

/// Both operands of a product share a dtype that is not bool.
pub(crate) fn check_same(a: &Value, b: &Value, what: &str) -> LowerResult<DType> {
    if a.dtype() != b.dtype() {
        return Err(LowerError::invalid(format!(
            "{what}, but got: {} != {}",
            a.dtype(),
            b.dtype()
        )));
    }
    if a.dtype() == DType::Bool {
        return Err(LowerError::dtype(
            DType::Bool,
            "\"addmm_impl_cpu_\" not implemented for 'Bool' (matrix products do not take bool tensors)",
        ));
    }
    Ok(a.dtype())
}

/// `dot_general` in the accumulation dtype (f32 for f16/bf16), at full precision for floats.
/// The result stays in the accumulation dtype.
pub(crate) fn contract(cx: &mut Lower, a: &Value, b: &Value, dims: &DotDims) -> LowerResult<Value> {
    let acc = acc_dtype(a.dtype());
    let a = cast(cx, a, acc)?;
    let b = cast(cx, b, acc)?;
    let p = if acc.is_float() {
        Precision::Highest
    } else {
        Precision::Default
    };
    Ok(cx.dot_general(&a, &b, dims, p)?)
}

fn dims(lb: &[usize], rb: &[usize], lc: &[usize], rc: &[usize]) -> DotDims {
    DotDims {
        lhs_batch: lb.to_vec(),
        rhs_batch: rb.to_vec(),
        lhs_contract: lc.to_vec(),
        rhs_contract: rc.to_vec(),
    }
}

fn need_rank(x: &Value, rank: usize, msg: &str) -> LowerResult<()> {
    if x.rank() == rank {
        Ok(())
    } else {
        Err(LowerError::invalid(format!("{msg}, got {}D", x.rank())))
    }
}

/// `[n, m] @ [m, p]` in the accumulation dtype (checked).
fn mm_acc(cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
    need_rank(a, 2, "self must be a matrix")?;
    need_rank(b, 2, "mat2 must be a matrix")?;
    check_same(a, b, "expected m1 and m2 to have the same dtype")?;
    if a.shape()[1] != b.shape()[0] {
        return Err(LowerError::invalid(format!(
            "mm: mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
            a.shape()[0],
            a.shape()[1],
            b.shape()[0],
            b.shape()[1]
        )));
    }
    contract(cx, a, b, &dims(&[], &[], &[1], &[0]))
}

/// `[b, n, m] @ [b, m, p]` in the accumulation dtype (checked).
fn bmm_acc(cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
    need_rank(a, 3, "batch1 must be a 3D tensor")?;
    need_rank(b, 3, "batch2 must be a 3D tensor")?;
    check_same(a, b, "expected m1 and m2 to have the same dtype")?;
    let (bs, m) = (a.shape()[0], a.shape()[2]);
    if b.shape()[0] != bs || b.shape()[1] != m {
        return Err(LowerError::invalid(format!(
            "Expected size for first two dimensions of batch2 tensor to be: [{bs}, {m}] but got: [{}, {}].",
            b.shape()[0],
            b.shape()[1]
        )));
    }
    contract(cx, a, b, &DotDims::matmul(1))
}

fn mm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let r = mm_acc(cx, &x, &a.tensor("mat2")?)?;
    one(cast(cx, &r, x.dtype())?)
}

fn bmm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let r = bmm_acc(cx, &x, &a.tensor("mat2")?)?;
    one(cast(cx, &r, x.dtype())?)
}

/// `beta * input + alpha * prod` (prod in the accumulation dtype); `beta == 0` ignores
/// `input` (its NaNs too), as PyTorch does.
fn add_scaled(
    cx: &mut Lower,
    a: &Args,
    input: &Value,
    prod: Value,
    out: DType,
) -> LowerResult<Value> {
    if input.dtype() != out {
        return Err(LowerError::invalid(format!(
            "self and mat2 must have the same dtype, but got {} and {}",
            torch_name(input.dtype()),
            torch_name(out)
        )));
    }
    let acc = prod.dtype();
    let (alpha, beta) = (a.scalar("alpha")?, a.scalar("beta")?);
    let mut r = prod;
    if alpha.as_f64() != 1.0 {
        let k = scalar_const(cx, alpha, acc)?;
        let k = cx.broadcast_to(&k, r.shape())?;
        r = cx.mul(&r, &k)?;
    }
    if beta.as_f64() != 0.0 {
        let s = cast(cx, input, acc)?;
        let s = cx.broadcast_to(&s, r.shape()).map_err(|_| {
            LowerError::invalid(format!(
                "The expanded size of the tensor ({:?}) must match the existing size ({:?})",
                r.shape(),
                input.shape()
            ))
        })?;
        let s = if beta.as_f64() != 1.0 {
            let k = scalar_const(cx, beta, acc)?;
            let k = cx.broadcast_to(&k, r.shape())?;
            cx.mul(&s, &k)?
        } else {
            s
        };
        r = cx.add(&r, &s)?;
    }
    cast(cx, &r, out)
}

fn addmm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let m1 = a.tensor("mat1")?;
    let p = mm_acc(cx, &m1, &a.tensor("mat2")?)?;
    one(add_scaled(cx, a, &a.tensor("self")?, p, m1.dtype())?)
}

fn baddbmm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let b1 = a.tensor("batch1")?;
    let p = bmm_acc(cx, &b1, &a.tensor("batch2")?)?;
    one(add_scaled(cx, a, &a.tensor("self")?, p, b1.dtype())?)
}

/// `torch.matmul`: dot, mv, mm, and batched products with broadcast batch dims; a 1-D
/// operand gets a dim prepended (left) or appended (right) that the result drops.
pub(crate) fn matmul_of(cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
    let (ra, rb) = (a.rank(), b.rank());
    if ra == 0 || rb == 0 {
        return Err(LowerError::invalid(format!(
            "both arguments to matmul need to be at least 1D, but they are {ra}D and {rb}D"
        )));
    }
    let out = check_same(a, b, "expected m1 and m2 to have the same dtype")?;
    let k_a = a.shape()[ra - 1];
    let k_b = if rb == 1 {
        b.shape()[0]
    } else {
        b.shape()[rb - 2]
    };
    if ra == 1 && rb == 1 && k_a != k_b {
        return Err(LowerError::invalid(format!(
            "inconsistent tensor size, expected tensor [{k_a}] and src [{k_b}] to have the same number of elements, but got {k_a} and {k_b} elements respectively"
        )));
    }
    if k_a != k_b {
        let s = |v: &Value| {
            v.shape()
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("x")
        };
        return Err(LowerError::invalid(format!(
            "mat1 and mat2 shapes cannot be multiplied ({} and {})",
            s(a),
            s(b)
        )));
    }
    let r = if rb <= 2 {
        // No batch dims on the right: contract a's last dim with b's first.
        contract(cx, a, b, &dims(&[], &[], &[ra - 1], &[0]))?
    } else {
        // a: [..., m, k] (or [k]); b: [..., k, n]: broadcast the batch dims.
        let a2 = if ra == 1 {
            cx.reshape(a, &[1, k_a])?
        } else {
            a.clone()
        };
        let (ba, bb) = (&a2.shape()[..a2.rank() - 2], &b.shape()[..rb - 2]);
        let batch = broadcast_shapes(ba, bb).map_err(|_| {
            LowerError::invalid(format!(
                "The size of tensor a ({ba:?}) must match the size of tensor b ({bb:?}) at non-singleton dimensions"
            ))
        })?;
        let nb = batch.len();
        let mut sa = batch.clone();
        sa.extend_from_slice(&a2.shape()[a2.rank() - 2..]);
        let mut sb = batch.clone();
        sb.extend_from_slice(&b.shape()[rb - 2..]);
        let a3 = cx.broadcast_to(&a2, &sa)?;
        let b3 = cx.broadcast_to(b, &sb)?;
        let r = contract(cx, &a3, &b3, &DotDims::matmul(nb))?;
        if ra == 1 {
            let mut s = batch.clone();
            s.push(b.shape()[rb - 1]);
            cx.reshape(&r, &s)?
        } else {
            r
        }
    };
    cast(cx, &r, out)
}

fn linear(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let w = a.tensor("weight")?;
    if x.rank() == 0 || w.rank() == 0 || w.rank() > 2 {
        return Err(LowerError::invalid(format!(
            "linear: input must be at least 1D and weight 1D or 2D, got {}D and {}D",
            x.rank(),
            w.rank()
        )));
    }
    let out = check_same(&x, &w, "expected m1 and m2 to have the same dtype")?;
    let (k, kw) = (x.shape()[x.rank() - 1], w.shape()[w.rank() - 1]);
    if k != kw {
        return Err(LowerError::invalid(format!(
            "mat1 and mat2 shapes cannot be multiplied (input's last dim {k} vs weight's {kw})"
        )));
    }
    let r = contract(
        cx,
        &x,
        &w,
        &dims(&[], &[], &[x.rank() - 1], &[w.rank() - 1]),
    )?;
    let r = match a.opt_tensor("bias")? {
        None => r,
        Some(bias) => {
            if bias.dtype() != out {
                return Err(LowerError::invalid(format!(
                    "self and mat2 must have the same dtype, but got {} and {}",
                    torch_name(bias.dtype()),
                    torch_name(out)
                )));
            }
            let b = cast(cx, &bias, r.dtype())?;
            let shape = broadcast_shapes(r.shape(), b.shape()).map_err(|_| {
                LowerError::invalid(format!(
                    "linear: bias of shape {:?} does not broadcast to the output shape {:?}",
                    bias.shape(),
                    r.shape()
                ))
            })?;
            let r = cx.broadcast_to(&r, &shape)?;
            let b = cx.broadcast_to(&b, &shape)?;
            cx.add(&r, &b)?
        }
    };
    one(cast(cx, &r, out)?)
}

fn dot(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    vector_dot(cx, &a.tensor("self")?, &a.tensor("tensor")?, "dot")
}

/// `dot`/`vdot` (`name`) of two 1-D tensors of one dtype, with torch's checks (real tensors:
/// no conjugate).
pub(super) fn vector_dot(
    cx: &mut Lower,
    x: &Value,
    y: &Value,
    name: &str,
) -> LowerResult<Vec<Out>> {
    if x.rank() != 1 || y.rank() != 1 {
        return Err(LowerError::invalid(format!(
            "1D tensors expected, but got {}D and {}D tensors",
            x.rank(),
            y.rank()
        )));
    }
    if x.dtype() != y.dtype() {
        return Err(LowerError::invalid(format!(
            "{name} : expected both vectors to have same dtype, but found {} and {}",
            torch_name(x.dtype()),
            torch_name(y.dtype())
        )));
    }
    check_same(x, y, name)?;
    if x.shape() != y.shape() {
        return Err(LowerError::invalid(format!(
            "inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively",
            x.shape()[0],
            y.shape()[0],
            x.shape()[0],
            y.shape()[0]
        )));
    }
    let r = contract(cx, x, y, &dims(&[], &[], &[0], &[0]))?;
    one(cast(cx, &r, x.dtype())?)
}

fn mv(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let (r, out) = mat_vec(cx, &a.tensor("self")?, &a.tensor("vec")?, 1)?;
    one(cast(cx, &r, out)?)
}

/// `m @ v` for `mv` and `addmv` (`self_rank`: the rank torch names first in its error, the
/// added tensor's for addmv), with the result dtype.
pub(super) fn mat_vec(
    cx: &mut Lower,
    m: &Value,
    v: &Value,
    self_rank: usize,
) -> LowerResult<(Value, DType)> {
    if m.rank() != 2 || v.rank() != 1 {
        return Err(LowerError::invalid(format!(
            "vector + matrix @ vector expected, got {self_rank}, {}, {}",
            m.rank(),
            v.rank()
        )));
    }
    let out = check_same(m, v, "expected m1 and m2 to have the same dtype")?;
    if m.shape()[1] != v.shape()[0] {
        return Err(LowerError::invalid(format!(
            "size mismatch, got input ({}), mat ({}x{}), vec ({})",
            m.shape()[0],
            m.shape()[0],
            m.shape()[1],
            v.shape()[0]
        )));
    }
    Ok((contract(cx, m, v, &dims(&[], &[], &[1], &[0]))?, out))
}

/// `outer(a, b) = a[:, None] * b[None, :]`, with type promotion as for `mul`.
fn outer(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let y = a.tensor("vec2")?;
    for (v, name) in [(&x, "self"), (&y, "vec2")] {
        if v.rank() != 1 {
            return Err(LowerError::invalid(format!(
                "outer: Expected 1-D argument {name}, but got {}-D",
                v.rank()
            )));
        }
    }
    let (n, m) = (x.shape()[0], y.shape()[0]);
    let xc = cx.reshape(&x, &[n, 1])?;
    let yr = cx.reshape(&y, &[1, m])?;
    let (v, dtype) = promote_broadcast(cx, &[Operand::Tensor(xc), Operand::Tensor(yr)], None)?;
    let op = if dtype == DType::Bool {
        BinaryOp::And
    } else {
        BinaryOp::Multiply
    };
    one(cx.binary(op, &v[0], &v[1])?)
}
