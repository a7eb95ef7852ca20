//! Ops whose typing the builder cannot infer: `custom_call` (e.g. the Mosaic emitter's
//! `tpu_custom_call`), the RNG, and a raw escape hatch for anything not covered yet.

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::types::{TensorType, Value};
use crate::dtype::DType;

/// MLIR string literal: `"..."` with `"`, `\` and control characters escaped.
pub fn mlir_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `#stablehlo<rng_algorithm ...>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RngAlgorithm {
    #[default]
    ThreeFry,
    Philox,
}

impl FuncBuilder {
    /// `stablehlo.custom_call @target(operands)` with `results` types; `backend_config` is
    /// passed as a string attribute, `extra_attrs` (`name = value` text, e.g.
    /// `("kernel_name", "\"matmul\"")`) verbatim.
    pub fn custom_call(
        &mut self,
        target: &str,
        operands: &[&Value],
        results: Vec<TensorType>,
        backend_config: &str,
        extra_attrs: &[(&str, String)],
    ) -> Result<Vec<Value>, BuildError> {
        let mut attrs = format!(
            "call_target_name = {}, backend_config = {}",
            mlir_string(target),
            mlir_string(backend_config)
        );
        for (name, value) in extra_attrs {
            attrs += &format!(", {name} = {value}");
        }
        self.emit(
            "stablehlo.custom_call",
            operands,
            &attrs,
            Vec::new(),
            results,
        )
    }

    /// Counter-based random bits: returns the next state and `shape` of random bits
    /// (`dtype`: an unsigned or signed integer type). `state` is `ui64` of 2 (ThreeFry) or 3
    /// (Philox) elements, so random ops are pure functions of an explicit seed.
    pub fn rng_bit_generator(
        &mut self,
        alg: RngAlgorithm,
        state: &Value,
        shape: &[usize],
        dtype: DType,
    ) -> Result<(Value, Value), BuildError> {
        const OP: &str = "stablehlo.rng_bit_generator";
        let (name, n) = match alg {
            RngAlgorithm::ThreeFry => ("THREE_FRY", 2),
            RngAlgorithm::Philox => ("PHILOX", 3),
        };
        if state.ty != TensorType::new([n], DType::U64) {
            return Err(BuildError::TypeMismatch {
                op: OP,
                lhs: TensorType::new([n], DType::U64),
                rhs: state.ty.clone(),
            });
        }
        if !dtype.is_int() {
            return Err(BuildError::UnsupportedDType {
                op: OP,
                dtype,
                expected: "an integer type",
            });
        }
        let attrs = format!("rng_algorithm = #stablehlo<rng_algorithm {name}>");
        let mut rs = self.emit(
            OP,
            &[state],
            &attrs,
            Vec::new(),
            vec![state.ty.clone(), TensorType::new(shape, dtype)],
        )?;
        let bits = rs.remove(1);
        Ok((rs.remove(0), bits))
    }

    /// Any op, by name, with attributes as text and result types as given: unchecked, for
    /// ops this builder does not type yet. The parser is the only judge of its validity.
    pub fn unchecked_op(
        &mut self,
        name: &'static str,
        operands: &[&Value],
        attrs: &str,
        results: Vec<TensorType>,
    ) -> Result<Vec<Value>, BuildError> {
        self.emit(name, operands, attrs, Vec::new(), results)
    }
}

#[cfg(test)]
mod tests {
    use super::mlir_string;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(mlir_string(r#"{"a": "b\c"}"#), r#""{\"a\": \"b\\c\"}""#);
        assert_eq!(mlir_string("x\ny"), r#""x\ny""#);
    }
}
