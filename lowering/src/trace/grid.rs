//! Grid queries inside a kernel body.

use super::builder::with;
use super::value::{Scalar, Traced};
use crate::ir::{Loc, OpKind, Type};

fn grid_query(axis: usize, kind: OpKind, name: &'static str, loc: Loc) -> Scalar<i32> {
    Scalar::from_val(with(|b| {
        match b.grid_rank {
            None => b.op_error(
                name,
                "not available in an index map: its arguments are the grid indices",
                loc,
            ),
            Some(rank) if axis >= rank => b.op_error(
                name,
                format!("axis {axis} is out of range for a grid of rank {rank}"),
                loc,
            ),
            Some(_) => {}
        }
        b.emit1(kind, Type::index(), loc)
    }))
}

/// This grid step's index along `axis`.
#[track_caller]
pub fn program_id(axis: usize) -> Scalar<i32> {
    grid_query(
        axis,
        OpKind::ProgramId { axis },
        "program_id",
        Loc::caller(),
    )
}

/// The number of grid steps along `axis`.
#[track_caller]
pub fn num_programs(axis: usize) -> Scalar<i32> {
    grid_query(
        axis,
        OpKind::NumPrograms { axis },
        "num_programs",
        Loc::caller(),
    )
}

/// `0..n` as a plain Rust range. Inside `#[tpu_kernel]`, `for i in range(n)` and
/// `for i in range(a, b)` are rewritten into a traced loop (`__fori`) whose bounds may be
/// traced; this function only serves code outside the macro, where the loop unrolls.
pub fn range(n: i32) -> std::ops::Range<i32> {
    0..n
}
