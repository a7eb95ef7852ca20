//! Dense row-major host tensors: what users hand to kernels and what the runtime and the
//! reference interpreter read and write. Bytes are native-endian, elements packed.
//!
//! Complex tensors (`c64`, `c128`) store each element as an interleaved `(re, im)` pair of
//! its component type, as PJRT, NumPy and PyTorch do. The f64 views ([`HostTensor::from_f64`],
//! [`HostTensor::to_f64_vec`]) see only real parts (imaginary parts are zero going in, dropped
//! coming out); [`HostTensor::from_complex`] and [`HostTensor::to_complex_vec`] see both.

use crate::dtype::DType;
use half::{bf16, f16};

/// Errors building or reading a host tensor.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostTensorError {
    #[error("shape {shape:?} of {dtype} needs {expected} bytes, got {got}")]
    ByteLength {
        dtype: DType,
        shape: Vec<usize>,
        expected: usize,
        got: usize,
    },
    #[error("tensor holds {actual}, asked for {asked}")]
    DTypeMismatch { actual: DType, asked: DType },
    /// The element count or byte size does not fit in memory addresses at all.
    #[error("{dtype}{shape:?} is too large: its size in bytes overflows a {bits}-bit address")]
    SizeOverflow {
        dtype: DType,
        shape: Vec<usize>,
        bits: u32,
    },
    /// The host has no room for the tensor (the allocator refused).
    #[error("allocating {bytes} bytes on the host for {dtype}{shape:?} failed (out of memory)")]
    OutOfMemory {
        dtype: DType,
        shape: Vec<usize>,
        bytes: usize,
    },
}

/// The bytes a dense `dtype` tensor of `shape` needs, or `SizeOverflow` when that does not
/// fit in a `usize` (checked: a product of user-given dims must never wrap).
pub fn byte_len(dtype: DType, shape: &[usize]) -> Result<usize, HostTensorError> {
    shape
        .iter()
        .try_fold(dtype.size_bytes(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| HostTensorError::SizeOverflow {
            dtype,
            shape: shape.to_vec(),
            bits: usize::BITS,
        })
}

/// The element count of `shape`, or `SizeOverflow`.
pub fn element_count(dtype: DType, shape: &[usize]) -> Result<usize, HostTensorError> {
    byte_len(dtype, shape)?;
    // Cannot overflow: the byte length (a multiple of it) did not.
    Ok(shape.iter().product())
}

/// `len` zeroed bytes for a `dtype` tensor of `shape`, or `OutOfMemory` naming the size when
/// the allocator refuses (never the process-wide abort of `vec![0; len]`). Zeroed through the
/// allocator's calloc path, so pages the caller never writes are never touched.
pub fn try_zeroed_bytes(
    dtype: DType,
    shape: &[usize],
    len: usize,
) -> Result<Vec<u8>, HostTensorError> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let oom = || HostTensorError::OutOfMemory {
        dtype,
        shape: shape.to_vec(),
        bytes: len,
    };
    let layout = std::alloc::Layout::array::<u8>(len).map_err(|_| oom())?;
    // SAFETY: `layout` has non-zero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(oom());
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `[u8; len]`,
    // all `len` bytes are initialized (zeroed), and the Vec takes sole ownership.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// A dense row-major array on the host.
#[derive(Clone, PartialEq)]
pub struct HostTensor {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl std::fmt::Debug for HostTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostTensor({}{:?}", self.dtype, self.shape)?;
        if self.dtype.is_complex() {
            let vals = self.to_complex_vec();
            let shown: Vec<(f64, f64)> = vals.iter().take(8).copied().collect();
            return write!(
                f,
                " {:?}{})",
                shown,
                if vals.len() > 8 { " ..." } else { "" }
            );
        }
        let vals = self.to_f64_vec();
        let shown: Vec<f64> = vals.iter().take(8).copied().collect();
        write!(
            f,
            " {:?}{})",
            shown,
            if vals.len() > 8 { " ..." } else { "" }
        )
    }
}

/// Rust element types that map one-to-one onto a [`DType`] on the host.
pub trait HostElement: Copy + Send + Sync + 'static {
    const DTYPE: DType;
    /// The element as an f64 (a complex element's real part).
    fn to_f64(self) -> f64;
    /// The element nearest `v` (a complex element with imaginary part 0).
    fn from_f64(v: f64) -> Self;
    /// The element as `(re, im)` (a real element's imaginary part is 0).
    fn to_complex(self) -> (f64, f64) {
        (self.to_f64(), 0.0)
    }
    /// The element nearest `re + im*i` (a real element drops `im`).
    fn from_complex(re: f64, _im: f64) -> Self {
        Self::from_f64(re)
    }
}

