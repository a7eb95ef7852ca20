//! Dense arrays of the interpreter: every element an f64 holding a value exactly
//! representable in the array's dtype (rounded after every op).

use crate::dtype::DType;
use half::{bf16, f16};

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Array {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl Array {
    pub fn new(dtype: DType, shape: Vec<usize>, data: Vec<f64>) -> Array {
        Array { dtype, shape, data }
    }

    pub fn filled(dtype: DType, shape: Vec<usize>, value: f64) -> Array {
        let n = shape.iter().product();
        Array {
            dtype,
            shape,
            data: vec![round(dtype, value); n],
        }
    }

    pub fn scalar(&self) -> f64 {
        self.data[0]
    }
}

/// Row-major strides.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Multi-index of flat position `flat`.
pub(crate) fn unravel(mut flat: usize, shape: &[usize], out: &mut [usize]) {
    for i in (0..shape.len()).rev() {
        out[i] = flat % shape[i];
        flat /= shape[i];
    }
}

/// `x` rounded to `dtype` the way arithmetic in that dtype would produce it: floats round
/// to nearest, integers wrap around (two's complement), bools are nonzero.
pub(crate) fn round(dtype: DType, x: f64) -> f64 {
    match dtype {
        // Complex never reaches the interpreter (`run` refuses it); round its real part.
        DType::F64 | DType::C128 => x,
        DType::F32 | DType::C64 => x as f32 as f64,
        DType::BF16 => bf16::from_f64(x).to_f64(),
        DType::F16 => f16::from_f64(x).to_f64(),
        DType::Bool => f64::from(u8::from(x != 0.0)),
        int => {
            if !x.is_finite() {
                return 0.0;
            }
            let bits = int.bits() as u32;
            let m = 1i128 << bits;
            let r = (x.trunc() as i128).rem_euclid(m);
            (if int.is_signed_int() && r >= m / 2 {
                r - m
            } else {
                r
            }) as f64
        }
    }
}

/// `x` converted to `dtype` like a cast: floats round, float-to-int truncates and saturates
/// (NaN becomes 0), like Rust's `as`.
pub(crate) fn convert(dtype: DType, x: f64) -> f64 {
    if dtype.is_int() {
        let bits = dtype.bits() as u32;
        let (lo, hi) = if dtype.is_signed_int() {
            (
                -(2f64.powi(bits as i32 - 1)),
                2f64.powi(bits as i32 - 1) - 1.0,
            )
        } else {
            (0.0, 2f64.powi(bits as i32) - 1.0)
        };
        if x.is_nan() {
            0.0
        } else {
            x.trunc().clamp(lo, hi)
        }
    } else {
        round(dtype, x)
    }
}

/// The bit pattern of `x` as an element of `dtype` (integers as two's complement).
pub(crate) fn to_bits(dtype: DType, x: f64) -> u64 {
    match dtype {
        DType::F64 | DType::C128 => x.to_bits(),
        DType::F32 | DType::C64 => u64::from((x as f32).to_bits()),
        DType::BF16 => u64::from(bf16::from_f64(x).to_bits()),
        DType::F16 => u64::from(f16::from_f64(x).to_bits()),
        DType::Bool => u64::from(x != 0.0),
        int => (x as i128).rem_euclid(1i128 << int.bits()) as u64,
    }
}

/// The element of `dtype` whose bit pattern is `bits` (the inverse of [`to_bits`]).
pub(crate) fn from_bits(dtype: DType, bits: u64) -> f64 {
    match dtype {
        DType::F64 | DType::C128 => f64::from_bits(bits),
        DType::F32 | DType::C64 => f64::from(f32::from_bits(bits as u32)),
        DType::BF16 => bf16::from_bits(bits as u16).to_f64(),
        DType::F16 => f16::from_bits(bits as u16).to_f64(),
        DType::Bool => f64::from(u8::from(bits != 0)),
        int => {
            let m = 1i128 << int.bits();
            let b = i128::from(bits) % m;
            (if int.is_signed_int() && b >= m / 2 {
                b - m
            } else {
                b
            }) as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_like_the_dtype() {
        assert_eq!(round(DType::I8, 130.0), -126.0);
        assert_eq!(round(DType::U8, -1.0), 255.0);
        assert_eq!(round(DType::BF16, 1.0 + 1.0 / 256.0), 1.0);
        assert_eq!(round(DType::F32, 0.1), 0.1f32 as f64);
        assert_eq!(convert(DType::I8, 300.7), 127.0);
        assert_eq!(convert(DType::I32, -2.9), -2.0);
    }

    #[test]
    fn bit_patterns_round_trip() {
        assert_eq!(to_bits(DType::F32, -0.0), 0x8000_0000);
        assert_eq!(from_bits(DType::I32, 0x8000_0000), -2147483648.0);
        assert_eq!(
            from_bits(DType::F32, to_bits(DType::I32, 1065353216.0)),
            1.0
        );
        assert_eq!(to_bits(DType::I16, -1.0), 0xffff);
        assert_eq!(from_bits(DType::BF16, 0x3f80), 1.0);
    }

    #[test]
    fn strides_and_unravel() {
        assert_eq!(strides(&[2, 3, 4]), vec![12, 4, 1]);
        let mut idx = [0; 3];
        unravel(23, &[2, 3, 4], &mut idx);
        assert_eq!(idx, [1, 2, 3]);
    }
}
