//! Translates discharged kernel IR (`ir::discharge`: refs are SSA versions) into StableHLO
//! ops, op by op, for the grid loop and the batched form: ref versions, regions and bounds
//! checks here, each traced op by the translator the folded layout shares (`translate.rs`),
//! with this layout's rules for where a value keeps its grid steps.
//!
//! In the grid loop every IR value is one tensor. In the batched form (this is `vmap` over the
//! grid) a value that differs between grid steps carries a leading dim per grid axis it
//! depends on (its `axes`, in axis order): an input block read with `[i, k]` carries axes i
//! and k, `program_id(1)` is an iota carrying axis 1, a constant carries none. Each op is the
//! same op shifted past those dims; an op mixing values broadcasts them to the union of their
//! axes, except `dot`, whose operands' distinct axes become free dims of one `dot_general`
//! (so `x[i] @ y[j]` over a 2-D grid is one matmul, not a broadcast).
//!
//! Per-step control flow in the batched form: an `if` condition that carries axes is
//! if-converted (both branches run, each step selects its results), as is an `if` with cheap
//! branches; an `if` that cannot be (a `while` in a branch) and a `fori` bound that carries
//! axes are reported as [`EmitError::NotBatchable`], and the caller falls back to the grid
//! loop. A slice offset that carries axes reads each step's window with one `gather`
//! where the ref is the same in every step (a scalar-prefetch array read at `program_id`);
//! else it is reported too. Values leaving a region carry every axis (both branches of an
//! `if`, and every trip of a loop, must agree on types).
//!
//! A ref version carries axes like any value: a window write lifts the version and the
//! window to the union of their axes.

use super::checks::{has_dynamic_starts, Access, BoundsCheck, Checker};
use super::error::EmitError;
use super::translate::{grid_axis, translate, Layout};
use crate::dtype::DType;
use crate::ir::discharge::{Discharged, Kind, Op, Region};
use crate::ir::{Offset, OpKind, Operation, ValueId};
use crate::stablehlo::{BinaryOp, DotDims, FuncBuilder, GatherDims, TensorType, Value};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

/// A translated value: `v` has one leading dim per grid axis in `axes` (sorted), then the
/// IR value's own dims.
#[derive(Clone, Debug)]
pub(super) struct Batched {
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
    func: &'a Discharged<'a>,
    grid: Vec<usize>,
    /// The grid axes values may carry (none in the loop form).
    batch_axes: Vec<usize>,
    /// `program_id` per grid axis: a scalar where the axis is looped over, `None` where it
    /// is batched (then it is an iota carrying the axis).
    program_ids: Vec<Option<Value>>,
    /// Values and ref versions.
    vals: HashMap<ValueId, Batched>,
    /// Checked mode (`checks.rs`): traced starts are checked, regions carry the state.
    checks: Option<Checker>,
}

impl<'a> BodyEmitter<'a> {
    /// The translator of one grid step; `program_ids` are its grid indices.
    pub(super) fn step(
        func: &'a Discharged<'a>,
        grid: Vec<usize>,
        program_ids: Vec<Value>,
    ) -> Self {
        let program_ids = program_ids.into_iter().map(Some).collect();
        BodyEmitter {
            func,
            grid,
            batch_axes: Vec::new(),
            program_ids,
            vals: HashMap::new(),
            checks: None,
        }
    }

