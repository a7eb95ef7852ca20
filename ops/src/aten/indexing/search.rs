//! Searching and element-wise indexing: searchsorted, bucketize, isin, take,
//! take_along_dim, index_fill, one_hot.
//!
//! Out-of-range indices (take, take_along_dim, one_hot) are not detected here (PyTorch
//! raises, data-dependently); they read clamped positions.

use super::points::*;
use crate::args::Args;
use crate::check::CheckKind;
use crate::aten::promote::promote_types;
use crate::aten::shape::common::*;
use crate::aten::util::{cast, scalar_const, wrap_dim};
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, ReduceKind, Value};
use tessera_lowering::DType;

/// How many of `seq`'s last-dim entries (batched by its leading dims, matching `v`'s, or
/// shared when `seq` is 1-d) are below `v` (`<=` with `right`): the insertion index.
fn count_below(cx: &mut Lower, seq: &Value, v: &Value, right: bool) -> LowerResult<Value> {
    let d = promote_types(seq.dtype(), v.dtype());
    let (s, x) = (cast(cx, seq, d)?, cast(cx, v, d)?);
    let m = s.shape().last().copied().unwrap_or(1);
    let s = if s.rank() == 0 {
        cx.reshape(&s, &[1])?
    } else {
        s
    };
    let mut big = x.shape().to_vec();
    big.push(m);
    let r = x.rank();
    let sb = if s.rank() == 1 {
        cx.broadcast_in_dim(&s, &big, &[r])?
    } else {
        cx.broadcast_in_dim(&s, &big, &(0..=r).collect::<Vec<_>>())?
    };
    let xb = cx.broadcast_in_dim(&x, &big, &(0..r).collect::<Vec<_>>())?;
    let below = cx.compare(
        if right {
            Comparison::Le
        } else {
            Comparison::Lt
        },
        &sb,
        &xb,
    )?;
    // NaN in the sequence sorts last (it compares false), NaN values go past the end.
    let below = if d.is_float() {
        let xn = cx.compare(Comparison::Ne, &xb, &xb)?;
        let sn = cx.compare(Comparison::Ne, &sb, &sb)?;
        let not_sn = cx.unary(tessera_lowering::stablehlo::UnaryOp::Not, &sn)?;
        let xn = cx.binary(BinaryOp::And, &xn, &not_sn)?;
        cx.binary(BinaryOp::Or, &below, &xn)?
    } else {
        below
    };
    let c = cx.convert(&below, DType::I64)?;
    Ok(cx.reduce_kind(&c, ReduceKind::Sum, &[r], false)?)
}

fn index_dtype(out_int32: bool) -> DType {
    if out_int32 {
        DType::I32
    } else {
        DType::I64
    }
}

/// `searchsorted.Tensor(sorted_sequence, self, *, out_int32, right, side, sorter)`.
pub(super) fn searchsorted(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let seq = a.tensor("sorted_sequence")?;
    let x = a.tensor("self")?;
    let side = a.opt_str("side")?;
    let right = a.bool("right")?;
    if side.as_deref() == Some("left") && right {
        return Err(LowerError::invalid(
            "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True",
        ));
    }
    let right = right || side.as_deref() == Some("right");
    // A sorter gives the order of an unsorted sequence along its last dim.
    let seq = match a.opt_tensor("sorter")? {
        Some(sorter) => {
            check_index_dtype(&sorter, "torch.searchsorted()")?;
            if sorter.shape() != seq.shape() {
                return Err(LowerError::invalid(format!(
                    "torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor {:?} and got sorter tensor {:?}",
                    seq.shape(),
                    sorter.shape()
                )));
            }
            let last = seq.rank().saturating_sub(1);
            let comps = along_dim(cx, &sorter, last)?;
            gather_points(cx, &seq, &comps, seq.shape())?
        }
        None => seq,
    };
    if seq.rank() > 1
        && (seq.rank() != x.rank()
            || seq.shape()[..seq.rank() - 1] != x.shape()[..x.rank().saturating_sub(1)])
    {
        return Err(LowerError::invalid(format!(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries tensor {:?} and input value tensor {:?}",
            seq.shape(),
            x.shape()
        )));
    }
    let c = count_below(cx, &seq, &x, right)?;
    one(cx.convert(&c, index_dtype(a.bool("out_int32")?))?)
}

