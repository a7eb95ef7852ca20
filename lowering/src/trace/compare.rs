//! `<`, `<=`, `>`, `>=`, `==`, `!=` in `#[tpu_kernel]` bodies. Rust's operators must return a
//! plain `bool`, so the macro rewrites each comparison `a < b` into
//! `(&&Pair(&a, &b)).__lt()`, and method resolution picks the meaning by the operand types
//! (autoref specialization): [`TracedCompare`] on `&Pair` is tried first and applies where the left
//! side is a tile or scalar (or a literal with a traced right side), recording a traced
//! comparison at the operator's line; otherwise [`PlainOrd`]/[`PlainEq`] on `Pair` applies and is exactly
//! Rust's `PartialOrd`/`PartialEq` (loop counters, shapes, `if` on Rust values keep working).

use super::arith::compare;
use super::builder::with;
use super::element::Element;
use super::operand::{Operand, ScalarOperand};
use super::value::{Scalar, Tile, Traced};
use crate::ir::{CompareOp, Loc};

/// The two operands of one comparison, borrowed as Rust's operators borrow them.
#[doc(hidden)]
pub struct Pair<'a, L: ?Sized, R: ?Sized>(pub &'a L, pub &'a R);

/// A left operand that compares to `R` by recording a traced comparison.
#[doc(hidden)]
pub trait CompareWith<R> {
    type Output;
    fn traced(&self, op: CompareOp, rhs: &R) -> Self::Output;
}

impl<E: Element, R: Operand<E> + Copy> CompareWith<R> for Tile<E> {
    type Output = Tile<bool>;
    #[track_caller]
    fn traced(&self, op: CompareOp, rhs: &R) -> Tile<bool> {
        let loc = Loc::caller();
        let y = with(|b| rhs.operand(b, loc));
        Tile::from_val(compare(op, self.v, y, loc))
    }
}

/// A scalar compares to a scalar or a literal (a traced scalar), or to a tile (a tile):
/// one impl per right-hand type, so they do not overlap and literals still infer.
macro_rules! scalar_with {
    ($($R:ty => $Out:ident),*) => {$(
        impl<E: Element> CompareWith<$R> for Scalar<E> where $R: Operand<E> {
            type Output = $Out<bool>;
            #[track_caller]
            fn traced(&self, op: CompareOp, rhs: &$R) -> $Out<bool> {
                let loc = Loc::caller();
                let y = with(|b| rhs.operand(b, loc));
                $Out::from_val(compare(op, self.v, y, loc))
            }
        }
    )*};
}
scalar_with!(Scalar<E> => Scalar, f64 => Scalar, i32 => Scalar, bool => Scalar, Tile<E> => Tile);

/// A literal on the left of a traced value: the same comparison with the sides swapped.
macro_rules! flipped {
    ($($L:ty),*) => {$(
        impl<E: Element> CompareWith<Tile<E>> for $L where $L: ScalarOperand<E> {
            type Output = Tile<bool>;
            #[track_caller]
            fn traced(&self, op: CompareOp, rhs: &Tile<E>) -> Tile<bool> {
                rhs.traced(swapped(op), self)
            }
        }
        impl<E: Element> CompareWith<Scalar<E>> for $L where $L: ScalarOperand<E> {
            type Output = Scalar<bool>;
            #[track_caller]
            fn traced(&self, op: CompareOp, rhs: &Scalar<E>) -> Scalar<bool> {
                rhs.traced(swapped(op), self)
            }
        }
    )*};
}
flipped!(f64, i32, bool);

/// `a op b` is `b swapped(op) a`.
fn swapped(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Lt => CompareOp::Gt,
        CompareOp::Le => CompareOp::Ge,
        CompareOp::Gt => CompareOp::Lt,
        CompareOp::Ge => CompareOp::Le,
        other => other,
    }
}

/// The traced meaning, tried first: the left operand is traced (or a literal with a traced
/// right operand).
#[doc(hidden)]
pub trait TracedCompare {
    type Output;
    fn __lt(&self) -> Self::Output;
    fn __le(&self) -> Self::Output;
    fn __gt(&self) -> Self::Output;
    fn __ge(&self) -> Self::Output;
    fn __eq(&self) -> Self::Output;
    fn __ne(&self) -> Self::Output;
}

impl<L: CompareWith<R>, R> TracedCompare for &Pair<'_, L, R> {
    type Output = L::Output;
    #[track_caller]
    fn __lt(&self) -> L::Output {
        self.0.traced(CompareOp::Lt, self.1)
    }
    #[track_caller]
    fn __le(&self) -> L::Output {
        self.0.traced(CompareOp::Le, self.1)
    }
    #[track_caller]
    fn __gt(&self) -> L::Output {
        self.0.traced(CompareOp::Gt, self.1)
    }
    #[track_caller]
    fn __ge(&self) -> L::Output {
        self.0.traced(CompareOp::Ge, self.1)
    }
    #[track_caller]
    fn __eq(&self) -> L::Output {
        self.0.traced(CompareOp::Eq, self.1)
    }
    #[track_caller]
    fn __ne(&self) -> L::Output {
        self.0.traced(CompareOp::Ne, self.1)
    }
}

/// Rust's `PartialOrd`, for operands that are not traced.
#[doc(hidden)]
pub trait PlainOrd {
    fn __lt(&self) -> bool;
    fn __le(&self) -> bool;
    fn __gt(&self) -> bool;
    fn __ge(&self) -> bool;
}

impl<L: ?Sized + PartialOrd<R>, R: ?Sized> PlainOrd for Pair<'_, L, R> {
    fn __lt(&self) -> bool {
        self.0 < self.1
    }
    fn __le(&self) -> bool {
        self.0 <= self.1
    }
    fn __gt(&self) -> bool {
        self.0 > self.1
    }
    fn __ge(&self) -> bool {
        self.0 >= self.1
    }
}

/// Rust's `PartialEq`, for operands that are not traced.
#[doc(hidden)]
pub trait PlainEq {
    fn __eq(&self) -> bool;
    fn __ne(&self) -> bool;
}

impl<L: ?Sized + PartialEq<R>, R: ?Sized> PlainEq for Pair<'_, L, R> {
    fn __eq(&self) -> bool {
        self.0 == self.1
    }
    fn __ne(&self) -> bool {
        self.0 != self.1
    }
}
