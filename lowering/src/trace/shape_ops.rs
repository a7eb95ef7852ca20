//! Shape and dtype changes: cast, broadcast, reshape, transpose, reductions, iota, constants
//! and select.

use super::builder::{with, Val};
use super::element::{Element, Numeric};
use super::operand::{broadcast_to, Operand, ScalarOperand};
use super::value::{Scalar, Tile, Traced};
use crate::dtype::DType;
use crate::ir::{reduced_shape, Literal, Loc, OpKind, ReduceOp, Type};

/// Reduction axes: one axis or several; negative axes count from the end like NumPy.
pub trait Axes {
    #[doc(hidden)]
    fn axes(self) -> Vec<i64>;
}
impl Axes for i32 {
    fn axes(self) -> Vec<i64> {
        vec![i64::from(self)]
    }
}
impl Axes for usize {
    fn axes(self) -> Vec<i64> {
        vec![self as i64]
    }
}
impl<const N: usize> Axes for [i32; N] {
    fn axes(self) -> Vec<i64> {
        self.iter().map(|&a| i64::from(a)).collect()
    }
}
impl<const N: usize> Axes for [usize; N] {
    fn axes(self) -> Vec<i64> {
        self.iter().map(|&a| a as i64).collect()
    }
}

/// Resolves negative axes (NumPy style) and sorts; reports axes outside `-rank..rank` as
/// errors of `op`.
pub(super) fn normalize_axes(
    op: &'static str,
    axes: Vec<i64>,
    shape: &[usize],
    loc: Loc,
) -> Vec<usize> {
    let rank = shape.len() as i64;
    let mut out = Vec::with_capacity(axes.len());
    for a in axes {
        let r = if a < 0 { a + rank } else { a };
        if !(0..rank).contains(&r) {
            with(|b| {
                b.op_error(
                    op,
                    format!("axis {a} is out of range for shape {shape:?}"),
                    loc,
                )
            });
            continue;
        }
        out.push(r as usize);
    }
    out.sort_unstable();
    out
}

pub(super) fn reduce(op: ReduceOp, x: Val, axes: Vec<i64>, keepdims: bool, loc: Loc) -> Val {
    let ty = with(|b| b.ty(x));
    let axes = normalize_axes("reduce", axes, ty.shape(), loc);
    with(|b| {
        let shape = reduced_shape(ty.shape(), &axes, keepdims).unwrap_or_default();
        let id = b.id(x, "reduce", loc);
        b.emit1(
            OpKind::Reduce {
                op,
                x: id,
                axes,
                keepdims,
            },
            Type::tile(ty.dtype(), shape),
            loc,
        )
    })
}

fn reshaped(x: Val, shape: Vec<usize>, loc: Loc) -> Val {
    with(|b| {
        let dtype = b.ty(x).dtype();
        let id = b.id(x, "reshape", loc);
        b.emit1(OpKind::Reshape { x: id }, Type::tile(dtype, shape), loc)
    })
}

impl<E: Element> Tile<E> {
    /// Converts every element to `U` (float to int truncates toward zero).
    #[track_caller]
    pub fn cast<U: Element>(self) -> Tile<U> {
        Tile::from_val(cast_val(self.v, U::DTYPE, Loc::caller()))
    }

    /// NumPy-style broadcast to `shape` (trailing dims aligned; size-1 dims stretch).
    #[track_caller]
    pub fn broadcast_to(self, shape: impl Into<Vec<usize>>) -> Tile<E> {
        let (loc, shape) = (Loc::caller(), shape.into());
        Tile::from_val(with(|b| broadcast_to(b, self.v, &shape, "broadcast", loc)))
    }

    /// StableHLO's broadcast_in_dim: dim `i` of `self` becomes dim `dims[i]` of the result.
    #[track_caller]
    pub fn broadcast_in_dim(
        self,
        shape: impl Into<Vec<usize>>,
        dims: impl Into<Vec<usize>>,
    ) -> Tile<E> {
        let loc = Loc::caller();
        Tile::from_val(with(|b| {
            let id = b.id(self.v, "broadcast", loc);
            b.emit1(
                OpKind::Broadcast {
                    x: id,
                    dims: dims.into(),
                },
                Type::tile(E::DTYPE, shape.into()),
                loc,
            )
        }))
    }

    #[track_caller]
    pub fn reshape(self, shape: impl Into<Vec<usize>>) -> Tile<E> {
        Tile::from_val(reshaped(self.v, shape.into(), Loc::caller()))
    }

