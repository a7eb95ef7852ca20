//! Binding a call's positional and keyword arguments to an op's schema: defaults filled in,
//! each value checked (and coerced, as PyTorch does: an int for a float, one int for `int[2]`)
//! against its declared type.

use crate::error::OpError;
use crate::schema::{ArgSchema, ArgType, OpSchema};
use crate::value::{ArgValue, Scalar};
use tessera_lowering::DType;

/// A call's arguments in schema order, every one present.
#[derive(Clone, Debug)]
pub struct Bound<T> {
    pub schema: &'static OpSchema,
    pub values: Vec<ArgValue<T>>,
}

impl<T> Bound<T> {
    /// The same call with every tensor mapped through `f` (host data -> types -> values).
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> Bound<U> {
        Bound {
            schema: self.schema,
            values: self
                .values
                .iter()
                .map(|v| {
                    v.try_map(&mut |t| Ok::<_, std::convert::Infallible>(f(t)))
                        .unwrap_or_else(|never| match never {})
                })
                .collect(),
        }
    }
}

/// Binds `args` then `kwargs` to `schema`'s arguments.
pub fn bind<T: TensorArg>(
    schema: &'static OpSchema,
    args: Vec<ArgValue<T>>,
    kwargs: Vec<(String, ArgValue<T>)>,
) -> Result<Bound<T>, OpError> {
    let bad = |reason: String| OpError::BadArgs {
        op: schema.full_name(),
        reason,
    };
    let positional = schema.args.iter().filter(|a| !a.kwarg_only).count();
    if args.len() > positional {
        return Err(bad(format!(
            "takes {positional} positional argument(s) but {} were given (schema: {})",
            args.len(),
            schema.schema
        )));
    }
    let mut slots: Vec<Option<ArgValue<T>>> = schema.args.iter().map(|_| None).collect();
    for (i, v) in args.into_iter().enumerate() {
        slots[i] = Some(v);
    }
    for (name, v) in kwargs {
        let Some(i) = schema.args.iter().position(|a| a.name == name) else {
            return Err(bad(format!(
                "got an unexpected keyword argument `{name}` (schema: {})",
                schema.schema
            )));
        };
        if slots[i].is_some() {
            return Err(bad(format!("got multiple values for argument `{name}`")));
        }
        slots[i] = Some(v);
    }
    let mut values = Vec::with_capacity(slots.len());
    for (a, slot) in schema.args.iter().zip(slots) {
        let v = match slot {
            Some(v) => v,
            None => match a.default {
                Some(d) => parse_default(a, d).map_err(&bad)?,
                None if a.ty == ArgType::Opaque || a.optional => ArgValue::None,
                None => {
                    return Err(bad(format!(
                        "missing required argument `{}` ({:?}) (schema: {})",
                        a.name, a.ty, schema.schema
                    )))
                }
            },
        };
        values.push(coerce(a, v).map_err(&bad)?);
    }
    Ok(Bound { schema, values })
}

/// What binding needs to read of a tensor argument.
pub trait TensorArg {
    /// The value of a one-element real tensor, truncated, which PyTorch takes for an `int`
    /// argument (`max.dim(x, torch.tensor(1.0))`); `None` for any other tensor.
    fn as_index(&self) -> Option<i64>;

    /// The value of a one-element real tensor, which PyTorch takes for a `float` argument
    /// (`normal(mean, torch.tensor(2.0))`); `None` for any other tensor.
    fn as_float(&self) -> Option<f64> {
        None
    }
}

/// A value being lowered: its data is not known, so it is never read as an `int`.
impl TensorArg for tessera_lowering::stablehlo::Value {
    fn as_index(&self) -> Option<i64> {
        None
    }
}

impl TensorArg for tessera_lowering::HostTensor {
    fn as_float(&self) -> Option<f64> {
        let one = self.shape().iter().product::<usize>() == 1 && !self.dtype().is_complex();
        one.then(|| self.to_f64_vec().first().copied()).flatten()
    }

