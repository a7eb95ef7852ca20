//! The accumulator pattern as one contraction. A kernel whose last grid axis `r` is the only
//! `arbitrary` one and whose body, per output block,
//! - zeroes a scratch `acc` on the first `r` step (or adds the first product to zeros),
//! - adds `dot(x block, y block)` to it on every step, and
//! - writes `acc` (cast, or not) to its one output on the last step and only then,
//!
//! while the blocks tile the arrays so that step `(.., r)` pairs x's and y's `r`-th blocks
//! along the contracted dim and the output block sits where x's rows and y's columns do,
//! computes `o = x @ y` with the sum split into `r` chunks. It is emitted as that: one
//! whole-array `dot_general` in the accumulator's type, converted to the output's, which is
//! what one writes by hand and what XLA runs fastest (the grid loop measured ~0.7x of it on
//! the CPU plugin). Sums are then rounded in XLA's order instead of chunk by chunk.
//!
//! The body is checked by evaluating it, discharged (`ir::discharge`), symbolically for a
//! first, a middle and a last `r` step, with conditions on `program_id(r)` decided per step
//! kind, so helper ops and their order do not matter; only the refs' last versions do. Any
//! other body keeps its loop.

use super::batched::{dim_maps, DimMap};
use super::error::EmitError;
use super::plan::{Operand, Plan};
use crate::ir::discharge::{discharge, Discharged, Kind, Op, Region as VRegion};
use crate::ir::{BinaryOp, CompareOp, Literal, Loc, OpKind, ReduceOp, Region, ValueId};
use crate::stablehlo::{DotDims, FuncBuilder, Module, Precision, TensorType};
use std::collections::HashMap;

/// What an IR value is in one kind of step, as far as the pattern cares.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Sym {
    Int(i64),
    Bool(bool),
    /// `program_id(r)` of a middle step: neither 0 nor the last index.
    Middle,
    Zero,
    /// A ref's contents when the step begins.
    Initial(ValueId),
    Dot {
        lhs: Box<Sym>,
        rhs: Box<Sym>,
        tl: bool,
        tr: bool,
    },
    Add(Box<Sym>, Box<Sym>),
    Cast(Box<Sym>),
    /// A sum-scan (`cumsum`) of a value along `axis` (`carried.rs`).
    Scan {
        x: Box<Sym>,
        axis: usize,
    },
    /// A value's sum along `axis`, kept as a size-1 dim or broadcast along it (`carried.rs`).
    Total {
        x: Box<Sym>,
        axis: usize,
    },
    Other,
}

/// The kinds of `r` step, by what `program_id(r)` is.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Step {
    /// 0, and also the last index (one step).
    Only,
    First,
    Middle,
    Last,
}

/// The module computing `plan` as one contraction, or `None` where the pattern does not hold.
pub(super) fn emit(plan: &Plan) -> Result<Option<Module>, EmitError> {
    let body = discharge(plan.body)?;
    let Some(m) = Matmul::find(plan, &body) else {
        return Ok(None);
    };
    let (x, y, o) = (&plan.inputs[m.x], &plan.inputs[m.y], &plan.outputs[0]);
    let acc = plan.scratch[0].dtype;
    let mut f = FuncBuilder::new("main");
    // The contraction is the kernel's `dot`: its ops carry that line.
    f.set_loc(dot_loc(&plan.body.body));
    let args: Vec<_> = plan
        .inputs
        .iter()
        .map(|i| f.arg(TensorType::new(i.array.clone(), i.dtype)))
        .collect();
    let (lhs, rhs) = (f.convert(&args[m.x], acc)?, f.convert(&args[m.y], acc)?);
    let dims = DotDims {
        lhs_batch: Vec::new(),
        rhs_batch: Vec::new(),
        lhs_contract: vec![usize::from(!m.tl)],
        rhs_contract: vec![usize::from(m.tr)],
    };
    let out = f.dot_general(&lhs, &rhs, &dims, Precision::Highest)?;
    let out = f.convert(&out, o.dtype)?;
    if out.shape() != o.array.as_slice() {
        return Err(EmitError::internal(format!(
            "contraction of {:?} and {:?} gives {:?}, not the output {:?}",
            x.array,
            y.array,
            out.shape(),
            o.array
        )));
    }
    Ok(Some(f.finish(&[&out])?))
}

