//! `histc`: counts of the elements in `bins` equal-width bins over [min, max], as PyTorch's CPU
//! kernel computes them (linear interpolation without local search): an element's bin is
//! `trunc((x - lo) * bins / (hi - lo))` in the input's dtype, the last edge counts in the
//! last bin, elements outside [lo, hi] (and NaN) are not counted. With `min == max` the range
//! is the data's (widened by 1 both ways when all elements are equal).
//!
//! Integer inputs are taken as CUDA takes them (torch's CPU kernel refuses them; transformers'
//! MoE routing calls `histc` on expert ids): the position is computed in f64 (exact below
//! 2^53), the counts in the input's dtype.

use super::super::util::cast;
use crate::args::Args;
use crate::check::CheckKind;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, ReduceKind, TensorType, Value};
use tessera_lowering::DType;

/// `histc(self, bins=100, min=0, max=0)`.
pub(super) fn histc(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let bins = a.int("bins")?;
    if bins <= 0 {
        return Err(LowerError::invalid(format!(
            "torch.histogram(): bins must be > 0, but got {bins} for dimension 0"
        )));
    }
    if x.dtype() == DType::Bool || x.dtype().is_complex() {
        return Err(LowerError::invalid(format!(
            "\"histogram_cpu\" not implemented for '{}'",
            super::super::util::torch_name(x.dtype())
        )));
    }
    let (min, max) = (a.scalar("min")?.as_f64(), a.scalar("max")?.as_f64());
    if min > max {
        return Err(LowerError::invalid(
            "torch.histc: max must be larger than min",
        ));
    }
    if !min.is_finite() || !max.is_finite() {
        return Err(LowerError::invalid(format!(
            "torch.histc: range of [{min}, {max}] is not finite"
        )));
    }
    let bins = bins as usize;
    // The dtype the position is computed in (torch: the input's; integers: f64).
    let d = if x.dtype().is_float() {
        x.dtype()
    } else {
        DType::F64
    };
    let n = x.ty().num_elements();
    let flat = cx.reshape(&x, &[n])?;
    let v = cast(cx, &flat, d)?;
    let rank0 = |cx: &mut Lower, k: f64| cx.full(TensorType::scalar(d), k);
    let (lo, hi) = if min == max {
        data_range(cx, &v, d)?
    } else {
        (rank0(cx, min)?, rank0(cx, max)?)
    };
    // trunc((x - lo) * bins / (hi - lo)), each step rounded in `d` as the C++ kernel's.
    let big = TensorType::new(vec![n], d);
    let lob = cx.broadcast_in_dim(&lo, &big.shape, &[])?;
    let hib = cx.broadcast_in_dim(&hi, &big.shape, &[])?;
    let off = cx.binary(BinaryOp::Subtract, &v, &lob)?;
    let nb = cx.full(big.clone(), bins as f64)?;
    let scaled = cx.binary(BinaryOp::Multiply, &off, &nb)?;
    let width = cx.binary(BinaryOp::Subtract, &hib, &lob)?;
    let pos = cx.binary(BinaryOp::Divide, &scaled, &width)?;
    let pos = cx.convert(&pos, DType::I64)?;
    let last = cx.full_int(TensorType::new(vec![n], DType::I64), bins as i128 - 1)?;
    let pos = cx.binary(BinaryOp::Minimum, &pos, &last)?;
    // Counted: lo <= x <= hi (NaN compares false).
    let ge = cx.compare(Comparison::Ge, &v, &lob)?;
    let le = cx.compare(Comparison::Le, &v, &hib)?;
    let inside = cx.binary(BinaryOp::And, &ge, &le)?;
    // One-hot [n, bins] of the bins, masked, summed over the elements.
    let shape = vec![n, bins];
    let ids = cx.iota(TensorType::new(shape.clone(), DType::I64), 1)?;
    let posb = cx.broadcast_in_dim(&pos, &shape, &[0])?;
    let hit = cx.compare(Comparison::Eq, &posb, &ids)?;
    let inb = cx.broadcast_in_dim(&inside, &shape, &[0])?;
    let hit = cx.binary(BinaryOp::And, &hit, &inb)?;
    // Counts accumulate in f32 for half types (exact up to 2^24) and round once.
    let acc = match x.dtype() {
        DType::F16 | DType::BF16 => DType::F32,
        t => t,
    };
    let hit = cx.convert(&hit, acc)?;
    let counts = cx.reduce_kind(&hit, ReduceKind::Sum, &[0], false)?;
    Ok(vec![Out::Tensor(cast(cx, &counts, x.dtype())?)])
}

/// The data's [min, max] as rank-0 values of `d`, widened to [min - 1, max + 1] when they are
/// equal (an empty input gives [-1, 1]: torch's min/max of nothing are 0); NaN or an infinity
/// in the data (a range that is not finite) is the check's error, as torch raises it.
fn data_range(cx: &mut Lower, v: &Value, d: DType) -> LowerResult<(Value, Value)> {
    let (lo, hi) = if v.shape()[0] == 0 {
        (
            cx.full(TensorType::scalar(d), 0.0)?,
            cx.full(TensorType::scalar(d), 0.0)?,
        )
    } else {
        (
            cx.reduce_kind(v, ReduceKind::Min, &[0], false)?,
            cx.reduce_kind(v, ReduceKind::Max, &[0], false)?,
        )
    };
    // torch's min/max of data holding NaN or an infinity is not a finite range: its error.
    let bad = not_finite(cx, v)?;
    let zeros = cx.full_int(TensorType::new(v.shape().to_vec(), DType::I64), 0)?;
    cx.check_mask(
        &bad,
        &zeros,
        CheckKind::Fixed(
            "torch.histc: range of the data is not finite (it holds NaN or an infinity)",
        ),
    )?;
    let same = cx.compare(Comparison::Eq, &lo, &hi)?;
    let one = cx.full(TensorType::scalar(d), 1.0)?;
    let lo_w = cx.binary(BinaryOp::Subtract, &lo, &one)?;
    let hi_w = cx.binary(BinaryOp::Add, &hi, &one)?;
    Ok((cx.select(&same, &lo_w, &lo)?, cx.select(&same, &hi_w, &hi)?))
}

/// Where `x` is NaN or infinite (integers converted to f64 are always finite).
fn not_finite(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    let diff = cx.binary(BinaryOp::Subtract, x, x)?;
    // x - x is 0 for finite x, NaN for NaN and infinities; NaN != NaN.
    Ok(cx.compare(Comparison::Ne, &diff, &diff)?)
}
