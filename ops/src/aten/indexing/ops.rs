//! gather / scatter / scatter_reduce along a dim, index_select / index_add / index_copy.

use super::points::*;
use crate::aten::shape::common::*;
use crate::aten::util::{scalar_const, wrap_dim};
use crate::args::Args;
use crate::check::CheckKind;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use crate::value::Scalar;
use tessera_lowering::stablehlo::{BinaryOp, Comparison, TensorType, Value};
use tessera_lowering::DType;

/// torch's check of the indices of `gather`/`scatter`/`index_add`/`index_copy` along `dim`
/// of `x` (negative ones are out of bounds too).
fn check_along(cx: &mut Lower, index: &Value, x: &Value, dim: usize, prefix: &'static str) -> LowerResult<()> {
    let size = x.shape()[dim] as i64;
    cx.check_range(index, 0, size, None, CheckKind::Bounds { prefix, dim, size })
}

/// Rank-0 tensors act as 1-D of one element in gather/scatter/index_* ops.
fn at_least_1d(cx: &mut Lower, x: &Value) -> LowerResult<Value> {
    if x.rank() == 0 {
        Ok(cx.reshape(x, &[1])?)
    } else {
        Ok(x.clone())
    }
}

/// The checks of `gather`/`scatter`: `index` has `x`'s rank and fits `x` (except along `dim`)
/// and `src` (everywhere).
fn check_scatter_shapes(what: &str, x: &Value, dim: usize, index: &Value, src: Option<&Value>) -> LowerResult<()> {
    if index.rank() != x.rank() {
        return Err(LowerError::invalid(format!(
            "Index tensor must have the same number of dimensions as {} tensor",
            if src.is_some() { "self" } else { "input" }
        )));
    }
    for d in 0..x.rank() {
        if d != dim && index.shape()[d] > x.shape()[d] {
            return Err(LowerError::invalid(format!(
                "Size does not match at dimension {d} expected index {:?} to be no larger than self {:?} apart from dimension {dim}",
                index.shape(),
                x.shape()
            )));
        }
        if let Some(s) = src {
            if s.rank() != x.rank() {
                return Err(LowerError::invalid("Index tensor must have the same number of dimensions as src tensor"));
            }
            if index.shape()[d] > s.shape()[d] {
                return Err(LowerError::invalid(format!(
                    "{what}: Expected index {:?} to be no larger than src {:?}",
                    index.shape(),
                    s.shape()
                )));
            }
        }
    }
    Ok(())
}

pub(super) fn gather(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x0 = a.tensor("self")?;
    let index0 = a.tensor("index")?;
    let dim = wrap_dim(a.int("dim")?, x0.rank())?;
    if index0.ty().num_elements() == 0 {
        // PyTorch checks neither the dtype nor the shape of an empty index.
        return one(zeros(cx, index0.shape(), x0.dtype())?);
    }
    check_index_dtype(&index0, "gather")?;
    let x = at_least_1d(cx, &x0)?;
    let index = at_least_1d(cx, &index0)?;
    check_scatter_shapes("gather", &x, dim, &index, None)?;
    check_along(cx, &index, &x, dim, "")?;
    let comps = along_dim(cx, &index, dim)?;
    let shape = index.shape().to_vec();
    let g = gather_points(cx, &x, &comps, &shape)?;
    one(cx.reshape(&g, index0.shape())?)
}

/// `scatter`/`scatter_add`/`scatter_reduce`'s common part: `(x, dim, index, updates)` with
/// rank-0 operands made 1-D and `updates` cut to `index`'s shape; `None` when `index` is empty
/// (the result is `self`).
fn scatter_operands(cx: &mut Lower, a: &Args, what: &str, src: Option<Value>) -> LowerResult<Option<(Value, usize, Value, Option<Value>)>> {
    let x = a.tensor("self")?;
    let index = a.tensor("index")?;
    let dim = wrap_dim(a.int("dim")?, x.rank())?;
    if let Some(s) = &src {
        if s.dtype() != x.dtype() {
            return Err(LowerError::invalid(format!("{what}(): Expected self.dtype to be equal to src.dtype")));
        }
    }
    if index.ty().num_elements() == 0 {
        // PyTorch checks neither the dtype nor the shape of an empty index: nothing is written.
        return Ok(None);
    }
    check_index_dtype(&index, what)?;
    let x1 = at_least_1d(cx, &x)?;
    let index = at_least_1d(cx, &index)?;
    let src = match src {
        Some(s) => Some(at_least_1d(cx, &s)?),
        None => None,
    };
    check_scatter_shapes(what, &x1, dim, &index, src.as_ref())?;
    check_along(cx, &index, &x1, dim, "")?;
    let src = match src {
        Some(s) => {
            let zero = vec![0; s.rank()];
            Some(cx.slice(&s, &zero, index.shape(), &vec![1; s.rank()])?)
        }
        None => None,
    };
    Ok(Some((x1, dim, index, src)))
}

