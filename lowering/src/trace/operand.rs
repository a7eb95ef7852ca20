//! Operands of binary vocabulary calls: traced values or Rust literals (`f64`, `i32`,
//! `bool`), plus NumPy-style broadcasting between them.

use super::builder::{Builder, Val};
use super::element::Element;
use super::value::{Scalar, Tile};
use crate::dtype::DType;
use crate::ir::{Literal, Loc, OpKind, Type};

/// Anything that can stand for a value of element type `E`: a tile, a scalar or a literal.
pub trait Operand<E: Element> {
    #[doc(hidden)]
    fn operand(self, b: &mut Builder, loc: Loc) -> Val;
}

/// An `Operand` that is a scalar (so scalar methods keep returning scalars).
pub trait ScalarOperand<E: Element>: Operand<E> {}

impl<E: Element> Operand<E> for Tile<E> {
    fn operand(self, _: &mut Builder, _: Loc) -> Val {
        self.v
    }
}
impl<E: Element> Operand<E> for Scalar<E> {
    fn operand(self, _: &mut Builder, _: Loc) -> Val {
        self.v
    }
}
impl<E: Element> ScalarOperand<E> for Scalar<E> {}

impl<E: Element> Operand<E> for f64 {
    fn operand(self, b: &mut Builder, loc: Loc) -> Val {
        literal(b, Literal::Float(self), E::DTYPE, loc)
    }
}
impl<E: Element> ScalarOperand<E> for f64 {}

impl<E: Element> Operand<E> for i32 {
    fn operand(self, b: &mut Builder, loc: Loc) -> Val {
        literal(b, Literal::Int(i64::from(self)), E::DTYPE, loc)
    }
}
impl<E: Element> ScalarOperand<E> for i32 {}

impl Operand<bool> for bool {
    fn operand(self, b: &mut Builder, loc: Loc) -> Val {
        literal(b, Literal::Bool(self), DType::Bool, loc)
    }
}
impl ScalarOperand<bool> for bool {}

/// A scalar constant of `dtype`. Literals adapt to the dtype like JAX's weak types; one that
/// cannot (2.5 as an integer, 3 as a bool) is reported.
pub(crate) fn literal(b: &mut Builder, value: Literal, dtype: DType, loc: Loc) -> Val {
    let value = match (value, dtype) {
        (Literal::Float(x), d) if d.is_int() && x.fract() == 0.0 => Literal::Int(x as i64),
        (Literal::Int(i), d) if d.is_float() => Literal::Float(i as f64),
        (Literal::Int(i), DType::Bool) if i == 0 || i == 1 => Literal::Bool(i == 1),
        (v, _) => v,
    };
    if let Literal::Int(i) = value {
        if dtype.is_int() && !int_range(dtype).contains(&i128::from(i)) {
            b.op_error(
                "constant",
                format!("literal {i} does not fit in {dtype}"),
                loc,
            );
        }
    }
    b.constant(value, Type::scalar(dtype), loc)
}

/// The values an integer dtype holds.
fn int_range(dtype: DType) -> std::ops::RangeInclusive<i128> {
    let bits = dtype.bits() as u32;
    if dtype.is_signed_int() {
        -(1i128 << (bits - 1))..=(1i128 << (bits - 1)) - 1
    } else {
        0..=(1i128 << bits) - 1
    }
}

/// NumPy's broadcast of two shapes: align trailing dims; each pair equal or one of them 1.
pub(crate) fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        if i + s.len() >= rank {
            s[i + s.len() - rank]
        } else {
            1
        }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y || y == 1 => Some(x),
            (1, y) => Some(y),
            _ => None,
        })
        .collect()
}

/// `v` broadcast to `shape` (NumPy rules: trailing alignment), or `v` itself if it has it.
pub(crate) fn broadcast_to(
    b: &mut Builder,
    v: Val,
    shape: &[usize],
    op: &'static str,
    loc: Loc,
) -> Val {
    let ty = b.ty(v);
    let from = ty.shape().to_vec();
    if from == shape {
        return v;
    }
    if broadcast_shapes(&from, shape).as_deref() != Some(shape) {
        b.op_error(
            op,
            format!("cannot broadcast shape {from:?} to {shape:?}"),
            loc,
        );
        return v;
    }
    let offset = shape.len() - from.len();
    let id = b.id(v, op, loc);
    b.emit1(
        OpKind::Broadcast {
            x: id,
            dims: (offset..shape.len()).collect(),
        },
        Type::tile(ty.dtype(), shape.to_vec()),
        loc,
    )
}

/// Both operands broadcast to their common shape (an error names both shapes).
pub(crate) fn broadcast_pair(
    b: &mut Builder,
    x: Val,
    y: Val,
    op: &'static str,
    loc: Loc,
) -> (Val, Val) {
    let (xs, ys) = (b.ty(x).shape().to_vec(), b.ty(y).shape().to_vec());
    match broadcast_shapes(&xs, &ys) {
        Some(s) => (
            broadcast_to(b, x, &s, op, loc),
            broadcast_to(b, y, &s, op, loc),
        ),
        None => {
            b.op_error(
                op,
                format!("shapes {xs:?} and {ys:?} do not broadcast together"),
                loc,
            );
            (x, y)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::broadcast_shapes;

    #[test]
    fn numpy_broadcasting() {
        assert_eq!(broadcast_shapes(&[8, 1], &[8, 128]), Some(vec![8, 128]));
        assert_eq!(broadcast_shapes(&[], &[8, 128]), Some(vec![8, 128]));
        assert_eq!(broadcast_shapes(&[128], &[8, 1]), Some(vec![8, 128]));
        assert_eq!(broadcast_shapes(&[8, 128], &[128, 8]), None);
    }
}
