//! `*o += x` (and `-=`, `*=`, `/=`, `%=`, `&=`, `|=`, `^=`, `<<=`, `>>=`) on writable refs:
//! a load of the whole block, the op, and a store of the whole block, at the user's line.
//! For helpers outside kernel bodies; inside `#[tpu_kernel]` bodies the macro rewrites
//! `o += x` and `*o += x` on output and scratch parameters into the same load, op and store
//! through `&self` methods, so both branches of an `if` may update one ref.

use super::element::Element;
use super::refs::{RefMut, Scratch};
use super::value::Tile;
use std::ops;

macro_rules! ref_assign {
    ($Ref:ident) => {
        ref_assign!(@ops $Ref;
            (Add, add, AddAssign, add_assign),
            (Sub, sub, SubAssign, sub_assign),
            (Mul, mul, MulAssign, mul_assign),
            (Div, div, DivAssign, div_assign),
            (Rem, rem, RemAssign, rem_assign),
            (BitAnd, bitand, BitAndAssign, bitand_assign),
            (BitOr, bitor, BitOrAssign, bitor_assign),
            (BitXor, bitxor, BitXorAssign, bitxor_assign),
            (Shl, shl, ShlAssign, shl_assign),
            (Shr, shr, ShrAssign, shr_assign)
        );
    };
    (@ops $Ref:ident; $(($Trait:ident, $method:ident, $Assign:ident, $assign:ident)),*) => {$(
        impl<E: Element, R> ops::$Assign<R> for $Ref<E>
        where
            Tile<E>: ops::$Trait<R, Output = Tile<E>>,
        {
            #[track_caller]
            fn $assign(&mut self, rhs: R) {
                self.store(ops::$Trait::$method(self.load(), rhs));
            }
        }
    )*};
}

ref_assign!(RefMut);
ref_assign!(Scratch);
