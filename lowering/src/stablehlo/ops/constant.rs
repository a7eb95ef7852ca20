//! Constants: splats of one value, and whole host tensors (printed exactly, see `literal.rs`).

use super::super::builder::FuncBuilder;
use super::super::error::BuildError;
use super::super::literal;
use super::super::types::{TensorType, Value};
use crate::dtype::DType;
use crate::host::HostTensor;

const OP: &str = "stablehlo.constant";

impl FuncBuilder {
    /// A tensor of type `ty` filled with `value` (rounded to a float dtype; an integer dtype
    /// needs an integral in-range value; bool takes 0 or 1).
    pub fn full(&mut self, ty: TensorType, value: f64) -> Result<Value, BuildError> {
        let body = literal::splat_f64(OP, ty.dtype, value)?;
        self.dense(&body, ty)
    }

    /// Like [`FuncBuilder::full`] for exact integers beyond f64's 53 bits (i64/u64 extremes).
    pub fn full_int(&mut self, ty: TensorType, value: i128) -> Result<Value, BuildError> {
        let body = literal::splat_int(OP, ty.dtype, value)?;
        self.dense(&body, ty)
    }

    /// A complex tensor of type `ty` (c64 or c128) filled with `re + im*i`.
    pub fn full_complex(&mut self, ty: TensorType, re: f64, im: f64) -> Result<Value, BuildError> {
        if !ty.dtype.is_complex() {
            return Err(BuildError::UnsupportedDType {
                op: OP,
                dtype: ty.dtype,
                expected: "a complex type (c64, c128)",
            });
        }
        let body = literal::complex_literal(ty.dtype, re, im);
        self.dense(&body, ty)
    }

    /// A rank-0 constant.
    pub fn scalar(&mut self, dtype: DType, value: f64) -> Result<Value, BuildError> {
        self.full(TensorType::scalar(dtype), value)
    }

    pub fn zeros(&mut self, ty: TensorType) -> Result<Value, BuildError> {
        self.full(ty, 0.0)
    }

    /// A constant holding a host tensor's elements bit for bit.
    pub fn constant(&mut self, t: &HostTensor) -> Result<Value, BuildError> {
        self.dense(
            &literal::dense_host(t),
            TensorType::new(t.shape().to_vec(), t.dtype()),
        )
    }

    /// The largest value of `dtype` (+inf for floats): the identity of `min` reductions.
    pub fn max_value(&mut self, ty: TensorType) -> Result<Value, BuildError> {
        unordered(ty.dtype)?;
        match ty.dtype {
            d if d.is_float() => self.full(ty, f64::INFINITY),
            DType::Bool => self.full_int(ty, 1),
            d if d.is_signed_int() => self.full_int(ty, (1i128 << (d.bits() - 1)) - 1),
            d => self.full_int(ty, (1i128 << d.bits()) - 1),
        }
    }

    /// The smallest value of `dtype` (-inf for floats): the identity of `max` reductions.
    pub fn min_value(&mut self, ty: TensorType) -> Result<Value, BuildError> {
        unordered(ty.dtype)?;
        match ty.dtype {
            d if d.is_float() => self.full(ty, f64::NEG_INFINITY),
            d if d.is_signed_int() => self.full_int(ty, -(1i128 << (d.bits() - 1))),
            _ => self.full_int(ty, 0),
        }
    }

    fn dense(&mut self, body: &str, ty: TensorType) -> Result<Value, BuildError> {
        let attrs = format!("value = dense<{body}> : {ty}");
        self.emit1(OP, &[], &attrs, ty)
    }
}

/// Complex numbers have no order, hence no largest or smallest value.
fn unordered(dtype: DType) -> Result<(), BuildError> {
    if dtype.is_complex() {
        return Err(BuildError::UnsupportedDType {
            op: OP,
            dtype,
            expected: "an ordered (real) type: complex numbers have no extremes",
        });
    }
    Ok(())
}
