//! When keeping scratch per parallel grid point (the batched form) gives the grid loop's
//! result, where one scratch is shared by all steps: when no step reads what another
//! parallel point left in it. [`Form::Auto`](super::Form::Auto) asks before it batches a
//! grid with `arbitrary` axes, so that it gives the interpreter's answer even for a kernel
//! that breaks the promise `parallel` makes.
//!
//! A parallel point's steps run back to back in the grid loop when every parallel axis of
//! extent > 1 comes before every `arbitrary` one of extent > 1. Then only the first of them
//! (all `arbitrary` program ids 0) sees another point's scratch, and the proof is that the
//! scratch's contents at entry cannot reach anything that step leaves behind (outputs and
//! scratch): the body is evaluated with those program ids known, an `if` whose condition
//! folds takes one branch, and the entry contents are followed through every value they
//! flow into (`if Pallas' pl.when(program_id(k) == 0): acc[...] = 0` passes). Otherwise
//! every step must pass it, with no program id known.

use super::plan::Plan;
use crate::dtype::DType;
use crate::ir::discharge::{Discharged, Kind, Op, Region};
use crate::ir::{BinaryOp, Literal, Offset, OpKind, ValueId};
use std::collections::{BTreeSet, HashMap};

/// Whether no step of `plan` can read scratch contents another parallel point wrote.
pub(super) fn scratch_is_private(plan: &Plan, body: &Discharged) -> bool {
    if plan.scratch.is_empty() {
        return true;
    }
    let spans = |a: usize| plan.grid[a] > 1;
    let last_parallel = (0..plan.grid.len()).rfind(|&a| plan.parallel[a] && spans(a));
    let first_arbitrary = (0..plan.grid.len()).find(|&a| !plan.parallel[a] && spans(a));
    let back_to_back = match (last_parallel, first_arbitrary) {
        (Some(p), Some(s)) => p < s,
        _ => true,
    };
    let mut flow = Flow {
        body,
        grid: &plan.grid,
        known_ids: back_to_back.then(|| {
            (0..plan.grid.len())
                .filter(|&a| !plan.parallel[a])
                .collect()
        }),
        consts: HashMap::new(),
        from: HashMap::new(),
    };
    for (k, s) in plan.scratch.iter().enumerate() {
        flow.from.insert(s.param, BTreeSet::from([k]));
    }
    if flow.region(&body.body.ops).is_none() {
        return false;
    }
    let left_behind = plan.outputs.iter().map(|o| o.param);
    let left_behind = left_behind.chain(plan.scratch.iter().map(|s| s.param));
    left_behind
        .map(|p| body.final_version(p).ok())
        .all(|v| v.is_some_and(|v| flow.sources(v).is_empty()))
}

/// A scalar known in the evaluated step.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Known {
    Int(i64),
    Bool(bool),
}

/// Which scratch buffers' entry contents flow into each value, and the scalars known.
struct Flow<'b> {
    body: &'b Discharged<'b>,
    grid: &'b [usize],
    /// The grid axes whose program id is 0 in the evaluated step (`None`: no id is known).
    known_ids: Option<Vec<usize>>,
    consts: HashMap<ValueId, Known>,
    from: HashMap<ValueId, BTreeSet<usize>>,
}