/// The location of the first `dot` in `region` (or its nested regions).
fn dot_loc(region: &Region) -> Option<Loc> {
    region.ops.iter().find_map(|op| match op.kind {
        OpKind::Dot { .. } => Some(op.loc),
        _ => op.kind.regions().into_iter().find_map(dot_loc),
    })
}

/// The contraction found: `o = op(inputs[x]) @ op(inputs[y])`.
struct Matmul {
    x: usize,
    y: usize,
    tl: bool,
    tr: bool,
}

/// The launch shape both carried patterns (this contraction, `carried.rs`'s scan) need: one
/// output, one scratch carried along the last grid axis `r`, the only `arbitrary` one, and
/// blocks that are plain re-layouts (no prefetch, aliases, manual DMA or squeezed dims).
/// Gives `r` and the kinds of `r` step the body must be evaluated at.
pub(super) fn carried_steps(plan: &Plan) -> Option<(usize, Vec<Step>)> {
    let r = plan.grid.len().checked_sub(1)?;
    let only_last_arbitrary = plan
        .parallel
        .iter()
        .enumerate()
        .all(|(a, &p)| p == (a != r));
    if !only_last_arbitrary
        || plan.outputs.len() != 1
        || plan.scratch.len() != 1
        || !plan.prefetch.is_empty()
        || !plan.aliases.is_empty()
        || plan.manual_dma
        || plan
            .inputs
            .iter()
            .chain(&plan.outputs)
            .any(|o| o.view != o.block)
    {
        return None;
    }
    let steps = match plan.grid[r] {
        0 => return None,
        1 => vec![Step::Only],
        2 => vec![Step::First, Step::Last],
        _ => vec![Step::First, Step::Middle, Step::Last],
    };
    Some((r, steps))
}

impl Matmul {
    fn find(plan: &Plan, body: &Discharged) -> Option<Matmul> {
        let (r, steps) = carried_steps(plan)?;
        let (acc, out) = (plan.scratch[0].param, plan.outputs[0].param);
        let init = |v: ValueId| Box::new(Sym::Initial(v));
        let mut product = None;
        for step in steps {
            let refs = Eval::run(plan, body, step)?;
            let (acc_end, out_end) = (refs.get(&acc)?, refs.get(&out)?);
            // The value `o` gets on the last step, or `acc` keeps for the next one.
            let sum = if matches!(step, Step::Only | Step::Last) {
                match out_end {
                    Sym::Cast(s) => s.as_ref(),
                    s => s,
                }
            } else if *out_end == Sym::Initial(out) {
                acc_end
            } else {
                return None;
            };
            let term = match (step, sum) {
                (Step::Only | Step::First, Sym::Add(a, b)) if **a == Sym::Zero => b.as_ref(),
                (Step::Only | Step::First, Sym::Add(a, b)) if **b == Sym::Zero => a.as_ref(),
                (Step::Only | Step::First, s @ Sym::Dot { .. }) => s,
                (Step::Middle | Step::Last, Sym::Add(a, b)) if *a == init(acc) => b.as_ref(),
                (Step::Middle | Step::Last, Sym::Add(a, b)) if *b == init(acc) => a.as_ref(),
                _ => return None,
            };
            // Every step adds the same product of the same two refs' blocks.
            match &product {
                None => product = Some(term.clone()),
                Some(p) if p == term => {}
                Some(_) => return None,
            }
        }
        let Some(Sym::Dot { lhs, rhs, tl, tr }) = product else {
            return None;
        };
        let input = |s: &Sym| match s {
            Sym::Initial(v) => plan.inputs.iter().position(|i| i.param == *v),
            _ => None,
        };
        let m = Matmul {
            x: input(&lhs)?,
            y: input(&rhs)?,
            tl,
            tr,
        };
        m.tiles(plan, r).then_some(m)
    }

