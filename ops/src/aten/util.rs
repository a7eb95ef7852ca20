//! Helpers every family uses: dim wrapping, scalars as constants, casts, broadcasting of
//! promoted operands.

use super::promote::{result_type, Operand};
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::Lower;
use crate::value::{ArgValue, Scalar};
use tessera_lowering::stablehlo::{TensorType, Value};
use tessera_lowering::DType;

/// `dim` in `-rank..rank` (PyTorch's `maybe_wrap_dim`; a rank-0 tensor accepts -1 and 0).
pub fn wrap_dim(dim: i64, rank: usize) -> LowerResult<usize> {
    let r = rank.max(1) as i64;
    if dim < -r || dim >= r {
        return Err(LowerError::invalid(format!(
            "Dimension out of range (expected to be in range of [{}, {}], but got {dim})",
            -r,
            r - 1
        )));
    }
    Ok(if dim < 0 {
        (dim + r) as usize
    } else {
        dim as usize
    })
}

/// Reduction dims: `None` or `[]` mean every dim; each wrapped, duplicates rejected; sorted.
pub fn reduce_dims(dims: Option<&[i64]>, rank: usize) -> LowerResult<Vec<usize>> {
    let dims = match dims {
        None | Some([]) => return Ok((0..rank).collect()),
        Some(d) => d,
    };
    // torch's TensorIterator reductions over named dims stop at 64 dims.
    if rank > 64 {
        return Err(LowerError::invalid(
            "only tensors with up to 64 dims are supported",
        ));
    }
    let mut out = Vec::new();
    for &d in dims {
        let w = wrap_dim(d, rank)?;
        if out.contains(&w) {
            return Err(LowerError::invalid(format!(
                "dim {w} appears multiple times in the list of dims"
            )));
        }
        out.push(w);
    }
    out.retain(|&d| d < rank.max(1));
    out.sort_unstable();
    if rank == 0 {
        out.clear();
    }
    Ok(out)
}

/// A rank-0 constant of `dtype` holding `s` (rounded as PyTorch rounds a Python number into a
/// tensor of that dtype; an out-of-range integer is an error).
pub fn scalar_const(cx: &mut Lower, s: Scalar, dtype: DType) -> LowerResult<Value> {
    let v = match (s, dtype) {
        (Scalar::Int(i), d) if !d.is_float() && d != DType::Bool => {
            return Ok(cx.full_int(TensorType::scalar(d), i as i128)?);
        }
        (s, DType::Bool) => (s.as_f64() != 0.0) as i64 as f64,
        (Scalar::Float(x), d) if !d.is_float() => x.trunc(),
        (s, _) => s.as_f64(),
    };
    Ok(cx.full(TensorType::scalar(dtype), v)?)
}

/// `x` converted to `dtype` (no op when it already is).
pub fn cast(cx: &mut Lower, x: &Value, dtype: DType) -> LowerResult<Value> {
    if x.dtype() == dtype {
        Ok(x.clone())
    } else {
        Ok(cx.convert(x, dtype)?)
    }
}

/// An operand as a tensor of `dtype` (scalars become rank-0 constants).
pub fn operand_as(cx: &mut Lower, o: &Operand, dtype: DType) -> LowerResult<Value> {
    match o {
        Operand::Tensor(v) => cast(cx, v, dtype),
        Operand::Scalar(s) => scalar_const(cx, *s, dtype),
    }
}

/// The operands promoted to their common dtype (or `compute`, when given) and broadcast to
/// their common shape; returns the values and the promoted (result) dtype.
pub fn promote_broadcast(
    cx: &mut Lower,
    operands: &[Operand],
    compute: Option<DType>,
) -> LowerResult<(Vec<Value>, DType)> {
    let result = result_type(operands);
    let dtype = compute.unwrap_or(result);
    let vals = operands
        .iter()
        .map(|o| operand_as(cx, o, dtype))
        .collect::<LowerResult<Vec<_>>>()?;
    let shape = broadcast_all(&vals)?;
    let vals = vals
        .iter()
        .map(|v| Ok(cx.broadcast_to(v, &shape)?))
        .collect::<LowerResult<Vec<_>>>()?;
    Ok((vals, result))
}

/// The broadcast shape of several values (PyTorch's rules).
pub fn broadcast_all(vals: &[Value]) -> LowerResult<Vec<usize>> {
    let mut shape: Vec<usize> = Vec::new();
    for v in vals {
        shape = tessera_lowering::stablehlo::broadcast_shapes(&shape, v.shape()).map_err(|_| {
            LowerError::invalid(format!(
                "The size of tensor a ({:?}) must match the size of tensor b ({:?}) at non-singleton dimensions",
                shape,
                v.shape()
            ))
        })?;
    }
    Ok(shape)
}

/// Refuses dtypes an op does not take, with PyTorch-like wording.
pub fn require(ok: bool, dtype: DType, what: &str) -> LowerResult<()> {
    if ok {
        Ok(())
    } else {
        Err(LowerError::dtype(dtype, what.to_string()))
    }
}

/// PyTorch's name of a dtype in its error messages (`Long`, `Float`, `Bool`).
pub fn torch_name(d: DType) -> &'static str {
    match d {
        DType::Bool => "Bool",
        DType::I8 => "Char",
        DType::I16 => "Short",
        DType::I32 => "Int",
        DType::I64 => "Long",
        DType::U8 => "Byte",
        DType::U16 => "UInt16",
        DType::U32 => "UInt32",
        DType::U64 => "UInt64",
        DType::F16 => "Half",
        DType::BF16 => "BFloat16",
        DType::F32 => "Float",
        DType::F64 => "Double",
        DType::C64 => "ComplexFloat",
        DType::C128 => "ComplexDouble",
    }
}

/// The arguments of a composite op bound to the overload `op` it computes: each argument of
/// `op` takes `a`'s argument of the same name, or the value in `set` (which wins), else its
/// default; binding checks and coerces them as for a call.
pub fn rebind(a: &Args, op: &str, set: Vec<(&str, ArgValue<Value>)>) -> LowerResult<Args> {
    let schema = crate::schema::find(op)
        .ok_or_else(|| LowerError::invalid(format!("no overload `{op}` to compute with")))?;
    let mut kwargs: Vec<(String, ArgValue<Value>)> =
        set.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    for arg in schema.args {
        if kwargs.iter().any(|(k, _)| k == arg.name) {
            continue;
        }
        if let Ok(v) = a.get(arg.name) {
            kwargs.push((arg.name.to_string(), v.clone()));
        }
    }
    crate::bind::bind(schema, Vec::new(), kwargs).map_err(|e| LowerError::invalid(e.to_string()))
}
