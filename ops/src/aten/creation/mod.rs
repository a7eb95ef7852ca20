//! Default lowerings: creation (arange, linspace, eye, empty/full/zeros/ones, their `_like`s
//! and `new_`s), metadata (`sym_*`, answered without running anything), `resize_`, and random ops.

mod random;

use crate::aten::shape::common::*;
use crate::aten::util::scalar_const;
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Lowering, Out};
use crate::lowerings;
use crate::value::Scalar;
use tessera_lowering::stablehlo::{Comparison, TensorType, Value};
use tessera_lowering::DType;

pub(super) const LOWERINGS: &[Lowering] = lowerings![
    ("arange", |cx, a| arange(cx, a, false, false)),
    ("arange.start", |cx, a| arange(cx, a, true, false)),
    ("arange.start_step", |cx, a| arange(cx, a, true, true)),
    ("empty.memory_format", |cx, a| fill_sized(cx, a, None)),
    ("empty_strided", |cx, a| fill_sized(cx, a, None)),
    ("zeros", |cx, a| fill_sized(cx, a, None)),
    ("ones", |cx, a| fill_sized(cx, a, Some(Scalar::Int(1)))),
    ("full", full),
    ("empty_like", |cx, a| fill_like(cx, a, Scalar::Int(0))),
    ("zeros_like", |cx, a| fill_like(cx, a, Scalar::Int(0))),
    ("ones_like", |cx, a| fill_like(cx, a, Scalar::Int(1))),
    ("full_like", |cx, a| fill_like(cx, a, a.scalar("fill_value")?)),
    ("new_zeros", |cx, a| fill_new(cx, a, Scalar::Int(0))),
    ("new_ones", |cx, a| fill_new(cx, a, Scalar::Int(1))),
    ("new_empty", |cx, a| fill_new(cx, a, Scalar::Int(0))),
    ("new_empty_strided", |cx, a| fill_new(cx, a, Scalar::Int(0))),
    ("new_full", |cx, a| fill_new(cx, a, a.scalar("fill_value")?)),
    ("zero", |cx, a| {
        let x = a.tensor("self")?;
        one(zeros(cx, x.shape(), x.dtype())?)
    }),
    ("eye", eye),
    ("eye.m", eye),
    ("linspace", linspace),
    ("sym_size.int", sym_size),
    ("sym_numel", |_, a| Ok(vec![Out::Int(a.tensor("self")?.ty().num_elements() as i64)])),
    ("sym_stride.int", sym_stride),
    ("sym_storage_offset", |_, _| Ok(vec![Out::Int(0)])),
    ("sym_is_contiguous", |_, _| Ok(vec![Out::Bool(true)])),
    ("resize_", resize),
    ("rand", random::rand),
    ("randn", random::randn),
    ("randperm", random::randperm),
    ("bernoulli.p", random::bernoulli),
    ("native_dropout", random::native_dropout),
    ("dropout", random::dropout),
    ("rand_like", random::rand_like),
    ("randn_like", random::randn_like),
    ("randint", random::randint),
    ("randint.low", random::randint),
    ("randint_like", random::randint_like),
    ("randint_like.low_dtype", random::randint_like),
    ("normal.Tensor_float", random::normal),
    ("normal.float_Tensor", random::normal),
    ("normal.Tensor_Tensor", random::normal),
    ("normal.float_float", random::normal),
    ("uniform", random::uniform_op),
    ("exponential", random::exponential),
    ("tril_indices", |cx, a| tri_indices(cx, a, true)),
    ("triu_indices", |cx, a| tri_indices(cx, a, false)),
    ("logspace", logspace),
];

