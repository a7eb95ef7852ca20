//! Discrete Fourier transforms: the Core ATen `_fft_r2c` and `_fft_c2r` (every `torch.fft`
//! function on real input or output reaches one of them), and `_fft_c2c` (complex to complex:
//! `fft`/`ifft`/`fftn` of complex input, and of real input that PyTorch makes complex first
//! when the full spectrum is asked for), on `stablehlo.fft`.
//!
//! `stablehlo.fft` transforms the trailing 1 to 3 dims, so the `dim` list is moved to the end
//! (at most three at a time) and back. PyTorch's conventions (aten/src/ATen/native/
//! SpectralOps.cpp and its CPU kernels):
//! * `normalization`: 0 = none, 1 = `1/sqrt(n)`, 2 = `1/n`, with `n` the number of points of
//!   the signal (the product of the input sizes over `dim` for r2c, of the output sizes for
//!   c2r). StableHLO's inverse transforms (IFFT, IRFFT) already divide by `n`, so c2r rescales
//!   by `n` times PyTorch's factor.
//! * r2c: a forward transform; the last dim of the list keeps `n/2 + 1` frequencies when
//!   `onesided`, otherwise the full (conjugate-symmetric) spectrum is returned.
//! * c2r: an inverse transform, as a complex inverse over every dim but the last of the list,
//!   then a 1-D complex-to-real one over the last (`last_dim_size` points, reading the first
//!   `last_dim_size/2 + 1` entries), as PyTorch does (so non-Hermitian inputs give its
//!   results: the imaginary parts of the zero and Nyquist frequencies are ignored).
//! * c2c: a forward (`forward=true`) or inverse transform over every dim of the list, with
//!   `n` the product of the sizes over `dim`.

use super::util::wrap_dim;
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Lowering, Out};
use crate::lowerings;
use tessera_lowering::stablehlo::{FftType, TensorType, Value};
use tessera_lowering::DType;

pub(super) const LOWERINGS: &[Lowering] = lowerings![complex:
    ("_fft_r2c", fft_r2c),
    ("_fft_c2r", fft_c2r),
    ("_fft_c2c", fft_c2c),
];

/// `stablehlo.fft` takes at most this many dims per op.
const MAX_FFT_DIMS: usize = 3;

fn fft_r2c(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims = signal_dims(&a.int_list("dim")?, x.shape())?;
    let norm = normalization(a.int("normalization")?)?;
    let onesided = a.bool("onesided")?;
    let d = x.dtype();
    let out_dtype = match d {
        DType::F32 => DType::C64,
        DType::F64 => DType::C128,
        DType::F16 | DType::BF16 => {
            return Err(LowerError::Unsupported(format!(
                "_fft_r2c of {d}: the FFT takes f32 or f64 (as PyTorch on CPU)"
            )))
        }
        _ => {
            return Err(LowerError::dtype(
                d,
                format!("Only supports floating-point dtypes, but found: {d}"),
            ))
        }
    };
    if let Some(&i) = dims.iter().find(|&&i| x.shape()[i] == 0) {
        return Err(LowerError::invalid(format!(
            "Invalid number of data points (0) specified (dim {i})"
        )));
    }
    let n: usize = dims.iter().map(|&i| x.shape()[i]).product();
    let Some(&last) = dims.last() else {
        return Err(LowerError::invalid(
            "FFT must transform at least one dimension",
        ));
    };
    let mut out_shape = x.shape().to_vec();
    if onesided {
        out_shape[last] = x.shape()[last] / 2 + 1;
    }
    if out_shape.contains(&0) {
        let z = cx.zeros(TensorType::new(out_shape, out_dtype))?;
        return Ok(vec![Out::Tensor(z)]);
    }
    let y = if onesided {
        // RFFT over the last dim of the list and up to two before it, complex FFTs over the
        // rest.
        let split = dims.len().saturating_sub(MAX_FFT_DIMS);
        let (rest, real_dims) = dims.split_at(split);
        let spectrum = along(cx, &x, real_dims, FftType::Rfft, &sizes(&x, real_dims))?;
        c2c(cx, &spectrum, rest, FftType::Fft)?
    } else {
        let xc = cx.convert(&x, out_dtype)?;
        c2c(cx, &xc, &dims, FftType::Fft)?
    };
    let y = scale(cx, &y, norm.factor(n))?;
    Ok(vec![Out::Tensor(y)])
}

