//! Complex numbers: `view_as_real`, `view_as_complex`, `complex`, `polar`, `conj_physical`
//! (which the device and the compile backend run for `_conj`, PyTorch's conjugate view), on
//! StableHLO's `complex`, `real` and `imag` (complex arithmetic, casts, views
//! and joins are the complex paths of the pointwise, shape and reduction families' lowerings;
//! the FFTs are in [`super::fft`]).
//!
//! `view_as_real` and `view_as_complex` are views in PyTorch (the real tensor aliases the
//! complex one's storage); Tessera's tensors are values, so they are computed as copies (the
//! parts stacked along a new last dim of 2, and back).
//!
//! Complex types are c64 and c128 (f32 and f64 parts): PyTorch's complex32 (f16 parts) has no
//! StableHLO type, so f16 inputs of `complex`, `polar` and `view_as_complex` are refused as
//! unsupported.

use super::pointwise::common::{broadcast_vals, out, torch_name};
use crate::args::Args;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Lowering, Out};
use crate::lowerings;
use tessera_lowering::stablehlo::{UnaryOp, Value};
use tessera_lowering::DType;

pub(super) const LOWERINGS: &[Lowering] = lowerings![complex:
    ("view_as_real", view_as_real),
    ("view_as_complex", view_as_complex),
    ("complex", complex),
    ("polar", polar),
    ("conj_physical", conj_physical),
];

/// `view_as_real(self)`: a complex tensor's parts along a new last dim of 2 (real, imag).
fn view_as_real(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if !x.dtype().is_complex() {
        return Err(LowerError::dtype(
            x.dtype(),
            "view_as_real is only supported for complex tensors",
        ));
    }
    let mut shape = x.shape().to_vec();
    shape.push(1);
    let re = cx.real(&x)?;
    let im = cx.imag(&x)?;
    let re = cx.reshape(&re, &shape)?;
    let im = cx.reshape(&im, &shape)?;
    out(cx.concatenate(&[&re, &im], shape.len() - 1)?)
}

/// `view_as_complex(self)`: a float tensor whose last dim of 2 holds (real, imag), as complex.
fn view_as_complex(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    let d = x.dtype();
    match d {
        DType::F32 | DType::F64 => {}
        DType::F16 => {
            return Err(LowerError::Unsupported(
                "view_as_complex of f16 (complex32): StableHLO has no complex type of f16 parts"
                    .into(),
            ))
        }
        _ => {
            return Err(LowerError::dtype(
                d,
                format!(
                    "view_as_complex is only supported for half, float and double tensors, but got a tensor of scalar type: {}",
                    torch_name(d)
                ),
            ))
        }
    }
    let Some((&last, lead)) = x.shape().split_last() else {
        return Err(LowerError::invalid(
            "Input tensor must have one or more dimensions",
        ));
    };
    if last != 2 {
        return Err(LowerError::invalid(
            "Tensor must have a last dimension of size 2",
        ));
    }
    let dim = x.rank() - 1;
    let re = cx.slice_axis(&x, dim, 0, 1)?;
    let im = cx.slice_axis(&x, dim, 1, 1)?;
    let re = cx.reshape(&re, lead)?;
    let im = cx.reshape(&im, lead)?;
    out(cx.complex(&re, &im)?)
}

/// The two float operands of `complex`/`polar`, of one dtype (f32 or f64, as PyTorch asks),
/// broadcast together.
fn parts(a: &Args, first: &str, second: &str, cx: &mut Lower) -> LowerResult<[Value; 2]> {
    let x = a.tensor(first)?;
    let y = a.tensor(second)?;
    let (dx, dy) = (x.dtype(), y.dtype());
    let float = |d: DType| matches!(d, DType::F16 | DType::F32 | DType::F64);
    if !float(dx) || !float(dy) {
        return Err(LowerError::dtype(
            if float(dx) { dy } else { dx },
            format!(
                "Expected both inputs to be Half, Float or Double tensors but got {} and {}",
                torch_name(dx),
                torch_name(dy)
            ),
        ));
    }
    if dx != dy {
        return Err(LowerError::invalid(format!(
            "Expected object of scalar type {} but got scalar type {} for second argument",
            torch_name(dx),
            torch_name(dy)
        )));
    }
    if dx == DType::F16 {
        return Err(LowerError::Unsupported(
            "complex32 (f16 parts): StableHLO has no complex type of f16 parts".into(),
        ));
    }
    let v = broadcast_vals(cx, &[x, y])?;
    Ok([v[0].clone(), v[1].clone()])
}

/// `complex(real, imag)`.
fn complex(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let [re, im] = parts(a, "real", "imag", cx)?;
    out(cx.complex(&re, &im)?)
}

/// `polar(abs, angle)`: `abs * cos(angle) + i * abs * sin(angle)` (PyTorch's formula).
fn polar(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let [r, theta] = parts(a, "abs", "angle", cx)?;
    let c = cx.unary(UnaryOp::Cosine, &theta)?;
    let s = cx.unary(UnaryOp::Sine, &theta)?;
    let re = cx.mul(&r, &c)?;
    let im = cx.mul(&r, &s)?;
    out(cx.complex(&re, &im)?)
}

/// `conj_physical(self)`: the conjugate (the imaginary part negated); a real tensor is itself.
fn conj_physical(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let x = a.tensor("self")?;
    if !x.dtype().is_complex() {
        return out(x);
    }
    let re = cx.real(&x)?;
    let im = cx.imag(&x)?;
    let im = cx.neg(&im)?;
    out(cx.complex(&re, &im)?)
}
