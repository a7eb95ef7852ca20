//! `Tile<E>` and `Scalar<E>`: `Copy` handles to traced values of one element type.

use super::builder::{with, Val};
use super::element::Element;
use std::fmt;
use std::marker::PhantomData;

/// A traced array value with a static shape (a block of a ref, or computed from one).
pub struct Tile<E> {
    pub(crate) v: Val,
    _e: PhantomData<fn() -> E>,
}

/// A traced scalar (a grid index, a loop counter, an SMEM element, a reduction to rank 0).
pub struct Scalar<E> {
    pub(crate) v: Val,
    _e: PhantomData<fn() -> E>,
}

/// What `Tile` and `Scalar` share; generic vocabulary functions take any `Traced`.
pub trait Traced: Copy {
    type Elem: Element;
    #[doc(hidden)]
    fn val(self) -> Val;
    #[doc(hidden)]
    fn from_val(v: Val) -> Self;

    /// The static shape (empty for scalars).
    fn shape(self) -> Vec<usize> {
        let v = self.val();
        with(|b| b.ty(v).shape().to_vec())
    }
}

macro_rules! handle {
    ($name:ident) => {
        impl<E> Clone for $name<E> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<E> Copy for $name<E> {}
        impl<E: Element> fmt::Debug for $name<E> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}<{}>({})", stringify!($name), E::DTYPE, self.v.id)
            }
        }
        impl<E: Element> Traced for $name<E> {
            type Elem = E;
            fn val(self) -> Val {
                self.v
            }
            fn from_val(v: Val) -> Self {
                $name { v, _e: PhantomData }
            }
        }
    };
}
handle!(Tile);
handle!(Scalar);

impl<E: Element> Scalar<E> {
    /// The same value as a rank-0 tile (it broadcasts against any tile).
    pub fn to_tile(self) -> Tile<E> {
        Tile::from_val(self.v)
    }
}