fn fft_c2r(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims = signal_dims(&a.int_list("dim")?, x.shape())?;
    let norm = normalization(a.int("normalization")?)?;
    let last_size = a.int("last_dim_size")?;
    if !x.dtype().is_complex() {
        return Err(LowerError::dtype(
            x.dtype(),
            format!("Only supports complex dtypes, but found: {}", x.dtype()),
        ));
    }
    if last_size < 0 {
        return Err(LowerError::invalid(format!(
            "Invalid number of data points ({last_size}) specified"
        )));
    }
    let last_size = last_size as usize;
    let Some((&last, lead)) = dims.split_last() else {
        return Err(LowerError::invalid(
            "FFT must transform at least one dimension",
        ));
    };
    let mut out_shape = x.shape().to_vec();
    out_shape[last] = last_size;
    let out_dtype = x.dtype().component();
    if out_shape.contains(&0) {
        let z = cx.zeros(TensorType::new(out_shape, out_dtype))?;
        return Ok(vec![Out::Tensor(z)]);
    }
    // The points of the signal (output sizes), and those StableHLO's inverses divide by.
    let n: usize = dims.iter().map(|&i| out_shape[i]).product();
    let y = fit_half_spectrum(cx, &x, last, last_size / 2 + 1)?;
    let y = c2c(cx, &y, lead, FftType::Ifft)?;
    let y = along(cx, &y, &[last], FftType::Irfft, &[last_size])?;
    let y = scale(cx, &y, norm.inverse_factor(n))?;
    Ok(vec![Out::Tensor(y)])
}

fn fft_c2c(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let dims = signal_dims(&a.int_list("dim")?, x.shape())?;
    let norm = normalization(a.int("normalization")?)?;
    let forward = a.bool("forward")?;
    if !x.dtype().is_complex() {
        return Err(LowerError::dtype(
            x.dtype(),
            format!("Only supports complex dtypes, but found: {}", x.dtype()),
        ));
    }
    if let Some(&i) = dims.iter().find(|&&i| x.shape()[i] == 0) {
        return Err(LowerError::invalid(format!(
            "Invalid number of data points (0) specified (dim {i})"
        )));
    }
    if x.shape().contains(&0) {
        return Ok(vec![Out::Tensor(x)]);
    }
    let n: usize = dims.iter().map(|&i| x.shape()[i]).product();
    let (fft_type, factor) = if forward {
        (FftType::Fft, norm.factor(n))
    } else {
        (FftType::Ifft, norm.inverse_factor(n))
    };
    let y = c2c(cx, &x, &dims, fft_type)?;
    let y = scale(cx, &y, factor)?;
    Ok(vec![Out::Tensor(y)])
}

/// PyTorch's `fft_norm_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Norm {
    None,
    ByRootN,
    ByN,
}

impl Norm {
    /// The factor the unnormalized transform of `n` points is multiplied by.
    fn factor(self, n: usize) -> f64 {
        match self {
            Norm::None => 1.0,
            Norm::ByRootN => 1.0 / (n as f64).sqrt(),
            Norm::ByN => 1.0 / n as f64,
        }
    }

    /// The factor StableHLO's inverse transforms (which divide by `n`) are multiplied by.
    fn inverse_factor(self, n: usize) -> f64 {
        match self {
            Norm::None => n as f64,
            Norm::ByRootN => (n as f64).sqrt(),
            Norm::ByN => 1.0,
        }
    }
}

