//! IR types and literals as MLIR text: scalars stay scalars, tiles become `vector<..>`,
//! refs become `memref<.., #tpu.memory_space<..>>`.

use crate::dtype::DType;
use crate::ir::{Literal, MemorySpace, Type};

/// The signless element type (`f32`, `bf16`, `i32`, `i1`).
pub(crate) fn elem(dtype: DType) -> &'static str {
    dtype.mlir_signless_name()
}

pub(crate) fn vector(dtype: DType, shape: &[usize]) -> String {
    if shape.is_empty() {
        return elem(dtype).to_string();
    }
    format!("vector<{}x{}>", dims(shape), elem(dtype))
}

pub(crate) fn memref(dtype: DType, shape: &[usize], space: MemorySpace) -> String {
    let space = match space {
        MemorySpace::Vmem => "vmem",
        MemorySpace::Smem => "smem",
        MemorySpace::Any => "any",
    };
    if shape.is_empty() {
        return format!("memref<{}, #tpu.memory_space<{space}>>", elem(dtype));
    }
    format!(
        "memref<{}x{}, #tpu.memory_space<{space}>>",
        dims(shape),
        elem(dtype)
    )
}

pub(crate) fn mlir_type(t: &Type) -> String {
    match t {
        Type::Value { dtype, shape } => vector(*dtype, shape),
        Type::Ref {
            dtype,
            shape,
            space,
        } => memref(*dtype, shape, *space),
    }
}

fn dims(shape: &[usize]) -> String {
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

/// `array<i64: 2, 2, 3>` (the `i32` form for `tpu.iota`'s dimensions).
pub(crate) fn dense_array(elem: &str, values: &[usize]) -> String {
    let v: Vec<String> = values.iter().map(|d| d.to_string()).collect();
    if v.is_empty() {
        return format!("array<{elem}>");
    }
    format!("array<{elem}: {}>", v.join(", "))
}

/// A literal rounded to `dtype`, as an MLIR attribute value without its type (`1.5e+00`,
/// `3`, `true`). Non-finite floats are hex bit patterns, the only way MLIR spells them.
pub(crate) fn literal(value: Literal, dtype: DType) -> String {
    match dtype {
        DType::Bool => (value.as_f64() != 0.0).to_string(),
        d if d.is_float() => float(value.as_f64(), d),
        // Wrapping into the width is what the interpreter does for out-of-range ints too.
        _ => match value {
            Literal::Int(i) => i.to_string(),
            other => (other.as_f64() as i64).to_string(),
        },
    }
}

fn float(x: f64, dtype: DType) -> String {
    let rounded = match dtype {
        DType::BF16 => f64::from(half::bf16::from_f64(x)),
        DType::F16 => f64::from(half::f16::from_f64(x)),
        DType::F32 => f64::from(x as f32),
        _ => x,
    };
    if !rounded.is_finite() {
        let bits = match dtype {
            DType::BF16 => u64::from(half::bf16::from_f64(rounded).to_bits()),
            DType::F16 => u64::from(half::f16::from_f64(rounded).to_bits()),
            DType::F32 => u64::from((rounded as f32).to_bits()),
            _ => rounded.to_bits(),
        };
        let digits = dtype.size_bytes() * 2;
        return format!("0x{bits:0digits$X}");
    }
    // `{:e}` is the shortest round-trip form; MLIR's lexer wants a `.` in float literals.
    let s = format!("{rounded:e}");
    match s.split_once('e') {
        Some((mantissa, exp)) if !mantissa.contains('.') => format!("{mantissa}.0e{exp}"),
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_parse_as_mlir_floats() {
        assert_eq!(literal(Literal::Float(1.0), DType::F32), "1.0e0");
        assert_eq!(literal(Literal::Float(-0.125), DType::BF16), "-1.25e-1");
        assert_eq!(
            literal(Literal::Float(f64::NEG_INFINITY), DType::F32),
            "0xFF800000"
        );
        assert_eq!(
            literal(Literal::Float(f64::INFINITY), DType::BF16),
            "0x7F80"
        );
        assert_eq!(literal(Literal::Int(-3), DType::I32), "-3");
        assert_eq!(literal(Literal::Bool(true), DType::Bool), "true");
        assert_eq!(literal(Literal::Int(2), DType::F32), "2.0e0");
    }
}
