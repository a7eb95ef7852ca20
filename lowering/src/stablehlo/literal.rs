//! Printing constants exactly: `dense<...>` literals for splats and for whole host tensors.
//!
//! Floats print through the MLIR text layer's [`float_literal`] (exact in the target type).
//! Host tensors print as `dense<"0x...">`: raw little-endian bytes, exact for every dtype.
//! Complex splats print as `(re, im)` pairs of the component type's literals.

use super::error::BuildError;
use crate::dtype::DType;
use crate::host::HostTensor;
use crate::mlir::float_literal;

/// The body of a splat `dense<...>` literal holding `value` in `dtype`. Integers must be
/// integral and in range; bools must be 0 or 1.
pub(crate) fn splat_f64(op: &'static str, dtype: DType, value: f64) -> Result<String, BuildError> {
    if dtype.is_complex() {
        return Ok(complex_literal(dtype, value, 0.0));
    }
    if dtype.is_float() {
        return Ok(float_literal(dtype, value));
    }
    if value.fract() != 0.0 || !value.is_finite() {
        return Err(BuildError::ConstantRange {
            op,
            value: value.to_string(),
            dtype,
        });
    }
    splat_int(op, dtype, value as i128)
}

/// The body of a splat literal for an exact integer (any width, including u64 and i64).
pub(crate) fn splat_int(op: &'static str, dtype: DType, value: i128) -> Result<String, BuildError> {
    if dtype.is_complex() {
        return Ok(complex_literal(dtype, value as f64, 0.0));
    }
    if dtype.is_float() {
        return Ok(float_literal(dtype, value as f64));
    }
    let (lo, hi): (i128, i128) = match dtype {
        DType::Bool => (0, 1),
        d if d.is_signed_int() => (-(1i128 << (d.bits() - 1)), (1i128 << (d.bits() - 1)) - 1),
        d => (0, (1i128 << d.bits()) - 1),
    };
    if value < lo || value > hi {
        return Err(BuildError::ConstantRange {
            op,
            value: value.to_string(),
            dtype,
        });
    }
    Ok(match dtype {
        DType::Bool => (if value == 1 { "true" } else { "false" }).to_string(),
        _ => value.to_string(),
    })
}

/// `(re, im)`: a complex literal of `dtype` (c64 or c128), each part exact in the component
/// type.
pub(crate) fn complex_literal(dtype: DType, re: f64, im: f64) -> String {
    let part = dtype.component();
    format!("({}, {})", float_literal(part, re), float_literal(part, im))
}

/// The body of a `dense<...>` literal holding a host tensor's elements exactly.
pub(crate) fn dense_host(t: &HostTensor) -> String {
    if t.is_empty() {
        return String::new();
    }
    // MLIR's hex form of i1 changed from bit-packed to one byte per element; the XLA CPU
    // plugin (StableHLO 1.13) reads only the old one. A nested list reads the same everywhere.
    if t.dtype() == DType::Bool {
        let words: Vec<&str> = t
            .bytes()
            .iter()
            .map(|&b| if b != 0 { "true" } else { "false" })
            .collect();
        return nested(&words, t.shape());
    }
    let mut s = String::with_capacity(2 + 2 * t.bytes().len() + 2);
    s.push_str("\"0x");
    // Per scalar: a complex element is two scalars of its component type.
    for chunk in t.bytes().chunks(t.dtype().component().size_bytes()) {
        // MLIR's hex form is little-endian per element; HostTensor is native-endian.
        let ordered: Vec<u8> = if cfg!(target_endian = "big") {
            chunk.iter().rev().copied().collect()
        } else {
            chunk.to_vec()
        };
        for b in ordered {
            s.push_str(&format!("{b:02X}"));
        }
    }
    s.push('"');
    s
}

/// `[[a, b], [c, d]]` for `shape` [2, 2] (a bare element for rank 0).
fn nested(items: &[&str], shape: &[usize]) -> String {
    match shape.split_first() {
        None => items.first().copied().unwrap_or_default().to_string(),
        Some((&n, rest)) => {
            let step = rest.iter().product::<usize>();
            let parts: Vec<String> = (0..n)
                .map(|i| nested(&items[i * step..(i + 1) * step], rest))
                .collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_are_range_checked() {
        assert_eq!(
            splat_int("t", DType::U64, u64::MAX as i128).unwrap(),
            "18446744073709551615"
        );
        assert_eq!(splat_int("t", DType::I8, -128).unwrap(), "-128");
        assert!(splat_int("t", DType::I8, 128).is_err());
        assert!(splat_f64("t", DType::I32, 0.5).is_err());
        assert_eq!(splat_f64("t", DType::Bool, 1.0).unwrap(), "true");
    }

    #[test]
    fn complex_splats_are_pairs() {
        assert_eq!(splat_f64("t", DType::C64, 1.5).unwrap(), "(1.5, 0.0)");
        assert_eq!(splat_int("t", DType::C128, -2).unwrap(), "(-2.0, 0.0)");
        assert_eq!(
            complex_literal(DType::C64, f64::NAN, 0.1),
            "(0x7FC00000, 0.1)"
        );
        let t = HostTensor::from_complex(DType::C64, vec![1], &[(1.0, 2.0)]);
        assert_eq!(dense_host(&t), "\"0x0000803F00000040\"");
    }

    #[test]
    fn host_tensors_print_as_hex_bytes() {
        let t = HostTensor::from_vec(vec![2], vec![1.0f32, 2.0]);
        assert_eq!(dense_host(&t), "\"0x0000803F00000040\"");
        assert_eq!(dense_host(&HostTensor::zeros(DType::F32, vec![0, 3])), "");
        let b = HostTensor::from_vec(vec![2, 2], vec![true, false, false, true]);
        assert_eq!(dense_host(&b), "[[true, false], [false, true]]");
        assert_eq!(
            dense_host(&HostTensor::from_vec(vec![], vec![true])),
            "true"
        );
    }
}
