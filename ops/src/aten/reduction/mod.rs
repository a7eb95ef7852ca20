//! Default lowerings: reductions (sum, mean, prod, amax/amin, any/all, max/min/argmax/argmin,
//! logsumexp), statistics and norms (var, std, vector norms), scans (cumsum, cumprod), softmax
//! and its backward, sort and topk.
//!
//! Shared conventions: reduced-precision floats (f16, bf16) accumulate in f32 and round once at
//! the end, as PyTorch's CPU kernels do; `dim` lists go through [`reduce_dims`] (`None`/`[]` =
//! every dim); empty reductions give the op's identity (sum 0, prod 1) or PyTorch's error when
//! the op has none (amax, max, argmax).

mod basic;
mod histc;
mod nan;
mod scan;
mod softmax;
mod sort;
mod stats;

// Helpers other families can build on (nn: log_softmax for losses, max/mean for pooling, ...).
#[allow(unused_imports)]
pub(crate) use basic::{arg_reduce, logsumexp_of, max_min, mean_of};
#[allow(unused_imports)]
pub(crate) use scan::scan;
#[allow(unused_imports)]
pub(crate) use softmax::softmax_of;
#[allow(unused_imports)]
pub(crate) use sort::sort_with_indices;
pub(crate) use stats::p_norm;

use super::util::{cast, reduce_dims};
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Lowering};
use crate::lowerings;
use tessera_lowering::stablehlo::{BinaryOp, ReduceKind, TensorType, Value};
use tessera_lowering::DType;

pub(super) const LOWERINGS: &[Lowering] = lowerings![
    ("amax", |cx, a| basic::amax_amin(cx, a, true)),
    ("amin", |cx, a| basic::amax_amin(cx, a, false)),
    ("any", |cx, a| basic::any_all(cx, a, true, DimsArg::All)),
    ("any.dim", |cx, a| basic::any_all(cx, a, true, DimsArg::One)),
    ("any.dims", |cx, a| basic::any_all(
        cx,
        a,
        true,
        DimsArg::List
    )),
    ("all", |cx, a| basic::any_all(cx, a, false, DimsArg::All)),
    ("all.dim", |cx, a| basic::any_all(
        cx,
        a,
        false,
        DimsArg::One
    )),
    ("argmax", |cx, a| basic::argmax_argmin(cx, a, true)),
    ("argmin", |cx, a| basic::argmax_argmin(cx, a, false)),
    ("max", |cx, a| basic::max_min_all(cx, a, true)),
    ("min", |cx, a| basic::max_min_all(cx, a, false)),
    ("max.dim", |cx, a| basic::max_min_dim(cx, a, true)),
    ("min.dim", |cx, a| basic::max_min_dim(cx, a, false)),
    ("logsumexp", basic::logsumexp),
    ("histc", histc::histc),
    ("cumsum", |cx, a| scan::cumulative(cx, a, true)),
    ("cumprod", |cx, a| scan::cumulative(cx, a, false)),
    ("var.correction", |cx, a| stats::var_std(
        cx,
        a,
        false,
        stats::Correction::Scalar
    )),
    ("var.dim", |cx, a| stats::var_std(
        cx,
        a,
        false,
        stats::Correction::Unbiased
    )),
    ("std.correction", |cx, a| stats::var_std(
        cx,
        a,
        true,
        stats::Correction::Scalar
    )),
    ("var_mean.correction", stats::var_mean),
    ("norm.ScalarOpt_dim", stats::norm),
    ("linalg_vector_norm", stats::linalg_vector_norm),
    ("_softmax", |cx, a| softmax::softmax_internal(cx, a, false)),
    ("_log_softmax", |cx, a| softmax::softmax_internal(
        cx, a, true
    )),
    ("softmax.int", |cx, a| softmax::softmax_int(cx, a, false)),
    ("log_softmax.int", |cx, a| softmax::softmax_int(cx, a, true)),
    ("_softmax_backward_data", |cx, a| softmax::backward(
        cx, a, false
    )),
    ("_log_softmax_backward_data", |cx, a| softmax::backward(
        cx, a, true
    )),
    ("_safe_softmax", softmax::safe_softmax),
    ("nansum", nan::nansum),
    ("nanmean", nan::nanmean),
    ("count_nonzero", nan::count_nonzero),
    ("count_nonzero.dim_IntList", nan::count_nonzero),
    ("aminmax", nan::aminmax),
    ("cummax", |cx, a| scan::cummax_cummin(cx, a, true)),
    ("cummin", |cx, a| scan::cummax_cummin(cx, a, false)),
    ("logcumsumexp", scan::logcumsumexp),
    ("argsort", sort::argsort),
    ("argsort.stable", sort::argsort),
    ("msort", sort::msort),
    ("kthvalue", sort::kthvalue),
    ("median", |cx, a| sort::median(cx, a, false)),
    ("median.dim", |cx, a| sort::median(cx, a, false)),
    ("nanmedian", |cx, a| sort::median(cx, a, true)),
    ("nanmedian.dim", |cx, a| sort::median(cx, a, true)),
    ("dist", stats::dist),
    ("diff", scan::diff),
    ("std_mean.correction", stats::std_mean),
    ("std.dim", |cx, a| stats::var_std(
        cx,
        a,
        true,
        stats::Correction::Unbiased
    )),
    ("sort", sort::sort),
    ("topk", sort::topk),
];

