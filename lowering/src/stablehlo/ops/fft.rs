//! `stablehlo.fft`: discrete Fourier transforms over the trailing 1 to 3 dims.

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::Value;
use super::i64_array;
use crate::dtype::DType;

const OP: &str = "stablehlo.fft";

/// `fft_type` of `stablehlo.fft`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FftType {
    /// Complex -> complex, forward (`exp(-2πi jk/n)`), unnormalized.
    Fft,
    /// Complex -> complex, inverse (`exp(+2πi jk/n)`), normalized by `1/n`.
    Ifft,
    /// Real -> complex forward; the last dim keeps `n/2 + 1` frequencies.
    Rfft,
    /// Complex -> real inverse of an `Rfft` (Hermitian input), normalized by `1/n`.
    Irfft,
}

impl FftType {
    fn keyword(self) -> &'static str {
        match self {
            FftType::Fft => "FFT",
            FftType::Ifft => "IFFT",
            FftType::Rfft => "RFFT",
            FftType::Irfft => "IRFFT",
        }
    }
}

impl FuncBuilder {
    /// `fft(x)` over the trailing `fft_length.len()` (1 to 3) dims of `x`, per the StableHLO
    /// spec: `Fft`/`Ifft` take and return c64/c128 and the trailing dims must equal
    /// `fft_length`; `Rfft` takes f32/f64 whose trailing dims equal `fft_length` and returns
    /// c64/c128 whose last dim is `n/2 + 1` (`n` the last length); `Irfft` takes c64/c128
    /// whose last dim is `n/2 + 1` (other trailing dims equal `fft_length`) and returns
    /// f32/f64 whose trailing dims are `fft_length`.
    pub fn fft(
        &mut self,
        x: &Value,
        fft_type: FftType,
        fft_length: &[usize],
    ) -> Result<Value, BuildError> {
        let k = fft_length.len();
        if !(1..=3).contains(&k) {
            return Err(BuildError::shape(
                OP,
                format!("fft_length has {k} entries; expected 1 to 3"),
            ));
        }
        if k > x.rank() {
            return Err(BuildError::shape(
                OP,
                format!(
                    "fft_length {fft_length:?} has more entries than the operand's rank {}",
                    x.rank()
                ),
            ));
        }
        let d = x.dtype();
        let out_dtype = match fft_type {
            FftType::Fft | FftType::Ifft => {
                check_dtype(d, d.is_complex(), "c64 or c128")?;
                d
            }
            FftType::Rfft => {
                check_dtype(d, matches!(d, DType::F32 | DType::F64), "f32 or f64")?;
                d.to_complex().unwrap_or(DType::C64)
            }
            FftType::Irfft => {
                check_dtype(d, d.is_complex(), "c64 or c128")?;
                d.component()
            }
        };
        let lead = x.rank() - k;
        let trailing = &x.shape()[lead..];
        let last = fft_length[k - 1];
        let mut shape = x.shape().to_vec();
        let (expected, result_tail): (Vec<usize>, Vec<usize>) = match fft_type {
            FftType::Fft | FftType::Ifft => (fft_length.to_vec(), fft_length.to_vec()),
            FftType::Rfft => {
                let mut tail = fft_length.to_vec();
                tail[k - 1] = half_spectrum(last);
                (fft_length.to_vec(), tail)
            }
            FftType::Irfft => {
                let mut want = fft_length.to_vec();
                want[k - 1] = half_spectrum(last);
                (want, fft_length.to_vec())
            }
        };
        if trailing != expected.as_slice() {
            return Err(BuildError::shape(
                OP,
                format!(
                    "{} with fft_length {fft_length:?} needs trailing dims {expected:?}, the operand has {trailing:?}",
                    fft_type.keyword()
                ),
            ));
        }
        shape.splice(lead.., result_tail);
        let lengths: Vec<i64> = fft_length.iter().map(|&n| n as i64).collect();
        let attrs = format!(
            "fft_type = #stablehlo<fft_type {}>, fft_length = {}",
            fft_type.keyword(),
            i64_array(&lengths)
        );
        self.emit1(
            OP,
            &[x],
            &attrs,
            x.ty.with_dtype(out_dtype).with_shape(shape),
        )
    }
}

/// Frequencies a real transform of length `n` keeps: `n/2 + 1` (0 for an empty one).
fn half_spectrum(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        n / 2 + 1
    }
}

fn check_dtype(dtype: DType, ok: bool, expected: &'static str) -> Result<(), BuildError> {
    if ok {
        Ok(())
    } else {
        Err(BuildError::UnsupportedDType {
            op: OP,
            dtype,
            expected,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stablehlo::TensorType;

    #[test]
    fn result_types_follow_the_spec() {
        let mut f = FuncBuilder::new("main");
        let x = f.arg(TensorType::new([3, 8], DType::F32));
        let r = f.fft(&x, FftType::Rfft, &[8]).unwrap();
        assert_eq!(r.ty, TensorType::new([3, 5], DType::C64));
        let back = f.fft(&r, FftType::Irfft, &[8]).unwrap();
        assert_eq!(back.ty, TensorType::new([3, 8], DType::F32));
        let c = f.fft(&r, FftType::Fft, &[3, 5]).unwrap();
        assert_eq!(c.ty, r.ty);
        assert!(f.fft(&x, FftType::Fft, &[8]).is_err());
        assert!(f.fft(&x, FftType::Rfft, &[4]).is_err());
        assert!(f.fft(&r, FftType::Irfft, &[9]).is_ok()); // 9/2+1 = 5
        assert!(f.fft(&r, FftType::Irfft, &[7]).is_err());
        assert!(f.fft(&x, FftType::Rfft, &[1, 1, 3, 8]).is_err());
        let m = f.finish(&[&back]).unwrap();
        assert!(m
            .text()
            .contains("fft_type = #stablehlo<fft_type IRFFT>, fft_length = array<i64: 8>"));
    }
}
