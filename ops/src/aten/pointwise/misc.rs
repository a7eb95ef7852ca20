//! Copies and fills: fill, masked_fill, where-like selects, copy, clone, _to_copy, alias,
//! scalar_tensor, _local_scalar_dense.

use super::common::*;
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use crate::value::Scalar;
use tessera_lowering::DType;

/// `fill.Scalar`: a tensor like `self` holding `value` (converted with PyTorch's overflow check).
pub(super) fn fill(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let k = checked_const(cx, a.scalar("value")?, x.dtype())?;
    out(cx.broadcast_to(&k, x.shape())?)
}

/// The name PyTorch prints for a mask's dtype (`caffe2::TypeMeta`).
fn meta_name(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::U8 => "unsigned char",
        DType::I8 => "signed char",
        DType::I16 => "short int",
        DType::I32 => "int",
        DType::I64 => "long int",
        DType::U16 => "unsigned short",
        DType::U32 => "unsigned int",
        DType::U64 => "unsigned long",
        DType::F16 => "c10::Half",
        DType::BF16 => "c10::BFloat16",
        DType::F32 => "float",
        DType::F64 => "double",
        DType::C64 => "c10::complex<float>",
        DType::C128 => "c10::complex<double>",
    }
}

/// `masked_fill.Scalar` / `masked_fill.Tensor`: `mask ? value : self`, broadcast together, in
/// `self`'s dtype.
pub(super) fn masked_fill(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let mask = a.tensor("mask")?;
    if mask.dtype() != DType::Bool {
        return Err(LowerError::invalid(format!(
            "masked_fill_ only supports boolean masks, but got mask with dtype {}",
            meta_name(mask.dtype())
        )));
    }
    let d = x.dtype();
    let v = match a.tensor("value") {
        Ok(t) => {
            if t.rank() != 0 {
                return Err(LowerError::invalid(format!(
                    "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
                    t.rank()
                )));
            }
            torch_cast(cx, &t, d)?
        }
        Err(_) => checked_const(cx, a.scalar("value")?, d)?,
    };
    let vals = broadcast_vals(cx, &[mask, x, v])?;
    out(sel(cx, &vals[0], &vals[2], &vals[1])?)
}

/// `copy(self, src)`: `src` broadcast to `self`'s shape, in `self`'s dtype.
pub(super) fn copy(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let src = a.tensor("src")?;
    let shape = broadcast_vals(cx, &[x.clone(), src.clone()])?[0].shape().to_vec();
    if shape != x.shape() {
        return Err(LowerError::invalid(format!(
            "output with shape {:?} doesn't match the broadcast shape {:?}",
            x.shape(),
            shape
        )));
    }
    let s = torch_cast(cx, &src, x.dtype())?;
    out(cx.broadcast_to(&s, x.shape())?)
}

/// `clone`, `alias`: the tensor itself.
pub(super) fn identity(_cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    out(a.tensor("self")?)
}

/// `_to_copy(self, dtype=None)` (layout, device, memory format ignored).
pub(super) fn to_copy(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = a.opt_dtype("dtype")?.unwrap_or(x.dtype());
    out(torch_cast(cx, &x, d)?)
}

/// `scalar_tensor(s, dtype=None)`: a rank-0 tensor, f32 by default (PyTorch's default dtype);
/// of a complex dtype, `s` is the real part.
pub(super) fn scalar_tensor(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let s = a.scalar("s")?;
    let d = a.opt_dtype("dtype")?.unwrap_or(DType::F32);
    let float = d.is_float() || d.is_complex();
    let s = if float { s } else { checked(s, d)? };
    let v = match (s, float) {
        (Scalar::Float(x), false) if d != DType::Bool => Scalar::Int(x.trunc() as i64),
        (s, _) => s,
    };
    out(konst(cx, v, d)?)
}

/// `_local_scalar_dense`: the first element, returned as a number.
pub(super) fn local_scalar_dense(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let n: usize = x.shape().iter().product();
    if n == 0 {
        return Err(LowerError::invalid("_local_scalar_dense: Empty tensor not supported"));
    }
    let flat = cx.reshape(&x, &[n])?;
    let first = cx.slice(&flat, &[0], &[1], &[1])?;
    let s = cx.reshape(&first, &[])?;
    Ok(vec![Out::Item(s)])
}
