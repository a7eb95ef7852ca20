//! Translates kernel-IR ops into StableHLO ops. One translator serves both forms.
//!
//! In the grid loop every IR value is one tensor. In the batched form (this is `vmap` over the
//! grid) a value that differs between grid steps carries a leading dim per grid axis it
//! depends on (its `axes`, in axis order): an input block read with `[i, k]` carries axes i
//! and k, `program_id(1)` is an iota carrying axis 1, a constant carries none. Each op is the
//! same op shifted past those dims; an op mixing values broadcasts them to the union of their
//! axes, except `dot`, whose operands' distinct axes become free dims of one `dot_general`
//! (so `x[i] @ y[j]` over a 2-D grid is one matmul, not a broadcast).
//!
//! The batched form cannot express per-step control flow: an `if` condition, `fori` bound or
//! slice offset that carries axes is reported as [`EmitError::NotBatchable`], and the caller
//! falls back to the grid loop. Values leaving a region carry every axis (both branches of an
//! `if`, and every trip of a loop, must agree on types).
//!
//! Refs are not values in StableHLO: the translator keeps the current contents of each ref
//! (its block) and turns loads into reads of that state and stores into replacing it.

use super::checks::{has_dynamic_starts, Access, BoundsCheck, Checker};
use super::error::EmitError;
use crate::dtype::DType;
use crate::ir::{Func, Literal, Offset, OpKind, Operation, Region, ValueId};
use crate::stablehlo::{BinaryOp, DotDims, FuncBuilder, Precision, TensorType, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A translated value: `v` has one leading dim per grid axis in `axes` (sorted), then the
/// IR value's own dims.
#[derive(Clone, Debug)]
struct Batched {
    v: Value,
    axes: Vec<usize>,
}

impl Batched {
    fn plain(v: Value) -> Self {
        Batched {
            v,
            axes: Vec::new(),
        }
    }
}

pub(super) struct BodyEmitter<'a> {
    func: &'a Func,
    grid: Vec<usize>,
    /// The grid axes values may carry (none in the loop form).
    batch_axes: Vec<usize>,
    /// `program_id` per grid axis: a scalar where the axis is looped over, `None` where it
    /// is batched (then it is an iota carrying the axis).
    program_ids: Vec<Option<Value>>,
    vals: HashMap<ValueId, Batched>,
    /// Current contents of each ref param, keyed by the ref's IR value.
    refs: BTreeMap<ValueId, Batched>,
    /// Checked mode (`checks.rs`): traced starts are checked, regions carry the state.
    checks: Option<Checker>,
}

impl<'a> BodyEmitter<'a> {
    /// The translator of one grid step; `program_ids` are its grid indices.
    pub(super) fn step(func: &'a Func, grid: Vec<usize>, program_ids: Vec<Value>) -> Self {
        let program_ids = program_ids.into_iter().map(Some).collect();
        BodyEmitter {
            func,
            grid,
            batch_axes: Vec::new(),
            program_ids,
            vals: HashMap::new(),
            refs: BTreeMap::new(),
            checks: None,
        }
    }

    /// The translator of all steps along `batch_axes` at once, at one index (`looped`,
    /// scalars) of the other axes.
    pub(super) fn batched(
        func: &'a Func,
        grid: Vec<usize>,
        batch_axes: Vec<usize>,
        looped: &[(usize, Value)],
    ) -> Self {
        let program_ids = (0..grid.len())
            .map(|a| looped.iter().find(|(x, _)| *x == a).map(|(_, v)| v.clone()))
            .collect();
        BodyEmitter {
            func,
            grid,
            batch_axes,
            program_ids,
            vals: HashMap::new(),
            refs: BTreeMap::new(),
            checks: None,
        }
    }

    /// Turns checked mode on (with `Some`) for the ops emitted next.
    pub(super) fn set_checks(&mut self, checks: Option<Checker>) {
        self.checks = checks;
    }

    /// The checker, with every check emitted so far (`None` when unchecked).
    pub(super) fn take_checks(&mut self) -> Option<Checker> {
        self.checks.take()
    }