    /// The translator of all steps along `batch_axes` at once, at one index (`looped`,
    /// scalars) of the other axes.
    pub(super) fn batched(
        func: &'a Discharged<'a>,
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

    /// Sets a ref param's first version; `axes` are the grid axes its leading dims stand for.
    pub(super) fn set_ref(&mut self, param: ValueId, v: Value, axes: Vec<usize>) {
        self.vals.insert(param, Batched { v, axes });
    }

    /// A ref param's last version carrying every batched axis (as it is, in the loop form).
    pub(super) fn ref_contents(
        &self,
        f: &mut FuncBuilder,
        param: ValueId,
    ) -> Result<Value, EmitError> {
        let last = self.func.final_version(param)?;
        self.lift(f, &self.get(last)?, &self.all_axes())
    }

    /// The grid axes the leading dims of `id`'s value stand for.
    pub(super) fn axes_of(&self, id: ValueId) -> Result<Vec<usize>, EmitError> {
        self.get(id).map(|b| b.axes)
    }

    /// The value of `id` broadcast to carry `axes` (a superset of its own, sorted).
    pub(super) fn value_over(
        &self,
        f: &mut FuncBuilder,
        id: ValueId,
        axes: &[usize],
    ) -> Result<Value, EmitError> {
        self.lift(f, &self.get(id)?, axes)
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

    /// The function's ops.
    pub(super) fn emit_body(&mut self, f: &mut FuncBuilder) -> Result<(), EmitError> {
        self.emit_ops(f, &self.func.body.ops)
    }

    fn emit_ops(&mut self, f: &mut FuncBuilder, ops: &[Op]) -> Result<(), EmitError> {
        for op in ops {
            // The StableHLO ops of `op` name the user's line (its regions' ops their own).
            let outer = f.set_loc(Some(op.origin.loc));
            let emitted = self.emit_op(f, op);
            f.set_loc(outer);
            emitted.map_err(|e| e.at(op.origin))?;
        }
        Ok(())
    }

    fn emit_op(&mut self, f: &mut FuncBuilder, vop: &Op) -> Result<(), EmitError> {
        let op = vop.origin;
        let result_ty = vop
            .results
            .first()
            .map(|r| TensorType::new(self.func.ty(*r).shape().to_vec(), self.func.ty(*r).dtype()));
        let ty = || {
            result_ty
                .clone()
                .ok_or_else(|| EmitError::internal(format!("`{}` has no result", op.kind.name())))
        };
        let result = match &vop.kind {
            Kind::Value(kind) => translate(self, f, kind, result_ty.clone())?,
            Kind::Alias(x) => self.get(*x)?,
            Kind::Zeros => Batched::plain(f.full(ty()?, 0.0)?),
            Kind::Window { x, starts, sizes } => self.read_window(f, op, *x, starts, sizes)?,
            Kind::Element { x, indices } => {
                let w = self.read_window(f, op, *x, indices, &vec![1; indices.len()])?;
                let v = f.reshape(&w.v, &self.extents(&w.axes))?;
                Batched { v, axes: w.axes }
            }
            Kind::Update { x, starts, value } => self.write_window(f, op, *x, starts, *value)?,
            Kind::If {
                cond,
                then_region,
                else_region,
            } => return self.emit_if(f, vop, *cond, then_region, else_region),
            Kind::Fori { lo, hi, init, body } => {
                return self.emit_fori(f, vop, *lo, *hi, init, body)
            }
            Kind::While { init, cond, body } => return self.emit_while(f, vop, init, cond, body),
        };
        let id = vop
            .results
            .first()
            .ok_or_else(|| EmitError::internal(format!("`{}` has no result", op.kind.name())))?;
        self.vals.insert(*id, result);
        Ok(())
    }

    /// A static or dynamic window of a ref version; the axes' dims are read whole.
    fn read_window(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        src: ValueId,
        starts: &[Offset],
        sizes: &[usize],
    ) -> Result<Batched, EmitError> {
        let r = self.get(src)?;
        let nb = r.axes.len();
        let full_sizes = [self.extents(&r.axes).as_slice(), sizes].concat();
        let varying = self.varying_axes(starts)?;
        if !varying.is_empty() {
            return self.gather_window(f, op, &r, starts, sizes, &varying);
        }
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

    /// The grid axes the traced starts among `starts` carry (sorted): the steps read
    /// different windows along them.
    fn varying_axes(&self, starts: &[Offset]) -> Result<Vec<usize>, EmitError> {
        let mut axes = BTreeSet::new();
        for s in starts {
            if let Offset::Dynamic(v) = s {
                axes.extend(self.get(*v)?.axes);
            }
        }
        Ok(axes.into_iter().collect())
    }

    /// A window read at starts that differ between the steps of `varying`: one `gather` of
    /// every step's window from `r`, which must be the same in every step (a scalar-prefetch
    /// array read at `program_id`, say). Its starts are clamped as `dynamic_slice`'s are,
    /// so checked mode, which reports them instead, keeps the grid loop.
    fn gather_window(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        r: &Batched,
        starts: &[Offset],
        sizes: &[usize],
        varying: &[usize],
    ) -> Result<Batched, EmitError> {
        if !r.axes.is_empty() || self.checks.is_some() {
            let why = if r.axes.is_empty() { "a checked" } else { "an" };
            return Err(EmitError::NotBatchable {
                kernel: self.func.func.name.clone(),
                reason: format!(
                    "{}: `{}` has {why} offset that depends on the grid step",
                    op.loc,
                    op.kind.name()
                ),
            });
        }
        let lead = self.extents(varying);
        let mut per_step = Vec::with_capacity(starts.len());
        for s in starts {
            per_step.push(match s {
                Offset::Static(s) => {
                    let v = f.scalar(DType::I32, *s as f64)?;
                    f.broadcast_in_dim(&v, &lead, &[])?
                }
                Offset::Dynamic(v) => self.lift(f, &self.get(*v)?, varying)?,
            });
        }
        let v = gather_windows(f, &r.v, &per_step, &lead, sizes)?;
        Ok(Batched {
            v,
            axes: varying.to_vec(),
        })
    }

    /// The ref version `dst` with the window `value` written at `starts`.
    fn write_window(
        &mut self,
        f: &mut FuncBuilder,
        op: &Operation,
        dst: ValueId,
        starts: &[Offset],
        value: ValueId,
    ) -> Result<Batched, EmitError> {
        let (r, v) = (self.get(dst)?, self.get(value)?);
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
        Ok(Batched { v: updated, axes })
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
                kernel: self.func.func.name.clone(),
                reason: format!(
                    "{}: `{}` has {what} that depends on the grid step",
                    op.loc,
                    op.kind.name()
                ),
            });
        }
        Ok(b.v)
    }

