//! Lowering one call, apart from running it: [`plan`] binds nothing and runs nothing; it takes
//! a bound call whose tensors are only types, dispatches it (overrides first) and says what
//! the lowering will see; [`lower_planned`] emits that lowering into any [`Lower`] context,
//! with the call's tensors as values already in its builder. The host path (`call`) lowers a
//! plan into a one-op module; the eager runtime keeps plans in its cache and lowers many of
//! them into one fused module.

use crate::args::HostArgs;
use crate::bind::Bound;
use crate::call::{can_cast, CallOptions};
use crate::error::{LowerError, OpError};
use crate::lower::{Lower, Out};
use crate::registry::{dispatch, overrides, Choice};
use crate::schema::{OpSchema, Tag};
use crate::value::ArgValue;
use tessera_lowering::stablehlo::{TensorType, Value};
use tessera_lowering::{DType, HostTensor};
use tessera_runtime::DeviceKind;

/// A call dispatched and ready to lower: which lowering, what it sees, where results go.
#[derive(Clone, Debug)]
pub struct Plan {
    pub schema: &'static OpSchema,
    pub choice: Choice,
    /// The call's arguments as bound, tensors as their types.
    pub original: Bound<TensorType>,
    /// The arguments the lowering sees (for an in-place or `.out` overload run through its
    /// functional op: less the `out` ones), each tensor as its index among the tensors of
    /// `original` (flattened in argument order).
    pub args: Bound<usize>,
    /// The indices (into `original`'s tensors) the lowering reads, in the order
    /// [`lower_planned`] takes their values.
    pub inputs: Vec<usize>,
    /// `(argument index, output index)`: the output written into that argument.
    pub writes: Vec<(usize, usize)>,
    /// How many of `writes`, at the start, are returns aliasing a mutated argument of an op
    /// with its own lowering (written as returned, not cast).
    pub direct: usize,
    /// The schema's returns (outputs after them only carry written arguments' new values).
    pub returns: usize,
    pub options: CallOptions,
    pub device: DeviceKind,
}

/// What [`lower_planned`] emitted.
#[derive(Debug)]
pub struct Lowered {
    /// One per schema return, then one per unreturned written argument that the op wrote.
    pub outs: Vec<Out>,
    /// `(argument index, output index)` pairs actually produced.
    pub writes: Vec<(usize, usize)>,
}

/// Dispatches the call `bound` (its tensors as types). `host` is the call with host data
/// where there is some (override predicates may read it); without it, a call of an op that
/// has overrides is shown to their predicates with zero-filled tensors of the right types.
pub fn plan(
    bound: &Bound<TensorType>,
    host: Option<&HostArgs>,
    device: DeviceKind,
    options: CallOptions,
) -> Result<Plan, OpError> {
    let schema = bound.schema;
    if device == DeviceKind::Interp {
        return Err(OpError::BadArgs {
            op: schema.full_name(),
            reason: "ATen ops run on PJRT devices (cpu, tpu, cuda), not the kernel interpreter"
                .into(),
        });
    }
    // Kernel overrides are real-only: a complex call goes to the default lowering, if that
    // takes complex.
    let complex = complex_arg(bound);
    let use_overrides = !options.skip_overrides && complex.is_none();
    let zeros;
    let host = match host {
        Some(h) => h,
        None => {
            let any = use_overrides && !overrides(&schema.full_name()).is_empty();
            zeros = zero_filled(bound, any);
            &zeros
        }
    };
    let choice = dispatch(host, device, use_overrides);
    if let Some(d) = complex {
        if !choice.as_ref().is_ok_and(|c| c.accepts_complex()) {
            return Err(OpError::Lower {
                op: schema.full_name(),
                source: LowerError::Unsupported(format!(
                    "complex tensors ({d}) are not supported by this op's lowering"
                )),
            });
        }
    }
    let choice = choice?;
    let mut next = 0usize;
    let indexed = bound.map(|_| {
        next += 1;
        next - 1
    });
    let (args, writes, direct) = match choice {
        Choice::ViaFunctional { functional, .. } => {
            let (args, writes) = rebind_functional(&indexed, functional);
            (args, writes, 0)
        }
        _ => {
            let direct = direct_writes(schema);
            let mut writes = unreturned_writes(schema, &direct);
            let n = direct.len();
            writes.splice(0..0, direct);
            (indexed, writes, n)
        }
    };
    let inputs = args
        .values
        .iter()
        .flat_map(|v| v.tensors().into_iter().copied())
        .collect();
    Ok(Plan {
        schema,
        choice,
        original: bound.clone(),
        args,
        inputs,
        writes,
        direct,
        returns: schema.returns.len(),
        options,
        device,
    })
}

