//! The one translator of a traced op (no ref operand, no region) to StableHLO, for every
//! layout of grid steps: the leading grid dims of the loop and batched forms (`body.rs`), and
//! the folded layout (`folded.rs`). Each op kind is translated here, once: a layout only says
//! where its values keep the grid steps ([`Layout::within`] gives the dims an op works on, past
//! any leading grid dims, and refuses where the steps would mix). The kinds whose StableHLO
//! differs between the layouts (`program_id`, `broadcast`, and the size-1 dims a `reduce`
//! keeps) are the layout's own methods; `dot` asks the layout only for its dims
//! ([`Layout::dot_dims`]).

use super::error::EmitError;
use crate::dtype::DType;
use crate::ir::{Literal, OpKind, ValueId};
use crate::stablehlo::{BuildError, DotDims, FuncBuilder, Precision, TensorType, Value};

/// How translated values hold the IR values of all the grid steps they stand for.
pub(super) trait Layout {
    /// A translated value: a StableHLO value and where its grid steps are.
    type Val;
    /// The layout several operands share once laid out alike.
    type Common;
    type Err: From<EmitError> + From<BuildError>;

    fn get(&self, id: ValueId) -> Result<Self::Val, Self::Err>;
    /// The IR shape of value `id` (one step's).
    fn ir_shape(&self, id: ValueId) -> Vec<usize>;
    fn grid(&self) -> &[usize];
    /// The StableHLO value an elementwise op of one operand applies to (its layout kept).
    fn base(x: &Self::Val) -> &Value;
    /// `x` with its base replaced by `v`, of the same shape.
    fn with_base(x: Self::Val, v: Value) -> Self::Val;
    /// The values of `ids` laid out alike, and that layout.
    fn operands(
        &self,
        f: &mut FuncBuilder,
        ids: &[ValueId],
    ) -> Result<(Vec<Value>, Self::Common), Self::Err>;
    /// A value of IR shape `shape` computed from operands laid out with `common`.
    fn joined(v: Value, shape: Vec<usize>, common: Self::Common) -> Self::Val;
    /// The type a constant of IR type `ty` is emitted as: the whole block, or one element
    /// broadcast where used.
    fn splat_type(ty: &TensorType) -> TensorType;
    /// A value the same in every step, of IR shape `shape`, from the constant `v` of
    /// [`Layout::splat_type`].
    fn splat(v: Value, shape: Vec<usize>) -> Self::Val;
    /// A value the same in every step, as emitted (of its IR shape).
    fn same(v: Value) -> Self::Val;
    /// The StableHLO value of `x` as `(v, lead)`: `lead` leading dims, then its IR dims, none
    /// of `dims` holding more than one step's elements; an error where the layout cannot
    /// keep that (the folded layout then gives way to leading dims).
    fn within(
        &self,
        f: &mut FuncBuilder,
        x: &Self::Val,
        dims: &[usize],
    ) -> Result<(Value, usize), Self::Err>;
    /// `v`, computed from [`Layout::within`] of `x`, as a value of IR shape `shape` whose dim
    /// `d` holds the steps dim `from[d]` of `x` holds (`None`: a dim of its own).
    fn steps_of(
        &self,
        x: Self::Val,
        v: Value,
        shape: Vec<usize>,
        from: &[Option<usize>],
    ) -> Self::Val;
    /// How `dot` contracts dim `cl` of `l` with dim `cr` of `r` (both of their
    /// [`Layout::within`]): its dims, the transpose that lays its result out, and that layout.
    fn dot_dims(
        &self,
        l: &Self::Val,
        r: &Self::Val,
        cl: usize,
        cr: usize,
    ) -> Result<(DotDims, Vec<usize>, Self::Common), Self::Err>;
    /// `program_id(axis)`: a scalar where the steps are looped over, else the steps' ids.
    fn program_id(&mut self, f: &mut FuncBuilder, axis: usize) -> Result<Self::Val, Self::Err>;
    /// `broadcast_in_dim` of `x` to IR shape `shape`, `dims` its dims' places.
    fn broadcast(
        &self,
        f: &mut FuncBuilder,
        x: Self::Val,
        dims: &[usize],
        shape: Vec<usize>,
    ) -> Result<Self::Val, Self::Err>;
    /// A `reduce` of `x` over `axes` with `keepdims`: `v` is the reduction without the size-1
    /// dims, of `x`'s [`Layout::within`]; `shape` the IR shape with them.
    fn keep_reduced(
        &self,
        f: &mut FuncBuilder,
        x: Self::Val,
        v: Value,
        axes: &[usize],
        shape: Vec<usize>,
    ) -> Result<Self::Val, Self::Err>;
}

