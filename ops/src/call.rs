//! Running one op call eagerly: bind, dispatch, build one StableHLO module, compile it through
//! the device's executable cache, run it, bring the results back.

use crate::args::{Args, HostArgs};
use crate::bind::{bind, Bound};
use crate::error::{LowerError, OpError};
use crate::lower::{Lower, Out};
use crate::registry::{dispatch, Choice};
use crate::schema::{self, OpSchema, Tag};
use crate::value::ArgValue;
use tessera_lowering::stablehlo::{FuncBuilder, TensorType, Value};
use tessera_lowering::{DType, HostTensor};
use tessera_runtime::{CompileOptions, Device, DeviceKind};

/// Options of one call.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallOptions {
    /// Seed for random ops.
    pub seed: u64,
    /// Run the default lowering even where an override applies (to compare the two).
    pub skip_overrides: bool,
}

/// One result of a call, per schema return.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    Tensor(HostTensor),
    Tensors(Vec<HostTensor>),
    Int(i64),
    Float(f64),
    Bool(bool),
}

#[derive(Debug)]
pub struct CallResult {
    pub outputs: Vec<Output>,
    /// For in-place and `.out` overloads: `(argument index, output index)` pairs; the caller
    /// writes each output into that argument (resizing an `out` tensor to its shape).
    pub writes: Vec<(usize, usize)>,
    /// How many of `outputs` are the op's results; the ones after them are only new values
    /// of written arguments that the op does not return (batch norm's running statistics).
    pub returns: usize,
    /// The override kernel that ran, if any.
    pub kernel: Option<&'static str>,
    /// The module that ran (None when nothing needed the device).
    pub module: Option<String>,
}

/// Calls `op` (`aten::add.Tensor`, `add.Tensor`, `abs`) with positional `args` and `kwargs`.
pub fn call(
    op: &str,
    args: Vec<ArgValue<HostTensor>>,
    kwargs: Vec<(String, ArgValue<HostTensor>)>,
    device: &Device,
    options: CallOptions,
) -> Result<CallResult, OpError> {
    let schema = schema::find(op).ok_or_else(|| OpError::UnknownOp { op: op.to_string() })?;
    let bound = bind(schema, args, kwargs)?;
    if device.kind() == DeviceKind::Interp {
        return Err(OpError::BadArgs {
            op: schema.full_name(),
            reason: "ATen ops run on PJRT devices (cpu, tpu, cuda), not the kernel interpreter"
                .into(),
        });
    }
    // Kernel overrides are real-only: a complex call goes to the default lowering, if that
    // takes complex.
    let complex = complex_arg(&bound);
    let choice = dispatch(
        &bound,
        device.kind(),
        !options.skip_overrides && complex.is_none(),
    );
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
    let (lower_args, writes) = match choice {
        Choice::ViaFunctional { functional, .. } => rebind_functional(&bound, functional),
        _ => (bound.clone(), Vec::new()),
    };
    let direct = direct_writes(schema);
    let updates = match choice {
        Choice::ViaFunctional { .. } => Vec::new(),
        _ => unreturned_writes(schema, &direct),
    };
    let mut lowered = build(
        &lower_args,
        &bound,
        &writes,
        &updates,
        choice,
        device.kind(),
        options,
    )?;
    let updates = std::mem::take(&mut lowered.updates);
    let outputs = run(schema, lowered, device)?;
    let mut writes = if writes.is_empty() { direct } else { writes };
    writes.extend(updates);
    Ok(CallResult {
        writes,
        returns: schema.returns.len(),
        kernel: choice.kernel(),
        outputs: outputs.0,
        module: outputs.1,
    })
}

/// The first complex dtype among the tensors and dtype arguments of a call, if any.
fn complex_arg(bound: &HostArgs) -> Option<DType> {
    bound.values.iter().find_map(|v| match v {
        ArgValue::DType(d) if d.is_complex() => Some(*d),
        v => v
            .tensors()
            .into_iter()
            .map(|t| t.dtype())
            .find(|d| d.is_complex()),
    })
}