/// The reductions that also take complex tensors (c64, c128): `sum` and `mean` (complex
/// addition), `prod` (complex multiplication); the ordered reductions stay real-only.
pub(super) const COMPLEX_LOWERINGS: &[Lowering] = lowerings![complex:
    ("sum", basic::sum),
    ("sum.dim_IntList", basic::sum_dim),
    ("mean", basic::mean),
    ("mean.dim", basic::mean_dim),
    ("prod", basic::prod),
    ("prod.dim_int", basic::prod_dim),
];

/// How an overload names its reduction dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DimsArg {
    /// No `dim` argument: every dim.
    All,
    /// `int dim`.
    One,
    /// `int[]? dim` (`None` = every dim).
    List,
}

/// The dtype a reduction accumulates in: f16/bf16 in f32 (PyTorch's CPU `acc_type`), others
/// their own.
pub(crate) fn acc_dtype(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// Sum and prod of integers and bool give i64 unless a dtype is asked for (floats and complex
/// keep theirs).
pub(crate) fn int_to_i64(d: DType) -> DType {
    if d.is_float() || d.is_complex() {
        d
    } else {
        DType::I64
    }
}

pub(crate) use crate::aten::util::torch_name;

/// `shape` with `dims` set to 1 (the keepdim shape).
pub(crate) fn kept_shape(shape: &[usize], dims: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &s)| if dims.contains(&i) { 1 } else { s })
        .collect()
}

/// Number of elements a reduction over `dims` combines.
pub(crate) fn count(shape: &[usize], dims: &[usize]) -> usize {
    dims.iter().map(|&d| shape[d]).product()
}

/// Reduces `x` over `dims` (sorted, distinct) with `kind`; no dims is the identity. Sum and
/// product of bool are `or`/`and`, max/min of bool `or`/`and`.
pub(crate) fn reduce(
    cx: &mut Lower,
    x: &Value,
    kind: ReduceKind,
    dims: &[usize],
    keepdim: bool,
) -> LowerResult<Value> {
    if dims.is_empty() {
        return Ok(x.clone());
    }
    let kind = match (kind, x.dtype()) {
        (ReduceKind::Sum | ReduceKind::Max, DType::Bool) => ReduceKind::Or,
        (ReduceKind::Product | ReduceKind::Min, DType::Bool) => ReduceKind::And,
        (k, _) => k,
    };
    Ok(cx.reduce_kind(x, kind, dims, keepdim)?)
}

/// `x op k` for a constant `k` of x's dtype.
pub(crate) fn with_const(cx: &mut Lower, op: BinaryOp, x: &Value, k: f64) -> LowerResult<Value> {
    let c = cx.full(TensorType::new(x.shape(), x.dtype()), k)?;
    Ok(cx.binary(op, x, &c)?)
}

/// The reduction dims an overload names (see [`DimsArg`]), wrapped and sorted.
pub(super) fn dims_of(a: &Args, x: &Value, how: DimsArg) -> LowerResult<Vec<usize>> {
    match how {
        DimsArg::All => Ok((0..x.rank()).collect()),
        DimsArg::One => {
            let d = a.int("dim")?;
            reduce_dims(Some(&[d]), x.rank())
        }
        DimsArg::List => reduce_dims(a.opt_int_list("dim")?.as_deref(), x.rank()),
    }
}

/// Refuses non-float inputs with `msg`.
pub(crate) fn require_float(x: &Value, msg: impl Into<String>) -> LowerResult<()> {
    if x.dtype().is_float() {
        Ok(())
    } else {
        Err(LowerError::dtype(x.dtype(), msg))
    }
}

/// `x` in its accumulation dtype.
pub(crate) fn to_acc(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    cast(cx, x, acc_dtype(x.dtype()))
}
