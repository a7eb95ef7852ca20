//! Elementwise math on floats: methods on tiles and scalars, and free functions.

use super::arith::unary;
use super::element::Float;
use super::value::{Scalar, Tile, Traced};
use crate::ir::{Loc, UnaryOp};

macro_rules! float_fns {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl<E: Float> Tile<E> {
            $($(#[$doc])* #[track_caller] pub fn $name(self) -> Tile<E> {
                Tile::from_val(unary(UnaryOp::$op, self.v, Loc::caller()))
            })*
        }
        impl<E: Float> Scalar<E> {
            $($(#[$doc])* #[track_caller] pub fn $name(self) -> Scalar<E> {
                Scalar::from_val(unary(UnaryOp::$op, self.v, Loc::caller()))
            })*
        }
        $($(#[$doc])* #[track_caller] pub fn $name<V: Traced>(x: V) -> V where V::Elem: Float {
            V::from_val(unary(UnaryOp::$op, x.val(), Loc::caller()))
        })*
    };
}

float_fns!(
    exp => Exp,
    /// Natural logarithm.
    log => Log,
    tanh => Tanh,
    sqrt => Sqrt,
    /// `1 / sqrt(x)`.
    rsqrt => Rsqrt,
    erf => Erf,
    sin => Sin,
    cos => Cos,
    /// The logistic function `1 / (1 + exp(-x))`.
    sigmoid => Logistic,
    floor => Floor,
    ceil => Ceil,
);

/// Absolute value.
#[track_caller]
pub fn abs<V: Traced>(x: V) -> V
where
    V::Elem: super::element::Numeric,
{
    V::from_val(unary(UnaryOp::Abs, x.val(), Loc::caller()))
}