/// The StableHLO of an op of kind `kind`, whose result has type `ty` (`None`: it has no
/// result). It reads only the kind, so an op a pass made translates as a traced one does.
pub(super) fn translate<L: Layout>(
    l: &mut L,
    f: &mut FuncBuilder,
    kind: &OpKind,
    ty: Option<TensorType>,
) -> Result<L::Val, L::Err> {
    let ty = || {
        ty.clone()
            .ok_or_else(|| EmitError::internal(format!("`{}` has no result", kind.name())))
    };
    Ok(match kind {
        OpKind::Constant { value } => {
            let t = ty()?;
            let emitted = L::splat_type(&t);
            let v = match *value {
                Literal::Int(i) if !t.dtype.is_float() => f.full_int(emitted, i.into())?,
                v => f.full(emitted, v.as_f64())?,
            };
            L::splat(v, t.shape)
        }
        OpKind::NumPrograms { axis } => {
            let n = *l.grid().get(*axis).ok_or_else(|| grid_axis(*axis))?;
            L::same(f.scalar(DType::I32, n as f64)?)
        }
        OpKind::Iota { dim } => L::same(f.iota(ty()?, *dim)?),
        OpKind::Unary { op: u, x } => {
            let x = l.get(*x)?;
            let v = f.unary(u.info().stablehlo, L::base(&x))?;
            L::with_base(x, v)
        }
        OpKind::Cast { x } => {
            let x = l.get(*x)?;
            let v = f.convert(L::base(&x), ty()?.dtype)?;
            L::with_base(x, v)
        }
        // A promise for libtpu's alignment proofs: the value itself.
        OpKind::AssumeMultiple { x, .. } => l.get(*x)?,
        OpKind::Binary { op: b, lhs, rhs } => {
            let (v, common) = l.operands(f, &[*lhs, *rhs])?;
            L::joined(
                f.binary(b.info().stablehlo, &v[0], &v[1])?,
                ty()?.shape,
                common,
            )
        }
        OpKind::Compare { op: c, lhs, rhs } => {
            let (v, common) = l.operands(f, &[*lhs, *rhs])?;
            L::joined(
                f.compare(c.info().stablehlo, &v[0], &v[1])?,
                ty()?.shape,
                common,
            )
        }
        OpKind::Select {
            cond,
            on_true,
            on_false,
        } => {
            let (v, common) = l.operands(f, &[*cond, *on_true, *on_false])?;
            L::joined(f.select(&v[0], &v[1], &v[2])?, ty()?.shape, common)
        }
        OpKind::Bitcast { x } => {
            let (x, t) = (l.get(*x)?, ty()?);
            if L::base(&x).dtype().bits() == t.dtype.bits() {
                // Same width: elementwise, the layout kept.
                let v = f.bitcast_packed(L::base(&x), t.dtype)?;
                L::with_base(x, v)
            } else {
                // Packing pairs rows within a block (its rows divide by the packing), so a
                // folded dim packs the same way, each step's rows in place.
                let (v, _) = l.within(f, &x, &[])?;
                let v = f.bitcast_packed(&v, t.dtype)?;
                let from = identity(t.shape.len());
                l.steps_of(x, v, t.shape, &from)
            }
        }
        OpKind::Slice { x, starts, strides } => {
            let (own, sizes) = (l.ir_shape(*x), ty()?.shape);
            // A dim holding grid steps must be taken whole (each step's block is then sliced
            // alike); a window of it would cut across steps.
            let whole = |d: usize| starts[d] == 0 && strides[d] == 1 && sizes[d] == own[d];
            let cut: Vec<usize> = (0..sizes.len()).filter(|&d| !whole(d)).collect();
            let x = l.get(*x)?;
            let (v, lead) = l.within(f, &x, &cut)?;
            let start = [vec![0; lead], starts.clone()].concat();
            let stride = [vec![1; lead], strides.clone()].concat();
            let limit: Vec<usize> = (0..lead + sizes.len())
                .map(|i| match i.checked_sub(lead) {
                    Some(d) if !whole(d) => starts[d] + strides[d] * (sizes[d] - 1) + 1,
                    _ => v.shape()[i],
                })
                .collect();
            let v = f.slice(&v, &start, &limit, &stride)?;
            let from = identity(sizes.len());
            l.steps_of(x, v, sizes, &from)
        }
        OpKind::Reshape { x } => {
            let rank = l.ir_shape(*x).len();
            let x = l.get(*x)?;
            // Steps stay apart only in dims the reshape leaves alone: every dim must hold one.
            let all: Vec<usize> = (0..rank).collect();
            let (v, lead) = l.within(f, &x, &all)?;
            let shape = ty()?.shape;
            let v = f.reshape(&v, &[&v.shape()[..lead], &shape[..]].concat())?;
            let from = vec![None; shape.len()];
            l.steps_of(x, v, shape, &from)
        }
        OpKind::Transpose { x, perm } => {
            let x = l.get(*x)?;
            let (v, lead) = l.within(f, &x, &[])?;
            let all: Vec<usize> = (0..lead).chain(perm.iter().map(|p| p + lead)).collect();
            let v = f.transpose(&v, &all)?;
            let from: Vec<_> = perm.iter().map(|&p| Some(p)).collect();
            l.steps_of(x, v, ty()?.shape, &from)
        }
        OpKind::Reduce {
            op: r,
            x,
            axes,
            keepdims,
        } => {
            let rank = l.ir_shape(*x).len();
            let x = l.get(*x)?;
            let (v, lead) = l.within(f, &x, axes)?;
            let shifted: Vec<usize> = axes.iter().map(|a| a + lead).collect();
            let v = f.reduce_kind(&v, r.info().stablehlo, &shifted, false)?;
            if *keepdims {
                l.keep_reduced(f, x, v, axes, ty()?.shape)?
            } else {
                let from: Vec<_> = (0..rank).filter(|d| !axes.contains(d)).map(Some).collect();
                l.steps_of(x, v, ty()?.shape, &from)
            }
        }
        // A scan along a dim that holds no grid step stays within each step's block.
        OpKind::Scan { op: r, x, axis } => {
            let x = l.get(*x)?;
            let (v, lead) = l.within(f, &x, &[*axis])?;
            let v = f.scan_kind(&v, r.info().stablehlo, axis + lead)?;
            let shape = ty()?.shape;
            let from = identity(shape.len());
            l.steps_of(x, v, shape, &from)
        }
        // `dot` accumulates in f32 (f64 for f64): operands are converted first, then
        // contracted at full precision, so bf16 inputs give the f32 products the IR promises.
        OpKind::Dot {
            lhs,
            rhs,
            transpose_lhs,
            transpose_rhs,
        } => {
            let acc = ty()?;
            let (x, y) = (l.get(*lhs)?, l.get(*rhs)?);
            let (cl, cr) = (usize::from(!*transpose_lhs), usize::from(*transpose_rhs));
            let (xv, _) = l.within(f, &x, &[cl])?;
            let (yv, _) = l.within(f, &y, &[cr])?;
            let (xv, yv) = (f.convert(&xv, acc.dtype)?, f.convert(&yv, acc.dtype)?);
            let (dims, perm, common) = l.dot_dims(&x, &y, cl, cr)?;
            let out = f.dot_general(&xv, &yv, &dims, Precision::Highest)?;
            L::joined(f.transpose(&out, &perm)?, acc.shape, common)
        }
        OpKind::ProgramId { axis } => l.program_id(f, *axis)?,
        OpKind::Broadcast { x, dims } => {
            let x = l.get(*x)?;
            l.broadcast(f, x, dims, ty()?.shape)?
        }
        OpKind::Load { .. }
        | OpKind::Store { .. }
        | OpKind::LoadSlice { .. }
        | OpKind::LoadElement { .. }
        | OpKind::StoreSlice { .. }
        | OpKind::StoreElement { .. }
        | OpKind::DmaStart(_)
        | OpKind::DmaWait(_)
        | OpKind::RunScoped { .. }
        | OpKind::If { .. }
        | OpKind::Fori { .. }
        | OpKind::While { .. } => {
            return Err(EmitError::internal(format!(
                "{} reached the translator: ir::discharge rewrites it first",
                kind.name()
            ))
            .into())
        }
        OpKind::StoreMasked { .. } | OpKind::PrngSeed { .. } | OpKind::PrngRandomBits { .. } => {
            return Err(EmitError::internal(format!(
                "{} reached the translator: desugar.rs rewrites it first",
                kind.name()
            ))
            .into())
        }
    })
}

fn identity(rank: usize) -> Vec<Option<usize>> {
    (0..rank).map(Some).collect()
}

pub(super) fn grid_axis(axis: usize) -> EmitError {
    EmitError::internal(format!("grid axis {axis} does not exist"))
}
