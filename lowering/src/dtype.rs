//! Element types shared by every layer: the IR, the emitters and the runtime's buffers.

use std::fmt;
use std::str::FromStr;

/// An element type. Names follow PyTorch/JAX spelling (`f32`, `bf16`, `i32`, `bool`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
    /// `complex<f32>`: interleaved (re, im) f32 pairs, 8 bytes.
    C64,
    /// `complex<f64>`: interleaved (re, im) f64 pairs, 16 bytes.
    C128,
}

impl DType {
    /// Every dtype, complex included. Kernels (the DSL, the interpreter, Mosaic) take only the
    /// real ones ([`DType::REAL`]); complex is for StableHLO programs (ATen ops, FFTs).
    pub const ALL: [DType; 15] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
    ];

    /// Every real (non-complex) dtype: what kernels and the interpreter take.
    pub const REAL: [DType; 13] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// Bytes per element as stored in a dense host or device buffer (bool takes one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// Bit width of the element (bool counts as 1, as in MLIR's `i1`).
    pub fn bits(self) -> usize {
        match self {
            DType::Bool => 1,
            other => other.size_bytes() * 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// `c64` or `c128`.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// The type of each part of a complex dtype (`c64` -> `f32`, `c128` -> `f64`); a real
    /// dtype is its own.
    pub fn component(self) -> DType {
        match self {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            d => d,
        }
    }

    /// The complex dtype whose parts are `self` (`f32` -> `c64`, `f64` -> `c128`; f16 and
    /// bf16 widen to `c64`, as StableHLO has no smaller complex type); `None` for integers
    /// and bool. A complex dtype is its own.
    pub fn to_complex(self) -> Option<DType> {
        match self {
            DType::F16 | DType::BF16 | DType::F32 | DType::C64 => Some(DType::C64),
            DType::F64 | DType::C128 => Some(DType::C128),
            _ => None,
        }
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    /// The dtype of PyTorch's `c10::ScalarType` enum value `code`, where Tessera has it.
    pub fn from_torch_scalar_type(code: i64) -> Option<DType> {
        DType::ALL
            .into_iter()
            .find(|d| i64::from(d.torch_scalar_type()) == code)
    }

    /// PyTorch's `c10::ScalarType` enum value of this dtype (c10's numbering: ComplexHalf,
    /// the quantized and float8 types are the codes Tessera has no dtype for).
    pub fn torch_scalar_type(self) -> i32 {
        match self {
            DType::U8 => 0,
            DType::I8 => 1,
            DType::I16 => 2,
            DType::I32 => 3,
            DType::I64 => 4,
            DType::F16 => 5,
            DType::F32 => 6,
            DType::F64 => 7,
            DType::C64 => 9,
            DType::C128 => 10,
            DType::Bool => 11,
            DType::BF16 => 15,
            DType::U16 => 27,
            DType::U32 => 28,
            DType::U64 => 29,
        }
    }

    /// The user-facing name (`f32`, `bf16`, `bool`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C64 => "c64",
            DType::C128 => "c128",
        }
    }

    /// The element type as written in StableHLO tensor types (`tensor<2x3xui8>`, `tensor<i1>`).
    pub fn stablehlo_name(self) -> &'static str {
        match self {
            DType::Bool => "i1",
            DType::U8 => "ui8",
            DType::U16 => "ui16",
            DType::U32 => "ui32",
            DType::U64 => "ui64",
            DType::C64 => "complex<f32>",
            DType::C128 => "complex<f64>",
            other => other.name(),
        }
    }

    /// The element type in signless MLIR dialects (arith, vector, memref): integers are `iN`.
    pub fn mlir_signless_name(self) -> &'static str {
        match self {
            DType::Bool => "i1",
            DType::I8 | DType::U8 => "i8",
            DType::I16 | DType::U16 => "i16",
            DType::I32 | DType::U32 => "i32",
            DType::I64 | DType::U64 => "i64",
            DType::C64 => "complex<f32>",
            DType::C128 => "complex<f64>",
            other => other.name(),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error for a dtype name that Tessera does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dtype `{0}` (expected one of bool, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, c64, c128)")]
pub struct UnknownDType(pub String);

impl FromStr for DType {
    type Err = UnknownDType;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let found = DType::ALL
            .into_iter()
            .find(|d| d.name() == t || d.stablehlo_name() == t)
            .or(match t {
                "float32" | "float" => Some(DType::F32),
                "float16" | "half" => Some(DType::F16),
                "bfloat16" => Some(DType::BF16),
                "float64" | "double" => Some(DType::F64),
                "int8" => Some(DType::I8),
                "int16" => Some(DType::I16),
                "int32" | "int" => Some(DType::I32),
                "int64" | "long" => Some(DType::I64),
                "uint8" => Some(DType::U8),
                "complex64" | "cfloat" => Some(DType::C64),
                "complex128" | "cdouble" => Some(DType::C128),
                _ => None,
            });
        found.ok_or_else(|| UnknownDType(t.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            assert_eq!(d.stablehlo_name().parse::<DType>().unwrap(), d);
        }
        assert!("f128".parse::<DType>().is_err());
        assert_eq!("complex64".parse::<DType>().unwrap(), DType::C64);
        assert_eq!("complex<f64>".parse::<DType>().unwrap(), DType::C128);
        assert_eq!(DType::C64.size_bytes(), 8);
        assert_eq!(DType::C128.size_bytes(), 16);
        assert_eq!(DType::C128.component(), DType::F64);
        assert!(DType::C64.is_complex() && !DType::C64.is_float() && !DType::C64.is_int());
        assert!(DType::REAL.iter().all(|d| !d.is_complex()));
    }

    #[test]
    fn torch_scalar_types_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_torch_scalar_type(d.torch_scalar_type().into()), Some(d));
        }
        // c10's ComplexHalf and QInt8: no Tessera dtype.
        assert_eq!(DType::from_torch_scalar_type(8), None);
        assert_eq!(DType::from_torch_scalar_type(12), None);
    }
}