    fn as_index(&self) -> Option<i64> {
        let d = self.dtype();
        if self.shape().iter().product::<usize>() != 1 || d.is_complex() {
            return None;
        }
        match d {
            DType::I64 => self.to_vec::<i64>().ok().map(|v| v[0]),
            DType::U64 => self
                .to_vec::<u64>()
                .ok()
                .and_then(|v| i64::try_from(v[0]).ok()),
            // Every other integer type is exact in an f64; floats truncate, as `int()` does.
            _ => self
                .to_f64_vec()
                .first()
                .filter(|x| x.is_finite())
                .map(|x| x.trunc() as i64),
        }
    }
}

/// The ops whose Tensor arguments take a Python number in `torch.ops.aten` (torch's
/// `_should_allow_numbers_as_tensors`, read from torch 2.x; with their `_` and `.out` forms).
const NUMBERS_AS_TENSORS: &[&str] = &[
    "add",
    "sub",
    "mul",
    "div",
    "true_divide",
    "floor_divide",
    "to",
    "_to_copy",
    "copy",
    "_conj",
    "divide",
    "multiply",
    "subtract",
];

/// Refuses a number for a Tensor argument where PyTorch does (`pow.Tensor_Scalar(1.5, 2)`:
/// "Expected a value of type 'Tensor' for argument 'self' but instead found type 'float'.").
/// Checked where a user's call enters (`ops::call`, the eager `call`), not in [`bind`]:
/// lowerings rebind numbers into their helpers' Tensor arguments on purpose.
pub fn refuse_numbers_as_tensors<T>(b: &Bound<T>) -> Result<(), OpError> {
    let base = b.schema.name.trim_end_matches('_');
    if NUMBERS_AS_TENSORS.contains(&base) {
        return Ok(());
    }
    for (a, v) in b.schema.args.iter().zip(&b.values) {
        let found = match v {
            ArgValue::Bool(_) => "bool",
            ArgValue::Int(_) => "int",
            ArgValue::Float(_) => "float",
            _ => continue,
        };
        if a.ty == ArgType::Tensor {
            let want = if a.optional {
                "Optional[Tensor]"
            } else {
                "Tensor"
            };
            return Err(OpError::BadArgs {
                op: b.schema.full_name(),
                reason: format!(
                    "Expected a value of type '{want}' for argument '{}' but instead found type '{found}'.",
                    a.name
                ),
            });
        }
    }
    Ok(())
}

/// Checks `v` against `a`'s type, converting where PyTorch converts.
fn coerce<T: TensorArg>(a: &ArgSchema, v: ArgValue<T>) -> Result<ArgValue<T>, String> {
    use ArgValue as V;
    let wrong = |v: &ArgValue<T>| {
        format!(
            "argument `{}` must be {}{}, not {}",
            a.name,
            type_name(a.ty),
            if a.optional { " or None" } else { "" },
            v.kind()
        )
    };
    Ok(match (a.ty, v) {
        (ArgType::Opaque, _) => V::None,
        (_, V::None) if a.optional => V::None,
        (ArgType::Tensor, v @ V::Tensor(_)) => v,
        // A Python number where a Tensor goes is a "wrapped number" in PyTorch: it stays a
        // Scalar here, so the lowerings that take one (`operand`) promote it as a number.
        (ArgType::Tensor, v @ (V::Bool(_) | V::Int(_) | V::Float(_))) => v,
        (ArgType::Int | ArgType::IntList, V::Tensor(t)) => match t.as_index() {
            Some(i) => coerce(a, V::Int(i))?,
            None => return Err(wrong(&V::Tensor(t))),
        },
        (ArgType::Float, V::Tensor(t)) => match t.as_float() {
            Some(x) => V::Float(x),
            None => return Err(wrong(&V::Tensor(t))),
        },
        (ArgType::TensorList, v @ V::TensorList(_)) => v,
        (ArgType::OptTensorList, V::TensorList(ts)) => {
            V::OptTensorList(ts.into_iter().map(Some).collect())
        }
        (ArgType::OptTensorList, v @ V::OptTensorList(_)) => v,
        (ArgType::Scalar, v @ (V::Bool(_) | V::Int(_) | V::Float(_))) => v,
        (ArgType::Bool, v @ V::Bool(_)) => v,
        (ArgType::Int, V::Bool(b)) => V::Int(b as i64),
        (ArgType::Int, v @ V::Int(_)) => v,
        (ArgType::Float, V::Int(i)) => V::Float(i as f64),
        (ArgType::Float, v @ V::Float(_)) => v,
        (ArgType::IntList, V::Int(i)) => V::IntList(vec![i; a.len.unwrap_or(1)]),
        (ArgType::IntList, V::Bool(b)) => V::IntList(vec![b as i64; a.len.unwrap_or(1)]),
        (ArgType::IntList, V::IntList(l)) => match a.len {
            Some(n) if l.len() == 1 && n > 1 => V::IntList(vec![l[0]; n]),
            _ => V::IntList(l),
        },
        (ArgType::FloatList, V::IntList(l)) => {
            V::FloatList(l.into_iter().map(|i| i as f64).collect())
        }
        (ArgType::FloatList, v @ V::FloatList(_)) => v,
        (ArgType::BoolList, v @ V::BoolList(_)) => v,
        (ArgType::DType, v @ V::DType(_)) => v,
        (ArgType::Str, v @ V::Str(_)) => v,
        (_, v) => return Err(wrong(&v)),
    })
}