    /// `if` with results; the versions of refs either branch stores are among them.
    fn emit_if(
        &mut self,
        f: &mut FuncBuilder,
        vop: &Op,
        cond: ValueId,
        then_r: &Region,
        else_r: &Region,
    ) -> Result<(), EmitError> {
        // Batched, an `if` whose branches are cheap is a select too: XLA copies the values a
        // `stablehlo.if` passes through, and fuses a select into the ops around it.
        let cheap = !self.batch_axes.is_empty()
            && [then_r, else_r].iter().all(|r| cheap(r))
            && !self.checks_in_branches(vop);
        if !self.get(cond)?.axes.is_empty() || cheap {
            return self.emit_selected_if(f, vop, cond, then_r, else_r);
        }
        let c = self.uniform(vop.origin, cond, "a condition")?;
        let checks_before = self.check_state();
        let me = RefCell::new(&mut *self);
        let branch = |f: &mut FuncBuilder, region: &Region| -> Result<Vec<Value>, EmitError> {
            let mut me = me.borrow_mut();
            me.split_check_state(&checks_before)?;
            me.emit_ops(f, &region.ops)?;
            let mut ys = me.yields(f, region)?;
            ys.extend(me.check_state());
            Ok(ys)
        };
        let outs = f.if_else(&c, |f| branch(f, then_r), |f| branch(f, else_r))?;
        let outs = self.split_check_state(&outs)?.to_vec();
        self.bind_results(vop, outs)
    }

    /// Whether, checked, the branches of `if` `vop` have traced starts to check.
    fn checks_in_branches(&self, vop: &Op) -> bool {
        let regions = vop.origin.kind.regions();
        self.checks.is_some() && regions.into_iter().any(has_dynamic_starts)
    }

