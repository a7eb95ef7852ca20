//! The folded layout of the batched form, for all-parallel grids: operands stay whole arrays
//! and the body runs once, on values whose dims each hold the steps of at most one grid axis
//! side by side, block index major, as the arrays themselves lay blocks out. A softmax over
//! blocks of rows is then the softmax of the whole array, with no re-layout and no leading
//! grid dims, i.e. the program one would write by hand (the same ops on rank-3
//! `[steps, rows, cols]` blocks measured ~0.85x of it on the XLA CPU plugin).
//!
//! It translates the discharged body (`ir::discharge`) with the shared translator
//! (`translate.rs`), giving it this layout's rules; a ref version never written is the zeros
//! outputs and scratch start as.
//!
//! Legal when no op can tell steps apart or mix them: elementwise ops, casts, broadcasts that
//! do not stretch a folded dim, transposes, reductions and `dot` contractions over dims that
//! hold no grid axis, and values the same in every step (constants, `iota`, blocks read at a
//! constant index), which are tiled where they meet a folded dim, and static slices that take
//! folded dims whole. Anything else (`program_id`, other slices, element access, regions,
//! squeezed block dims, reshapes of folded values, an axis ending up in two dims of one
//! value, or in a dim other than the output's) makes [`emit`] return `None`, and the batched
//! form uses its leading-grid-dims layout instead.

use super::batched::{const_blocks, DimMap};
use super::error::EmitError;
use super::plan::Plan;
use super::translate::{translate, Layout};
use crate::ir::discharge::{Discharged, Kind, Op};
use crate::ir::ValueId;
use crate::stablehlo::{BuildError, DotDims, FuncBuilder, Module, TensorType, Value};
use std::collections::HashMap;

/// An IR value for all steps: `broadcast_in_dim(base, dims)` to the IR value's own `shape`
/// with each dim `d` scaled by the extent of grid axis `axes[d]`, if any. The broadcast stays
/// symbolic until a use needs it, so a row statistic or a splat constant is broadcast
/// straight to the shape it meets.
#[derive(Clone, Debug)]
pub(super) struct Folded {
    base: Value,
    /// The dim of the value that each dim of `base` stands for.
    dims: Vec<usize>,
    shape: Vec<usize>,
    axes: Vec<Option<usize>>,
}

/// Why folding stopped.
pub(super) enum Stop {
    /// This launch cannot be folded (not an error: the other layout applies).
    Unfoldable,
    Failed(EmitError),
}

impl From<EmitError> for Stop {
    fn from(e: EmitError) -> Self {
        Stop::Failed(e)
    }
}

impl From<BuildError> for Stop {
    fn from(e: BuildError) -> Self {
        Stop::Failed(e.into())
    }
}

/// The module of `plan` (all axes parallel) in the folded layout, or `None` where it does not
/// apply; `body` is the plan's body discharged, `maps` the operands' index maps read as
/// [`DimMap`]s, inputs then outputs.
pub(super) fn emit(
    plan: &Plan,
    body: &Discharged,
    maps: &[Vec<DimMap>],
) -> Result<Option<Module>, EmitError> {
    let mut fold = Fold {
        func: body,
        grid: &plan.grid,
        vals: HashMap::new(),
    };
    match fold.module(plan, maps) {
        Ok(m) => Ok(Some(m)),
        Err(Stop::Unfoldable) => Ok(None),
        Err(Stop::Failed(e)) => Err(e),
    }
}

struct Fold<'p> {
    func: &'p Discharged<'p>,
    grid: &'p [usize],
    /// Values and ref versions; a ref param's first version is set for inputs only.
    vals: HashMap<ValueId, Folded>,
}

