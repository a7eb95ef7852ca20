//! Scans and index reductions along one axis: `cumsum`/`cummax`/`cummin` (one IR `scan` op)
//! and `argmax`/`argmin`, which are composed from ops every backend already has (a max, an
//! equality with it, an iota and a min over the matching indices), so they are exact
//! everywhere the max is.

use super::builder::{with, Val};
use super::element::Numeric;
use super::shape_ops::{normalize_axes, reduce, Axes};
use super::value::{Tile, Traced};
use crate::dtype::DType;
use crate::ir::{CompareOp, Literal, Loc, OpKind, ReduceOp, Type};

/// The one axis of `axis` for `op` on `shape`, or `None` after recording the error.
fn one_axis(op: &'static str, axis: impl Axes, shape: &[usize], loc: Loc) -> Option<usize> {
    let axes = axis.axes();
    if axes.len() != 1 {
        with(|b| b.op_error(op, format!("takes one axis, got {axes:?}"), loc));
        return None;
    }
    if shape.is_empty() {
        with(|b| b.op_error(op, "needs a tile, got a scalar (rank 0)", loc));
        return None;
    }
    normalize_axes(op, axes, shape, loc).first().copied()
}

fn scan(op: ReduceOp, x: Val, axis: impl Axes, loc: Loc) -> Val {
    let ty = with(|b| b.ty(x));
    let name = match op {
        ReduceOp::Sum => "cumsum",
        ReduceOp::Max => "cummax",
        ReduceOp::Min => "cummin",
    };
    let Some(axis) = one_axis(name, axis, ty.shape(), loc) else {
        return x;
    };
    with(|b| {
        let id = b.id(x, name, loc);
        b.emit1(OpKind::Scan { op, x: id, axis }, ty, loc)
    })
}

/// The index of the first maximum (`Max`) or minimum (`Min`) along `axis`, as i32. NaN
/// counts as the extreme, so the first NaN wins (as in NumPy and JAX). The first NaN is
/// found on its own, so the answer does not depend on whether a backend's max propagates
/// NaN (XLA's CPU max, for one, may not).
fn arg_reduce(op: ReduceOp, x: Val, axis: impl Axes, keepdims: bool, loc: Loc) -> Val {
    let ty = with(|b| b.ty(x));
    let name = if op == ReduceOp::Max {
        "argmax"
    } else {
        "argmin"
    };
    let shape = ty.shape().to_vec();
    let Some(axis) = one_axis(name, axis, &shape, loc) else {
        return with(|b| b.constant(Literal::Int(0), Type::scalar(DType::I32), loc));
    };
    let extreme = reduce(op, x, vec![axis as i64], true, loc);
    with(|b| {
        let dtype = ty.dtype();
        let x = b.id(x, name, loc);
        let extreme = b.id(extreme, name, loc);
        let rank = shape.len();
        let bools = Type::tile(DType::Bool, shape.clone());
        let indices = Type::tile(DType::I32, shape.clone());
        let kept = Type::tile(
            DType::I32,
            crate::ir::reduced_shape(&shape, &[axis], keepdims).unwrap_or_default(),
        );
        let position = b.emit1(OpKind::Iota { dim: axis }, indices.clone(), loc);
        let n = shape[axis] as i64;
        let past_end = b.constant(Literal::Int(n), indices.clone(), loc);
        // min over `axis` of the positions where `hit` holds (`n` where it never does).
        let first = |b: &mut super::builder::Builder, hit: Val| {
            let candidates = b.emit1(
                OpKind::Select {
                    cond: hit.id,
                    on_true: position.id,
                    on_false: past_end.id,
                },
                indices.clone(),
                loc,
            );
            b.emit1(
                OpKind::Reduce {
                    op: ReduceOp::Min,
                    x: candidates.id,
                    axes: vec![axis],
                    keepdims,
                },
                kept.clone(),
                loc,
            )
        };
        let stretched = b.emit1(
            OpKind::Broadcast {
                x: extreme,
                dims: (0..rank).collect(),
            },
            Type::tile(dtype, shape.clone()),
            loc,
        );
        let hit = b.emit1(
            OpKind::Compare {
                op: CompareOp::Eq,
                lhs: x,
                rhs: stretched.id,
            },
            bools.clone(),
            loc,
        );
        let first_extreme = first(b, hit);
        if !dtype.is_float() {
            return first_extreme;
        }
        let nan = b.emit1(
            OpKind::Compare {
                op: CompareOp::Ne,
                lhs: x,
                rhs: x,
            },
            bools,
            loc,
        );
        let first_nan = first(b, nan);
        let none = b.constant(Literal::Int(n), kept.clone(), loc);
        let has_nan = b.emit1(
            OpKind::Compare {
                op: CompareOp::Lt,
                lhs: first_nan.id,
                rhs: none.id,
            },
            Type::tile(DType::Bool, kept.shape().to_vec()),
            loc,
        );
        b.emit1(
            OpKind::Select {
                cond: has_nan.id,
                on_true: first_nan.id,
                on_false: first_extreme.id,
            },
            kept,
            loc,
        )
    })
}