/// A complex number as stored in `c64` (`Complex<f32>`) and `c128` (`Complex<f64>`) tensors:
/// the real part, then the imaginary part.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Complex<T> {
    pub re: T,
    pub im: T,
}

impl<T> Complex<T> {
    pub fn new(re: T, im: T) -> Self {
        Complex { re, im }
    }
}

impl HostElement for Complex<f32> {
    const DTYPE: DType = DType::C64;
    fn to_f64(self) -> f64 {
        self.re as f64
    }
    fn from_f64(v: f64) -> Self {
        Complex::new(v as f32, 0.0)
    }
    fn to_complex(self) -> (f64, f64) {
        (self.re as f64, self.im as f64)
    }
    fn from_complex(re: f64, im: f64) -> Self {
        Complex::new(re as f32, im as f32)
    }
}

impl HostElement for Complex<f64> {
    const DTYPE: DType = DType::C128;
    fn to_f64(self) -> f64 {
        self.re
    }
    fn from_f64(v: f64) -> Self {
        Complex::new(v, 0.0)
    }
    fn to_complex(self) -> (f64, f64) {
        (self.re, self.im)
    }
    fn from_complex(re: f64, im: f64) -> Self {
        Complex::new(re, im)
    }
}

macro_rules! host_element {
    ($t:ty, $d:ident, |$x:ident| $to:expr, |$v:ident| $from:expr) => {
        impl HostElement for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                let $x = self;
                $to
            }
            fn from_f64($v: f64) -> Self {
                $from
            }
        }
    };
}
host_element!(bool, Bool, |x| if x { 1.0 } else { 0.0 }, |v| v != 0.0);
host_element!(i8, I8, |x| x as f64, |v| v as i8);
host_element!(i16, I16, |x| x as f64, |v| v as i16);
host_element!(i32, I32, |x| x as f64, |v| v as i32);
host_element!(i64, I64, |x| x as f64, |v| v as i64);
host_element!(u8, U8, |x| x as f64, |v| v as u8);
host_element!(u16, U16, |x| x as f64, |v| v as u16);
host_element!(u32, U32, |x| x as f64, |v| v as u32);
host_element!(u64, U64, |x| x as f64, |v| v as u64);
host_element!(f16, F16, |x| x.to_f64(), |v| f16::from_f64(v));
host_element!(bf16, BF16, |x| x.to_f64(), |v| bf16::from_f64(v));
host_element!(f32, F32, |x| x as f64, |v| v as f32);
host_element!(f64, F64, |x| x, |v| v);

/// Calls `$body` with `$T` bound to the Rust type of `$dtype`.
#[macro_export]
macro_rules! with_host_type {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
            $crate::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::DType::I16 => {
                type $T = i16;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::U16 => {
                type $T = u16;
                $body
            }
            $crate::DType::U32 => {
                type $T = u32;
                $body
            }
            $crate::DType::U64 => {
                type $T = u64;
                $body
            }
            $crate::DType::F16 => {
                type $T = half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::DType::C64 => {
                type $T = $crate::host::Complex<f32>;
                $body
            }
            $crate::DType::C128 => {
                type $T = $crate::host::Complex<f64>;
                $body
            }
        }
    };
}

impl HostTensor {
    /// Wraps raw bytes, checking their length against the shape.
    pub fn from_bytes(
        dtype: DType,
        shape: Vec<usize>,
        bytes: Vec<u8>,
    ) -> Result<Self, HostTensorError> {
        let expected = byte_len(dtype, &shape)?;
        if bytes.len() != expected {
            return Err(HostTensorError::ByteLength {
                dtype,
                shape,
                expected,
                got: bytes.len(),
            });
        }
        Ok(HostTensor {
            dtype,
            shape,
            bytes,
        })
    }