fn arange(cx: &mut Lower, a: &Args, has_start: bool, has_step: bool) -> LowerResult<Vec<Out>> {
    let end = a.scalar("end")?;
    let start = if has_start { a.scalar("start")? } else { Scalar::Int(0) };
    let step = if has_step { a.scalar("step")? } else { Scalar::Int(1) };
    let any_float = [start, end, step].iter().any(|s| matches!(s, Scalar::Float(_)));
    let dtype = a.opt_dtype("dtype")?.unwrap_or(if any_float { DType::F32 } else { DType::I64 });
    if dtype == DType::Bool {
        return Err(LowerError::dtype(dtype, "\"arange_cpu\" not implemented for 'Bool'"));
    }
    let (s, e, st) = (start.as_f64(), end.as_f64(), step.as_f64());
    if st == 0.0 {
        return Err(LowerError::invalid("step must be nonzero"));
    }
    if !s.is_finite() || !e.is_finite() {
        return Err(LowerError::invalid(format!("unsupported range: {s} -> {e}")));
    }
    if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
        return Err(LowerError::invalid("upper bound and larger bound inconsistent with step sign"));
    }
    let size = ((e - s) / st).ceil();
    if !(0.0..=(i64::MAX as f64)).contains(&size) || size > 1e10 {
        return Err(LowerError::invalid(format!("invalid size, possible overflow? ({size})")));
    }
    let n = size as usize;
    if n == 0 {
        return one(zeros(cx, &[0], dtype)?);
    }
    let i = iota(cx, &[n], 0)?;
    let v = if dtype.is_float() {
        let i = cx.convert(&i, DType::F64)?;
        let k = cx.full(TensorType::new(vec![n], DType::F64), st)?;
        let b = cx.full(TensorType::new(vec![n], DType::F64), s)?;
        let m = cx.mul(&i, &k)?;
        cx.add(&m, &b)?
    } else {
        let trunc = |x: Scalar| match x {
            Scalar::Float(f) => f.trunc() as i64,
            other => other.as_f64() as i64,
        };
        let int_of = |x: Scalar| match x {
            Scalar::Int(i) => i,
            other => trunc(other),
        };
        let k = i64_full(cx, &[n], int_of(step))?;
        let b = i64_full(cx, &[n], int_of(start))?;
        let m = cx.mul(&i, &k)?;
        cx.add(&m, &b)?
    };
    one(cx.convert(&v, dtype)?)
}

/// `empty`/`zeros`/`ones` of `size` (default dtype f32).
fn fill_sized(cx: &mut Lower, a: &Args, value: Option<Scalar>) -> LowerResult<Vec<Out>> {
    let shape = sizes(&a.int_list("size")?)?;
    let dtype = a.opt_dtype("dtype")?.unwrap_or(DType::F32);
    let v = scalar_const(cx, value.unwrap_or(Scalar::Int(0)), dtype)?;
    one(cx.broadcast_to(&v, &shape)?)
}

fn full(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let shape = sizes(&a.int_list("size")?)?;
    let fill = a.scalar("fill_value")?;
    let dtype = a.opt_dtype("dtype")?.unwrap_or(fill.default_dtype());
    let v = scalar_const(cx, fill, dtype)?;
    one(cx.broadcast_to(&v, &shape)?)
}

fn fill_like(cx: &mut Lower, a: &Args, value: Scalar) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dtype = a.opt_dtype("dtype")?.unwrap_or(x.dtype());
    let v = scalar_const(cx, value, dtype)?;
    one(cx.broadcast_to(&v, x.shape())?)
}

/// `new_zeros`/`new_ones`/`new_empty`/`new_empty_strided`/`new_full(self, size, ...)`: a
/// tensor of `size`, in `dtype` or self's dtype (strides are row-major here).
fn fill_new(cx: &mut Lower, a: &Args, value: Scalar) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let shape = sizes(&a.int_list("size")?)?;
    let dtype = a.opt_dtype("dtype")?.unwrap_or(x.dtype());
    let v = scalar_const(cx, value, dtype)?;
    one(cx.broadcast_to(&v, &shape)?)
}

/// `eye(n)` / `eye.m(n, m)`: ones on the main diagonal (default dtype f32).
fn eye(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let n = a.int("n")?;
    let m = if a.schema.overload == "m" { a.int("m")? } else { n };
    if n < 0 || m < 0 {
        return Err(LowerError::invalid(format!(
            "{} must be greater or equal to 0, got {}",
            if n < 0 { "n" } else { "m" },
            n.min(m)
        )));
    }
    let dtype = a.opt_dtype("dtype")?.unwrap_or(DType::F32);
    let shape = [n as usize, m as usize];
    let r = iota(cx, &shape, 0)?;
    let c = iota(cx, &shape, 1)?;
    let on = cx.compare(Comparison::Eq, &r, &c)?;
    let one_ = scalar_const(cx, Scalar::Int(1), dtype)?;
    let one_ = cx.broadcast_to(&one_, &shape)?;
    let z = zeros(cx, &shape, dtype)?;
    one(cx.select(&on, &one_, &z)?)
}

/// `linspace(start, end, steps)`: PyTorch's CPU formula, `start + i * step` for the first
/// half and `end - (steps - 1 - i) * step` for the rest, `step = (end - start) / (steps - 1)`;
/// computed in f64 for integer dtypes (then truncated), in the float dtype otherwise
/// (f32 for f16/bf16).
fn linspace(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let dtype = a.opt_dtype("dtype")?.unwrap_or(DType::F32);
    let v = linspace_values(cx, a, dtype)?;
    one(torch_round(cx, &v, dtype)?)
}

/// `logspace(start, end, steps, base=10)`: `base ** linspace(start, end, steps)`, computed as
/// linspace computes (then the power, in the same dtype).
fn logspace(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let dtype = a.opt_dtype("dtype")?.unwrap_or(DType::F32);
    let v = linspace_values(cx, a, dtype)?;
    let b = cx.full(v.ty().clone(), a.float("base")?)?;
    let p = cx.binary(tessera_lowering::stablehlo::BinaryOp::Power, &b, &v)?;
    one(torch_round(cx, &p, dtype)?)
}