fn type_name(t: ArgType) -> &'static str {
    match t {
        ArgType::Tensor => "a Tensor",
        ArgType::TensorList => "a list of Tensors",
        ArgType::OptTensorList => "a list of optional Tensors",
        ArgType::Scalar => "a number",
        ArgType::Bool => "a bool",
        ArgType::Int => "an int",
        ArgType::IntList => "a list of ints",
        ArgType::Float => "a float",
        ArgType::FloatList => "a list of floats",
        ArgType::BoolList => "a list of bools",
        ArgType::DType => "a dtype",
        ArgType::Str => "a str",
        ArgType::Opaque => "anything",
    }
}

/// A schema default (`1`, `None`, `[0, 0]`, `"none"`, `1e-05`, `False`) as a value.
fn parse_default<T>(a: &ArgSchema, d: &str) -> Result<ArgValue<T>, String> {
    let bad = || format!("cannot read the default `{d}` of argument `{}`", a.name);
    if d == "None" || a.ty == ArgType::Opaque {
        return Ok(ArgValue::None);
    }
    if d == "True" || d == "False" {
        return Ok(ArgValue::Bool(d == "True"));
    }
    if let Some(s) = d.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        return Ok(ArgValue::Str(s.to_string()));
    }
    if let Some(inner) = d.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        let items: Vec<&str> = inner
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if a.ty == ArgType::FloatList {
            let v: Result<Vec<f64>, _> = items.iter().map(|s| s.parse::<f64>()).collect();
            return v.map(ArgValue::FloatList).map_err(|_| bad());
        }
        let v: Result<Vec<i64>, _> = items.iter().map(|s| s.parse::<i64>()).collect();
        return v.map(ArgValue::IntList).map_err(|_| bad());
    }
    if let Ok(i) = d.parse::<i64>() {
        return Ok(match a.ty {
            // torchgen prints ScalarType defaults as c10's enum value (`dtype=4`: long).
            ArgType::DType => ArgValue::DType(DType::from_torch_scalar_type(i).ok_or_else(bad)?),
            ArgType::Float => ArgValue::Float(i as f64),
            ArgType::IntList => ArgValue::IntList(vec![i; a.len.unwrap_or(1)]),
            _ => ArgValue::Int(i),
        });
    }
    d.parse::<f64>().map(ArgValue::Float).map_err(|_| bad())
}