    /// Result dim `i` is dim `perm[i]` of `self`.
    #[track_caller]
    pub fn transpose(self, perm: impl Into<Vec<usize>>) -> Tile<E> {
        let (loc, perm) = (Loc::caller(), perm.into());
        Tile::from_val(with(|b| {
            let ty = b.ty(self.v);
            let shape = perm
                .iter()
                .map(|&p| ty.shape().get(p).copied().unwrap_or(0))
                .collect::<Vec<_>>();
            let id = b.id(self.v, "transpose", loc);
            b.emit1(
                OpKind::Transpose { x: id, perm },
                Type::tile(E::DTYPE, shape),
                loc,
            )
        }))
    }

    /// Transpose of a 2-D tile.
    #[track_caller]
    pub fn t(self) -> Tile<E> {
        let loc = Loc::caller();
        Tile::from_val(with(|b| {
            let ty = b.ty(self.v);
            let shape: Vec<usize> = ty.shape().iter().rev().copied().collect();
            let id = b.id(self.v, "transpose", loc);
            b.emit1(
                OpKind::Transpose {
                    x: id,
                    perm: vec![1, 0],
                },
                Type::tile(E::DTYPE, shape),
                loc,
            )
        }))
    }

    /// The single element of a tile of any shape with one element.
    #[track_caller]
    pub fn to_scalar(self) -> Scalar<E> {
        Scalar::from_val(reshaped(self.v, vec![], Loc::caller()))
    }
}

impl<E: Numeric> Tile<E> {
    /// Sum over `axes`; `keepdims` leaves them as size-1 dims.
    #[track_caller]
    pub fn sum(self, axes: impl Axes, keepdims: bool) -> Tile<E> {
        Tile::from_val(reduce(
            ReduceOp::Sum,
            self.v,
            axes.axes(),
            keepdims,
            Loc::caller(),
        ))
    }
    /// Maximum over `axes` (the elementwise maximum is [`Tile::maximum`]).
    #[track_caller]
    pub fn max(self, axes: impl Axes, keepdims: bool) -> Tile<E> {
        Tile::from_val(reduce(
            ReduceOp::Max,
            self.v,
            axes.axes(),
            keepdims,
            Loc::caller(),
        ))
    }
    #[track_caller]
    pub fn min(self, axes: impl Axes, keepdims: bool) -> Tile<E> {
        Tile::from_val(reduce(
            ReduceOp::Min,
            self.v,
            axes.axes(),
            keepdims,
            Loc::caller(),
        ))
    }
}

/// Sum over one axis, dropping it (`jnp.sum(x, axis)`).
#[track_caller]
pub fn sum<E: Numeric>(x: Tile<E>, axis: impl Axes) -> Tile<E> {
    Tile::from_val(reduce(
        ReduceOp::Sum,
        x.v,
        axis.axes(),
        false,
        Loc::caller(),
    ))
}

/// Maximum over an axis, dropping it (`jnp.max`); the elementwise one is [`maximum`](super::maximum).
#[track_caller]
pub fn max<E: Numeric>(x: Tile<E>, axis: impl Axes) -> Tile<E> {
    Tile::from_val(reduce(
        ReduceOp::Max,
        x.v,
        axis.axes(),
        false,
        Loc::caller(),
    ))
}

#[track_caller]
pub fn min<E: Numeric>(x: Tile<E>, axis: impl Axes) -> Tile<E> {
    Tile::from_val(reduce(
        ReduceOp::Min,
        x.v,
        axis.axes(),
        false,
        Loc::caller(),
    ))
}

pub(crate) fn cast_val(x: Val, to: DType, loc: Loc) -> Val {
    with(|b| {
        let shape = b.ty(x).shape().to_vec();
        let id = b.id(x, "cast", loc);
        b.emit1(OpKind::Cast { x: id }, Type::tile(to, shape), loc)
    })
}

impl<E: Element> Scalar<E> {
    #[track_caller]
    pub fn cast<U: Element>(self) -> Scalar<U> {
        Scalar::from_val(cast_val(self.v, U::DTYPE, Loc::caller()))
    }

    /// This scalar as a tile of `shape`.
    #[track_caller]
    pub fn broadcast_to(self, shape: impl Into<Vec<usize>>) -> Tile<E> {
        let (loc, shape) = (Loc::caller(), shape.into());
        Tile::from_val(with(|b| broadcast_to(b, self.v, &shape, "broadcast", loc)))
    }
}

