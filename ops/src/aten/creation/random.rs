//! Random ops, drawn from the call's explicit seed (`cx.seed`) with `rng_bit_generator`
//! (ThreeFry): rand, randn, randperm, bernoulli.p, native_dropout, dropout, the `_like`s,
//! randint, normal, uniform, exponential. Values differ from
//! PyTorch's generator; their distributions are the same.

use crate::args::Args;
use crate::aten::shape::common::*;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, RngAlgorithm, TensorType, UnaryOp, Value};
use tessera_lowering::{DType, HostTensor};

/// `shape` of random bits of the unsigned `dtype` (u32 or u64), from the seed (or the key
/// input, [`Lower::rng_key`]) and a per-op `stream` number. ThreeFry's state is [key,
/// counter]: the stream is the counter's start, so two draws of one call never share bits.
fn bits(cx: &mut Lower, shape: &[usize], dtype: DType, stream: u64) -> LowerResult<Value> {
    let counter = 0x9E37_79B9_7F4A_7C15u64 ^ stream;
    let state = match cx.rng_key.clone() {
        Some(key) => {
            let salt = cx.constant(&HostTensor::from_vec(vec![2], vec![0u64, counter]))?;
            cx.binary(BinaryOp::Xor, &key, &salt)?
        }
        None => {
            let seed = cx.seed;
            cx.constant(&HostTensor::from_vec(vec![2], vec![seed, counter]))?
        }
    };
    let (_, b) = cx.rng_bit_generator(RngAlgorithm::ThreeFry, &state, shape, dtype)?;
    Ok(b)
}

/// Uniform `[0, 1)` of a float `dtype`: random mantissa bits under the exponent of 1.0, minus 1.
pub(super) fn uniform(
    cx: &mut Lower,
    shape: &[usize],
    dtype: DType,
    stream: u64,
) -> LowerResult<Value> {
    let (ubits, mant, one_bits, uint) = match dtype {
        DType::F64 => (DType::U64, 52, 0x3FF0_0000_0000_0000u64, DType::U64),
        DType::F32 => (DType::U32, 23, 0x3F80_0000, DType::U32),
        DType::F16 => (DType::U32, 10, 0x3C00, DType::U16),
        DType::BF16 => (DType::U32, 7, 0x3F80, DType::U16),
        d => {
            return Err(LowerError::dtype(
                d,
                "uniform random numbers need a float dtype",
            ))
        }
    };
    let r = bits(cx, shape, ubits, stream)?;
    let shift = cx.full_int(
        TensorType::new(shape.to_vec(), ubits),
        (ubits.bits() - mant) as i128,
    )?;
    let r = cx.binary(BinaryOp::ShiftRightLogical, &r, &shift)?;
    let r = cx.convert(&r, uint)?;
    let e = cx.full_int(TensorType::new(shape.to_vec(), uint), one_bits as i128)?;
    let r = cx.binary(BinaryOp::Or, &r, &e)?;
    let f = cx.bitcast_convert(&r, dtype)?;
    let one_ = cx.full(TensorType::new(shape.to_vec(), dtype), 1.0)?;
    Ok(cx.sub(&f, &one_)?)
}

fn float_dtype(a: &Args, what: &str) -> LowerResult<DType> {
    let d = a.opt_dtype("dtype")?.unwrap_or(DType::F32);
    if !d.is_float() {
        return Err(LowerError::dtype(
            d,
            format!("\"{what}\" not implemented for '{d}'"),
        ));
    }
    Ok(d)
}

pub(super) fn rand(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let shape = sizes(&a.int_list("size")?)?;
    let dtype = float_dtype(a, "check_uniform_bounds")?;
    if shape.iter().product::<usize>() == 0 {
        return one(zeros(cx, &shape, dtype)?);
    }
    one(uniform(cx, &shape, dtype, 1)?)
}