impl Fold<'_> {
    fn module(&mut self, plan: &Plan, maps: &[Vec<DimMap>]) -> Result<Module, Stop> {
        // A squeezed dim is an array dim the body's values lack: no dim of theirs can hold
        // its steps.
        if plan
            .inputs
            .iter()
            .chain(&plan.outputs)
            .any(|o| o.view != o.block)
        {
            return Err(Stop::Unfoldable);
        }
        let (in_maps, out_maps) = maps.split_at(plan.inputs.len());
        let mut f = FuncBuilder::new("main");
        for (o, m) in plan.inputs.iter().zip(in_maps) {
            let x = f.arg(TensorType::new(o.array.clone(), o.dtype));
            let base = const_blocks(&mut f, o, m, &x)?;
            let folded = Folded {
                dims: (0..base.rank()).collect(),
                base,
                shape: o.block.clone(),
                axes: self.axes_of(m),
            };
            self.vals.insert(o.param, folded);
        }
        for op in &self.func.body.ops {
            let outer = f.set_loc(Some(op.origin.loc));
            let emitted = self.op(&mut f, op);
            f.set_loc(outer);
            emitted.map_err(|e| match e {
                Stop::Failed(e) => Stop::Failed(e.at(op.origin)),
                stop => stop,
            })?;
        }
        let mut outs = Vec::new();
        for (o, m) in plan.outputs.iter().zip(out_maps) {
            let last = self.func.final_version(o.param).map_err(EmitError::from)?;
            let contents = self.version(&mut f, last)?;
            let v = self.materialize(&mut f, &contents, &self.axes_of(m))?;
            if v.shape() != o.array.as_slice() {
                return Err(EmitError::internal(format!(
                    "folded output {:?} is not the array {:?}",
                    v.shape(),
                    o.array
                ))
                .into());
            }
            outs.push(v);
        }
        let refs: Vec<&Value> = outs.iter().collect();
        Ok(f.finish(&refs)?)
    }

    /// The grid axis each dim of an operand holds: the axis its block index follows, unless
    /// the axis has one step (then the block is the whole dim, folding is moot).
    fn axes_of(&self, maps: &[DimMap]) -> Vec<Option<usize>> {
        maps.iter()
            .map(|m| match *m {
                DimMap::Axis(a) if self.grid[a] > 1 => Some(a),
                _ => None,
            })
            .collect()
    }

    fn scaled(&self, shape: &[usize], axes: &[Option<usize>]) -> Vec<usize> {
        shape
            .iter()
            .zip(axes)
            .map(|(&n, a)| a.map_or(n, |a| n * self.grid[a]))
            .collect()
    }

    /// A ref version; a ref param's first one, unless an input, holds zeros (outputs and
    /// scratch start so), emitted where it is read.
    fn version(&self, f: &mut FuncBuilder, id: ValueId) -> Result<Folded, Stop> {
        if let Some(v) = self.vals.get(&id) {
            return Ok(v.clone());
        }
        let t = self.func.ty(id);
        if !t.is_ref() {
            return self.get(id);
        }
        Ok(splat(
            f.zeros(TensorType::scalar(t.dtype()))?,
            t.shape().to_vec(),
        ))
    }

    /// `x` laid out with `to`'s axes (which must include `x`'s): broadcast from its base, and
    /// tiled along dims where `to` folds an axis that `x`, the same in every step, lacks.
    fn materialize(
        &self,
        f: &mut FuncBuilder,
        x: &Folded,
        to: &[Option<usize>],
    ) -> Result<Value, Stop> {
        if x.axes.iter().zip(to).any(|(h, t)| h.is_some() && h != t) {
            return Err(Stop::Unfoldable);
        }
        let target = self.scaled(&x.shape, to);
        // A base dim of size 1 (or a dim the base lacks) stretches to any size by itself.
        let varies = |d: usize| {
            x.dims
                .iter()
                .position(|&e| e == d)
                .is_some_and(|i| x.base.shape()[i] != 1)
        };
        let tiled: Vec<usize> = (0..to.len())
            .filter(|&d| to[d].is_some() && x.axes[d].is_none() && varies(d))
            .collect();
        if tiled.is_empty() {
            return Ok(broadcast(f, &x.base, &target, &x.dims)?);
        }
        let own = broadcast(f, &x.base, &self.scaled(&x.shape, &x.axes), &x.dims)?;
        // One copy per step in front of each tiled dim, then merged into it (steps major).
        let (mut shape, mut dims) = (Vec::new(), Vec::new());
        for (d, &n) in own.shape().iter().enumerate() {
            if let (true, Some(a)) = (tiled.contains(&d), to[d]) {
                shape.push(self.grid[a]);
            }
            dims.push(shape.len());
            shape.push(n);
        }
        let copies = f.broadcast_in_dim(&own, &shape, &dims)?;
        Ok(f.reshape(&copies, &target)?)
    }

    fn op(&mut self, f: &mut FuncBuilder, vop: &Op) -> Result<(), Stop> {
        let kind = match &vop.kind {
            Kind::Value(kind) => kind,
            Kind::Alias(x) => {
                let v = self.version(f, *x)?;
                return self.bind(vop, v);
            }
            Kind::Zeros
            | Kind::Window { .. }
            | Kind::Element { .. }
            | Kind::Update { .. }
            | Kind::If { .. }
            | Kind::Fori { .. }
            | Kind::While { .. } => return Err(Stop::Unfoldable),
        };
        let ty = vop.results.first().map(|r| self.func.ty(*r));
        let ty = ty.map(|t| TensorType::new(t.shape().to_vec(), t.dtype()));
        let result = translate(self, f, kind, ty)?;
        self.bind(vop, result)
    }
}