impl Scalar<i32> {
    /// This index, promised a multiple of `multiple` (Pallas' `pl.multiple_of`): a traced
    /// VMEM index along the last dim must be provably a multiple of 128, along the
    /// second-minor of 8, and this is how to promise it when the arithmetic does not show it.
    /// The interpreter checks the promise; on TPU a broken one reads the wrong window.
    #[track_caller]
    pub fn multiple_of(self, multiple: usize) -> Scalar<i32> {
        let loc = Loc::caller();
        Scalar::from_val(with(|b| {
            let x = b.id(self.v, "multiple_of", loc);
            b.emit1(
                OpKind::AssumeMultiple { x, multiple },
                Type::scalar(DType::I32),
                loc,
            )
        }))
    }
}

/// A tile of `shape` whose elements are their index along `dim`.
#[track_caller]
pub fn iota<E: Numeric>(shape: impl Into<Vec<usize>>, dim: usize) -> Tile<E> {
    let loc = Loc::caller();
    Tile::from_val(with(|b| {
        b.emit1(
            OpKind::Iota { dim },
            Type::tile(E::DTYPE, shape.into()),
            loc,
        )
    }))
}

/// A tile of `shape` filled with `value` (a literal or a traced scalar).
#[track_caller]
pub fn full<E: Element>(shape: impl Into<Vec<usize>>, value: impl Operand<E>) -> Tile<E> {
    let (loc, shape) = (Loc::caller(), shape.into());
    Tile::from_val(with(|b| {
        let v = value.operand(b, loc);
        broadcast_to(b, v, &shape, "full", loc)
    }))
}

/// A traced scalar holding `value` (e.g. a counter a `while` loop carries: `let mut i =
/// scalar::<i32>(0);`).
#[track_caller]
pub fn scalar<E: Element>(value: impl ScalarOperand<E>) -> Scalar<E> {
    let loc = Loc::caller();
    Scalar::from_val(with(|b| value.operand(b, loc)))
}

/// Zero as a rank-0 tile: it broadcasts to any shape, so `acc.store(zeros())` fills `acc`.
#[track_caller]
pub fn zeros<E: Numeric>() -> Tile<E> {
    let loc = Loc::caller();
    Tile::from_val(with(|b| {
        b.constant(Literal::Int(0), Type::scalar(E::DTYPE), loc)
    }))
}

/// Zeros of `x`'s shape and type.
#[track_caller]
pub fn zeros_like<E: Numeric>(x: Tile<E>) -> Tile<E> {
    let loc = Loc::caller();
    Tile::from_val(with(|b| {
        let ty = b.ty(x.v);
        b.constant(Literal::Int(0), ty, loc)
    }))
}

/// `cond ? on_true : on_false` elementwise (`jnp.where`); all three broadcast together.
#[track_caller]
pub fn where_<E: Element>(
    cond: impl Operand<bool>,
    on_true: impl Operand<E>,
    on_false: impl Operand<E>,
) -> Tile<E> {
    select_at(cond, on_true, on_false, Loc::caller())
}

/// [`where_`] at `loc`.
pub(crate) fn select_at<E: Element>(
    cond: impl Operand<bool>,
    on_true: impl Operand<E>,
    on_false: impl Operand<E>,
    loc: Loc,
) -> Tile<E> {
    Tile::from_val(with(|b| {
        let (c, t, f) = (
            cond.operand(b, loc),
            on_true.operand(b, loc),
            on_false.operand(b, loc),
        );
        let shape = [c, t, f].iter().try_fold(Vec::new(), |s, v| {
            super::operand::broadcast_shapes(&s, b.ty(*v).shape())
        });
        let Some(shape) = shape else {
            let shapes: Vec<Vec<usize>> = [c, t, f]
                .iter()
                .map(|v| b.ty(*v).shape().to_vec())
                .collect();
            b.op_error(
                "select",
                format!("shapes {shapes:?} do not broadcast together"),
                loc,
            );
            return t;
        };
        let c = broadcast_to(b, c, &shape, "select", loc);
        let t = broadcast_to(b, t, &shape, "select", loc);
        let f = broadcast_to(b, f, &shape, "select", loc);
        let ty = b.ty(t);
        let kind = OpKind::Select {
            cond: b.id(c, "select", loc),
            on_true: b.id(t, "select", loc),
            on_false: b.id(f, "select", loc),
        };
        b.emit1(kind, ty, loc)
    }))
}
