//! Typed, by-name access to bound arguments, for lowerings (`Args` = tensors as StableHLO
//! values) and override predicates ([`HostArgs`] = tensors as host data).

use crate::bind::{scalar_of, Bound};
use crate::error::{LowerError, LowerResult};
use crate::value::{ArgValue, Scalar};
use tessera_lowering::stablehlo::Value;
use tessera_lowering::{DType, HostTensor};

/// The arguments a lowering sees.
pub type Args = Bound<Value>;
/// The arguments an override predicate sees.
pub type HostArgs = Bound<HostTensor>;

impl<T: Clone> Bound<T> {
    /// The value of argument `name`; an unknown name is a bug in the lowering, reported as an
    /// error rather than a panic.
    pub fn get(&self, name: &str) -> LowerResult<&ArgValue<T>> {
        self.schema
            .args
            .iter()
            .position(|a| a.name == name)
            .map(|i| &self.values[i])
            .ok_or_else(|| {
                LowerError::invalid(format!(
                    "the schema has no argument `{name}` ({})",
                    self.schema.schema
                ))
            })
    }

    fn wrong(&self, name: &str, want: &str, v: &ArgValue<T>) -> LowerError {
        LowerError::invalid(format!(
            "argument `{name}` must be {want}, not {}",
            v.kind()
        ))
    }

    pub fn is_none(&self, name: &str) -> LowerResult<bool> {
        Ok(matches!(self.get(name)?, ArgValue::None))
    }

    pub fn tensor(&self, name: &str) -> LowerResult<T> {
        match self.get(name)? {
            ArgValue::Tensor(t) => Ok(t.clone()),
            v => Err(self.wrong(name, "a Tensor", v)),
        }
    }

    /// The tensor argument `name` without cloning it (for predicates over host data).
    pub fn tensor_ref(&self, name: &str) -> LowerResult<&T> {
        match self.get(name)? {
            ArgValue::Tensor(t) => Ok(t),
            v => Err(self.wrong(name, "a Tensor", v)),
        }
    }

    pub fn opt_tensor(&self, name: &str) -> LowerResult<Option<T>> {
        match self.get(name)? {
            ArgValue::None => Ok(None),
            _ => self.tensor(name).map(Some),
        }
    }

    pub fn tensors(&self, name: &str) -> LowerResult<Vec<T>> {
        match self.get(name)? {
            ArgValue::TensorList(ts) => Ok(ts.clone()),
            v => Err(self.wrong(name, "a list of Tensors", v)),
        }
    }

    pub fn opt_tensors(&self, name: &str) -> LowerResult<Vec<Option<T>>> {
        match self.get(name)? {
            ArgValue::OptTensorList(ts) => Ok(ts.clone()),
            ArgValue::TensorList(ts) => Ok(ts.iter().cloned().map(Some).collect()),
            v => Err(self.wrong(name, "a list of optional Tensors", v)),
        }
    }

    pub fn scalar(&self, name: &str) -> LowerResult<Scalar> {
        let v = self.get(name)?;
        scalar_of(v).ok_or_else(|| self.wrong(name, "a number", v))
    }

    pub fn opt_scalar(&self, name: &str) -> LowerResult<Option<Scalar>> {
        match self.get(name)? {
            ArgValue::None => Ok(None),
            _ => self.scalar(name).map(Some),
        }
    }

    pub fn int(&self, name: &str) -> LowerResult<i64> {
        match self.get(name)? {
            ArgValue::Int(i) => Ok(*i),
            ArgValue::Bool(b) => Ok(*b as i64),
            v => Err(self.wrong(name, "an int", v)),
        }
    }

    pub fn opt_int(&self, name: &str) -> LowerResult<Option<i64>> {
        match self.get(name)? {
            ArgValue::None => Ok(None),
            _ => self.int(name).map(Some),
        }
    }

    pub fn float(&self, name: &str) -> LowerResult<f64> {
        match self.get(name)? {
            ArgValue::Float(x) => Ok(*x),
            ArgValue::Int(i) => Ok(*i as f64),
            v => Err(self.wrong(name, "a float", v)),
        }
    }

    pub fn opt_float(&self, name: &str) -> LowerResult<Option<f64>> {
        match self.get(name)? {
            ArgValue::None => Ok(None),
            _ => self.float(name).map(Some),
        }
    }

    pub fn bool(&self, name: &str) -> LowerResult<bool> {
        match self.get(name)? {
            ArgValue::Bool(b) => Ok(*b),
            v => Err(self.wrong(name, "a bool", v)),
        }
    }

    pub fn opt_bool(&self, name: &str) -> LowerResult<Option<bool>> {
        match self.get(name)? {
            ArgValue::None => Ok(None),
            _ => self.bool(name).map(Some),
        }
    }

    pub fn int_list(&self, name: &str) -> LowerResult<Vec<i64>> {
        match self.get(name)? {
            ArgValue::IntList(l) => Ok(l.clone()),
            ArgValue::Int(i) => Ok(vec![*i]),
            v => Err(self.wrong(name, "a list of ints", v)),
        }
    }

    pub fn opt_int_list(&self, name: &str) -> LowerResult<Option<Vec<i64>>> {
        match self.get(name)? {
            ArgValue::None => Ok(None),
            _ => self.int_list(name).map(Some),
        }
    }

    pub fn float_list(&self, name: &str) -> LowerResult<Vec<f64>> {
        match self.get(name)? {
            ArgValue::FloatList(l) => Ok(l.clone()),
            ArgValue::IntList(l) => Ok(l.iter().map(|&i| i as f64).collect()),
            v => Err(self.wrong(name, "a list of floats", v)),
        }
    }

    pub fn opt_float_list(&self, name: &str) -> LowerResult<Option<Vec<f64>>> {
        match self.get(name)? {
            ArgValue::None => Ok(None),
            _ => self.float_list(name).map(Some),
        }
    }

    pub fn bool_list(&self, name: &str) -> LowerResult<Vec<bool>> {
        match self.get(name)? {
            ArgValue::BoolList(l) => Ok(l.clone()),
            v => Err(self.wrong(name, "a list of bools", v)),
        }
    }

    pub fn opt_dtype(&self, name: &str) -> LowerResult<Option<DType>> {
        match self.get(name)? {
            ArgValue::None => Ok(None),
            ArgValue::DType(d) => Ok(Some(*d)),
            v => Err(self.wrong(name, "a dtype", v)),
        }
    }

    pub fn dtype(&self, name: &str) -> LowerResult<DType> {
        let v = self.get(name)?;
        self.opt_dtype(name)?
            .ok_or_else(|| self.wrong(name, "a dtype", v))
    }

    pub fn str(&self, name: &str) -> LowerResult<String> {
        match self.get(name)? {
            ArgValue::Str(s) => Ok(s.clone()),
            v => Err(self.wrong(name, "a str", v)),
        }
    }

    pub fn opt_str(&self, name: &str) -> LowerResult<Option<String>> {
        match self.get(name)? {
            ArgValue::None => Ok(None),
            _ => self.str(name).map(Some),
        }
    }
}
