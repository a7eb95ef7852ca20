//! Running one op call on host data: bind, plan and lower it (`plan.rs`) into a one-op
//! StableHLO module, compile it through the device's executable cache, upload the inputs, run
//! it, bring the results back. The eager runtime (`tessera-eager`) lowers the same plans but
//! keeps values on the device.

use crate::bind::bind;
use crate::check::{failure, CheckKind};
use crate::error::{LowerError, OpError};
use crate::lower::{Lower, Out};
use crate::plan::{lower_planned, plan, result_values, types_of};
use crate::schema::{self, OpSchema};
use crate::value::ArgValue;
use tessera_lowering::stablehlo::{TensorType, Value};
use tessera_lowering::{DType, HostTensor};
use tessera_runtime::{CompileOptions, Device};

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
    /// A masked-out or undefined gradient (PyTorch's None).
    None,
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
    crate::bind::refuse_numbers_as_tensors(&bound)?;
    let p = plan(&types_of(&bound), Some(&bound), device.kind(), options)?;
    let tensors: Vec<&HostTensor> = bound.values.iter().flat_map(|v| v.tensors()).collect();
    let inputs: Vec<HostTensor> = p.inputs.iter().map(|&i| tensors[i].clone()).collect();
    let mut cx = Lower::new(options.seed, device.kind());
    // This device's own target: a TPU's generation is read from its client, which may be a
    // private one the kind alone would not find.
    cx.target = Some(device.target().map_err(|source| OpError::Runtime {
        op: schema.full_name(),
        source,
    })?);
    let args: Vec<Value> = inputs
        .iter()
        .map(|t| cx.f.arg(TensorType::new(t.shape(), t.dtype())))
        .collect();
    let lowered = lower_planned(&mut cx, &p, &args)?;
    let results = result_values(&lowered.outs);
    let checks = std::mem::take(&mut cx.checks);
    let module = if results.is_empty() {
        None
    } else {
        // The checks' flags are outputs after the results.
        let refs: Vec<&Value> = results
            .iter()
            .chain(checks.iter().map(|c| &c.flag))
            .collect();
        let finished = cx.f.finish(&refs).map_err(|e| OpError::Lower {
            op: schema.full_name(),
            source: LowerError::from(e),
        })?;
        Some(finished.into_text())
    };
    let kinds: Vec<CheckKind> = checks.into_iter().map(|c| c.kind).collect();
    let outputs = run(
        schema,
        &lowered.outs,
        &kinds,
        module.as_deref(),
        &inputs,
        device,
    )?;
    Ok(CallResult {
        writes: lowered.writes,
        returns: p.returns,
        kernel: p.choice.kernel(),
        outputs,
        module,
    })
}

/// PyTorch's `canCast`: no complex -> real, no float -> integral, no non-bool -> bool.
pub fn can_cast(from: DType, to: DType) -> bool {
    !(from.is_complex() && !to.is_complex()
        || from.is_float() && !to.is_float() && !to.is_complex()
        || from != DType::Bool && to == DType::Bool)
}

fn run(
    schema: &OpSchema,
    outs: &[Out],
    checks: &[CheckKind],
    module: Option<&str>,
    inputs: &[HostTensor],
    device: &Device,
) -> Result<Vec<Output>, OpError> {
    let op = schema.full_name();
    let rt = |source| OpError::Runtime {
        op: op.clone(),
        source,
    };
    let mut host = Vec::new();
    if let Some(text) = module {
        let client = device.client().map_err(rt)?;
        let exe = client
            .compile_cached(text, &CompileOptions::default())
            .map_err(rt)?;
        let bufs = inputs
            .iter()
            .map(|t| client.upload(t))
            .collect::<Result<Vec<_>, _>>()
            .map_err(rt)?;
        let refs: Vec<_> = bufs.iter().collect();
        for b in exe.execute(&refs).map_err(rt)? {
            host.push(b.to_host().map_err(rt)?);
        }
    }
    // A set check flag is the call's error (the flags are the module's last outputs).
    if module.is_some() {
        let flags = host.split_off(host.len().saturating_sub(checks.len()));
        if let Some(message) = checks.iter().zip(&flags).find_map(|(k, f)| failure(k, f)) {
            return Err(OpError::Checked { op, message });
        }
    }
    let mut host = host.into_iter();
    let mut next = || {
        host.next().ok_or_else(|| OpError::Lower {
            op: op.clone(),
            source: LowerError::invalid("the module returned fewer results than the lowering"),
        })
    };
    let mut outputs = Vec::new();
    for o in outs {
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
            Out::None => Output::None,
        });
    }
    Ok(outputs)
}

/// The first `count` entries of `t` along dim 0.
pub fn prefix(t: &HostTensor, count: usize) -> HostTensor {
    let count = count.min(t.shape().first().copied().unwrap_or(0));
    let row: usize = t.shape()[1..].iter().product::<usize>() * t.dtype().size_bytes();
    let mut shape = t.shape().to_vec();
    shape[0] = count;
    HostTensor::from_bytes(t.dtype(), shape, t.bytes()[..count * row].to_vec())
        .expect("a prefix of a valid tensor is valid")
}

/// A rank-0 result as the number it holds (an `Out::Item`).
pub fn item(t: &HostTensor) -> Output {
    let v = t.to_f64_vec().first().copied().unwrap_or(f64::NAN);
    match t.dtype() {
        DType::Bool => Output::Bool(v != 0.0),
        d if d.is_float() => Output::Float(v),
        DType::I64 => Output::Int(t.to_vec::<i64>().map(|v| v[0]).unwrap_or(0)),
        _ => Output::Int(v as i64),
    }
}
