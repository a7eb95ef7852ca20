//! embedding and embedding_dense_backward.

use super::points::*;
use crate::aten::shape::common::*;
use crate::args::Args;
use crate::check::CheckKind;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::Comparison;
use tessera_lowering::DType;

pub(super) fn embedding(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let w = a.tensor("weight")?;
    let idx = a.tensor("indices")?;
    if w.rank() != 2 {
        return Err(LowerError::invalid("'weight' must be 2-D"));
    }
    if !matches!(idx.dtype(), DType::I64 | DType::I32) {
        return Err(LowerError::dtype(
            idx.dtype(),
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int",
        ));
    }
    let n = idx.ty().num_elements();
    cx.check_range(&idx, 0, w.shape()[0] as i64, None, CheckKind::InSelf)?;
    let flat = cx.reshape(&idx, &[n])?;
    let rows = take_rows(cx, &w, 0, &flat)?;
    let mut shape = idx.shape().to_vec();
    shape.push(w.shape()[1]);
    one(cx.reshape(&rows, &shape)?)
}

pub(crate) fn embedding_dense_backward(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let g = a.tensor("grad_output")?;
    let idx = a.tensor("indices")?;
    let num = a.int("num_weights")?;
    let padding_idx = a.int("padding_idx")?;
    let scale = a.bool("scale_grad_by_freq")?;
    if !matches!(idx.dtype(), DType::I64 | DType::I32) {
        return Err(LowerError::dtype(
            idx.dtype(),
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int",
        ));
    }
    if num < 0 {
        return Err(LowerError::invalid(format!("num_weights must be non-negative, got {num}")));
    }
    let n = idx.ty().num_elements();
    let dsz = if g.rank() == 0 { 1 } else { g.shape()[g.rank() - 1] };
    if g.ty().num_elements() != n * dsz {
        return Err(LowerError::invalid(format!(
            "embedding_dense_backward: grad_output {:?} does not match indices {:?}",
            g.shape(),
            idx.shape()
        )));
    }
    let out = zeros(cx, &[num as usize, dsz], g.dtype())?;
    if n == 0 || num == 0 || dsz == 0 {
        return one(out);
    }
    let g2 = cx.reshape(&g, &[n, dsz])?;
    let i1 = cx.convert(&idx, DType::I64)?;
    let i1 = cx.reshape(&i1, &[n])?;
    let pad = i64_full(cx, &[n], padding_idx)?;
    let keep = cx.compare(Comparison::Ne, &i1, &pad)?;
    let keep = cx.broadcast_in_dim(&keep, &[n, dsz], &[0])?;
    let z = zeros(cx, &[n, dsz], g.dtype())?;
    let mut rows = cx.select(&keep, &g2, &z)?;
    if scale {
        let counts0 = zeros(cx, &[num as usize], DType::I64)?;
        let ones = i64_full(cx, &[n], 1)?;
        let counts = put_rows(cx, &counts0, 0, &i1, &ones, Combine::Add)?;
        let per = take_rows(cx, &counts, 0, &i1)?;
        let per = cx.convert(&per, g.dtype())?;
        let per = cx.broadcast_in_dim(&per, &[n, dsz], &[0])?;
        rows = cx.div(&rows, &per)?;
    }
    one(put_rows(cx, &out, 0, &i1, &rows, Combine::Add)?)
}