pub(super) fn randn(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let shape = sizes(&a.int_list("size")?)?;
    let dtype = float_dtype(a, "normal_kernel_cpu")?;
    one(standard_normal(cx, &shape, dtype, 2)?)
}

/// Standard normal draws of `shape` and the float `dtype` from `stream`.
fn standard_normal(
    cx: &mut Lower,
    shape: &[usize],
    dtype: DType,
    stream: u64,
) -> LowerResult<Value> {
    if shape.iter().product::<usize>() == 0 {
        return zeros(cx, shape, dtype);
    }
    // Box-Muller in f32 (f64 for f64).
    let cd = if dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let mut two = vec![2];
    two.extend_from_slice(shape);
    let u = uniform(cx, &two, cd, stream)?;
    let n: usize = shape.iter().product();
    let u = cx.reshape(&u, &[2, n])?;
    let u1 = cx.slice(&u, &[0, 0], &[1, n], &[1, 1])?;
    let u2 = cx.slice(&u, &[1, 0], &[2, n], &[1, 1])?;
    let ty = TensorType::new(vec![1, n], cd);
    let one_ = cx.full(ty.clone(), 1.0)?;
    let u1 = cx.sub(&one_, &u1)?; // (0, 1]
    let l = cx.unary(UnaryOp::Log, &u1)?;
    let m2 = cx.full(ty.clone(), -2.0)?;
    let l = cx.mul(&l, &m2)?;
    let rad = cx.unary(UnaryOp::Sqrt, &l)?;
    let tau = cx.full(ty, std::f64::consts::TAU)?;
    let th = cx.mul(&u2, &tau)?;
    let c = cx.unary(UnaryOp::Cosine, &th)?;
    let z = cx.mul(&rad, &c)?;
    let z = cx.reshape(&z, shape)?;
    Ok(cx.convert(&z, dtype)?)
}

pub(super) fn randperm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let n = a.int("n")?;
    let dtype = a.opt_dtype("dtype")?.unwrap_or(DType::I64);
    if n < 0 {
        return Err(LowerError::invalid(format!(
            "n must be non-negative, got{n}"
        )));
    }
    let n = n as usize;
    if n == 0 {
        return one(zeros(cx, &[0], dtype)?);
    }
    let keys = bits(cx, &[n], DType::U64, 3)?;
    let pos = iota(cx, &[n], 0)?;
    let sorted = cx.sort(&[&keys, &pos], 0, false, |f, a| {
        Ok::<_, LowerError>(f.compare(Comparison::Lt, &a[0], &a[1])?)
    })?;
    one(cx.convert(&sorted[1], dtype)?)
}

pub(super) fn bernoulli(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let p = a.float("p")?;
    if !(0.0..=1.0).contains(&p) {
        return Err(LowerError::invalid(format!(
            "bernoulli_ expects p to be in [0, 1], but got p={p}"
        )));
    }
    let shape = x.shape().to_vec();
    if x.ty().num_elements() == 0 {
        return one(zeros(cx, &shape, x.dtype())?);
    }
    let u = uniform(cx, &shape, DType::F64, 4)?;
    let pv = cx.full(TensorType::new(shape.clone(), DType::F64), p)?;
    let hit = cx.compare(Comparison::Lt, &u, &pv)?;
    one(cx.convert(&hit, x.dtype())?)
}

