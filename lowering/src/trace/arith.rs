//! Elementwise arithmetic and comparisons, and the Rust operators that record them.
//! Operands broadcast NumPy-style; literals on either side adapt to the element type.

use super::builder::{with, Builder, Val};
use super::element::{Element, Int, Numeric};
use super::operand::{broadcast_pair, Operand, ScalarOperand};
use super::value::{Scalar, Tile, Traced};
use crate::dtype::DType;
use crate::ir::{BinaryOp, CompareOp, Literal, Loc, OpKind, Type, UnaryOp};
use std::ops;

pub(crate) fn binary_in(b: &mut Builder, op: BinaryOp, x: Val, y: Val, loc: Loc) -> Val {
    let name = op.name();
    let (x, y) = broadcast_pair(b, x, y, name, loc);
    let ty = b.ty(x);
    let (lhs, rhs) = (b.id(x, name, loc), b.id(y, name, loc));
    b.emit1(OpKind::Binary { op, lhs, rhs }, ty, loc)
}

pub(crate) fn binary(op: BinaryOp, x: Val, y: Val, loc: Loc) -> Val {
    with(|b| binary_in(b, op, x, y, loc))
}

pub(crate) fn compare(op: CompareOp, x: Val, y: Val, loc: Loc) -> Val {
    with(|b| {
        let name = op.name();
        let (x, y) = broadcast_pair(b, x, y, name, loc);
        let shape = b.ty(x).shape().to_vec();
        let (lhs, rhs) = (b.id(x, name, loc), b.id(y, name, loc));
        b.emit1(
            OpKind::Compare { op, lhs, rhs },
            Type::tile(DType::Bool, shape),
            loc,
        )
    })
}

pub(crate) fn unary(op: UnaryOp, x: Val, loc: Loc) -> Val {
    with(|b| {
        let ty = b.ty(x);
        let x = b.id(x, op.name(), loc);
        b.emit1(OpKind::Unary { op, x }, ty, loc)
    })
}

/// `lhs (op) rhs` where either side may be a literal of element type `E`.
#[track_caller]
fn arith<E: Element>(op: BinaryOp, lhs: impl Operand<E>, rhs: impl Operand<E>) -> Val {
    let loc = Loc::caller();
    with(|b| {
        let (x, y) = (lhs.operand(b, loc), rhs.operand(b, loc));
        binary_in(b, op, x, y, loc)
    })
}

macro_rules! binary_operator {
    ($Trait:ident, $method:ident, $Assign:ident, $assign:ident, $op:expr) => {
        binary_operator!(@pair $Trait, $method, $op, Tile<E>, Tile<E>, Tile<E>);
        binary_operator!(@pair $Trait, $method, $op, Tile<E>, Scalar<E>, Tile<E>);
        binary_operator!(@pair $Trait, $method, $op, Scalar<E>, Tile<E>, Tile<E>);
        binary_operator!(@pair $Trait, $method, $op, Scalar<E>, Scalar<E>, Scalar<E>);
        binary_operator!(@pair $Trait, $method, $op, Tile<E>, f64, Tile<E>);
        binary_operator!(@pair $Trait, $method, $op, Tile<E>, i32, Tile<E>);
        binary_operator!(@pair $Trait, $method, $op, f64, Tile<E>, Tile<E>);
        binary_operator!(@pair $Trait, $method, $op, i32, Tile<E>, Tile<E>);
        binary_operator!(@pair $Trait, $method, $op, Scalar<E>, f64, Scalar<E>);
        binary_operator!(@pair $Trait, $method, $op, Scalar<E>, i32, Scalar<E>);
        binary_operator!(@pair $Trait, $method, $op, f64, Scalar<E>, Scalar<E>);
        binary_operator!(@pair $Trait, $method, $op, i32, Scalar<E>, Scalar<E>);

        impl<E: Numeric, R> ops::$Assign<R> for Tile<E> where Tile<E>: ops::$Trait<R, Output = Tile<E>> {
            #[track_caller]
            fn $assign(&mut self, rhs: R) {
                *self = ops::$Trait::$method(*self, rhs);
            }
        }
        impl<E: Numeric, R> ops::$Assign<R> for Scalar<E> where Scalar<E>: ops::$Trait<R, Output = Scalar<E>> {
            #[track_caller]
            fn $assign(&mut self, rhs: R) {
                *self = ops::$Trait::$method(*self, rhs);
            }
        }
    };
    (@pair $Trait:ident, $method:ident, $op:expr, $L:ty, $R:ty, $Out:ty) => {
        impl<E: Numeric> ops::$Trait<$R> for $L {
            type Output = $Out;
            #[track_caller]
            fn $method(self, rhs: $R) -> $Out {
                <$Out>::from_val(arith::<E>($op, self, rhs))
            }
        }
    };
}