/// `bucketize.Tensor(self, boundaries, *, out_int32, right)`: searchsorted on 1-d boundaries.
pub(super) fn bucketize(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let b = a.tensor("boundaries")?;
    if b.rank() != 1 {
        return Err(LowerError::invalid(format!(
            "boundaries tensor must be 1 dimension, but got dim({})",
            b.rank()
        )));
    }
    let c = count_below(cx, &b, &a.tensor("self")?, a.bool("right")?)?;
    one(cx.convert(&c, index_dtype(a.bool("out_int32")?))?)
}

/// `isin.Tensor_Tensor(elements, test_elements, *, assume_unique, invert)`.
pub(super) fn isin(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("elements")?;
    let t = a.tensor("test_elements")?;
    let d = promote_types(x.dtype(), t.dtype());
    let (x, t) = (cast(cx, &x, d)?, cast(cx, &t, d)?);
    let n = t.ty().num_elements();
    let r = x.rank();
    let mut big = x.shape().to_vec();
    big.push(n);
    let tf = cx.reshape(&t, &[n])?;
    let tb = cx.broadcast_in_dim(&tf, &big, &[r])?;
    let xb = cx.broadcast_in_dim(&x, &big, &(0..r).collect::<Vec<_>>())?;
    let eq = cx.compare(Comparison::Eq, &xb, &tb)?;
    let any = cx.reduce_kind(&eq, ReduceKind::Or, &[r], false)?;
    one(if a.bool("invert")? {
        cx.unary(tessera_lowering::stablehlo::UnaryOp::Not, &any)?
    } else {
        any
    })
}

/// `take(self, index)`: elements of the flattened tensor (negative indices from the end).
pub(super) fn take(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let idx = a.tensor("index")?;
    check_index_dtype(&idx, "take")?;
    let n = x.ty().num_elements();
    if n == 0 && idx.ty().num_elements() > 0 {
        return Err(LowerError::invalid(
            "take(): tried to take from an empty tensor",
        ));
    }
    let size = n as i64;
    cx.check_range(&idx, -size, size, None, CheckKind::Flat { size })?;
    let flat = cx.reshape(&x, &[n])?;
    let i = cx.convert(&idx, DType::I64)?;
    let neg = i64_full(cx, idx.shape(), 0)?;
    let is_neg = cx.compare(Comparison::Lt, &i, &neg)?;
    let nn = i64_full(cx, idx.shape(), n as i64)?;
    let wrapped = cx.add(&i, &nn)?;
    let i = cx.select(&is_neg, &wrapped, &i)?;
    one(gather_points(cx, &flat, &[i], idx.shape())?)
}

/// `take_along_dim(self, indices, dim=None)`: `gather` along `dim` with `self` and `indices`
/// broadcast against each other except along it (without a dim: of the flattened tensor).
pub(super) fn take_along_dim(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let idx = a.tensor("indices")?;
    check_index_dtype(&idx, "torch.take_along_dim()")?;
    let Some(dim) = a.opt_int("dim")? else {
        let n = x.ty().num_elements();
        let flat = cx.reshape(&x, &[n])?;
        let m = idx.ty().num_elements();
        let i = cx.reshape(&idx, &[m])?;
        let comps = along_dim(cx, &i, 0)?;
        return one(gather_points(cx, &flat, &comps, &[m])?);
    };
    if x.rank() != idx.rank() {
        return Err(LowerError::invalid(
            "torch.take_along_dim(): input and indices should have the same number of dimensions",
        ));
    }
    let d = wrap_dim(dim, x.rank())?;
    let mut xs = Vec::with_capacity(x.rank());
    let mut is = Vec::with_capacity(x.rank());
    for k in 0..x.rank() {
        let (p, q) = (x.shape()[k], idx.shape()[k]);
        if k == d {
            xs.push(p);
            is.push(q);
        } else if p == q || p == 1 || q == 1 {
            xs.push(p.max(q));
            is.push(p.max(q));
        } else {
            return Err(LowerError::invalid(format!(
                "torch.take_along_dim(): the shapes {:?} and {:?} do not broadcast outside dim {d}",
                x.shape(),
                idx.shape()
            )));
        }
    }
    let xb = cx.broadcast_to(&x, &xs)?;
    let ib = cx.broadcast_to(&idx, &is)?;
    let comps = along_dim(cx, &ib, d)?;
    let size = i64_full(cx, &is, xs[d] as i64)?;
    let zero = i64_full(cx, &is, 0)?;
    let neg = cx.compare(Comparison::Lt, &comps[d], &zero)?;
    let wrapped = cx.add(&comps[d], &size)?;
    let mut comps = comps;
    comps[d] = cx.select(&neg, &wrapped, &comps[d])?;
    one(gather_points(cx, &xb, &comps, &is)?)
}