pub(super) fn native_dropout(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("input")?;
    let p = a.float("p")?;
    let train = a.opt_bool("train")?.unwrap_or(true);
    let shape = x.shape().to_vec();
    let bool_ty = TensorType::new(shape.clone(), DType::Bool);
    if x.ty().num_elements() == 0 {
        // PyTorch returns `empty_like(input)` as the mask of an empty input.
        let m = zeros(cx, &shape, x.dtype())?;
        return Ok(vec![Out::Tensor(x), Out::Tensor(m)]);
    }
    if !train {
        let m = cx.full(bool_ty, 1.0)?;
        return Ok(vec![Out::Tensor(x), Out::Tensor(m)]);
    }
    if !x.dtype().is_float() {
        return Err(LowerError::dtype(
            x.dtype(),
            "native_dropout needs a floating point input",
        ));
    }
    if !(0.0..=1.0).contains(&p) {
        return Err(LowerError::invalid(format!(
            "dropout probability has to be between 0 and 1, but got {p}"
        )));
    }
    let keep_p = 1.0 - p;
    let scale = if keep_p == 0.0 { 0.0 } else { 1.0 / keep_p };
    let u = uniform(cx, &shape, DType::F64, 5)?;
    let kp = cx.full(TensorType::new(shape.clone(), DType::F64), keep_p)?;
    let keep = cx.compare(Comparison::Lt, &u, &kp)?;
    let m = cx.convert(&keep, x.dtype())?;
    let y = cx.mul(&x, &m)?;
    let s = cx.full(x.ty().clone(), scale)?;
    let y = cx.mul(&y, &s)?;
    Ok(vec![Out::Tensor(y), Out::Tensor(keep)])
}

/// The float dtype of a draw shaped like `self`: `dtype` (where the overload has one), else
/// `self`'s.
fn like_dtype(a: &Args, x: &Value, what: &str) -> LowerResult<DType> {
    let given = if a.schema.args.iter().any(|s| s.name == "dtype") {
        a.opt_dtype("dtype")?
    } else {
        None
    };
    let d = given.unwrap_or(x.dtype());
    if !d.is_float() {
        return Err(LowerError::dtype(
            d,
            format!("\"{what}\" not implemented for '{d}'"),
        ));
    }
    Ok(d)
}

/// Uniform `[0, 1)` draws of `shape` in `dtype`, empty shapes included.
fn uniform_any(cx: &mut Lower, shape: &[usize], dtype: DType, stream: u64) -> LowerResult<Value> {
    if shape.iter().product::<usize>() == 0 {
        return zeros(cx, shape, dtype);
    }
    uniform(cx, shape, dtype, stream)
}

/// `rand_like(self, *, dtype=None)`.
pub(super) fn rand_like(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = like_dtype(a, &x, "check_uniform_bounds")?;
    one(uniform_any(cx, x.shape(), d, 6)?)
}

/// `randn_like(self, *, dtype=None)`.
pub(super) fn randn_like(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = like_dtype(a, &x, "normal_kernel_cpu")?;
    one(standard_normal(cx, x.shape(), d, 7)?)
}