fn scatter_with(cx: &mut Lower, a: &Args, what: &str, src: Option<Value>, value: Option<Scalar>, c: Combine) -> LowerResult<Vec<Out>> {
    let shape0 = a.tensor("self")?.shape().to_vec();
    let Some((x, dim, index, src)) = scatter_operands(cx, a, what, src)? else {
        return one(a.tensor("self")?);
    };
    let upd = match (src, value) {
        (Some(s), _) => s,
        (None, Some(v)) => {
            let k = scalar_const(cx, v, x.dtype())?;
            cx.broadcast_to(&k, index.shape())?
        }
        (None, None) => return Err(LowerError::invalid("scatter needs src or value")),
    };
    let comps = along_dim(cx, &index, dim)?;
    let r = scatter_points(cx, &x, &comps, &index.shape().to_vec(), &upd, c)?;
    one(cx.reshape(&r, &shape0)?)
}

pub(super) fn scatter_src(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    scatter_with(cx, a, "scatter", Some(a.tensor("src")?), None, Combine::Replace)
}

pub(super) fn scatter_value(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    scatter_with(cx, a, "scatter", None, Some(a.scalar("value")?), Combine::Replace)
}

pub(super) fn scatter_add(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    scatter_with(cx, a, "scatter_add", Some(a.tensor("src")?), None, Combine::Add)
}

pub(super) fn scatter_reduce(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let reduce = a.str("reduce")?;
    let include_self = a.bool("include_self")?;
    let c = match reduce.as_str() {
        "sum" | "mean" => Combine::Add,
        "prod" => Combine::Mul,
        "amax" => Combine::Max,
        "amin" => Combine::Min,
        _ => {
            return Err(LowerError::invalid(format!(
                "reduce argument must be either sum, prod, mean, amax or amin, got {reduce}"
            )))
        }
    };
    let shape0 = a.tensor("self")?.shape().to_vec();
    let Some((x, dim, index, src)) = scatter_operands(cx, a, "scatter_reduce", Some(a.tensor("src")?))? else {
        return one(a.tensor("self")?);
    };
    let src = src.ok_or_else(|| LowerError::invalid("scatter_reduce needs src"))?;
    let dtype = x.dtype();
    if reduce == "mean" && dtype == DType::Bool {
        return Err(LowerError::dtype(dtype, "scatter_reduce(): mean is not supported for bool tensors"));
    }
    let ishape = index.shape().to_vec();
    let comps = along_dim(cx, &index, dim)?;
    let mut base = x.clone();
    if !include_self {
        let ty = TensorType::new(ishape.clone(), dtype);
        let init = match c {
            Combine::Add => cx.zeros(ty)?,
            Combine::Mul => cx.full(ty, 1.0)?,
            Combine::Max => cx.min_value(ty)?,
            _ => cx.max_value(ty)?,
        };
        base = scatter_points(cx, &base, &comps, &ishape, &init, Combine::Replace)?;
    }
    let mut r = scatter_points(cx, &base, &comps, &ishape, &src, c)?;
    if reduce == "mean" {
        let start = if include_self { 1.0 } else { 0.0 };
        let counts0 = cx.full(x.ty().clone(), start)?;
        let ones = cx.full(TensorType::new(ishape.clone(), dtype), 1.0)?;
        let counts = scatter_points(cx, &counts0, &comps, &ishape, &ones, Combine::Add)?;
        let zero = zeros(cx, x.shape(), dtype)?;
        let one_ = cx.full(x.ty().clone(), 1.0)?;
        let is0 = cx.compare(Comparison::Eq, &counts, &zero)?;
        let counts = cx.select(&is0, &one_, &counts)?;
        r = if dtype.is_float() { cx.div(&r, &counts)? } else { floor_div(cx, &r, &counts)? };
    }
    one(cx.reshape(&r, &shape0)?)
}