    /// Whether the blocks tile the arrays as a matmul split along axis `r`: x's and y's
    /// contracted dims follow `r` (or are whole with one `r` step), x's free dim is laid out
    /// like the output's rows and y's like its columns, and every parallel axis with more
    /// than one step picks a different output block.
    fn tiles(&self, plan: &Plan, r: usize) -> bool {
        let (x, y, o) = (&plan.inputs[self.x], &plan.inputs[self.y], &plan.outputs[0]);
        let (Ok(xm), Ok(ym), Ok(om)) = (dim_maps(plan, x), dim_maps(plan, y), dim_maps(plan, o))
        else {
            return false;
        };
        if [x, y, o].iter().any(|b| b.block.len() != 2) {
            return false;
        }
        // Dims of x: (rows, contracted); of y: (contracted, columns); transposed when asked.
        let (xr, xk) = if self.tl { (1, 0) } else { (0, 1) };
        let (yk, yc) = if self.tr { (1, 0) } else { (0, 1) };
        let contracted = |b: &Operand, m: &[DimMap], d: usize| match m[d] {
            DimMap::Axis(a) => a == r,
            DimMap::Const(c) => c == 0 && plan.grid[r] == 1 && b.block[d] == b.array[d],
        };
        let same = |b: &Operand, m: &[DimMap], d: usize, od: usize| {
            let laid_out = match m[d] {
                DimMap::Axis(a) => a != r,
                DimMap::Const(c) => c == 0 && b.block[d] == b.array[d],
            };
            laid_out && m[d] == om[od] && b.block[d] == o.block[od] && b.array[d] == o.array[od]
        };
        let every_axis_used = (0..r).all(|a| plan.grid[a] == 1 || om.contains(&DimMap::Axis(a)));
        contracted(x, &xm, xk)
            && contracted(y, &ym, yk)
            && x.block[xk] == y.block[yk]
            && x.array[xk] == y.array[yk]
            && same(x, &xm, xr, 0)
            && same(y, &ym, yc, 1)
            && every_axis_used
    }
}

/// Symbolic evaluation of the body in one kind of step.
pub(super) struct Eval<'p> {
    plan: &'p Plan<'p>,
    body: &'p Discharged<'p>,
    step: Step,
    /// The reduction axis and its last index.
    r: usize,
    last: i64,
    /// Values and ref versions.
    vals: HashMap<ValueId, Sym>,
}

impl<'p> Eval<'p> {
    /// Every ref param's last version, or `None` where a condition is undecided.
    pub(super) fn run(
        plan: &'p Plan<'p>,
        body: &'p Discharged<'p>,
        step: Step,
    ) -> Option<HashMap<ValueId, Sym>> {
        let r = plan.grid.len().checked_sub(1)?;
        let params = plan.body.params();
        let mut e = Eval {
            plan,
            body,
            step,
            r,
            last: i64::try_from(plan.grid[r]).ok()? - 1,
            vals: params.iter().map(|&p| (p, Sym::Initial(p))).collect(),
        };
        e.ops(&body.body.ops)?;
        let last = |p: ValueId| Some((p, e.get(body.final_version(p).ok()?)));
        params.iter().map(|&p| last(p)).collect()
    }

    fn ops(&mut self, ops: &[Op]) -> Option<()> {
        ops.iter().try_for_each(|op| self.op(op))
    }

    fn get(&self, v: ValueId) -> Sym {
        self.vals.get(&v).cloned().unwrap_or(Sym::Other)
    }

    fn op(&mut self, vop: &Op) -> Option<()> {
        let sym = match &vop.kind {
            Kind::Value(kind) => self.value_op(kind, &vop.results)?,
            Kind::Alias(x) => self.get(*x),
            Kind::If {
                cond,
                then_region,
                else_region,
            } => {
                // A branch taken in some steps of this kind and not in others is not the
                // pattern.
                let Sym::Bool(c) = self.get(*cond) else {
                    return None;
                };
                let region = if c { then_region } else { else_region };
                return self.region(vop, region);
            }
            // Windows, writes into part of a ref, and whatever a loop carries are unknown.
            Kind::Zeros
            | Kind::Window { .. }
            | Kind::Element { .. }
            | Kind::Update { .. }
            | Kind::Fori { .. }
            | Kind::While { .. } => Sym::Other,
        };
        for &v in &vop.results {
            self.vals.insert(v, sym.clone());
        }
        Some(())
    }