/// For an in-place or out overload: its arguments less the `out` ones, bound to the functional
/// schema (whose arguments are the same, in the same order), and where each result goes.
fn rebind_functional(
    bound: &HostArgs,
    functional: &'static OpSchema,
) -> (HostArgs, Vec<(usize, usize)>) {
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

/// What the lowering produced, inside a finished module.
struct Lowered {
    module: Option<String>,
    outs: Vec<Out>,
    /// The values the module returns, in order.
    results: Vec<Value>,
    /// The unreturned written arguments whose new values the lowering produced.
    updates: Vec<(usize, usize)>,
    inputs: Vec<HostTensor>,
}

fn build(
    args: &HostArgs,
    original: &HostArgs,
    writes: &[(usize, usize)],
    updates: &[(usize, usize)],
    choice: Choice,
    device: DeviceKind,
    options: CallOptions,
) -> Result<Lowered, OpError> {
    let op = original.schema.full_name();
    let wrap = |source: LowerError| OpError::Lower {
        op: op.clone(),
        source,
    };
    let mut cx = Lower {
        f: FuncBuilder::new("main"),
        seed: options.seed,
        device,
    };
    let mut inputs = Vec::new();
    let values = args
        .values
        .iter()
        .map(|v| {
            v.try_map(&mut |t: &HostTensor| {
                inputs.push(t.clone());
                Ok::<_, LowerError>(cx.f.arg(TensorType::new(t.shape(), t.dtype())))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(&wrap)?;
    let lower_args: Args = Bound {
        schema: args.schema,
        values,
    };
    let mut outs = (choice.lower_fn())(&mut cx, &lower_args).map_err(|e| match choice {
        Choice::Override(o) => OpError::Override {
            op: op.clone(),
            kernel: o.kernel.to_string(),
            message: e.to_string(),
        },
        _ => wrap(e),
    })?;
    // A lowering returns the new values of unreturned written arguments where the op writes
    // them (batch norm in training mode), and leaves them out where it does not.
    let updates: Vec<_> = updates
        .iter()
        .copied()
        .filter(|&(_, out)| out < outs.len())
        .collect();
    for &(arg, out) in writes.iter().chain(&updates) {
        cast_for_write(&mut cx, original, arg, outs.get_mut(out)).map_err(&wrap)?;
    }
    let mut results = Vec::new();
    for o in &outs {
        match o {
            Out::Tensor(v) | Out::Item(v) => results.push(v.clone()),
            Out::Tensors(vs) => results.extend(vs.iter().cloned()),
            Out::Prefix { value, count } => {
                results.push(value.clone());
                results.push(count.clone());
            }
            Out::Int(_) | Out::Float(_) | Out::Bool(_) => {}
        }
    }
    let module = if results.is_empty() {
        None
    } else {
        let refs: Vec<&Value> = results.iter().collect();
        Some(cx.f.finish(&refs).map_err(|e| wrap(e.into()))?.into_text())
    };
    Ok(Lowered {
        module,
        outs,
        results,
        inputs,
        updates,
    })
}

/// Converts a result to the dtype of the argument it is written into, as PyTorch does, and
/// refuses what PyTorch refuses (a float result into an int tensor; an in-place result whose
/// shape is not the argument's).
fn cast_for_write(
    cx: &mut Lower,
    args: &HostArgs,
    arg: usize,
    out: Option<&mut Out>,
) -> Result<(), LowerError> {
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
    if !can_cast(v.dtype(), target.dtype()) {
        return Err(LowerError::invalid(format!(
            "result type {} can't be cast to the desired output type {}",
            v.dtype(),
            target.dtype()
        )));
    }
    let schema_arg = &args.schema.args[arg];
    // In-place views (`t_`, `unsqueeze_`, `as_strided_`) change `self`'s shape by design.
    let reshapes = schema_arg.out || args.schema.has_tag(Tag::InplaceView);
    if !reshapes && v.shape() != target.shape() {
        return Err(LowerError::invalid(format!(
            "output with shape {:?} doesn't match the broadcast shape {:?}",
            target.shape(),
            v.shape()
        )));
    }
    if v.dtype() != target.dtype() {
        *v = cx.f.convert(v, target.dtype())?;
    }
    Ok(())
}

/// PyTorch's `canCast`: no complex -> real, no float -> integral, no non-bool -> bool.
pub fn can_cast(from: DType, to: DType) -> bool {
    !(from.is_complex() && !to.is_complex()
        || from.is_float() && !to.is_float() && !to.is_complex()
        || from != DType::Bool && to == DType::Bool)
}

fn run(
    schema: &OpSchema,
    lowered: Lowered,
    device: &Device,
) -> Result<(Vec<Output>, Option<String>), OpError> {
    let op = schema.full_name();
    let rt = |source| OpError::Runtime {
        op: op.clone(),
        source,
    };
    let mut host = Vec::new();
    if let Some(text) = &lowered.module {
        let client = device.client().map_err(rt)?;
        let exe = client
            .compile_cached(text, &CompileOptions::default())
            .map_err(rt)?;
        let bufs = lowered
            .inputs
            .iter()
            .map(|t| client.upload(t))
            .collect::<Result<Vec<_>, _>>()
            .map_err(rt)?;
        let refs: Vec<_> = bufs.iter().collect();
        for b in exe.execute(&refs).map_err(rt)? {
            host.push(b.to_host().map_err(rt)?);
        }
    }
    debug_assert_eq!(host.len(), lowered.results.len());
    let mut host = host.into_iter();
    let mut next = || {
        host.next().ok_or_else(|| OpError::Lower {
            op: op.clone(),
            source: LowerError::invalid("the module returned fewer results than the lowering"),
        })
    };
    let mut outputs = Vec::new();
    for o in &lowered.outs {
        outputs.push(match o {
            Out::Tensor(_) => Output::Tensor(next()?),
            Out::Tensors(vs) => {
                Output::Tensors(vs.iter().map(|_| next()).collect::<Result<_, _>>()?)
            }
            Out::Prefix { .. } => {
                let value = next()?;
                let count = next()?.to_f64_vec().first().copied().unwrap_or(0.0) as usize;
                Output::Tensor(prefix(&value, count))
            }
            Out::Item(_) => item(&next()?),
            Out::Int(i) => Output::Int(*i),
            Out::Float(x) => Output::Float(*x),
            Out::Bool(b) => Output::Bool(*b),
        });
    }
    Ok((outputs, lowered.module))
}

/// The first `count` entries of `t` along dim 0.
fn prefix(t: &HostTensor, count: usize) -> HostTensor {
    let count = count.min(t.shape().first().copied().unwrap_or(0));
    let row: usize = t.shape()[1..].iter().product::<usize>() * t.dtype().size_bytes();
    let mut shape = t.shape().to_vec();
    shape[0] = count;
    HostTensor::from_bytes(t.dtype(), shape, t.bytes()[..count * row].to_vec())
        .expect("a prefix of a valid tensor is valid")
}

fn item(t: &HostTensor) -> Output {
    let v = t.to_f64_vec().first().copied().unwrap_or(f64::NAN);
    match t.dtype() {
        DType::Bool => Output::Bool(v != 0.0),
        d if d.is_float() => Output::Float(v),
        DType::I64 => Output::Int(t.to_vec::<i64>().map(|v| v[0]).unwrap_or(0)),
        _ => Output::Int(v as i64),
    }
}