/// Integer division rounding toward -inf (divisor positive or negative).
fn floor_div(cx: &mut Lower, a: &Value, b: &Value) -> LowerResult<Value> {
    let q = cx.div(a, b)?;
    if a.dtype().is_unsigned_int() {
        return Ok(q);
    }
    let rem = cx.binary(BinaryOp::Remainder, a, b)?;
    let zero = zeros(cx, a.shape(), a.dtype())?;
    let nz = cx.compare(Comparison::Ne, &rem, &zero)?;
    let rneg = cx.compare(Comparison::Lt, &rem, &zero)?;
    let bneg = cx.compare(Comparison::Lt, b, &zero)?;
    let diff = cx.compare(Comparison::Ne, &rneg, &bneg)?;
    let fix = cx.binary(BinaryOp::And, &nz, &diff)?;
    let one_ = cx.full(a.ty().clone(), 1.0)?;
    let q1 = cx.sub(&q, &one_)?;
    Ok(cx.select(&fix, &q1, &q)?)
}

/// The 1-D index of `index_select`/`index_add`/`index_copy` (0-D taken as 1 element).
fn vector_index(cx: &mut Lower, index: &Value, what: &str) -> LowerResult<Value> {
    if index.rank() > 1 {
        return Err(LowerError::invalid(format!("{what}(): Index is supposed to be a vector")));
    }
    at_least_1d(cx, index)
}

pub(super) fn index_select(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let index = a.tensor("index")?;
    if !matches!(index.dtype(), DType::I64 | DType::I32) {
        return Err(LowerError::dtype(index.dtype(), "index_select(): Expected dtype int32 or int64 for index"));
    }
    let dim = wrap_dim(a.int("dim")?, x.rank())?;
    let index = vector_index(cx, &index, "index_select")?;
    let size = x.shape().get(dim).copied().unwrap_or(1) as i64;
    // torch's CPU kernel along dim 1 words it differently (measured, torch 2.x).
    let kind = if dim == 1 && x.rank() > 1 { CheckKind::Indices { size } } else { CheckKind::InSelf };
    cx.check_range(&index, 0, size, None, kind)?;
    if x.rank() == 0 {
        return one(x);
    }
    one(take_rows(cx, &x, dim, &index)?)
}

fn index_put_rows(cx: &mut Lower, a: &Args, what: &str, c: Combine) -> LowerResult<Vec<Out>> {
    let x0 = a.tensor("self")?;
    let index = a.tensor("index")?;
    let mut source = a.tensor("source")?;
    let dim = wrap_dim(a.int("dim")?, x0.rank())?;
    if c == Combine::Replace && index.dtype() != DType::I64 {
        return Err(LowerError::dtype(index.dtype(), format!("{what}(): Expected a long tensor for index, but got {}", index.dtype())));
    }
    check_index_dtype(&index, what)?;
    if source.dtype() != x0.dtype() {
        return Err(LowerError::invalid(format!(
            "{what}(): self ({}) and source ({}) must have the same scalar type",
            x0.dtype(),
            source.dtype()
        )));
    }
    let index = vector_index(cx, &index, what)?;
    let x = at_least_1d(cx, &x0)?;
    let source1 = at_least_1d(cx, &source)?;
    let mut want = x.shape().to_vec();
    want[dim] = index.shape()[0];
    if source1.shape() != want.as_slice() {
        return Err(LowerError::invalid(format!(
            "{what}(): Number of indices ({}) should be equal to source.size(dim) ({}), and source {:?} should match self {:?} apart from dim {dim}",
            index.shape()[0],
            source1.shape().get(dim).copied().unwrap_or(0),
            source.shape(),
            x0.shape()
        )));
    }
    source = source1;
    // torch names the op in index_copy's message only.
    let prefix = if c == Combine::Replace { "index_copy_(): " } else { "" };
    check_along(cx, &index, &x, dim, prefix)?;
    if c == Combine::Add {
        let mut alpha = a.scalar("alpha")?;
        if let (Scalar::Int(i), true) = (alpha, source.dtype().is_unsigned_int()) {
            // PyTorch lets negative numbers wrap into unsigned types (two's complement).
            let m = 1i64 << source.dtype().bits().min(62);
            if i < 0 && -i < m {
                alpha = Scalar::Int(i.rem_euclid(m));
            }
        }
        if alpha.as_f64() != 1.0 {
            let k = scalar_const(cx, alpha, source.dtype())?;
            let k = cx.broadcast_to(&k, source.shape())?;
            source = cx.mul(&source, &k)?;
        }
    }
    let r = put_rows(cx, &x, dim, &index, &source, c)?;
    one(cx.reshape(&r, x0.shape())?)
}

pub(super) fn index_add(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    index_put_rows(cx, a, "index_add_", Combine::Add)
}

pub(super) fn index_copy(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    index_put_rows(cx, a, "index_copy_", Combine::Replace)
}

