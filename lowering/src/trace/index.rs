//! Indices: slice starts, element indices, loop bounds and block indices may be Rust
//! integers (known at trace time) or traced `Scalar<i32>` values, mixed freely.

use super::builder::{Builder, Val};
use super::value::{Scalar, Traced};
use crate::ir::{Literal, Loc, Offset, Type};

/// One index, static or traced.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum IndexValue {
    Static(i64),
    Traced(Val),
}

impl IndexValue {
    /// An SSA `i32` value for it (static ones become constants).
    pub(crate) fn to_val(self, b: &mut Builder, loc: Loc) -> Val {
        match self {
            IndexValue::Traced(v) => v,
            IndexValue::Static(i) => b.constant(Literal::Int(i), Type::index(), loc),
        }
    }

    /// An IR offset; a negative static index is reported as an error of `op`.
    pub(crate) fn to_offset(self, b: &mut Builder, op: &'static str, loc: Loc) -> Offset {
        match self {
            IndexValue::Traced(v) => Offset::Dynamic(b.id(v, op, loc)),
            IndexValue::Static(i) => match usize::try_from(i) {
                Ok(i) => Offset::Static(i),
                Err(_) => {
                    b.op_error(op, format!("negative index {i}"), loc);
                    Offset::Static(0)
                }
            },
        }
    }
}

/// A single index: `i32`, `usize` or `Scalar<i32>`.
pub trait IntoIndex {
    #[doc(hidden)]
    fn into_index(self) -> IndexValue;
}
impl IntoIndex for i32 {
    fn into_index(self) -> IndexValue {
        IndexValue::Static(i64::from(self))
    }
}
impl IntoIndex for usize {
    fn into_index(self) -> IndexValue {
        IndexValue::Static(self as i64)
    }
}
impl IntoIndex for Scalar<i32> {
    fn into_index(self) -> IndexValue {
        IndexValue::Traced(self.val())
    }
}

/// A list of indices: an array of one index type, or a tuple mixing them (`(i, 0)`).
pub trait IndexList {
    #[doc(hidden)]
    fn into_indices(self) -> Vec<IndexValue>;
}

impl<X: IntoIndex, const N: usize> IndexList for [X; N] {
    fn into_indices(self) -> Vec<IndexValue> {
        self.into_iter().map(IntoIndex::into_index).collect()
    }
}
impl<X: IntoIndex> IndexList for Vec<X> {
    fn into_indices(self) -> Vec<IndexValue> {
        self.into_iter().map(IntoIndex::into_index).collect()
    }
}
impl IndexList for () {
    fn into_indices(self) -> Vec<IndexValue> {
        Vec::new()
    }
}

macro_rules! index_tuple {
    ($($X:ident),+) => {
        impl<$($X: IntoIndex),+> IndexList for ($($X,)+) {
            #[allow(non_snake_case)]
            fn into_indices(self) -> Vec<IndexValue> {
                let ($($X,)+) = self;
                vec![$($X.into_index()),+]
            }
        }
    };
}
index_tuple!(A);
index_tuple!(A, B);
index_tuple!(A, B, C);
index_tuple!(A, B, C, D);
index_tuple!(A, B, C, D, F);
index_tuple!(A, B, C, D, F, G);