    /// An `if` whose condition differs between batched steps, if-converted: both branches run
    /// for every step and each result is selected per step. Refused (the grid loop then runs
    /// it) where running the untaken branch could do harm: a `while` there may not end, and in
    /// checked mode its traced starts would be checked (and fail) for steps that skip it.
    fn emit_selected_if(
        &mut self,
        f: &mut FuncBuilder,
        vop: &Op,
        cond: ValueId,
        then_r: &Region,
        else_r: &Region,
    ) -> Result<(), EmitError> {
        let op = vop.origin;
        let refuse = |why: &str| EmitError::NotBatchable {
            kernel: self.func.func.name.clone(),
            reason: format!(
                "{}: `if` has a condition that depends on the grid step, and {why}",
                op.loc
            ),
        };
        if [then_r, else_r].iter().any(|r| has_while(r)) {
            return Err(refuse("a branch has a `while` loop"));
        }
        if self.checks_in_branches(vop) {
            return Err(refuse("a branch has slices checked at traced starts"));
        }
        let mut branch =
            |f: &mut FuncBuilder, region: &Region| -> Result<Vec<Batched>, EmitError> {
                self.emit_ops(f, &region.ops)?;
                region.yields.iter().map(|&y| self.get(y)).collect()
            };
        let (thens, elses) = (branch(f, then_r)?, branch(f, else_r)?);
        if thens.len() != vop.results.len() || elses.len() != vop.results.len() {
            return Err(EmitError::internal(format!(
                "`if` branches yield {} and {} values for {} results",
                thens.len(),
                elses.len(),
                vop.results.len()
            )));
        }
        let c = self.get(cond)?;
        for ((&r, t), e) in vop.results.iter().zip(thens).zip(elses) {
            let axes: Vec<usize> = [&c.axes, &t.axes, &e.axes]
                .into_iter()
                .flatten()
                .copied()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let (t, e) = (self.lift(f, &t, &axes)?, self.lift(f, &e, &axes)?);
            let lead = self.extents(&axes);
            let c = self.lift(f, &c, &axes)?;
            let pred = f.broadcast_in_dim(&c, t.shape(), &(0..lead.len()).collect::<Vec<_>>())?;
            let v = f.select(&pred, &t, &e)?;
            self.vals.insert(r, Batched { v, axes });
        }
        Ok(())
    }

    /// `fori` as a counted `while`; the versions of refs the body stores are carried too.
    fn emit_fori(
        &mut self,
        f: &mut FuncBuilder,
        vop: &Op,
        lo: ValueId,
        hi: ValueId,
        init: &[ValueId],
        body: &Region,
    ) -> Result<(), EmitError> {
        let op = vop.origin;
        let (lo, hi) = (
            self.uniform(op, lo, "a loop bound")?,
            self.uniform(op, hi, "a loop bound")?,
        );
        let mut carried = self.carried(f, init)?;
        carried.extend(self.check_state());
        let refs: Vec<&Value> = carried.iter().collect();
        let me = RefCell::new(&mut *self);
        let outs = f.fori_loop(&lo, &hi, &refs, |f, i, c| {
            let mut me = me.borrow_mut();
            let c = me.split_check_state(c)?;
            let (index, args) = body
                .args
                .split_first()
                .ok_or_else(|| EmitError::internal("fori body without an index".into()))?;
            me.bind(*index, i.clone());
            me.enter(args, c);
            me.emit_ops(f, &body.ops)?;
            let mut ys = me.yields(f, body)?;
            ys.extend(me.check_state());
            Ok::<_, EmitError>(ys)
        })?;
        let outs = self.split_check_state(&outs)?.to_vec();
        self.bind_results(vop, outs)
    }