binary_operator!(Add, add, AddAssign, add_assign, BinaryOp::Add);
binary_operator!(Sub, sub, SubAssign, sub_assign, BinaryOp::Sub);
binary_operator!(Mul, mul, MulAssign, mul_assign, BinaryOp::Mul);
binary_operator!(Div, div, DivAssign, div_assign, BinaryOp::Div);
binary_operator!(Rem, rem, RemAssign, rem_assign, BinaryOp::Rem);

macro_rules! unary_operators {
    ($($T:ident: $Rhs:ident),*) => {$(
        impl<E: Numeric> ops::Neg for $T<E> {
            type Output = $T<E>;
            #[track_caller]
            fn neg(self) -> $T<E> {
                $T::from_val(unary(UnaryOp::Neg, self.v, Loc::caller()))
            }
        }
        impl ops::Not for $T<bool> {
            type Output = $T<bool>;
            #[track_caller]
            fn not(self) -> $T<bool> {
                $T::from_val(unary(UnaryOp::Not, self.v, Loc::caller()))
            }
        }
        impl<R: $Rhs<bool>> ops::BitAnd<R> for $T<bool> {
            type Output = $T<bool>;
            #[track_caller]
            fn bitand(self, rhs: R) -> $T<bool> {
                $T::from_val(arith::<bool>(BinaryOp::And, self, rhs))
            }
        }
        impl<R: $Rhs<bool>> ops::BitOr<R> for $T<bool> {
            type Output = $T<bool>;
            #[track_caller]
            fn bitor(self, rhs: R) -> $T<bool> {
                $T::from_val(arith::<bool>(BinaryOp::Or, self, rhs))
            }
        }
        impl<R: $Rhs<bool>> ops::BitXor<R> for $T<bool> {
            type Output = $T<bool>;
            #[track_caller]
            fn bitxor(self, rhs: R) -> $T<bool> {
                $T::from_val(arith::<bool>(BinaryOp::Xor, self, rhs))
            }
        }
    )*};
}
unary_operators!(Tile: Operand, Scalar: ScalarOperand);

/// `&`, `|`, `^`, `<<`, `>>` and `!` on integers, as in Rust: `>>` is arithmetic for signed
/// and logical for unsigned elements. A shift by an amount outside `0..bits` gives 0 (the
/// sign for an arithmetic right shift), as StableHLO defines it (Rust would panic).
macro_rules! int_operators {
    ($($T:ident: $Rhs:ident),*) => {$(
        int_operators!(@op $T, $Rhs, BitAnd, bitand, |_| BinaryOp::And);
        int_operators!(@op $T, $Rhs, BitOr, bitor, |_| BinaryOp::Or);
        int_operators!(@op $T, $Rhs, BitXor, bitxor, |_| BinaryOp::Xor);
        int_operators!(@op $T, $Rhs, Shl, shl, |_| BinaryOp::Shl);
        int_operators!(@op $T, $Rhs, Shr, shr, |d: DType| if d.is_signed_int() {
            BinaryOp::ShrArithmetic
        } else {
            BinaryOp::ShrLogical
        });
        impl<E: Int> ops::Not for $T<E> {
            type Output = $T<E>;
            #[track_caller]
            fn not(self) -> $T<E> {
                $T::from_val(unary(UnaryOp::Not, self.v, Loc::caller()))
            }
        }
        impl<E: Int> $T<E> {
            /// `self << amount` (an amount outside `0..bits` gives 0).
            #[track_caller]
            pub fn shift_left(self, amount: impl $Rhs<E>) -> $T<E> {
                $T::from_val(arith::<E>(BinaryOp::Shl, self, amount))
            }
            /// Right shift filling with zeros, whatever the signedness (`lax.shift_right_logical`).
            #[track_caller]
            pub fn shift_right_logical(self, amount: impl $Rhs<E>) -> $T<E> {
                $T::from_val(arith::<E>(BinaryOp::ShrLogical, self, amount))
            }
            /// Right shift filling with the sign bit (`lax.shift_right_arithmetic`).
            #[track_caller]
            pub fn shift_right_arithmetic(self, amount: impl $Rhs<E>) -> $T<E> {
                $T::from_val(arith::<E>(BinaryOp::ShrArithmetic, self, amount))
            }
        }
    )*};
    (@op $T:ident, $Rhs:ident, $Trait:ident, $method:ident, $op:expr) => {
        impl<E: Int, R: $Rhs<E>> ops::$Trait<R> for $T<E> {
            type Output = $T<E>;
            #[track_caller]
            fn $method(self, rhs: R) -> $T<E> {
                let op: fn(DType) -> BinaryOp = $op;
                $T::from_val(arith::<E>(op(E::DTYPE), self, rhs))
            }
        }
    };
}
int_operators!(Tile: Operand, Scalar: ScalarOperand);

