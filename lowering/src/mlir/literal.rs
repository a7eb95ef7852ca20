//! Literals as MLIR text, exact in their type: one float formatter for every emitter.
//!
//! Finite floats print as the shortest decimal that round-trips in the target type (rounded to
//! that type first), non-finite ones as their bit pattern in hex, which MLIR reads as raw bits.

use crate::dtype::DType;
use crate::ir::Literal;
use half::{bf16, f16};

/// A float literal exact in `dtype` (f16, bf16, f32 or f64; a complex dtype's component).
pub fn float_literal(dtype: DType, value: f64) -> String {
    match dtype.component() {
        DType::F64 if value.is_finite() => decimal(format!("{value:?}")),
        DType::F64 => format!("0x{:016X}", value.to_bits()),
        DType::F16 => {
            let h = f16::from_f64(value);
            if h.is_finite() {
                decimal(format!("{:?}", h.to_f32()))
            } else {
                format!("0x{:04X}", h.to_bits())
            }
        }
        DType::BF16 => {
            let h = bf16::from_f64(value);
            if h.is_finite() {
                decimal(format!("{:?}", h.to_f32()))
            } else {
                format!("0x{:04X}", h.to_bits())
            }
        }
        _ => {
            let x = value as f32;
            if x.is_finite() {
                decimal(format!("{x:?}"))
            } else {
                format!("0x{:08X}", x.to_bits())
            }
        }
    }
}

/// Rust's shortest round-trip form (`1e-7`, `0.5`) made MLIR-legal: MLIR's float literal
/// needs a `.` before the exponent (`1.0e-7`).
fn decimal(s: String) -> String {
    match s.split_once('e') {
        Some((mant, exp)) if !mant.contains('.') => format!("{mant}.0e{exp}"),
        _ => s,
    }
}

/// An IR literal rounded to `dtype`, as an MLIR attribute value without its type (`1.5`, `3`,
/// `true`, `0xFF800000`).
pub fn attr_value(value: Literal, dtype: DType) -> String {
    match dtype {
        DType::Bool => (value.as_f64() != 0.0).to_string(),
        d if d.is_float() => float_literal(d, value.as_f64()),
        // Wrapping into the width is what the interpreter does for out-of-range ints too.
        _ => match value {
            Literal::Int(i) => i.to_string(),
            other => (other.as_f64() as i64).to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_exactly() {
        assert_eq!(float_literal(DType::F32, 1.0), "1.0");
        assert_eq!(float_literal(DType::F32, 1e-7), "1.0e-7");
        assert_eq!(float_literal(DType::F32, f64::NAN), "0x7FC00000");
        assert_eq!(float_literal(DType::F32, f64::NEG_INFINITY), "0xFF800000");
        assert_eq!(float_literal(DType::BF16, f64::INFINITY), "0x7F80");
        assert_eq!(float_literal(DType::F16, 65504.0), "65504.0");
        assert_eq!(float_literal(DType::F64, 0.1), "0.1");
        assert_eq!(float_literal(DType::F32, -0.0), "-0.0");
        // Rounded to f32 before printing: the text names the f32 value, not the f64 one.
        assert_eq!(float_literal(DType::F32, 0.1), "0.1");
        assert_eq!(float_literal(DType::BF16, 0.1), "0.100097656");
        for x in [0.1f32, 3.4028235e38, 1.4e-45, -2.5e-12] {
            assert_eq!(
                float_literal(DType::F32, x as f64).parse::<f32>().unwrap(),
                x
            );
        }
    }

    #[test]
    fn attribute_values() {
        assert_eq!(attr_value(Literal::Float(1.0), DType::F32), "1.0");
        assert_eq!(attr_value(Literal::Float(-0.125), DType::BF16), "-0.125");
        assert_eq!(attr_value(Literal::Float(1e-7), DType::F32), "1.0e-7");
        assert_eq!(
            attr_value(Literal::Float(f64::NEG_INFINITY), DType::F32),
            "0xFF800000"
        );
        assert_eq!(
            attr_value(Literal::Float(f64::INFINITY), DType::BF16),
            "0x7F80"
        );
        assert_eq!(attr_value(Literal::Int(-3), DType::I32), "-3");
        assert_eq!(attr_value(Literal::Bool(true), DType::Bool), "true");
        assert_eq!(attr_value(Literal::Int(2), DType::F32), "2.0");
    }
}