/// The grid steps side by side within the IR dims, block index major.
impl Layout for Fold<'_> {
    type Val = Folded;
    type Common = Vec<Option<usize>>;
    type Err = Stop;

    fn get(&self, id: ValueId) -> Result<Folded, Stop> {
        self.vals.get(&id).cloned().ok_or_else(|| {
            EmitError::internal(format!("IR value {id} has no StableHLO value")).into()
        })
    }

    fn ir_shape(&self, id: ValueId) -> Vec<usize> {
        self.func.ty(id).shape().to_vec()
    }

    fn grid(&self) -> &[usize] {
        self.grid
    }

    fn base(x: &Folded) -> &Value {
        &x.base
    }

    fn with_base(x: Folded, base: Value) -> Folded {
        Folded { base, ..x }
    }

    /// The values of `ids` laid out with the union of their axes; and that union.
    fn operands(
        &self,
        f: &mut FuncBuilder,
        ids: &[ValueId],
    ) -> Result<(Vec<Value>, Vec<Option<usize>>), Stop> {
        let xs: Vec<Folded> = ids
            .iter()
            .map(|&id| self.get(id))
            .collect::<Result<_, _>>()?;
        let mut axes = vec![None; xs.first().map_or(0, |x| x.axes.len())];
        for x in &xs {
            for (u, h) in axes.iter_mut().zip(&x.axes) {
                match (*u, *h) {
                    (Some(a), Some(b)) if a != b => return Err(Stop::Unfoldable),
                    (None, h) => *u = h,
                    _ => {}
                }
            }
        }
        distinct(&axes)?;
        let vals = xs
            .iter()
            .map(|x| self.materialize(f, x, &axes))
            .collect::<Result<_, _>>()?;
        Ok((vals, axes))
    }

    fn joined(v: Value, shape: Vec<usize>, axes: Vec<Option<usize>>) -> Folded {
        plain(v, shape, axes)
    }

    fn splat_type(ty: &TensorType) -> TensorType {
        TensorType::scalar(ty.dtype)
    }

    fn splat(v: Value, shape: Vec<usize>) -> Folded {
        splat(v, shape)
    }

    fn same(v: Value) -> Folded {
        let axes = vec![None; v.rank()];
        plain(v.clone(), v.shape().to_vec(), axes)
    }

    /// `x` materialized; a dim of `dims` holding steps would mix them.
    fn within(
        &self,
        f: &mut FuncBuilder,
        x: &Folded,
        dims: &[usize],
    ) -> Result<(Value, usize), Stop> {
        if dims.iter().any(|&d| x.axes[d].is_some()) {
            return Err(Stop::Unfoldable);
        }
        Ok((self.materialize(f, x, &x.axes)?, 0))
    }

    fn steps_of(&self, x: Folded, v: Value, shape: Vec<usize>, from: &[Option<usize>]) -> Folded {
        let axes = from.iter().map(|d| d.and_then(|d| x.axes[d])).collect();
        plain(v, shape, axes)
    }

    /// One `dot_general` of the whole operands: their free dims may hold grid axes (one
    /// matmul of all row blocks by all column blocks).
    fn dot_dims(
        &self,
        l: &Folded,
        r: &Folded,
        cl: usize,
        cr: usize,
    ) -> Result<(DotDims, Vec<usize>, Vec<Option<usize>>), Stop> {
        let axes = vec![l.axes[1 - cl], r.axes[1 - cr]];
        distinct(&axes)?;
        let dims = DotDims {
            lhs_batch: Vec::new(),
            rhs_batch: Vec::new(),
            lhs_contract: vec![cl],
            rhs_contract: vec![cr],
        };
        Ok((dims, vec![0, 1], axes))
    }

    fn program_id(&mut self, _f: &mut FuncBuilder, _axis: usize) -> Result<Folded, Stop> {
        Err(Stop::Unfoldable)
    }

    /// Symbolic: the base is broadcast where a use needs it.
    fn broadcast(
        &self,
        _f: &mut FuncBuilder,
        x: Folded,
        dims: &[usize],
        shape: Vec<usize>,
    ) -> Result<Folded, Stop> {
        let mut axes = vec![None; shape.len()];
        for (i, &d) in dims.iter().enumerate() {
            if let Some(a) = x.axes[i] {
                // A folded dim of size 1 cannot stretch: its steps would interleave.
                if x.shape[i] != shape[d] {
                    return Err(Stop::Unfoldable);
                }
                axes[d] = Some(a);
            }
        }
        Ok(Folded {
            base: x.base,
            dims: x.dims.iter().map(|&e| dims[e]).collect(),
            shape,
            axes,
        })
    }

    /// The size-1 dims are a broadcast for later: no reshape to [.., 1].
    fn keep_reduced(
        &self,
        _f: &mut FuncBuilder,
        x: Folded,
        base: Value,
        axes: &[usize],
        shape: Vec<usize>,
    ) -> Result<Folded, Stop> {
        let dims = (0..x.shape.len()).filter(|d| !axes.contains(d)).collect();
        Ok(Folded {
            base,
            dims,
            shape,
            axes: x.axes,
        })
    }
}