/// Reads a scalar argument value (for the accessors).
pub(crate) fn scalar_of<T>(v: &ArgValue<T>) -> Option<Scalar> {
    match v {
        ArgValue::Bool(b) => Some(Scalar::Bool(*b)),
        ArgValue::Int(i) => Some(Scalar::Int(*i)),
        ArgValue::Float(x) => Some(Scalar::Float(*x)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::find;

    type V = ArgValue<u8>;

    /// Test tensors are plain numbers; 100 + i stands for a one-element int tensor holding i.
    impl TensorArg for u8 {
        fn as_index(&self) -> Option<i64> {
            self.checked_sub(100).map(i64::from)
        }
        fn as_float(&self) -> Option<f64> {
            self.checked_sub(100).map(f64::from)
        }
    }

    #[test]
    fn fills_defaults_and_coerces() {
        let s = find("add.Tensor").unwrap();
        let b = bind(s, vec![V::Tensor(1), V::Tensor(2)], vec![]).unwrap();
        assert_eq!(b.values[2], V::Int(1));
        let s = find("max_pool2d_with_indices").unwrap();
        let b = bind(s, vec![V::Tensor(1), V::Int(2)], vec![]).unwrap();
        assert_eq!(b.values[1], V::IntList(vec![2, 2]));
        assert_eq!(b.values[2], V::IntList(vec![]));
    }

    #[test]
    fn rejects_bad_arguments_by_name() {
        let s = find("add.Tensor").unwrap();
        let e = bind(s, vec![V::Tensor(1)], vec![]).unwrap_err().to_string();
        assert!(e.contains("missing required argument `other`"), "{e}");
        let e = bind(s, vec![V::Tensor(1), V::Str("x".into())], vec![])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("argument `other` must be a Tensor, not str"),
            "{e}"
        );
        let e = bind(s, vec![V::Tensor(1), V::Tensor(1), V::Int(1)], vec![])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("takes 2 positional argument(s) but 3 were given"),
            "{e}"
        );
        let e = bind(
            s,
            vec![V::Tensor(1), V::Tensor(1)],
            vec![("beta".into(), V::Int(1))],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unexpected keyword argument `beta`"), "{e}");
    }

    #[test]
    fn coerces_what_pytorch_coerces() {
        // A one-element int tensor for an int (`narrow(x, 0, torch.tensor(2), 3)`).
        let s = find("narrow").unwrap();
        let b = bind(
            s,
            vec![V::Tensor(1), V::Int(0), V::Tensor(102), V::Int(3)],
            vec![],
        )
        .unwrap();
        assert_eq!(b.values[2], V::Int(2));
        let e = bind(
            s,
            vec![V::Tensor(1), V::Int(0), V::Tensor(1), V::Int(3)],
            vec![],
        );
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("`start` must be an int, not Tensor"));
        // A number for a Tensor stays a number (a wrapped number).
        let s = find("add_.Tensor").unwrap();
        let b = bind(s, vec![V::Tensor(1), V::Float(2.5)], vec![]).unwrap();
        assert_eq!(b.values[1], V::Float(2.5));
        // A bool for `int[1]? dim` (`var(x, True)` reaches var.dim so).
        let s = find("var.dim").unwrap();
        let b = bind(s, vec![V::Tensor(1), V::Bool(true)], vec![]).unwrap();
        assert_eq!(b.values[1], V::IntList(vec![1]));
        // A one-element tensor for a float (`normal.Tensor_float(mean, torch.tensor(2.))`).
        let s = find("normal.Tensor_float").unwrap();
        let b = bind(s, vec![V::Tensor(1), V::Tensor(102)], vec![]).unwrap();
        assert_eq!(b.values[1], V::Float(2.0));
        let e = bind(s, vec![V::Tensor(1), V::Tensor(1)], vec![]).unwrap_err();
        assert!(e.to_string().contains("`std` must be a float"), "{e}");
        // ScalarType defaults are c10 enum values.
        let s = find("randperm").unwrap();
        let b = bind(s, vec![V::Int(3)], vec![]).unwrap();
        assert_eq!(b.values[1], V::DType(DType::I64));
    }
}