    /// An op of values (no refs, no regions) with `results`; `None` where an index overflows.
    fn value_op(&self, kind: &OpKind, results: &[ValueId]) -> Option<Sym> {
        let dtype = |v: ValueId| self.body.ty(v).dtype();
        let float = results.first().is_some_and(|&v| dtype(v).is_float());
        Some(match kind {
            OpKind::Constant { value } => match *value {
                Literal::Bool(b) => Sym::Bool(b),
                v if float && v.as_f64() == 0.0 => Sym::Zero,
                Literal::Int(i) if !float => Sym::Int(i),
                _ => Sym::Other,
            },
            OpKind::ProgramId { axis } if *axis == self.r => match self.step {
                Step::Only | Step::First => Sym::Int(0),
                Step::Middle => Sym::Middle,
                Step::Last => Sym::Int(self.last),
            },
            OpKind::NumPrograms { axis } => Sym::Int(*self.plan.grid.get(*axis)? as i64),
            OpKind::Broadcast { x, .. } if self.get(*x) == Sym::Zero => Sym::Zero,
            // A total broadcast along its own (size-1) axis only, other dims unchanged.
            OpKind::Broadcast { x, dims } => match self.get(*x) {
                t @ Sym::Total { axis, .. } => {
                    let (from, to) = (
                        self.body.ty(*x).shape(),
                        self.body.ty(*results.first()?).shape(),
                    );
                    let same = from.len() == to.len()
                        && dims.iter().copied().eq(0..from.len())
                        && (0..from.len()).all(|d| d == axis || from[d] == to[d]);
                    if same {
                        t
                    } else {
                        Sym::Other
                    }
                }
                _ => Sym::Other,
            },
            OpKind::Scan {
                op: ReduceOp::Sum,
                x,
                axis,
            } => Sym::Scan {
                x: Box::new(self.get(*x)),
                axis: *axis,
            },
            OpKind::Reduce {
                op: ReduceOp::Sum,
                x,
                axes,
                keepdims: true,
            } if axes.len() == 1 => Sym::Total {
                x: Box::new(self.get(*x)),
                axis: axes[0],
            },
            OpKind::Cast { x } if results.first().map(|&v| dtype(v)) == Some(dtype(*x)) => {
                self.get(*x)
            }
            OpKind::Cast { x } => Sym::Cast(Box::new(self.get(*x))),
            OpKind::Binary { op: b, lhs, rhs } => match (b, self.get(*lhs), self.get(*rhs)) {
                (BinaryOp::Add, Sym::Int(a), Sym::Int(b)) => Sym::Int(a.checked_add(b)?),
                (BinaryOp::Sub, Sym::Int(a), Sym::Int(b)) => Sym::Int(a.checked_sub(b)?),
                (BinaryOp::Mul, Sym::Int(a), Sym::Int(b)) => Sym::Int(a.checked_mul(b)?),
                (BinaryOp::Add, a, b) => Sym::Add(Box::new(a), Box::new(b)),
                _ => Sym::Other,
            },
            OpKind::Compare { op: c, lhs, rhs } => {
                match self.equal(self.get(*lhs), self.get(*rhs)) {
                    Some(eq) if *c == CompareOp::Eq => Sym::Bool(eq),
                    Some(eq) if *c == CompareOp::Ne => Sym::Bool(!eq),
                    _ => Sym::Other,
                }
            }
            OpKind::Dot {
                lhs,
                rhs,
                transpose_lhs,
                transpose_rhs,
            } => Sym::Dot {
                lhs: Box::new(self.get(*lhs)),
                rhs: Box::new(self.get(*rhs)),
                tl: *transpose_lhs,
                tr: *transpose_rhs,
            },
            _ => Sym::Other,
        })
    }

    /// Runs the taken branch of `vop`; its yields (values, then ref versions) are `vop`'s
    /// results.
    fn region(&mut self, vop: &Op, region: &VRegion) -> Option<()> {
        self.ops(&region.ops)?;
        for (&res, &y) in vop.results.iter().zip(&region.yields) {
            let s = self.get(y);
            self.vals.insert(res, s);
        }
        Some(())
    }

    /// Whether two integer scalars are equal in every step of this kind, if that is known.
    fn equal(&self, a: Sym, b: Sym) -> Option<bool> {
        match (a, b) {
            (Sym::Int(a), Sym::Int(b)) => Some(a == b),
            (Sym::Middle, Sym::Int(c)) | (Sym::Int(c), Sym::Middle) if c == 0 || c == self.last => {
                Some(false)
            }
            _ => None,
        }
    }
}