impl<E: Numeric> Tile<E> {
    /// Inclusive cumulative sum along `axis` (`jnp.cumsum`; negative axes count from the end).
    #[track_caller]
    pub fn cumsum(self, axis: impl Axes) -> Tile<E> {
        Tile::from_val(scan(ReduceOp::Sum, self.val(), axis, Loc::caller()))
    }

    /// Running maximum along `axis` (`lax.cummax`).
    #[track_caller]
    pub fn cummax(self, axis: impl Axes) -> Tile<E> {
        Tile::from_val(scan(ReduceOp::Max, self.val(), axis, Loc::caller()))
    }

    /// Running minimum along `axis` (`lax.cummin`).
    #[track_caller]
    pub fn cummin(self, axis: impl Axes) -> Tile<E> {
        Tile::from_val(scan(ReduceOp::Min, self.val(), axis, Loc::caller()))
    }

    /// Index of the first maximum along `axis` (`jnp.argmax`), as i32; `keepdims` leaves
    /// the axis as a size-1 dim.
    #[track_caller]
    pub fn argmax(self, axis: impl Axes, keepdims: bool) -> Tile<i32> {
        Tile::from_val(arg_reduce(
            ReduceOp::Max,
            self.val(),
            axis,
            keepdims,
            Loc::caller(),
        ))
    }

    /// Index of the first minimum along `axis` (`jnp.argmin`), as i32.
    #[track_caller]
    pub fn argmin(self, axis: impl Axes, keepdims: bool) -> Tile<i32> {
        Tile::from_val(arg_reduce(
            ReduceOp::Min,
            self.val(),
            axis,
            keepdims,
            Loc::caller(),
        ))
    }
}

/// `jnp.cumsum(x, axis)`.
#[track_caller]
pub fn cumsum<E: Numeric>(x: Tile<E>, axis: impl Axes) -> Tile<E> {
    Tile::from_val(scan(ReduceOp::Sum, x.val(), axis, Loc::caller()))
}

/// `jnp.argmax(x, axis)`: the axis is dropped.
#[track_caller]
pub fn argmax<E: Numeric>(x: Tile<E>, axis: impl Axes) -> Tile<i32> {
    Tile::from_val(arg_reduce(
        ReduceOp::Max,
        x.val(),
        axis,
        false,
        Loc::caller(),
    ))
}

/// `jnp.argmin(x, axis)`: the axis is dropped.
#[track_caller]
pub fn argmin<E: Numeric>(x: Tile<E>, axis: impl Axes) -> Tile<i32> {
    Tile::from_val(arg_reduce(
        ReduceOp::Min,
        x.val(),
        axis,
        false,
        Loc::caller(),
    ))
}