/// Emits the plan's lowering into `cx`; `inputs` are the values of [`Plan::inputs`], in order.
pub fn lower_planned(cx: &mut Lower, p: &Plan, inputs: &[Value]) -> Result<Lowered, OpError> {
    let op = p.schema.full_name();
    let wrap = |source: LowerError| OpError::Lower {
        op: op.clone(),
        source,
    };
    if inputs.len() != p.inputs.len() {
        return Err(wrap(LowerError::invalid(format!(
            "the plan takes {} tensor(s), {} given",
            p.inputs.len(),
            inputs.len()
        ))));
    }
    let value_of = |i: &usize| {
        let at = p.inputs.iter().position(|j| j == i);
        Ok::<_, LowerError>(
            inputs[at.expect("a lowering input is among the plan's inputs")].clone(),
        )
    };
    let args = Bound {
        schema: p.args.schema,
        values: p
            .args
            .values
            .iter()
            .map(|v| v.try_map(&mut |i| value_of(i)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(&wrap)?,
    };
    let mut outs = (p.choice.lower_fn())(cx, &args).map_err(|e| match p.choice {
        Choice::Override(o) => OpError::Override {
            op: op.clone(),
            kernel: o.kernel.to_string(),
            message: e.to_string(),
        },
        _ => wrap(e),
    })?;
    // A lowering returns the new values of unreturned written arguments where the op writes
    // them (batch norm in training mode), and leaves them out where it does not.
    let writes: Vec<_> = p
        .writes
        .iter()
        .copied()
        .filter(|&(_, out)| out < outs.len())
        .collect();
    for &(arg, out) in &p.writes[p.direct..] {
        if out >= outs.len() {
            continue;
        }
        cast_for_write(cx, &p.original, arg, outs.get_mut(out)).map_err(&wrap)?;
    }
    Ok(Lowered { outs, writes })
}

/// The values a module of the lowering returns, in order (rank-0 items and prefix counts
/// included; known numbers are not values).
pub fn result_values(outs: &[Out]) -> Vec<Value> {
    let mut results = Vec::new();
    for o in outs {
        match o {
            Out::Tensor(v) | Out::Item(v) => results.push(v.clone()),
            Out::Tensors(vs) => results.extend(vs.iter().cloned()),
            Out::Prefix { value, count } => {
                results.push(value.clone());
                results.push(count.clone());
            }
            Out::Int(_) | Out::Float(_) | Out::Bool(_) | Out::None => {}
        }
    }
    results
}

/// The call's tensors as types.
pub fn types_of(bound: &HostArgs) -> Bound<TensorType> {
    bound.map(|t| TensorType::new(t.shape(), t.dtype()))
}

/// The call with zero-filled host tensors where `fill`, else with empty ones of no shape
/// (dispatch reads them only for override predicates).
fn zero_filled(bound: &Bound<TensorType>, fill: bool) -> HostArgs {
    bound.map(|t| {
        if fill {
            HostTensor::zeros(t.dtype, t.shape.clone())
        } else {
            HostTensor::zeros(t.dtype, vec![0])
        }
    })
}

/// The first complex dtype among the tensors and dtype arguments of a call, if any.
fn complex_arg(bound: &Bound<TensorType>) -> Option<DType> {
    bound.values.iter().find_map(|v| match v {
        ArgValue::DType(d) if d.is_complex() => Some(*d),
        v => v
            .tensors()
            .into_iter()
            .map(|t| t.dtype)
            .find(|d| d.is_complex()),
    })
}

/// For an in-place or out overload: its arguments less the `out` ones, bound to the functional
/// schema (whose arguments are the same, in the same order), and where each result goes.
fn rebind_functional<T: Clone>(
    bound: &Bound<T>,
    functional: &'static OpSchema,
) -> (Bound<T>, Vec<(usize, usize)>) {
    let mut values = Vec::new();
    let mut targets = Vec::new();
    for (i, (a, v)) in bound.schema.args.iter().zip(&bound.values).enumerate() {
        if a.out {
            targets.push(i);
        } else {
            if a.mutable {
                targets.push(i);
            }
            values.push(v.clone());
        }
    }
    let writes = targets
        .into_iter()
        .enumerate()
        .map(|(out, arg)| (arg, out))
        .collect();
    (
        Bound {
            schema: functional,
            values,
        },
        writes,
    )
}

/// For overloads with their own lowering that mutate arguments: the returns that alias a
/// mutated argument (`Tensor(a!)`) are written back to it.
fn direct_writes(schema: &OpSchema) -> Vec<(usize, usize)> {
    schema
        .returns
        .iter()
        .enumerate()
        .filter_map(|(r, ret)| {
            let alias = ret.alias.filter(|a| a.ends_with('!'))?;
            let arg = schema
                .args
                .iter()
                .position(|a| a.mutable && alias_of(schema, a.name) == Some(alias))?;
            Some((arg, r))
        })
        .collect()
}

/// Written arguments that no return aliases (`Tensor(a!) running_mean`; `returned` are the
/// [`direct_writes`]), paired with the output after the schema's returns that carries each
/// one's new value.
fn unreturned_writes(schema: &OpSchema, returned: &[(usize, usize)]) -> Vec<(usize, usize)> {
    schema
        .args
        .iter()
        .enumerate()
        .filter(|(i, a)| a.mutable && !a.out && !returned.iter().any(|(arg, _)| arg == i))
        .enumerate()
        .map(|(k, (i, _))| (i, schema.returns.len() + k))
        .collect()
}

/// The alias set (`a!`) of argument `name`, read from the schema text.
fn alias_of(schema: &OpSchema, name: &str) -> Option<&'static str> {
    let text = schema.schema;
    let at = text.find(&format!(" {name}"))?;
    let before = &text[..at];
    let open = before.rfind('(')?;
    let close = before.rfind(')')?;
    (close > open && before[..open].ends_with("Tensor")).then(|| &text[open + 1..close])
}

/// Converts a result to the dtype of the argument it is written into, as PyTorch does, and
/// refuses what PyTorch refuses (a float result into an int tensor; an in-place result whose
/// shape is not the argument's).
fn cast_for_write(
    cx: &mut Lower,
    args: &Bound<TensorType>,
    arg: usize,
    out: Option<&mut Out>,
) -> Result<(), LowerError> {
    // A list `out` (`split_copy.Tensor_out`'s `Tensor(a!)[] out`) takes a list result, one
    // tensor into each of its tensors, resized like any `out` (as torch's
    // `split_with_sizes_copy.out` and `unbind_copy.int_out` do).
    let out = match (out, &args.values[arg]) {
        (Some(Out::Tensors(vs)), ArgValue::TensorList(targets)) => {
            if vs.len() != targets.len() {
                return Err(LowerError::invalid(format!(
                    "argument `{}` holds {} tensor(s) for {} result(s)",
                    args.schema.args[arg].name,
                    targets.len(),
                    vs.len()
                )));
            }
            for (v, target) in vs.iter_mut().zip(targets) {
                cast_one(cx, args, arg, v, target, true)?;
            }
            return Ok(());
        }
        (out, _) => out,
    };
    // A data-dependent prefix (`nonzero`) is written like a tensor: the `out` argument is
    // resized to the prefix when the result comes back.
    let (Some(Out::Tensor(v)) | Some(Out::Prefix { value: v, .. })) = out else {
        return Err(LowerError::invalid(
            "the functional op returned no tensor to write",
        ));
    };
    let ArgValue::Tensor(target) = &args.values[arg] else {
        return Err(LowerError::invalid(format!(
            "argument `{}` must be a Tensor",
            args.schema.args[arg].name
        )));
    };
    // In-place views (`t_`, `unsqueeze_`, `as_strided_`) change `self`'s shape by design.
    let reshapes = args.schema.args[arg].out || args.schema.has_tag(Tag::InplaceView);
    cast_one(cx, args, arg, v, target, reshapes)
}

/// [`cast_for_write`] of one result `v` into the tensor `target` of argument `arg` (resized
/// to the result where `reshapes`).
fn cast_one(
    cx: &mut Lower,
    args: &Bound<TensorType>,
    arg: usize,
    v: &mut Value,
    target: &TensorType,
    reshapes: bool,
) -> Result<(), LowerError> {
    if !can_cast(v.dtype(), target.dtype) {
        return Err(LowerError::invalid(format!(
            "result type {} can't be cast to the desired output type {}",
            v.dtype(),
            target.dtype
        )));
    }
    let schema_arg = &args.schema.args[arg];
    if schema_arg.out && v.dtype() != target.dtype {
        if let Some(message) = exact_out_dtype(args.schema.name, v.dtype(), target.dtype) {
            return Err(LowerError::invalid(message));
        }
    }
    if !reshapes && v.shape() != target.shape.as_slice() {
        return Err(LowerError::invalid(format!(
            "output with shape {:?} doesn't match the broadcast shape {:?}",
            target.shape,
            v.shape()
        )));
    }
    if v.dtype() != target.dtype {
        *v = cx.f.convert(v, target.dtype)?;
    }
    Ok(())
}

/// The ops whose `out=` tensor must have the result's dtype (torch refuses to cast there):
/// torch's message, or None where the result is cast into `out`.
fn exact_out_dtype(op: &str, result: DType, out: DType) -> Option<String> {
    use crate::aten::util::torch_name;
    // The C++ names torch prints for gather (`float`, `double`).
    let c_name = |d: DType| match d {
        DType::F32 => "float".to_string(),
        DType::F64 => "double".to_string(),
        DType::I64 => "long int".to_string(),
        DType::I32 => "int".to_string(),
        DType::Bool => "bool".to_string(),
        d => d.to_string(),
    };
    match op {
        "amax" | "amin" => Some(format!(
            "Expected the dtype for input and out to match, but got {} for input's dtype and {} for out's dtype.",
            torch_name(result),
            torch_name(out)
        )),
        "gather" => Some(format!(
            "Expected out tensor to have dtype {}, but got {} instead",
            c_name(result),
            c_name(out)
        )),
        _ => None,
    }
}