/// Integers uniform in `[low, high)` of `shape` and `dtype` (drawn in f64, floored).
fn randint_of(
    cx: &mut Lower,
    low: i64,
    high: i64,
    shape: &[usize],
    dtype: DType,
) -> LowerResult<Value> {
    if low >= high {
        return Err(LowerError::invalid(format!(
            "random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )));
    }
    if shape.iter().product::<usize>() == 0 {
        return zeros(cx, shape, dtype);
    }
    let u = uniform(cx, shape, DType::F64, 8)?;
    let ty = TensorType::new(shape.to_vec(), DType::F64);
    let span = cx.full(ty.clone(), (high - low) as f64)?;
    let lo = cx.full(ty, low as f64)?;
    let v = cx.mul(&u, &span)?;
    let v = cx.unary(UnaryOp::Floor, &v)?;
    let v = cx.add(&v, &lo)?;
    Ok(cx.convert(&v, dtype)?)
}

/// `randint(high, size)` / `randint.low(low, high, size)` (default dtype i64).
pub(super) fn randint(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let shape = sizes(&a.int_list("size")?)?;
    let low = if a.schema.overload == "low" {
        a.int("low")?
    } else {
        0
    };
    let dtype = a.opt_dtype("dtype")?.unwrap_or(DType::I64);
    one(randint_of(cx, low, a.int("high")?, &shape, dtype)?)
}

/// `randint_like(self, high)` / `.low_dtype(self, low, high)`: self's shape and dtype.
pub(super) fn randint_like(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let low = if a.schema.overload == "low_dtype" {
        a.int("low")?
    } else {
        0
    };
    let dtype = a.opt_dtype("dtype")?.unwrap_or(x.dtype());
    one(randint_of(cx, low, a.int("high")?, x.shape(), dtype)?)
}

/// `normal.Tensor_float(mean, std)`, `.float_Tensor`, `.Tensor_Tensor`, `.float_float(mean,
/// std, size)`: `mean + std * z`, the shape of the tensor operands (or `size`).
pub(super) fn normal(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let mean = a.tensor("mean").ok();
    let std = a.tensor("std").ok();
    let (shape, dtype) = match (&mean, &std) {
        (Some(m), Some(s)) => (
            crate::aten::util::broadcast_all(&[m.clone(), s.clone()])?,
            m.dtype(),
        ),
        (Some(m), None) => (m.shape().to_vec(), m.dtype()),
        (None, Some(s)) => (s.shape().to_vec(), s.dtype()),
        (None, None) => (
            sizes(&a.int_list("size")?)?,
            a.opt_dtype("dtype")?.unwrap_or(DType::F32),
        ),
    };
    if !dtype.is_float() {
        return Err(LowerError::dtype(
            dtype,
            format!("\"normal_kernel_cpu\" not implemented for '{dtype}'"),
        ));
    }
    if std.is_none() && a.float("std")? < 0.0 {
        return Err(LowerError::invalid(format!(
            "normal expects std >= 0.0, but found std {}",
            a.float("std")?
        )));
    }
    let z = standard_normal(cx, &shape, dtype, 9)?;
    let ty = TensorType::new(shape.clone(), dtype);
    let m = match mean {
        Some(m) => cx.broadcast_to(&m, &shape)?,
        None => cx.full(ty.clone(), a.float("mean")?)?,
    };
    let s = match std {
        Some(s) => cx.broadcast_to(&s, &shape)?,
        None => cx.full(ty, a.float("std")?)?,
    };
    let v = cx.mul(&z, &s)?;
    one(cx.add(&m, &v)?)
}

/// `uniform(self, from=0, to=1)`: self's shape and (float) dtype.
pub(super) fn uniform_op(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let (from, to) = (a.float("from")?, a.float("to")?);
    if from > to {
        return Err(LowerError::invalid(format!(
            "uniform_ expects to return a [from, to) range, but found from={from} > to={to}"
        )));
    }
    let d = like_dtype(a, &x, "check_uniform_bounds")?;
    let u = uniform_any(cx, x.shape(), d, 10)?;
    let ty = TensorType::new(x.shape().to_vec(), d);
    let span = cx.full(ty.clone(), to - from)?;
    let lo = cx.full(ty, from)?;
    let v = cx.mul(&u, &span)?;
    one(cx.add(&v, &lo)?)
}

/// `exponential(self, lambd=1)`: `-log(1 - u) / lambd`.
pub(super) fn exponential(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let l = a.float("lambd")?;
    if l <= 0.0 {
        return Err(LowerError::invalid(format!(
            "exponential_ expects lambda > 0.0, but found lambda={l}"
        )));
    }
    let d = like_dtype(a, &x, "exponential_cpu")?;
    let u = uniform_any(cx, x.shape(), d, 11)?;
    let ty = TensorType::new(x.shape().to_vec(), d);
    let one_ = cx.full(ty.clone(), 1.0)?;
    let q = cx.sub(&one_, &u)?;
    let lg = cx.unary(UnaryOp::Log, &q)?;
    let k = cx.full(ty, -1.0 / l)?;
    one(cx.mul(&lg, &k)?)
}

/// `dropout(input, p, train)`: the output of `native_dropout`.
pub(super) fn dropout(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let b = crate::aten::util::rebind(a, "native_dropout", vec![])?;
    let mut r = native_dropout(cx, &b)?;
    r.truncate(1);
    Ok(r)
}