fn normalization(v: i64) -> LowerResult<Norm> {
    match v {
        0 => Ok(Norm::None),
        1 => Ok(Norm::ByRootN),
        2 => Ok(Norm::ByN),
        _ => Err(LowerError::invalid(format!(
            "Invalid normalization mode: {v} (expected 0 = none, 1 = by root n, 2 = by n)"
        ))),
    }
}

/// The `dim` list wrapped, in its order; empty or repeated dims are errors (as in PyTorch).
fn signal_dims(dims: &[i64], shape: &[usize]) -> LowerResult<Vec<usize>> {
    let rank = shape.len();
    if dims.is_empty() {
        return Err(LowerError::invalid(
            "FFT must transform at least one dimension",
        ));
    }
    if rank == 0 {
        return Err(LowerError::invalid(
            "FFT of a 0-dimensional tensor: it has no dimension to transform",
        ));
    }
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let w = wrap_dim(d, rank)?;
        if out.contains(&w) {
            return Err(LowerError::invalid(format!(
                "FFT dims must be unique, got {dims:?}"
            )));
        }
        out.push(w);
    }
    Ok(out)
}

/// `fft_type` over `dims` (1 to 3 of them; the last of the list is the one RFFT halves and
/// IRFFT grows): they are moved to the end in order, transformed, and moved back. `lengths`
/// are the signal's sizes along them (the output's for IRFFT, the input's otherwise).
fn along(
    cx: &mut Lower,
    x: &Value,
    dims: &[usize],
    fft_type: FftType,
    lengths: &[usize],
) -> LowerResult<Value> {
    let mut perm: Vec<usize> = (0..x.rank()).filter(|i| !dims.contains(i)).collect();
    perm.extend_from_slice(dims);
    let identity = perm.iter().enumerate().all(|(i, &p)| i == p);
    let xt = if identity {
        x.clone()
    } else {
        cx.transpose(x, &perm)?
    };
    let y = cx.fft(&xt, fft_type, lengths)?;
    if identity {
        return Ok(y);
    }
    Ok(cx.transpose(&y, &inverse(&perm))?)
}

/// The sizes of `x` along `dims`.
fn sizes(x: &Value, dims: &[usize]) -> Vec<usize> {
    dims.iter().map(|&d| x.shape()[d]).collect()
}

/// Complex-to-complex `fft_type` (FFT or IFFT) over any number of `dims`, three at a time.
fn c2c(cx: &mut Lower, x: &Value, dims: &[usize], fft_type: FftType) -> LowerResult<Value> {
    let mut y = x.clone();
    for chunk in dims.rchunks(MAX_FFT_DIMS) {
        let lengths = sizes(&y, chunk);
        y = along(cx, &y, chunk, fft_type, &lengths)?;
    }
    Ok(y)
}

/// The first `m` entries of `x` along `dim` (what a c2r reads; PyTorch accepts `n/2 + 1`
/// entries or the full `n`).
fn fit_half_spectrum(cx: &mut Lower, x: &Value, dim: usize, m: usize) -> LowerResult<Value> {
    let have = x.shape()[dim];
    if have < m {
        return Err(LowerError::invalid(format!(
            "_fft_c2r: dim {dim} has {have} entries, fewer than the last_dim_size/2 + 1 = {m} it reads"
        )));
    }
    if have == m {
        return Ok(x.clone());
    }
    Ok(cx.slice_axis(x, dim, 0, m)?)
}

/// `x * s` for a real factor `s` (each part of a complex `x` scaled on its own, so no
/// `inf * 0` appears).
fn scale(cx: &mut Lower, x: &Value, s: f64) -> LowerResult<Value> {
    if s == 1.0 {
        return Ok(x.clone());
    }
    let part = x.ty().with_dtype(x.dtype().component());
    let k = cx.full(part, s)?;
    if !x.dtype().is_complex() {
        return Ok(cx.mul(x, &k)?);
    }
    let re = cx.real(x)?;
    let im = cx.imag(x)?;
    let re = cx.mul(&re, &k)?;
    let im = cx.mul(&im, &k)?;
    Ok(cx.complex(&re, &im)?)
}

/// The permutation that undoes `perm`.
fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}
