//! Matrix multiplication of 2-D tiles, accumulated in and returning f32 (as on the TPU's
//! MXU), so `acc.load() + dot(x, y)` type-checks for an f32 accumulator whatever `T` is;
//! `dot_i8` multiplies int8 tiles with exact int32 accumulation (the MXU's integer mode).

use super::builder::with;
use super::element::{Element, Float};
use super::value::{Tile, Traced};
use crate::ir::{dot_accumulator, Loc, OpKind, Type};

#[track_caller]
fn dot_impl<E: Element, A: Element>(
    a: Tile<E>,
    b: Tile<E>,
    transpose_lhs: bool,
    transpose_rhs: bool,
) -> Tile<A> {
    let loc = Loc::caller();
    Tile::from_val(with(|bl| {
        let (ls, rs) = (bl.ty(a.v).shape().to_vec(), bl.ty(b.v).shape().to_vec());
        let dim = |s: &[usize], i: usize| s.get(i).copied().unwrap_or(0);
        let m = if transpose_lhs {
            dim(&ls, 1)
        } else {
            dim(&ls, 0)
        };
        let n = if transpose_rhs {
            dim(&rs, 0)
        } else {
            dim(&rs, 1)
        };
        let acc = dot_accumulator(E::DTYPE).unwrap_or(A::DTYPE);
        let (lhs, rhs) = (bl.id(a.v, "dot", loc), bl.id(b.v, "dot", loc));
        bl.emit1(
            OpKind::Dot {
                lhs,
                rhs,
                transpose_lhs,
                transpose_rhs,
            },
            Type::tile(acc, vec![m, n]),
            loc,
        )
    }))
}

/// `a @ b` for `a: [m, k]`, `b: [k, n]`, accumulated and returned in `f32` (f32 for
/// f32/bf16/f16): cast the result back with `.cast::<E>()`.
#[track_caller]
pub fn dot<E: Float>(a: Tile<E>, b: Tile<E>) -> Tile<f32> {
    dot_impl(a, b, false, false)
}

/// `a @ b` for int8 `a: [m, k]`, `b: [k, n]`, accumulated exactly in `i32` (quantized
/// matmuls: dequantize the result with a per-row or per-column scale).
#[track_caller]
pub fn dot_i8(a: Tile<i8>, b: Tile<i8>) -> Tile<i32> {
    dot_impl(a, b, false, false)
}

/// `a @ b^T` for `a: [m, k]`, `b: [n, k]` (attention's `q @ k^T`).
#[track_caller]
pub fn dot_t<E: Float>(a: Tile<E>, b: Tile<E>) -> Tile<f32> {
    dot_impl(a, b, false, true)
}

/// `op(a) @ op(b)` where `op` transposes when asked.
#[track_caller]
pub fn dot_general<E: Float>(
    a: Tile<E>,
    b: Tile<E>,
    transpose_lhs: bool,
    transpose_rhs: bool,
) -> Tile<f32> {
    dot_impl(a, b, transpose_lhs, transpose_rhs)
}