impl Fold<'_> {
    fn bind(&mut self, vop: &Op, v: Folded) -> Result<(), Stop> {
        let id = vop.results.first().ok_or_else(|| {
            EmitError::internal(format!("`{}` has no result", vop.origin.kind.name()))
        })?;
        self.vals.insert(*id, v);
        Ok(())
    }
}

/// One value in every step, broadcast where used.
fn splat(base: Value, shape: Vec<usize>) -> Folded {
    let axes = vec![None; shape.len()];
    Folded {
        base,
        dims: Vec::new(),
        shape,
        axes,
    }
}

/// A value already laid out with `axes`.
fn plain(v: Value, shape: Vec<usize>, axes: Vec<Option<usize>>) -> Folded {
    Folded {
        dims: (0..v.rank()).collect(),
        base: v,
        shape,
        axes,
    }
}

/// An axis in two dims of one value would pair step `s` along one with step `t` along the
/// other: not a layout of per-step values.
fn distinct(axes: &[Option<usize>]) -> Result<(), Stop> {
    let mut seen: Vec<usize> = axes.iter().flatten().copied().collect();
    seen.sort_unstable();
    let n = seen.len();
    seen.dedup();
    if seen.len() == n {
        Ok(())
    } else {
        Err(Stop::Unfoldable)
    }
}

/// `base` broadcast to `shape` (itself when that changes nothing).
fn broadcast(
    f: &mut FuncBuilder,
    base: &Value,
    shape: &[usize],
    dims: &[usize],
) -> Result<Value, BuildError> {
    let identity = dims.iter().enumerate().all(|(i, &d)| i == d);
    if identity && base.shape() == shape {
        return Ok(base.clone());
    }
    f.broadcast_in_dim(base, shape, dims)
}