    /// A tensor of typed elements. Panics only if `data.len()` disagrees with `shape`
    /// (a programming error in the caller, not user input).
    pub fn from_vec<T: HostElement>(shape: Vec<usize>, data: Vec<T>) -> Self {
        assert_eq!(
            shape.iter().product::<usize>(),
            data.len(),
            "data length vs shape {shape:?}"
        );
        let mut bytes = Vec::with_capacity(data.len() * T::DTYPE.size_bytes());
        for v in &data {
            // SAFETY: HostElement types are plain-old-data of size T::DTYPE.size_bytes().
            let raw = unsafe {
                std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>())
            };
            bytes.extend_from_slice(raw);
        }
        HostTensor {
            dtype: T::DTYPE,
            shape,
            bytes,
        }
    }

    /// A tensor of `dtype` whose elements are `values` rounded (or truncated) to that dtype
    /// (complex dtypes get imaginary parts 0).
    pub fn from_f64(dtype: DType, shape: Vec<usize>, values: &[f64]) -> Self {
        with_host_type!(dtype, T => HostTensor::from_vec::<T>(shape, values.iter().map(|&v| T::from_f64(v)).collect()))
    }

    /// As [`HostTensor::from_f64`] for sizes that come from users: a shape whose byte size
    /// overflows, a value count that disagrees with it, or memory the host cannot give are
    /// errors instead of a panic or an abort.
    pub fn try_from_f64(
        dtype: DType,
        shape: Vec<usize>,
        values: &[f64],
    ) -> Result<Self, HostTensorError> {
        let len = byte_len(dtype, &shape)?;
        if values.len() * dtype.size_bytes() != len {
            return Err(HostTensorError::ByteLength {
                dtype,
                shape,
                expected: len,
                got: values.len() * dtype.size_bytes(),
            });
        }
        let mut bytes = try_zeroed_bytes(dtype, &shape, len)?;
        with_host_type!(dtype, T => {
            let size = std::mem::size_of::<T>();
            for (chunk, &v) in bytes.chunks_exact_mut(size).zip(values) {
                let e = T::from_f64(v);
                // SAFETY: HostElement types are plain-old-data of `size` bytes.
                let raw = unsafe { std::slice::from_raw_parts(&e as *const T as *const u8, size) };
                chunk.copy_from_slice(raw);
            }
        });
        Ok(HostTensor {
            dtype,
            shape,
            bytes,
        })
    }

    /// All elements equal to `value` (e.g. a NaN poison before a kernel writes its output).
    pub fn full(dtype: DType, shape: Vec<usize>, value: f64) -> Self {
        let n = shape.iter().product::<usize>();
        HostTensor::from_f64(dtype, shape, &vec![value; n])
    }

    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Self {
        HostTensor::full(dtype, shape, 0.0)
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Typed copy of the elements.
    pub fn to_vec<T: HostElement>(&self) -> Result<Vec<T>, HostTensorError> {
        if T::DTYPE != self.dtype {
            return Err(HostTensorError::DTypeMismatch {
                actual: self.dtype,
                asked: T::DTYPE,
            });
        }
        let size = std::mem::size_of::<T>();
        Ok(self
            .bytes
            .chunks_exact(size)
            // SAFETY: each chunk holds exactly one T; read_unaligned tolerates any alignment.
            .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr() as *const T) })
            .collect())
    }

    /// Every element widened to f64 (the float64 reference's view). For a complex tensor:
    /// the real parts (see [`HostTensor::to_complex_vec`] for both parts).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        with_host_type!(self.dtype, T => self.to_vec::<T>().expect("dtype matches").into_iter().map(HostElement::to_f64).collect())
    }

    /// A tensor of `dtype` whose elements are `values` (`(re, im)` pairs) rounded to that
    /// dtype; a real dtype keeps only the real parts.
    pub fn from_complex(dtype: DType, shape: Vec<usize>, values: &[(f64, f64)]) -> Self {
        with_host_type!(dtype, T => HostTensor::from_vec::<T>(shape, values.iter().map(|&(re, im)| T::from_complex(re, im)).collect()))
    }

    /// Every element as `(re, im)` in f64 (a real tensor's imaginary parts are 0).
    pub fn to_complex_vec(&self) -> Vec<(f64, f64)> {
        with_host_type!(self.dtype, T => self.to_vec::<T>().expect("dtype matches").into_iter().map(HostElement::to_complex).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_dtype() {
        for d in DType::ALL {
            let t = HostTensor::from_f64(d, vec![2, 2], &[0.0, 1.0, 0.0, 1.0]);
            assert_eq!(t.bytes().len(), 4 * d.size_bytes());
            assert_eq!(t.to_f64_vec(), vec![0.0, 1.0, 0.0, 1.0]);
        }
    }

    #[test]
    fn complex_elements_are_interleaved_pairs() {
        let t = HostTensor::from_complex(DType::C64, vec![2], &[(1.0, 2.0), (-3.0, 0.5)]);
        assert_eq!(t.bytes().len(), 16);
        assert_eq!(
            t.to_vec::<Complex<f32>>().unwrap(),
            vec![Complex::new(1.0, 2.0), Complex::new(-3.0, 0.5)]
        );
        assert_eq!(&t.bytes()[4..8], &2.0f32.to_ne_bytes());
        assert_eq!(t.to_f64_vec(), vec![1.0, -3.0]);
        assert_eq!(t.to_complex_vec(), vec![(1.0, 2.0), (-3.0, 0.5)]);
        let w = HostTensor::from_complex(DType::C128, vec![1], &[(0.1, -0.2)]);
        assert_eq!(w.to_complex_vec(), vec![(0.1, -0.2)]);
        let r = HostTensor::from_complex(DType::F32, vec![1], &[(4.0, 9.0)]);
        assert_eq!(r.to_complex_vec(), vec![(4.0, 0.0)]);
        assert!(format!("{t:?}").contains("(1.0, 2.0)"));
    }

    #[test]
    fn sizes_are_overflow_checked_and_allocation_failure_is_an_error() {
        let err = byte_len(DType::F32, &[usize::MAX / 2, 3]).unwrap_err();
        assert!(
            err.to_string().contains("overflows a 64-bit address"),
            "{err}"
        );
        assert_eq!(
            byte_len(DType::F32, &[100_000, 100_000]),
            Ok(40_000_000_000)
        );
        assert_eq!(byte_len(DType::C128, &[]), Ok(16));
        assert_eq!(byte_len(DType::F64, &[0, usize::MAX]), Ok(0));
        // More than any address space can give: the allocator refuses, no abort.
        let huge = usize::MAX / 4;
        let err = try_zeroed_bytes(DType::U8, &[huge], huge).unwrap_err();
        assert_eq!(
            err,
            HostTensorError::OutOfMemory {
                dtype: DType::U8,
                shape: vec![huge],
                bytes: huge
            }
        );
        assert!(
            err.to_string()
                .contains(&format!("allocating {huge} bytes")),
            "{err}"
        );
        assert_eq!(try_zeroed_bytes(DType::U8, &[3], 3).unwrap(), vec![0, 0, 0]);
        let err = HostTensor::from_bytes(DType::F32, vec![usize::MAX, 2], vec![]).unwrap_err();
        assert!(matches!(err, HostTensorError::SizeOverflow { .. }), "{err}");
    }

    #[test]
    fn try_from_f64_matches_from_f64_and_checks_sizes() {
        for d in DType::ALL {
            let vals = [0.0, 1.0, -2.5, 3.0];
            let want = HostTensor::from_f64(d, vec![2, 2], &vals);
            assert_eq!(HostTensor::try_from_f64(d, vec![2, 2], &vals), Ok(want));
        }
        let err = HostTensor::try_from_f64(DType::F32, vec![3], &[1.0]).unwrap_err();
        assert!(err.to_string().contains("needs 12 bytes, got 4"), "{err}");
    }

    #[test]
    fn rejects_wrong_byte_length() {
        let err = HostTensor::from_bytes(DType::F32, vec![3], vec![0; 8]).unwrap_err();
        assert!(err.to_string().contains("needs 12 bytes, got 8"));
    }
}