impl Flow<'_> {
    fn sources(&self, v: ValueId) -> BTreeSet<usize> {
        self.from.get(&v).cloned().unwrap_or_default()
    }

    fn union(&self, vs: impl IntoIterator<Item = ValueId>) -> BTreeSet<usize> {
        vs.into_iter().flat_map(|v| self.sources(v)).collect()
    }

    fn set(&mut self, results: &[ValueId], from: BTreeSet<usize>) {
        for &r in results {
            self.from.insert(r, from.clone());
        }
    }

    /// `None` where the flow cannot be followed (a bug in the IR; the caller then keeps the
    /// grid loop).
    fn region(&mut self, ops: &[Op]) -> Option<()> {
        ops.iter().try_for_each(|op| self.op(op))
    }

    fn op(&mut self, op: &Op) -> Option<()> {
        let dynamic = |offsets: &[Offset]| {
            offsets
                .iter()
                .filter_map(|o| match o {
                    Offset::Dynamic(v) => Some(*v),
                    Offset::Static(_) => None,
                })
                .collect::<Vec<_>>()
        };
        match &op.kind {
            Kind::Value(kind) => {
                if let Some(k) = self.fold(kind, op.results.first().copied()) {
                    self.consts.insert(*op.results.first()?, k);
                }
                let from = self.union(kind.operands());
                self.set(&op.results, from);
            }
            Kind::Alias(x) => {
                if let Some(k) = self.consts.get(x).copied() {
                    self.consts.insert(*op.results.first()?, k);
                }
                let from = self.sources(*x);
                self.set(&op.results, from);
            }
            Kind::Zeros => self.set(&op.results, BTreeSet::new()),
            Kind::Window { x, starts, .. } => {
                let from = self.union([*x].into_iter().chain(dynamic(starts)));
                self.set(&op.results, from);
            }
            Kind::Element { x, indices } => {
                let from = self.union([*x].into_iter().chain(dynamic(indices)));
                self.set(&op.results, from);
            }
            Kind::Update { x, starts, value } => {
                let from = self.union([*x, *value].into_iter().chain(dynamic(starts)));
                self.set(&op.results, from);
            }
            Kind::If {
                cond,
                then_region,
                else_region,
            } => {
                let taken: Vec<&Region> = match self.consts.get(cond) {
                    Some(Known::Bool(true)) => vec![then_region],
                    Some(Known::Bool(false)) => vec![else_region],
                    _ => vec![then_region, else_region],
                };
                let mut from: Vec<BTreeSet<usize>> = vec![self.sources(*cond); op.results.len()];
                for r in &taken {
                    self.region(&r.ops)?;
                    for (f, &y) in from.iter_mut().zip(&r.yields) {
                        f.extend(self.sources(y));
                    }
                }
                if let [only] = taken.as_slice() {
                    for (&res, &y) in op.results.iter().zip(&only.yields) {
                        if let Some(k) = self.consts.get(&y).copied() {
                            self.consts.insert(res, k);
                        }
                    }
                }
                for (&r, f) in op.results.iter().zip(from) {
                    self.from.insert(r, f);
                }
            }
            Kind::Fori { lo, hi, init, body } => {
                let outer = self.union([*lo, *hi]);
                // The index and every carried value may hold any trip's contents.
                self.looped(&op.results, init, &body.args, &[body], outer)?;
            }
            Kind::While { init, cond, body } => {
                self.looped(
                    &op.results,
                    init,
                    &body.args,
                    &[cond, body],
                    BTreeSet::new(),
                )?;
                // The condition decides how many trips run, so it reaches every result.
                let c = cond
                    .yields
                    .first()
                    .map(|&y| self.sources(y))
                    .unwrap_or_default();
                for r in &op.results {
                    self.from.entry(*r).or_default().extend(c.iter().copied());
                }
            }
        }
        Some(())
    }

    /// A loop: its args (`body_args`, the `while` condition's too: they are the same carried
    /// values) take what flows in from `init` and from every trip's yields, until that is
    /// stable.
    fn looped(
        &mut self,
        results: &[ValueId],
        init: &[ValueId],
        body_args: &[ValueId],
        regions: &[&Region],
        outer: BTreeSet<usize>,
    ) -> Option<()> {
        let carried_args = |r: &Region| -> Vec<ValueId> {
            // A fori body's first arg is its index.
            r.args[r.args.len() - init.len()..].to_vec()
        };
        let mut state: Vec<BTreeSet<usize>> = init.iter().map(|&v| self.sources(v)).collect();
        for s in &mut state {
            s.extend(outer.iter().copied());
        }
        let body = *regions.last()?;
        if body_args.len() < init.len() || regions.iter().any(|r| r.args.len() < init.len()) {
            return None;
        }
        let index = &body_args[..body_args.len() - init.len()];
        for _ in 0..=init.len() {
            for r in regions {
                for (&a, s) in carried_args(r).iter().zip(&state) {
                    self.from.insert(a, s.clone());
                }
            }
            for &i in index {
                self.from.insert(i, outer.clone());
            }
            // Scalars known before the loop stay known in it; the carried ones are not.
            for r in regions {
                self.region(&r.ops)?;
            }
            let next: Vec<BTreeSet<usize>> = state
                .iter()
                .zip(&body.yields)
                .map(|(s, &y)| s.union(&self.sources(y)).copied().collect())
                .collect();
            if next == state {
                break;
            }
            state = next;
        }
        for (&r, s) in results.iter().zip(state) {
            self.from.insert(r, s);
        }
        Some(())
    }

    /// The value of a scalar op whose operands are known, where it is known.
    fn fold(&self, kind: &OpKind, result: Option<ValueId>) -> Option<Known> {
        let int = |v: &ValueId| match self.consts.get(v) {
            Some(Known::Int(i)) if self.body.ty(*v).dtype() == DType::I32 => Some(*i),
            _ => None,
        };
        let boolean = |v: &ValueId| match self.consts.get(v) {
            Some(Known::Bool(b)) => Some(*b),
            _ => None,
        };
        let scalar = result.is_some_and(|r| self.body.ty(r).shape().is_empty());
        if !scalar {
            return None;
        }
        Some(match kind {
            OpKind::Constant {
                value: Literal::Bool(b),
            } => Known::Bool(*b),
            OpKind::Constant {
                value: Literal::Int(i),
            } if self.body.ty(result?).dtype() == DType::I32 => Known::Int(*i),
            OpKind::ProgramId { axis } => match &self.known_ids {
                Some(axes) if axes.contains(axis) => Known::Int(0),
                _ => return None,
            },
            OpKind::NumPrograms { axis } => Known::Int(*self.grid.get(*axis)? as i64),
            OpKind::Binary { op, lhs, rhs } => match op {
                BinaryOp::And => Known::Bool(boolean(lhs)? && boolean(rhs)?),
                BinaryOp::Or => Known::Bool(boolean(lhs)? || boolean(rhs)?),
                BinaryOp::Add => Known::Int(i32::try_from(int(lhs)? + int(rhs)?).ok()?.into()),
                BinaryOp::Sub => Known::Int(i32::try_from(int(lhs)? - int(rhs)?).ok()?.into()),
                BinaryOp::Mul => Known::Int(i32::try_from(int(lhs)? * int(rhs)?).ok()?.into()),
                _ => return None,
            },
            OpKind::Compare { op, lhs, rhs } => Known::Bool(op.holds(int(lhs)?, int(rhs)?)),
            _ => return None,
        })
    }
}