    /// `while` as `stablehlo.while`; the versions of refs the body stores are carried too
    /// (the condition stores nothing: the tracer rejects that). The condition must be the
    /// same in every batched step. In checked mode a condition with traced starts is checked
    /// outside its region (which yields only the predicate): again at the top of each trip,
    /// and once after the loop for its last, false evaluation; and the loop stops once a
    /// check has failed (a condition reading a clamped window may never turn false).
    fn emit_while(
        &mut self,
        f: &mut FuncBuilder,
        vop: &Op,
        init: &[ValueId],
        cond: &Region,
        body: &Region,
    ) -> Result<(), EmitError> {
        let op = vop.origin;
        let mut carried = self.carried(f, init)?;
        carried.extend(self.check_state());
        let recheck_cond = self.checks.is_some()
            && matches!(&op.kind, OpKind::While { cond, .. } if has_dynamic_starts(cond));
        let refs: Vec<&Value> = carried.iter().collect();
        let me = RefCell::new(&mut *self);
        let outs = f.while_loop(
            &refs,
            |f, c| {
                let mut me = me.borrow_mut();
                // Checked at the top of the body and after the loop instead (see above).
                let c = me.split_check_state(c)?;
                let checks = me.checks.take();
                me.enter(&cond.args, c);
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
                    me.enter(&cond.args, c);
                    me.emit_ops(f, &cond.ops)?;
                }
                me.enter(&body.args, c);
                me.emit_ops(f, &body.ops)?;
                let mut ys = me.yields(f, body)?;
                ys.extend(me.check_state());
                Ok::<_, EmitError>(ys)
            },
        )?;
        let me = me.into_inner();
        let outs = me.split_check_state(&outs)?.to_vec();
        if recheck_cond {
            me.enter(&cond.args, &outs);
            me.emit_ops(f, &cond.ops)?;
        }
        me.bind_results(vop, outs)
    }

    /// A loop's carried values (its own, then ref versions), carrying every axis.
    fn carried(&self, f: &mut FuncBuilder, init: &[ValueId]) -> Result<Vec<Value>, EmitError> {
        let all = self.all_axes();
        init.iter()
            .map(|&v| self.lift(f, &self.get(v)?, &all))
            .collect()
    }

    /// Binds a loop region's args to the carried values, which carry every axis.
    fn enter(&mut self, args: &[ValueId], carried: &[Value]) {
        let all = self.all_axes();
        for (a, v) in args.iter().zip(carried) {
            let axes = all.clone();
            self.vals.insert(*a, Batched { v: v.clone(), axes });
        }
    }

    /// What a region yields (its values, then ref versions), carrying every axis so that all
    /// paths agree on types.
    fn yields(&self, f: &mut FuncBuilder, region: &Region) -> Result<Vec<Value>, EmitError> {
        let all = self.all_axes();
        region
            .yields
            .iter()
            .map(|&y| self.lift(f, &self.get(y)?, &all))
            .collect()
    }

    fn bind_results(&mut self, vop: &Op, outs: Vec<Value>) -> Result<(), EmitError> {
        if outs.len() != vop.results.len() {
            return Err(EmitError::internal(format!(
                "`{}` yields {} values for {} results",
                vop.origin.kind.name(),
                outs.len(),
                vop.results.len()
            )));
        }
        self.enter(&vop.results, &outs);
        Ok(())
    }
}

