//! Argument values of an op call. Generic over how a tensor is held: host data
//! ([`HostTensor`](tessera_lowering::HostTensor)) when a call arrives, a StableHLO
//! [`Value`](tessera_lowering::stablehlo::Value) while it is being lowered.

use std::fmt;
use tessera_lowering::DType;

/// A Python number as ATen's `Scalar` holds it; its kind drives type promotion.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as i64 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// The dtype PyTorch gives a tensor made from this number (`torch.tensor(2.5)`).
    pub fn default_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DType::F32,
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
        }
    }
}

/// One argument of a call.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue<T> {
    None,
    Tensor(T),
    TensorList(Vec<T>),
    OptTensorList(Vec<Option<T>>),
    Bool(bool),
    Int(i64),
    Float(f64),
    IntList(Vec<i64>),
    FloatList(Vec<f64>),
    BoolList(Vec<bool>),
    DType(DType),
    Str(String),
}

impl<T> ArgValue<T> {
    /// What the value is, for error messages ("int", "Tensor", "list of ints").
    pub fn kind(&self) -> &'static str {
        match self {
            ArgValue::None => "None",
            ArgValue::Tensor(_) => "Tensor",
            ArgValue::TensorList(_) => "list of Tensors",
            ArgValue::OptTensorList(_) => "list of optional Tensors",
            ArgValue::Bool(_) => "bool",
            ArgValue::Int(_) => "int",
            ArgValue::Float(_) => "float",
            ArgValue::IntList(_) => "list of ints",
            ArgValue::FloatList(_) => "list of floats",
            ArgValue::BoolList(_) => "list of bools",
            ArgValue::DType(_) => "dtype",
            ArgValue::Str(_) => "str",
        }
    }

    /// The same argument with every tensor mapped through `f` (host data -> SSA value).
    pub fn try_map<U, E>(&self, f: &mut impl FnMut(&T) -> Result<U, E>) -> Result<ArgValue<U>, E> {
        Ok(match self {
            ArgValue::None => ArgValue::None,
            ArgValue::Tensor(t) => ArgValue::Tensor(f(t)?),
            ArgValue::TensorList(ts) => {
                ArgValue::TensorList(ts.iter().map(&mut *f).collect::<Result<_, _>>()?)
            }
            ArgValue::OptTensorList(ts) => ArgValue::OptTensorList(
                ts.iter()
                    .map(|t| t.as_ref().map(&mut *f).transpose())
                    .collect::<Result<_, _>>()?,
            ),
            ArgValue::Bool(b) => ArgValue::Bool(*b),
            ArgValue::Int(i) => ArgValue::Int(*i),
            ArgValue::Float(x) => ArgValue::Float(*x),
            ArgValue::IntList(v) => ArgValue::IntList(v.clone()),
            ArgValue::FloatList(v) => ArgValue::FloatList(v.clone()),
            ArgValue::BoolList(v) => ArgValue::BoolList(v.clone()),
            ArgValue::DType(d) => ArgValue::DType(*d),
            ArgValue::Str(s) => ArgValue::Str(s.clone()),
        })
    }

    /// Every tensor in the argument, in order (lists flattened, `None`s skipped).
    pub fn tensors(&self) -> impl Iterator<Item = &T> {
        // An iterator, not a Vec: the eager runtime asks per argument of every op.
        let (one, list, opts): (Option<&T>, &[T], &[Option<T>]) = match self {
            ArgValue::Tensor(t) => (Some(t), &[], &[]),
            ArgValue::TensorList(ts) => (None, ts, &[]),
            ArgValue::OptTensorList(ts) => (None, &[], ts),
            _ => (None, &[], &[]),
        };
        one.into_iter().chain(list).chain(opts.iter().flatten())
    }
}