    /// The running bounds-check state, which regions yield and loops carry (none unchecked).
    fn check_state(&self) -> Vec<Value> {
        self.checks.as_ref().map(Checker::state).unwrap_or_default()
    }

    /// Takes the bounds-check state from the tail of `values` (as `check_state` appended it);
    /// returns the values before it.
    fn split_check_state<'v>(&mut self, values: &'v [Value]) -> Result<&'v [Value], EmitError> {
        Checker::split_state(&mut self.checks, values)
    }

    /// Checks each traced start of `starts` (ops' window `sizes` in a ref of `shape`).
    fn check_starts(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        side: &'static str,
        starts: &[Offset],
        idx: &[Value],
        sizes: &[usize],
        shape: &[usize],
    ) -> Result<(), EmitError> {
        if self.checks.is_none() {
            return Ok(());
        }
        // A checked start carries no batched axis (`checks.rs`): it fails at every index of
        // those, so the step names index 0 there.
        let step = self
            .program_ids
            .iter()
            .map(|id| match id {
                Some(v) => Ok(v.clone()),
                None => f.scalar(DType::I32, 0.0),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let Some(checks) = self.checks.as_mut() else {
            return Ok(());
        };
        let side = matches!(op.kind, OpKind::DmaStart(_)).then_some(side);
        for (dim, (s, start)) in starts.iter().zip(idx).enumerate() {
            if let Offset::Dynamic(_) = s {
                let check = BoundsCheck {
                    loc: op.loc,
                    access: Access::Op {
                        op: op.kind.name(),
                        side,
                    },
                    dim,
                    size: sizes[dim],
                    shape: shape.to_vec(),
                };
                checks.check(f, start, &step, check)?;
            }
        }
        Ok(())
    }

    /// Binds an IR value (a param of an index map, say) to a StableHLO value.
    pub(super) fn bind(&mut self, id: ValueId, v: Value) {
        self.vals.insert(id, Batched::plain(v));
    }

    /// The value of `id` (in the loop form, where values carry no axes).
    pub(super) fn value(&self, id: ValueId) -> Result<Value, EmitError> {
        self.get(id).map(|b| b.v)
    }

    /// Sets a ref's contents; `axes` are the grid axes its leading dims stand for.
    pub(super) fn set_ref(&mut self, param: ValueId, v: Value, axes: Vec<usize>) {
        self.refs.insert(param, Batched { v, axes });
    }

    /// A ref's contents carrying every batched axis (as they are, in the loop form).
    pub(super) fn ref_contents(
        &self,
        f: &mut FuncBuilder,
        param: ValueId,
    ) -> Result<Value, EmitError> {
        self.lift(f, &self.ref_state(param)?, &self.all_axes())
    }

    fn get(&self, id: ValueId) -> Result<Batched, EmitError> {
        self.vals
            .get(&id)
            .cloned()
            .ok_or_else(|| EmitError::internal(format!("IR value {id} has no StableHLO value")))
    }

    fn ref_state(&self, id: ValueId) -> Result<Batched, EmitError> {
        self.refs
            .get(&id)
            .cloned()
            .ok_or_else(|| EmitError::internal(format!("IR ref {id} has no contents")))
    }

    fn all_axes(&self) -> Vec<usize> {
        self.batch_axes.clone()
    }

    /// The leading dims standing for `axes`.
    fn extents(&self, axes: &[usize]) -> Vec<usize> {
        axes.iter().map(|&a| self.grid[a]).collect()
    }

    /// `b` broadcast to carry `to` (a superset of its axes, sorted).
    fn lift(&self, f: &mut FuncBuilder, b: &Batched, to: &[usize]) -> Result<Value, EmitError> {
        if b.axes == to {
            return Ok(b.v.clone());
        }
        let own = &b.v.shape()[b.axes.len()..];
        let shape = [self.extents(to).as_slice(), own].concat();
        let dims: Vec<usize> = b
            .axes
            .iter()
            .map(|a| {
                to.iter()
                    .position(|t| t == a)
                    .ok_or_else(|| EmitError::internal(format!("axis {a} missing from {to:?}")))
            })
            .chain((0..own.len()).map(|d| Ok(to.len() + d)))
            .collect::<Result<_, _>>()?;
        Ok(f.broadcast_in_dim(&b.v, &shape, &dims)?)
    }

    /// The values of `ids`, broadcast to the union of their axes; and that union.
    fn operands(
        &mut self,
        f: &mut FuncBuilder,
        ids: &[ValueId],
    ) -> Result<(Vec<Value>, Vec<usize>), EmitError> {
        let bs: Vec<Batched> = ids
            .iter()
            .map(|&id| self.get(id))
            .collect::<Result<_, _>>()?;
        let axes: Vec<usize> = bs
            .iter()
            .flat_map(|b| b.axes.iter().copied())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let vals = bs
            .iter()
            .map(|b| self.lift(f, b, &axes))
            .collect::<Result<_, _>>()?;
        Ok((vals, axes))
    }

    pub(super) fn emit_ops(
        &mut self,
        f: &mut FuncBuilder,
        ops: &[Operation],
    ) -> Result<(), EmitError> {
        for op in ops {
            // The StableHLO ops of `op` name the user's line (its regions' ops their own).
            let outer = f.set_loc(Some(op.loc));
            let emitted = self.emit_op(f, op);
            f.set_loc(outer);
            emitted.map_err(|e| e.at(op))?;
        }
        Ok(())
    }

    fn emit_op(&mut self, f: &mut FuncBuilder, op: &Operation) -> Result<(), EmitError> {
        let ty = op
            .results
            .first()
            .map(|r| TensorType::new(self.func.ty(*r).shape().to_vec(), self.func.ty(*r).dtype()));
        let ty = || {
            ty.clone()
                .ok_or_else(|| EmitError::internal(format!("`{}` has no result", op.kind.name())))
        };
        let result = match &op.kind {
            OpKind::Constant { value } => Batched::plain(match *value {
                Literal::Int(i) if !ty()?.dtype.is_float() => f.full_int(ty()?, i.into())?,
                v => f.full(ty()?, v.as_f64())?,
            }),
            OpKind::ProgramId { axis } => match self.program_ids.get(*axis) {
                Some(Some(v)) => Batched::plain(v.clone()),
                Some(None) => Batched {
                    v: f.iota(TensorType::new([self.grid[*axis]], DType::I32), 0)?,
                    axes: vec![*axis],
                },
                None => return Err(grid_axis(*axis)),
            },
            OpKind::NumPrograms { axis } => {
                let n = *self.grid.get(*axis).ok_or_else(|| grid_axis(*axis))?;
                Batched::plain(f.scalar(DType::I32, n as f64)?)
            }
            OpKind::Load { src } => self.ref_state(*src)?,
            OpKind::Store { dst, value } => {
                let v = self.get(*value)?;
                self.refs.insert(*dst, v);
                return Ok(());
            }
            OpKind::LoadSlice { src, starts, sizes } => {
                self.read_window(f, op, *src, starts, sizes)?
            }
            OpKind::LoadElement { src, indices } => {
                let w = self.read_window(f, op, *src, indices, &vec![1; indices.len()])?;
                let v = f.reshape(&w.v, &self.extents(&w.axes))?;
                Batched { v, axes: w.axes }
            }
            OpKind::StoreSlice { dst, starts, value } => {
                return self.write_window(f, op, *dst, starts, *value)
            }
            OpKind::StoreMasked { .. }
            | OpKind::PrngSeed { .. }
            | OpKind::PrngRandomBits { .. } => {
                return Err(EmitError::internal(format!(
                    "{} reached the translator: desugar.rs rewrites it first",
                    op.kind.name()
                )))
            }
            OpKind::StoreElement {
                dst,
                indices,
                value,
            } => return self.write_window(f, op, *dst, indices, *value),
            OpKind::Unary { op: u, x } => {
                let b = self.get(*x)?;
                Batched {
                    v: f.unary(u.info().stablehlo, &b.v)?,
                    axes: b.axes,
                }
            }
            OpKind::Cast { x } => {
                let b = self.get(*x)?;
                Batched {
                    v: f.convert(&b.v, ty()?.dtype)?,
                    axes: b.axes,
                }
            }
            // A promise for libtpu's alignment proofs: the value itself.
            OpKind::AssumeMultiple { x, .. } => self.get(*x)?,
            OpKind::Bitcast { x } => {
                let b = self.get(*x)?;
                Batched {
                    v: f.bitcast_packed(&b.v, ty()?.dtype)?,
                    axes: b.axes,
                }
            }
            OpKind::Slice { x, starts, strides } => {
                let b = self.get(*x)?;
                let nb = b.axes.len();
                let extents = self.extents(&b.axes);
                let sizes = ty()?.shape;
                let start = [vec![0; nb], starts.clone()].concat();
                let stride = [vec![1; nb], strides.clone()].concat();
                let limit = [
                    extents,
                    (0..sizes.len())
                        .map(|d| starts[d] + strides[d] * (sizes[d] - 1) + 1)
                        .collect(),
                ]
                .concat();
                Batched {
                    v: f.slice(&b.v, &start, &limit, &stride)?,
                    axes: b.axes,
                }
            }
            OpKind::Binary { op: b, lhs, rhs } => {
                let (v, axes) = self.operands(f, &[*lhs, *rhs])?;
                Batched {
                    v: f.binary(b.info().stablehlo, &v[0], &v[1])?,
                    axes,
                }
            }
            OpKind::Compare { op: c, lhs, rhs } => {
                let (v, axes) = self.operands(f, &[*lhs, *rhs])?;
                Batched {
                    v: f.compare(c.info().stablehlo, &v[0], &v[1])?,
                    axes,
                }
            }
            OpKind::Select {
                cond,
                on_true,
                on_false,
            } => {
                let (v, axes) = self.operands(f, &[*cond, *on_true, *on_false])?;
                Batched {
                    v: f.select(&v[0], &v[1], &v[2])?,
                    axes,
                }
            }
            OpKind::Iota { dim } => Batched::plain(f.iota(ty()?, *dim)?),
            OpKind::Broadcast { x, dims } => {
                let b = self.get(*x)?;
                let nb = b.axes.len();
                let shape = [self.extents(&b.axes), ty()?.shape].concat();
                let all: Vec<usize> = (0..nb).chain(dims.iter().map(|d| d + nb)).collect();
                let v = if b.v.shape() == shape.as_slice() {
                    b.v
                } else {
                    f.broadcast_in_dim(&b.v, &shape, &all)?
                };
                Batched { v, axes: b.axes }
            }
            OpKind::Reshape { x } => {
                let b = self.get(*x)?;
                let v = f.reshape(&b.v, &[self.extents(&b.axes), ty()?.shape].concat())?;
                Batched { v, axes: b.axes }
            }
            OpKind::Transpose { x, perm } => {
                let b = self.get(*x)?;
                let nb = b.axes.len();
                let all: Vec<usize> = (0..nb).chain(perm.iter().map(|p| p + nb)).collect();
                Batched {
                    v: f.transpose(&b.v, &all)?,
                    axes: b.axes,
                }
            }
            OpKind::Reduce {
                op: r,
                x,
                axes,
                keepdims,
            } => {
                let b = self.get(*x)?;
                let shifted: Vec<usize> = axes.iter().map(|a| a + b.axes.len()).collect();
                Batched {
                    v: f.reduce_kind(&b.v, r.info().stablehlo, &shifted, *keepdims)?,
                    axes: b.axes,
                }
            }
            OpKind::Scan { op: r, x, axis } => {
                let b = self.get(*x)?;
                Batched {
                    v: f.scan_kind(&b.v, r.info().stablehlo, axis + b.axes.len())?,
                    axes: b.axes,
                }
            }
            OpKind::Dot {
                lhs,
                rhs,
                transpose_lhs,
                transpose_rhs,
            } => self.dot(f, ty()?.dtype, *lhs, *rhs, *transpose_lhs, *transpose_rhs)?,
            OpKind::If {
                cond,
                then_region,
                else_region,
            } => return self.emit_if(f, op, *cond, then_region, else_region),
            OpKind::Fori { lo, hi, init, body } => {
                return self.emit_fori(f, op, *lo, *hi, init, body)
            }
            OpKind::While { init, cond, body } => return self.emit_while(f, op, init, cond, body),
            // The CPU forms run a DMA synchronously: the copy happens at its start and the
            // wait has nothing left to do (the interpreter checks the start/wait protocol).
            OpKind::DmaStart(c) => {
                let w = self.read_window(f, op, c.src, &c.src_starts, &c.sizes)?;
                return self.write_batched(f, op, c.dst, &c.dst_starts, w);
            }
            OpKind::DmaWait(_) => return Ok(()),
            // Scoped buffers are zeroed tensors for the region's ops, which run inline.
            OpKind::RunScoped { body } => {
                for a in &body.args {
                    let t = self.func.ty(*a);
                    let zeros = f.full(TensorType::new(t.shape().to_vec(), t.dtype()), 0.0)?;
                    self.set_ref(*a, zeros, Vec::new());
                }
                self.emit_ops(f, &body.ops)?;
                for (r, y) in op.results.iter().zip(&body.yields) {
                    let v = self.get(*y)?;
                    self.vals.insert(*r, v);
                }
                return Ok(());
            }
        };
        let id = op
            .results
            .first()
            .ok_or_else(|| EmitError::internal(format!("`{}` has no result", op.kind.name())))?;
        self.vals.insert(*id, result);
        Ok(())
    }

    /// `dot` accumulates in f32 (f64 for f64): operands are converted first, then contracted
    /// at full precision, so bf16 inputs give the f32 products the IR promises. Axes both
    /// operands carry are batch dims; an axis only one carries is a free dim of that side.
    fn dot(
        &mut self,
        f: &mut FuncBuilder,
        acc: DType,
        lhs: ValueId,
        rhs: ValueId,
        tl: bool,
        tr: bool,
    ) -> Result<Batched, EmitError> {
        let (l, r) = (self.get(lhs)?, self.get(rhs)?);
        let (lv, rv) = (f.convert(&l.v, acc)?, f.convert(&r.v, acc)?);
        let shared: Vec<usize> = l
            .axes
            .iter()
            .filter(|a| r.axes.contains(a))
            .copied()
            .collect();
        let pos = |axes: &[usize], a: &usize| axes.iter().position(|x| x == a).unwrap_or(0);
        let (nl, nr) = (l.axes.len(), r.axes.len());
        let dims = DotDims {
            lhs_batch: shared.iter().map(|a| pos(&l.axes, a)).collect(),
            rhs_batch: shared.iter().map(|a| pos(&r.axes, a)).collect(),
            lhs_contract: vec![nl + usize::from(!tl)],
            rhs_contract: vec![nr + usize::from(tr)],
        };
        let out = f.dot_general(&lv, &rv, &dims, Precision::Highest)?;
        // dot_general's dims: shared axes, lhs-only axes, m, rhs-only axes, n.
        let l_only = l.axes.iter().filter(|a| !shared.contains(a));
        let r_only: Vec<usize> = r
            .axes
            .iter()
            .filter(|a| !shared.contains(a))
            .copied()
            .collect();
        let mut labels: Vec<Option<usize>> =
            shared.iter().chain(l_only).map(|&a| Some(a)).collect();
        let m_at = labels.len();
        labels.push(None);
        labels.extend(r_only.iter().map(|&a| Some(a)));
        let axes: Vec<usize> = l
            .axes
            .iter()
            .chain(&r.axes)
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let perm: Vec<usize> = axes
            .iter()
            .map(|a| labels.iter().position(|x| *x == Some(*a)).unwrap_or(0))
            .chain([m_at, labels.len()])
            .collect();
        Ok(Batched {
            v: f.transpose(&out, &perm)?,
            axes,
        })
    }

    /// A static or dynamic window of a ref's contents; the axes' dims are read whole.
    fn read_window(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        src: ValueId,
        starts: &[Offset],
        sizes: &[usize],
    ) -> Result<Batched, EmitError> {
        let r = self.ref_state(src)?;
        let nb = r.axes.len();
        let full_sizes = [self.extents(&r.axes).as_slice(), sizes].concat();
        let v = if let Some(st) = static_starts(starts) {
            let lo = [vec![0; nb], st].concat();
            let hi: Vec<usize> = lo.iter().zip(&full_sizes).map(|(a, b)| a + b).collect();
            f.slice(&r.v, &lo, &hi, &vec![1; lo.len()])?
        } else {
            let idx = self.offsets(f, op, nb, starts)?;
            let shape = &r.v.shape()[nb..];
            self.check_starts(f, op, "source", starts, &idx[nb..], sizes, shape)?;
            let refs: Vec<&Value> = idx.iter().collect();
            f.dynamic_slice(&r.v, &refs, &full_sizes)?
        };
        Ok(Batched { v, axes: r.axes })
    }

    /// `store_slice`/`store_element`: the ref's contents with `value` written at `starts`.
    fn write_window(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        dst: ValueId,
        starts: &[Offset],
        value: ValueId,
    ) -> Result<(), EmitError> {
        let v = self.get(value)?;
        self.write_batched(f, op, dst, starts, v)
    }

    /// The ref's contents with the window `v` written at `starts`.
    fn write_batched(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        dst: ValueId,
        starts: &[Offset],
        v: Batched,
    ) -> Result<(), EmitError> {
        let r = self.ref_state(dst)?;
        let axes: Vec<usize> = r
            .axes
            .iter()
            .chain(&v.axes)
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let (rv, vv) = (self.lift(f, &r, &axes)?, self.lift(f, &v, &axes)?);
        let nb = axes.len();
        // A scalar stored into one element becomes a window of ones.
        let ones = vec![1; starts.len().saturating_sub(vv.rank() - nb)];
        let vv = f.reshape(
            &vv,
            &[&self.extents(&axes)[..], &ones[..], &vv.shape()[nb..]].concat(),
        )?;
        let idx = self.offsets(f, op, nb, starts)?;
        let (shape, sizes) = (&rv.shape()[nb..], &vv.shape()[nb..]);
        self.check_starts(f, op, "destination", starts, &idx[nb..], sizes, shape)?;
        let refs: Vec<&Value> = idx.iter().collect();
        let updated = f.dynamic_update_slice(&rv, &vv, &refs)?;
        self.refs.insert(dst, Batched { v: updated, axes });
        Ok(())
    }

    /// Start indices as i32 scalars (zeros for `nb` leading dims). An offset that differs
    /// between grid steps would need a gather: not batchable.
    fn offsets(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        nb: usize,
        starts: &[Offset],
    ) -> Result<Vec<Value>, EmitError> {
        let mut out = Vec::with_capacity(nb + starts.len());
        for _ in 0..nb {
            out.push(f.scalar(DType::I32, 0.0)?);
        }
        for s in starts {
            out.push(match s {
                Offset::Static(s) => f.scalar(DType::I32, *s as f64)?,
                Offset::Dynamic(v) => self.uniform(op, *v, "a slice offset")?,
            });
        }
        Ok(out)
    }

    /// The value of `id`, which must be the same in every grid step (carry no axes).
    fn uniform(&self, op: &Operation, id: ValueId, what: &str) -> Result<Value, EmitError> {
        let b = self.get(id)?;
        if !b.axes.is_empty() {
            return Err(EmitError::NotBatchable {
                kernel: self.func.name.clone(),
                reason: format!(
                    "{}: `{}` has {what} that depends on the grid step",
                    op.loc,
                    op.kind.name()
                ),
            });
        }
        Ok(b.v)
    }

    /// `if` with results; refs stored in either branch are threaded through as extra results.
    fn emit_if(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        cond: ValueId,
        then_r: &Region,
        else_r: &Region,
    ) -> Result<(), EmitError> {
        let c = self.uniform(op, cond, "a condition")?;
        let stored: Vec<ValueId> = stored_refs(then_r)
            .union(&stored_refs(else_r))
            .copied()
            .collect();
        let before = self.refs.clone();
        let checks_before = self.check_state();
        let me = RefCell::new(&mut *self);
        let branch = |f: &mut FuncBuilder, region: &Region| -> Result<Vec<Value>, EmitError> {
            let mut me = me.borrow_mut();
            me.refs = before.clone();
            me.split_check_state(&checks_before)?;
            me.emit_ops(f, &region.ops)?;
            let mut ys = me.yields(f, region, &stored)?;
            ys.extend(me.check_state());
            Ok(ys)
        };
        let outs = f.if_else(&c, |f| branch(f, then_r), |f| branch(f, else_r))?;
        let outs = self.split_check_state(&outs)?.to_vec();
        self.bind_results(op, &stored, outs)
    }

    /// `fori` as a counted `while`; refs stored in the body are carried too.
    fn emit_fori(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        lo: ValueId,
        hi: ValueId,
        init: &[ValueId],
        body: &Region,
    ) -> Result<(), EmitError> {
        let (lo, hi) = (
            self.uniform(op, lo, "a loop bound")?,
            self.uniform(op, hi, "a loop bound")?,
        );
        let stored: Vec<ValueId> = stored_refs(body).into_iter().collect();
        let all = self.all_axes();
        let mut carried = Vec::new();
        for &v in init {
            carried.push(self.lift(f, &self.get(v)?, &all)?);
        }
        for &r in &stored {
            carried.push(self.lift(f, &self.ref_state(r)?, &all)?);
        }
        carried.extend(self.check_state());
        let refs: Vec<&Value> = carried.iter().collect();
        let me = RefCell::new(&mut *self);
        let outs = f.fori_loop(&lo, &hi, &refs, |f, i, c| {
            let mut me = me.borrow_mut();
            let c = me.split_check_state(c)?;
            let (vals, states) = c.split_at(init.len());
            let (index, args) = body
                .args
                .split_first()
                .ok_or_else(|| EmitError::internal("fori body without an index".into()))?;
            me.bind(*index, i.clone());
            for (a, v) in args.iter().zip(vals) {
                me.vals.insert(
                    *a,
                    Batched {
                        v: v.clone(),
                        axes: all.clone(),
                    },
                );
            }
            for (r, s) in stored.iter().zip(states) {
                me.refs.insert(
                    *r,
                    Batched {
                        v: s.clone(),
                        axes: all.clone(),
                    },
                );
            }
            me.emit_ops(f, &body.ops)?;
            let mut ys = me.yields(f, body, &stored)?;
            ys.extend(me.check_state());
            Ok::<_, EmitError>(ys)
        })?;
        let outs = self.split_check_state(&outs)?.to_vec();
        self.bind_results(op, &stored, outs)
    }

    /// `while` as `stablehlo.while`; refs stored in the body are carried too (the condition
    /// stores nothing: the tracer rejects that). The condition must be the same in every
    /// batched step. In checked mode a condition with traced starts is checked outside its
    /// region (which yields only the predicate): again at the top of each trip, and once
    /// after the loop for its last, false evaluation; and the loop stops once a check has
    /// failed (a condition reading a clamped window may never turn false).
    fn emit_while(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        init: &[ValueId],
        cond: &Region,
        body: &Region,
    ) -> Result<(), EmitError> {
        let stored: Vec<ValueId> = stored_refs(body).into_iter().collect();
        let all = self.all_axes();
        let mut carried = Vec::new();
        for &v in init {
            carried.push(self.lift(f, &self.get(v)?, &all)?);
        }
        for &r in &stored {
            carried.push(self.lift(f, &self.ref_state(r)?, &all)?);
        }
        carried.extend(self.check_state());
        let recheck_cond = self.checks.is_some() && has_dynamic_starts(cond);
        let refs: Vec<&Value> = carried.iter().collect();
        let me = RefCell::new(&mut *self);
        let enter = |me: &mut BodyEmitter, args: &[ValueId], c: &[Value]| {
            let (vals, states) = c.split_at(init.len());
            for (a, v) in args.iter().zip(vals) {
                me.vals.insert(
                    *a,
                    Batched {
                        v: v.clone(),
                        axes: all.clone(),
                    },
                );
            }
            for (r, s) in stored.iter().zip(states) {
                me.refs.insert(
                    *r,
                    Batched {
                        v: s.clone(),
                        axes: all.clone(),
                    },
                );
            }
        };
        let outs = f.while_loop(
            &refs,
            |f, c| {
                let mut me = me.borrow_mut();
                // Checked at the top of the body and after the loop instead (see above).
                let c = me.split_check_state(c)?;
                let checks = me.checks.take();
                enter(&mut me, &cond.args, c);
                me.emit_ops(f, &cond.ops)?;
                let y = *cond
                    .yields
                    .first()
                    .ok_or_else(|| EmitError::internal("while condition yields nothing".into()))?;
                let go_on = me.uniform(op, y, "a loop condition")?;
                me.checks = checks;
                match &me.checks {
                    Some(checks) => {
                        let none_failed = checks.none_failed(f)?;
                        Ok(f.binary(BinaryOp::And, &go_on, &none_failed)?)
                    }
                    None => Ok(go_on),
                }
            },
            |f, c| {
                let mut me = me.borrow_mut();
                let c = me.split_check_state(c)?;
                if recheck_cond {
                    enter(&mut me, &cond.args, c);
                    me.emit_ops(f, &cond.ops)?;
                }
                enter(&mut me, &body.args, c);
                me.emit_ops(f, &body.ops)?;
                let mut ys = me.yields(f, body, &stored)?;
                ys.extend(me.check_state());
                Ok::<_, EmitError>(ys)
            },
        )?;
        let me = me.into_inner();
        let outs = me.split_check_state(&outs)?.to_vec();
        if recheck_cond {
            enter(me, &cond.args, &outs);
            me.emit_ops(f, &cond.ops)?;
        }
        me.bind_results(op, &stored, outs)
    }

    /// What a region yields: its values, then the contents of `stored` refs, carrying every
    /// axis so that all paths agree on types.
    fn yields(
        &self,
        f: &mut FuncBuilder,
        region: &Region,
        stored: &[ValueId],
    ) -> Result<Vec<Value>, EmitError> {
        let all = self.all_axes();
        let mut ys = Vec::new();
        for &y in &region.yields {
            ys.push(self.lift(f, &self.get(y)?, &all)?);
        }
        for &r in stored {
            ys.push(self.lift(f, &self.ref_state(r)?, &all)?);
        }
        Ok(ys)
    }

    fn bind_results(
        &mut self,
        op: &Operation,
        stored: &[ValueId],
        mut outs: Vec<Value>,
    ) -> Result<(), EmitError> {
        let all = self.all_axes();
        let states = outs.split_off(op.results.len());
        for (r, v) in op.results.iter().zip(outs) {
            self.vals.insert(
                *r,
                Batched {
                    v,
                    axes: all.clone(),
                },
            );
        }
        for (r, s) in stored.iter().zip(states) {
            self.refs.insert(
                *r,
                Batched {
                    v: s,
                    axes: all.clone(),
                },
            );
        }
        Ok(())
    }
}

/// Refs written anywhere inside `region` (nested regions included).
pub(super) fn stored_refs(region: &Region) -> BTreeSet<ValueId> {
    let mut out = BTreeSet::new();
    for op in &region.ops {
        match &op.kind {
            OpKind::Store { dst, .. }
            | OpKind::StoreSlice { dst, .. }
            | OpKind::StoreElement { dst, .. }
            | OpKind::DmaStart(crate::ir::DmaCopy { dst, .. }) => {
                out.insert(*dst);
            }
            // Its own buffers die with it; what it writes outside is carried like a loop's.
            OpKind::RunScoped { body } => out.extend(
                stored_refs(body)
                    .into_iter()
                    .filter(|r| !body.args.contains(r)),
            ),
            k => k
                .regions()
                .into_iter()
                .for_each(|r| out.extend(stored_refs(r))),
        }
    }
    out
}

fn static_starts(starts: &[Offset]) -> Option<Vec<usize>> {
    starts
        .iter()
        .map(|s| {
            if let Offset::Static(s) = s {
                Some(*s)
            } else {
                None
            }
        })
        .collect()
}

pub(super) fn grid_axis(axis: usize) -> EmitError {
    EmitError::internal(format!("grid axis {axis} does not exist"))
}