/// The grid steps in leading dims, one per grid axis a value depends on.
impl Layout for BodyEmitter<'_> {
    type Val = Batched;
    type Common = Vec<usize>;
    type Err = EmitError;

    fn get(&self, id: ValueId) -> Result<Batched, EmitError> {
        self.vals
            .get(&id)
            .cloned()
            .ok_or_else(|| EmitError::internal(format!("IR value {id} has no StableHLO value")))
    }

    fn ir_shape(&self, id: ValueId) -> Vec<usize> {
        self.func.ty(id).shape().to_vec()
    }

    fn grid(&self) -> &[usize] {
        &self.grid
    }

    fn base(x: &Batched) -> &Value {
        &x.v
    }

    fn with_base(x: Batched, v: Value) -> Batched {
        Batched { v, axes: x.axes }
    }

    /// The values of `ids`, broadcast to the union of their axes; and that union.
    fn operands(
        &self,
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

    fn joined(v: Value, _shape: Vec<usize>, axes: Vec<usize>) -> Batched {
        Batched { v, axes }
    }

    fn splat_type(ty: &TensorType) -> TensorType {
        ty.clone()
    }

    fn splat(v: Value, _shape: Vec<usize>) -> Batched {
        Batched::plain(v)
    }

    fn same(v: Value) -> Batched {
        Batched::plain(v)
    }

    /// The leading dims hold the steps: every IR dim is one step's.
    fn within(
        &self,
        _f: &mut FuncBuilder,
        x: &Batched,
        _dims: &[usize],
    ) -> Result<(Value, usize), EmitError> {
        Ok((x.v.clone(), x.axes.len()))
    }

    fn steps_of(
        &self,
        x: Batched,
        v: Value,
        _shape: Vec<usize>,
        _from: &[Option<usize>],
    ) -> Batched {
        Batched { v, axes: x.axes }
    }

    /// Axes both operands carry are batch dims; an axis only one carries is a free dim of
    /// that side.
    fn dot_dims(
        &self,
        l: &Batched,
        r: &Batched,
        cl: usize,
        cr: usize,
    ) -> Result<(DotDims, Vec<usize>, Vec<usize>), EmitError> {
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
            lhs_contract: vec![nl + cl],
            rhs_contract: vec![nr + cr],
        };
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
        Ok((dims, perm, axes))
    }

    fn program_id(&mut self, f: &mut FuncBuilder, axis: usize) -> Result<Batched, EmitError> {
        Ok(match self.program_ids.get(axis) {
            Some(Some(v)) => Batched::plain(v.clone()),
            Some(None) => Batched {
                v: f.iota(TensorType::new([self.grid[axis]], DType::I32), 0)?,
                axes: vec![axis],
            },
            None => return Err(grid_axis(axis)),
        })
    }

    fn broadcast(
        &self,
        f: &mut FuncBuilder,
        b: Batched,
        dims: &[usize],
        shape: Vec<usize>,
    ) -> Result<Batched, EmitError> {
        let nb = b.axes.len();
        let shape = [self.extents(&b.axes), shape].concat();
        let all: Vec<usize> = (0..nb).chain(dims.iter().map(|d| d + nb)).collect();
        let v = if b.v.shape() == shape.as_slice() {
            b.v
        } else {
            f.broadcast_in_dim(&b.v, &shape, &all)?
        };
        Ok(Batched { v, axes: b.axes })
    }

    /// The reduction kept its leading dims; the reduced ones come back as size 1.
    fn keep_reduced(
        &self,
        f: &mut FuncBuilder,
        x: Batched,
        v: Value,
        _axes: &[usize],
        shape: Vec<usize>,
    ) -> Result<Batched, EmitError> {
        let v = f.reshape(&v, &[self.extents(&x.axes), shape].concat())?;
        Ok(Batched { v, axes: x.axes })
    }
}

/// Whether running `region` when its `if` is not taken costs about what a `stablehlo.if`
/// does: no loops and no `dot`, also in nested regions.
fn cheap(region: &Region) -> bool {
    region.ops.iter().all(|op| match &op.kind {
        Kind::While { .. } | Kind::Fori { .. } => false,
        Kind::Value(kind) => !matches!(kind.as_ref(), OpKind::Dot { .. }),
        Kind::If {
            then_region,
            else_region,
            ..
        } => cheap(then_region) && cheap(else_region),
        _ => true,
    })
}

/// Whether `region` or one nested in it has a `while` loop.
fn has_while(region: &Region) -> bool {
    region.ops.iter().any(|op| match &op.kind {
        Kind::While { .. } => true,
        Kind::If {
            then_region,
            else_region,
            ..
        } => has_while(then_region) || has_while(else_region),
        Kind::Fori { body, .. } => has_while(body),
        _ => false,
    })
}

/// Every step's window of `x` at once, `lead ++ sizes`: `starts[d]` holds each step's start
/// along dim `d` (i32, of shape `lead`). `gather` clamps a start so that the window fits, as
/// `dynamic_slice` does.
pub(super) fn gather_windows(
    f: &mut FuncBuilder,
    x: &Value,
    starts: &[Value],
    lead: &[usize],
    sizes: &[usize],
) -> Result<Value, EmitError> {
    let one = [lead, &[1]].concat();
    let columns = starts
        .iter()
        .map(|s| f.reshape(s, &one))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&Value> = columns.iter().collect();
    let indices = f.concatenate(&refs, lead.len())?;
    let n = lead.len();
    let dims = GatherDims {
        offset_dims: (n..n + sizes.len()).collect(),
        collapsed_slice_dims: Vec::new(),
        start_index_map: (0..sizes.len()).collect(),
        index_vector_dim: n,
    };
    Ok(f.gather(x, &indices, &dims, sizes)?)
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
