//! Random ops, drawn from the call's explicit seed (`cx.seed`) with `rng_bit_generator`
//! (ThreeFry): rand, randn, randperm, bernoulli.p, native_dropout. Values differ from
//! PyTorch's generator; their distributions are the same.

use crate::aten::shape::common::*;
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, RngAlgorithm, TensorType, UnaryOp, Value};
use tessera_lowering::{DType, HostTensor};

/// `shape` of random bits of the unsigned `dtype` (u32 or u64), from the seed and a per-op
/// `stream` number.
fn bits(cx: &mut Lower, shape: &[usize], dtype: DType, stream: u64) -> LowerResult<Value> {
    let state = HostTensor::from_vec(vec![2], vec![cx.seed, 0x9E37_79B9_7F4A_7C15u64 ^ stream]);
    let state = cx.constant(&state)?;
    let (_, b) = cx.rng_bit_generator(RngAlgorithm::ThreeFry, &state, shape, dtype)?;
    Ok(b)
}

/// Uniform `[0, 1)` of a float `dtype`: random mantissa bits under the exponent of 1.0, minus 1.
pub(super) fn uniform(cx: &mut Lower, shape: &[usize], dtype: DType, stream: u64) -> LowerResult<Value> {
    let (ubits, mant, one_bits, uint) = match dtype {
        DType::F64 => (DType::U64, 52, 0x3FF0_0000_0000_0000u64, DType::U64),
        DType::F32 => (DType::U32, 23, 0x3F80_0000, DType::U32),
        DType::F16 => (DType::U32, 10, 0x3C00, DType::U16),
        DType::BF16 => (DType::U32, 7, 0x3F80, DType::U16),
        d => return Err(LowerError::dtype(d, "uniform random numbers need a float dtype")),
    };
    let r = bits(cx, shape, ubits, stream)?;
    let shift = cx.full_int(TensorType::new(shape.to_vec(), ubits), (ubits.bits() - mant) as i128)?;
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
        return Err(LowerError::dtype(d, format!("\"{what}\" not implemented for '{d}'")));
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
    if shape.iter().product::<usize>() == 0 {
        return one(zeros(cx, &shape, dtype)?);
    }
    // Box-Muller in f32 (f64 for f64).
    let cd = if dtype == DType::F64 { DType::F64 } else { DType::F32 };
    let mut two = vec![2];
    two.extend_from_slice(&shape);
    let u = uniform(cx, &two, cd, 2)?;
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
    let z = cx.reshape(&z, &shape)?;
    one(cx.convert(&z, dtype)?)
}

pub(super) fn randperm(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let n = a.int("n")?;
    let dtype = a.opt_dtype("dtype")?.unwrap_or(DType::I64);
    if n < 0 {
        return Err(LowerError::invalid(format!("n must be non-negative, got{n}")));
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
        return Err(LowerError::invalid(format!("bernoulli_ expects p to be in [0, 1], but got p={p}")));
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
        return Err(LowerError::dtype(x.dtype(), "native_dropout needs a floating point input"));
    }
    if !(0.0..=1.0).contains(&p) {
        return Err(LowerError::invalid(format!("dropout probability has to be between 0 and 1, but got {p}")));
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