macro_rules! bitcast {
    ($($T:ident),*) => {$(
        impl<E: Element> $T<E> {
            /// Reinterprets each element's bits as `U`, which must have the same width
            /// (`lax.bitcast_convert_type`): `x.bitcast::<u32>()` of an f32 tile. Packing
            /// narrow types into wider ones is `Tile::pack_bitcast`.
            #[track_caller]
            pub fn bitcast<U: Element>(self) -> $T<U> {
                let loc = Loc::caller();
                $T::from_val(with(|b| {
                    let shape = b.ty(self.v).shape().to_vec();
                    let (from, to) = (E::DTYPE, U::DTYPE);
                    if from.bits() != to.bits() {
                        b.op_error(
                            "bitcast",
                            format!(
                                "cannot reinterpret {from} ({} bits) as {to} ({} bits): a \
                                 bitcast keeps the width; `pack_bitcast` packs along the \
                                 second-minor dim (Pallas' `pltpu.bitcast`)",
                                from.bits(),
                                to.bits()
                            ),
                            loc,
                        );
                        return b.constant(Literal::Int(0), Type::tile(to, shape), loc);
                    }
                    let x = b.id(self.v, "bitcast", loc);
                    b.emit1(OpKind::Bitcast { x }, Type::tile(U::DTYPE, shape), loc)
                }))
            }
        }
    )*};
}
bitcast!(Tile, Scalar);

/// Methods shared by tiles and scalars; `$Rhs` is what the right-hand side may be and
/// `$Out<bool>` what comparisons return.
macro_rules! elementwise_methods {
    ($T:ident, $Rhs:ident) => {
        impl<E: Element> $T<E> {
            /// Elementwise `==` (Rust's `==` must return a plain `bool`, so it cannot be traced).
            #[track_caller]
            pub fn eq(self, rhs: impl $Rhs<E>) -> $T<bool> {
                self.cmp_with(CompareOp::Eq, rhs)
            }
            #[track_caller]
            pub fn ne(self, rhs: impl $Rhs<E>) -> $T<bool> {
                self.cmp_with(CompareOp::Ne, rhs)
            }
            #[track_caller]
            pub fn lt(self, rhs: impl $Rhs<E>) -> $T<bool> {
                self.cmp_with(CompareOp::Lt, rhs)
            }
            #[track_caller]
            pub fn le(self, rhs: impl $Rhs<E>) -> $T<bool> {
                self.cmp_with(CompareOp::Le, rhs)
            }
            #[track_caller]
            pub fn gt(self, rhs: impl $Rhs<E>) -> $T<bool> {
                self.cmp_with(CompareOp::Gt, rhs)
            }
            #[track_caller]
            pub fn ge(self, rhs: impl $Rhs<E>) -> $T<bool> {
                self.cmp_with(CompareOp::Ge, rhs)
            }

            #[track_caller]
            fn cmp_with(self, op: CompareOp, rhs: impl $Rhs<E>) -> $T<bool> {
                let loc = Loc::caller();
                let y = with(|b| rhs.operand(b, loc));
                $T::from_val(compare(op, self.v, y, loc))
            }
        }

        impl<E: Numeric> $T<E> {
            /// Elementwise maximum (`jnp.maximum`).
            #[track_caller]
            pub fn maximum(self, rhs: impl $Rhs<E>) -> $T<E> {
                $T::from_val(arith::<E>(BinaryOp::Max, self, rhs))
            }
            /// Elementwise minimum (`jnp.minimum`).
            #[track_caller]
            pub fn minimum(self, rhs: impl $Rhs<E>) -> $T<E> {
                $T::from_val(arith::<E>(BinaryOp::Min, self, rhs))
            }
            #[track_caller]
            pub fn pow(self, rhs: impl $Rhs<E>) -> $T<E> {
                $T::from_val(arith::<E>(BinaryOp::Pow, self, rhs))
            }
            #[track_caller]
            pub fn abs(self) -> $T<E> {
                $T::from_val(unary(UnaryOp::Abs, self.v, Loc::caller()))
            }
        }
    };
}
elementwise_methods!(Tile, Operand);
elementwise_methods!(Scalar, ScalarOperand);

/// Elementwise maximum of two values of one kind.
#[track_caller]
pub fn maximum<V: Traced>(a: V, b: V) -> V
where
    V::Elem: Numeric,
{
    V::from_val(binary(BinaryOp::Max, a.val(), b.val(), Loc::caller()))
}

/// Elementwise minimum of two values of one kind.
#[track_caller]
pub fn minimum<V: Traced>(a: V, b: V) -> V
where
    V::Elem: Numeric,
{
    V::from_val(binary(BinaryOp::Min, a.val(), b.val(), Loc::caller()))
}
