//! cumsum and cumprod: an inclusive scan along one dim, as log2(n) shifted combines
//! (Hillis-Steele), in f32 for f16/bf16.

use super::{int_to_i64, to_acc};
use crate::args::Args;
use crate::aten::util::{cast, wrap_dim};
use crate::error::LowerResult;
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, TensorType, Value};
use tessera_lowering::DType;

/// Inclusive scan of `x` along `dim` with `op` (whose identity is `identity`).
pub(crate) fn scan(
    cx: &mut Lower,
    x: &Value,
    dim: usize,
    op: BinaryOp,
    identity: f64,
) -> LowerResult<Value> {
    let n = x.shape()[dim];
    let r = x.rank();
    let id = cx.full(TensorType::scalar(x.dtype()), identity)?;
    let mut y = x.clone();
    let mut k = 1;
    while k < n {
        let head = cx.slice_axis(&y, dim, 0, n - k)?;
        let mut low = vec![0i64; r];
        low[dim] = k as i64;
        let shifted = cx.pad(&head, &id, &low, &vec![0; r], &vec![0; r])?;
        y = cx.binary(op, &y, &shifted)?;
        k *= 2;
    }
    Ok(y)
}

pub(super) fn cumulative(cx: &mut Lower, a: &Args, is_sum: bool) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let out = a
        .opt_dtype("dtype")?
        .unwrap_or_else(|| int_to_i64(x.dtype()));
    let d = wrap_dim(a.int("dim")?, x.rank())?;
    let x = cast(cx, &x, out)?;
    if x.rank() == 0 {
        return Ok(vec![Out::Tensor(x)]);
    }
    let xa = to_acc(cx, &x)?;
    let (op, id) = match (is_sum, out == DType::Bool) {
        (true, false) => (BinaryOp::Add, 0.0),
        (false, false) => (BinaryOp::Multiply, 1.0),
        (true, true) => (BinaryOp::Or, 0.0),
        (false, true) => (BinaryOp::And, 1.0),
    };
    let r = scan(cx, &xa, d, op, id)?;
    Ok(vec![Out::Tensor(cast(cx, &r, out)?)])
}