/// `v` (f32 or f64) in `dtype`: floats round, integers truncate.
fn torch_round(cx: &mut Lower, v: &Value, dtype: DType) -> LowerResult<Value> {
    Ok(if dtype.is_float() {
        cx.convert(v, dtype)?
    } else {
        let t = cx.convert(v, DType::I64)?;
        cx.convert(&t, dtype)?
    })
}

/// The `steps` values of `linspace` in its compute dtype (f32 for f32/f16/bf16, else f64).
fn linspace_values(cx: &mut Lower, a: &Args, dtype: DType) -> LowerResult<Value> {
    let steps = a.int("steps")?;
    if steps < 0 {
        return Err(LowerError::invalid("number of steps must be non-negative"));
    }
    let n = steps as usize;
    let (start, end) = (a.scalar("start")?, a.scalar("end")?);
    let ct = match dtype {
        DType::F32 | DType::F16 | DType::BF16 => DType::F32,
        _ => DType::F64,
    };
    if n == 0 {
        return zeros(cx, &[0], ct);
    }
    // The bounds as the dtype holds them (a float bound of an integer linspace truncates).
    let (s, e) = if dtype.is_float() {
        (start.as_f64(), end.as_f64())
    } else {
        (start.as_f64().trunc(), end.as_f64().trunc())
    };
    let ty = TensorType::new(vec![n], ct);
    if n == 1 {
        return Ok(cx.full(ty, s)?);
    }
    let i = iota(cx, &[n], 0)?;
    let i = cx.convert(&i, ct)?;
    let step = cx.full(ty.clone(), (e - s) / (n as f64 - 1.0))?;
    let sv = cx.full(ty.clone(), s)?;
    let ev = cx.full(ty.clone(), e)?;
    let last = cx.full(ty.clone(), n as f64 - 1.0)?;
    let lo = cx.mul(&i, &step)?;
    let lo = cx.add(&sv, &lo)?;
    let back = cx.sub(&last, &i)?;
    let back = cx.mul(&back, &step)?;
    let hi = cx.sub(&ev, &back)?;
    let half = cx.full(ty, (n / 2) as f64)?;
    let first = cx.compare(Comparison::Lt, &i, &half)?;
    Ok(cx.select(&first, &lo, &hi)?)
}

/// `tril_indices` / `triu_indices(row, col, offset=0, *, dtype=long)`: the `[2, N]`
/// coordinates (row-major) of the lower (upper) triangle from diagonal `offset`, computed on
/// the host.
fn tri_indices(cx: &mut Lower, a: &Args, lower: bool) -> LowerResult<Vec<Out>> {
    let (row, col, off) = (a.int("row")?, a.int("col")?, a.int("offset")?);
    if row < 0 || col < 0 {
        return Err(LowerError::invalid(format!("row must be non-negative, got{row}")));
    }
    let dtype = a.opt_dtype("dtype")?.unwrap_or(DType::I64);
    if row.saturating_mul(col) > 1 << 24 {
        return Err(LowerError::Unsupported(format!("{row} x {col} triangle indices")));
    }
    let (mut rs, mut cs) = (Vec::new(), Vec::new());
    for r in 0..row {
        for c in 0..col {
            if (lower && c - r <= off) || (!lower && c - r >= off) {
                rs.push(r);
                cs.push(c);
            }
        }
    }
    let n = rs.len();
    rs.extend(cs);
    let t = tessera_lowering::HostTensor::from_vec::<i64>(vec![2, n], rs);
    let v = cx.constant(&t)?;
    one(cx.convert(&v, dtype)?)
}

fn sym_size(_cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim_strict(a.int("dim")?, x.rank())?;
    Ok(vec![Out::Int(x.shape()[d] as i64)])
}

fn sym_stride(_cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = wrap_dim_strict(a.int("dim")?, x.rank())?;
    Ok(vec![Out::Int(contiguous_strides(x.shape())[d])])
}

/// `resize_`: the new shape holds the first elements of `self` (row-major), zeros beyond.
fn resize(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let shape = sizes(&a.int_list("size")?)?;
    let old = x.ty().num_elements();
    let new: usize = shape.iter().product();
    let flat = cx.reshape(&x, &[old])?;
    let flat = if new <= old {
        cx.slice(&flat, &[0], &[new], &[1])?
    } else {
        let z = zeros(cx, &[], x.dtype())?;
        cx.pad(&flat, &z, &[0], &[(new - old) as i64], &[0])?
    };
    one(cx.reshape(&flat, &shape)?)
}