/// `index_fill.int_Scalar` / `.int_Tensor(self, dim, index, value)`: the entries at `index`
/// along `dim` set to `value` (negative indices from the end).
pub(super) fn index_fill(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let idx = a.tensor("index")?;
    check_index_dtype(&idx, "index_fill_()")?;
    if idx.rank() > 1 {
        return Err(LowerError::invalid("Index has to be a vector/scalar"));
    }
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    let xs = if x.rank() == 0 {
        cx.reshape(&x, &[1])?
    } else {
        x.clone()
    };
    let size = xs.shape()[d] as i64;
    let v = match a.tensor("value") {
        Ok(t) => {
            if t.rank() != 0 {
                return Err(LowerError::invalid(format!(
                    "index_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
                    t.rank()
                )));
            }
            cast(cx, &t, x.dtype())?
        }
        Err(_) => scalar_const(cx, a.scalar("value")?, x.dtype())?,
    };
    let m = idx.ty().num_elements();
    cx.check_range(&idx, -size, size, None, CheckKind::Bounds { prefix: "", dim: d, size })?;
    let i = cx.reshape(&idx, &[m])?;
    let i = cx.convert(&i, DType::I64)?;
    let zero = i64_full(cx, &[m], 0)?;
    let neg = cx.compare(Comparison::Lt, &i, &zero)?;
    let sz = i64_full(cx, &[m], size)?;
    let wrapped = cx.add(&i, &sz)?;
    let i = cx.select(&neg, &wrapped, &i)?;
    // hit[p] = any(index == p) along dim, broadcast over the other dims.
    let pos = iota(cx, &[size as usize, m], 0)?;
    let ib = cx.broadcast_in_dim(&i, &[size as usize, m], &[1])?;
    let eq = cx.compare(Comparison::Eq, &pos, &ib)?;
    let hit = cx.reduce_kind(&eq, ReduceKind::Or, &[1], false)?;
    let hit = cx.broadcast_in_dim(&hit, xs.shape(), &[d])?;
    let vb = cx.broadcast_to(&v, xs.shape())?;
    let y = cx.select(&hit, &vb, &xs)?;
    one(cx.reshape(&y, x.shape())?)
}

/// `one_hot(self, num_classes)`: i64 one-hot rows; `num_classes = -1` (one more than the
/// largest value) is refused: the output's shape would depend on the data.
pub(super) fn one_hot(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if x.dtype() != DType::I64 {
        return Err(LowerError::invalid(
            "one_hot is only applicable to index tensor of type LongTensor.",
        ));
    }
    let c = a.int("num_classes")?;
    if c == -1 {
        return Err(LowerError::Unsupported(
            "one_hot with num_classes=-1 (the output shape would depend on the data); pass num_classes".into(),
        ));
    }
    if c < 0 {
        return Err(LowerError::invalid("num_classes should be positive"));
    }
    cx.check_range(&x, 0, i64::MAX, None, CheckKind::Fixed("Class values must be non-negative."))?;
    cx.check_range(&x, i64::MIN, c, None, CheckKind::Fixed("Class values must be smaller than num_classes."))?;
    let mut shape = x.shape().to_vec();
    shape.push(c as usize);
    let r = x.rank();
    let cls = iota(cx, &shape, r)?;
    let xb = cx.broadcast_in_dim(&x, &shape, &(0..r).collect::<Vec<_>>())?;
    let eq = cx.compare(Comparison::Eq, &cls, &xb)?;
    one(cx.convert(&eq, DType::I64)?)
}
