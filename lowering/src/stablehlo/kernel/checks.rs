//! Checked mode of the StableHLO forms. `dynamic_slice` and `dynamic_update_slice` clamp a
//! start that would put the window past the operand's end (StableHLO's rule), so a traced
//! start out of bounds is a silent wrong answer on the CPU plugin where the interpreter and
//! a TPU fail. In checked mode every traced start is compared with its bounds
//! (`0 <= start <= extent - size`) where it is used, and the module returns, after the
//! kernel's outputs, `i32` scalars: the id of the first check that failed (0 for none; id
//! `k` is `checks[k - 1]`), the start it saw, and the grid step it failed at (one program
//! id per grid axis). Loops and `if`s carry that state, so the first failure of any grid
//! step or trip is the one reported.
//!
//! The step is exact in every form that checks: the grid loop runs the steps in the TPU's
//! order and records the failing step's indices. The batched form checks only starts that
//! are the same at every index of its batched (parallel) axes (a start that differs is not
//! batchable), so a failure there fails at every index of those axes: it reports index 0
//! for them, which with the looped axes' indices is the first failing step in the TPU's
//! order, the step the grid loop reports. The folded layout and the accumulator
//! contraction are not used for kernels with traced starts.
//!
//! Only traced starts are checked: static ones are checked when traced, and index maps that
//! read only grid indices are evaluated over the whole grid when the launch is traced
//! (`trace::launch`). A kernel with nothing to check emits the unchecked module unchanged.

use super::error::EmitError;
use super::plan::{Operand, Plan};
use crate::dtype::DType;
use crate::ir::{Loc, Offset, OpKind, Region};
use crate::stablehlo::{BinaryOp, Comparison, FuncBuilder, TensorType, Value};
use std::fmt;

/// One bounds check of a checked module: a traced start that `dynamic_slice` would clamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundsCheck {
    /// The user's line of the op (or of the `BlockSpec`, for an index map).
    pub loc: Loc,
    pub access: Access,
    /// The dim the start is for.
    pub dim: usize,
    /// The window's (or block's) extent along `dim`.
    pub size: usize,
    /// The shape of the ref (or array) the window is in.
    pub shape: Vec<usize>,
}

/// What reads or writes the window a [`BoundsCheck`] guards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// A kernel op (`load_slice`, `store_element`, `dma_start`, ...) on a ref.
    Op {
        op: &'static str,
        /// `source` or `destination` of a DMA; `None` for other ops.
        side: Option<&'static str>,
    },
    /// The block an index map selects (reading a scalar-prefetch array).
    Block {
        operand: String,
        /// The map gives an element offset along the check's dim (`BlockSpec::element`),
        /// not a block index.
        element: bool,
    },
}

impl BoundsCheck {
    /// Where `dynamic_slice` puts a window whose start is `start`.
    pub fn clamped(&self, start: i64) -> i64 {
        let limit = self.shape[self.dim].saturating_sub(self.size) as i64;
        start.clamp(0, limit)
    }

    /// The failure of this check at `start` on grid step `step` (its program ids), naming
    /// the user's line.
    pub fn describe(&self, start: i64, step: &[i64]) -> String {
        let (loc, dim, size, shape) = (self.loc, self.dim, self.size, &self.shape);
        let clamped = self.clamped(start);
        // A grid of no axes has one step: nothing to name.
        let step = match step {
            [] => String::new(),
            _ => {
                let ids: Vec<String> = step.iter().map(i64::to_string).collect();
                format!(" at grid step ({})", ids.join(", "))
            }
        };
        match &self.access {
            Access::Op { op, side } => {
                let side = side.map(|s| format!(" {s}")).unwrap_or_default();
                format!(
                    "{loc}: `{op}`{side} start {start} out of bounds{step}: \
                     window of {size} at dim {dim} of a ref of shape {shape:?} (the CPU plugin \
                     would have clamped it to {clamped})"
                )
            }
            Access::Block {
                operand,
                element: true,
            } => format!(
                "{loc}: the index map of `{operand}` gives element offset {start} at dim {dim}{step}, \
                 out of bounds for a block of {size} in an array of shape {shape:?} \
                 (the CPU plugin would have clamped it to {clamped})"
            ),
            Access::Block { operand, .. } => format!(
                "{loc}: the index map of `{operand}` gives block {} at dim {dim}{step}, out of \
                 bounds for blocks of {size} in an array of shape {shape:?} \
                 (the CPU plugin would have clamped it to the block at element {clamped})",
                start.div_euclid(size.max(1) as i64)
            ),
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Access::Op { op, side: None } => write!(f, "`{op}`"),
            Access::Op { op, side: Some(s) } => write!(f, "`{op}` {s}"),
            Access::Block { operand, .. } => write!(f, "index map of `{operand}`"),
        }
    }
}

/// Values of the running state of a grid of `grid_rank` axes (`id`, `start`, then the step's
/// program ids), which loops carry last and checked modules return last.
pub(crate) fn state_len(grid_rank: usize) -> usize {
    2 + grid_rank
}

/// The checks emitted so far and the running `(id, start, step)` of the first failure.
pub(super) struct Checker {
    pub(super) table: Vec<BoundsCheck>,
    id: Value,
    start: Value,
    /// The program ids of the step of the first failure.
    step: Vec<Value>,
}

impl Checker {
    /// A checker with no failure yet for a grid of `grid_rank` axes; its zeros are emitted
    /// where `f` is (the function's top, so that every loop can carry them).
    pub(super) fn new(f: &mut FuncBuilder, grid_rank: usize) -> Result<Self, EmitError> {
        Ok(Checker {
            table: Vec::new(),
            id: f.scalar(DType::I32, 0.0)?,
            start: f.scalar(DType::I32, 0.0)?,
            step: (0..grid_rank)
                .map(|_| f.scalar(DType::I32, 0.0))
                .collect::<Result<_, _>>()?,
        })
    }

    /// The running failure: values a region yields (or a loop carries).
    pub(super) fn state(&self) -> Vec<Value> {
        [&[self.id.clone(), self.start.clone()][..], &self.step].concat()
    }

    /// The number of values of [`Checker::state`].
    pub(super) fn state_len(&self) -> usize {
        state_len(self.step.len())
    }

    /// Takes the running failure from the values `state` returned, as carried.
    pub(super) fn set_state(&mut self, state: &[Value]) -> Result<(), EmitError> {
        match state {
            [id, start, step @ ..] if step.len() == self.step.len() => {
                self.id = id.clone();
                self.start = start.clone();
                self.step = step.to_vec();
                Ok(())
            }
            _ => Err(EmitError::internal(format!(
                "a bounds-check state of {} values, not {}",
                state.len(),
                self.state_len()
            ))),
        }
    }

    /// `true` (an `i1` scalar) while no check has failed: `while` loops run on only while it
    /// holds, since a condition that reads a clamped window may never turn false (the
    /// interpreter stops at the first failure).
    pub(super) fn none_failed(&self, f: &mut FuncBuilder) -> Result<Value, EmitError> {
        let zero = f.scalar(DType::I32, 0.0)?;
        Ok(f.compare(Comparison::Eq, &self.id, &zero)?)
    }

    /// Takes the state from the tail of `values`, where loops carry it (after what they
    /// carry unchecked); returns the values before it. Unchecked (`None`): all of `values`.
    pub(super) fn split_state<'v>(
        checks: &mut Option<Checker>,
        values: &'v [Value],
    ) -> Result<&'v [Value], EmitError> {
        let Some(checks) = checks else {
            return Ok(values);
        };
        let n = values
            .len()
            .checked_sub(checks.state_len())
            .ok_or_else(|| EmitError::internal("a loop lost its bounds-check state".into()))?;
        checks.set_state(&values[n..])?;
        Ok(&values[..n])
    }

    /// Records `check` for the traced `start` (an integer scalar) at grid step `step` (one
    /// integer scalar per grid axis): the first failure stays.
    pub(super) fn check(
        &mut self,
        f: &mut FuncBuilder,
        start: &Value,
        step: &[Value],
        check: BoundsCheck,
    ) -> Result<(), EmitError> {
        if step.len() != self.step.len() {
            return Err(EmitError::internal(format!(
                "a grid step of {} indices in a grid of {}",
                step.len(),
                self.step.len()
            )));
        }
        let limit = check.shape[check.dim]
            .checked_sub(check.size)
            .ok_or_else(|| {
                EmitError::internal(format!("window {check:?} is larger than its ref"))
            })?;
        self.table.push(check);
        let start = as_i32(f, start)?;
        let zero = f.scalar(DType::I32, 0.0)?;
        let limit = f.scalar(DType::I32, limit as f64)?;
        let below = f.compare(Comparison::Lt, &start, &zero)?;
        let above = f.compare(Comparison::Gt, &start, &limit)?;
        let bad = f.binary(BinaryOp::Or, &below, &above)?;
        let first = f.compare(Comparison::Eq, &self.id, &zero)?;
        let fails = f.binary(BinaryOp::And, &bad, &first)?;
        let id = f.scalar(DType::I32, self.table.len() as f64)?;
        self.id = f.select(&fails, &id, &self.id)?;
        self.start = f.select(&fails, &start, &self.start)?;
        for (kept, now) in self.step.iter_mut().zip(step) {
            let now = as_i32(f, now)?;
            *kept = f.select(&fails, &now, kept)?;
        }
        Ok(())
    }
}

fn as_i32(f: &mut FuncBuilder, v: &Value) -> Result<Value, EmitError> {
    Ok(if v.ty == TensorType::scalar(DType::I32) {
        v.clone()
    } else {
        f.convert(v, DType::I32)?
    })
}

/// Whether the launch has a traced start for checked mode to check.
pub(super) fn needs_checks(plan: &Plan) -> bool {
    has_dynamic_starts(&plan.body.body)
        || plan
            .inputs
            .iter()
            .chain(&plan.outputs)
            .any(|o| block_needs_check(plan, o))
}

/// Index maps that read scalar-prefetch data (or run over more grid steps than the tracer
/// evaluates) yield blocks only known when the kernel runs.
pub(super) fn block_needs_check(plan: &Plan, o: &Operand) -> bool {
    !crate::ir::index_map_checked_at_trace(o.index_map, &plan.grid)
}

/// Whether an op of `region` (nested regions included) has a traced start.
pub(super) fn has_dynamic_starts(region: &Region) -> bool {
    let dynamic = |starts: &[Offset]| starts.iter().any(|s| matches!(s, Offset::Dynamic(_)));
    region.ops.iter().any(|op| {
        let own = match &op.kind {
            OpKind::LoadSlice { starts, .. } | OpKind::StoreSlice { starts, .. } => dynamic(starts),
            OpKind::LoadElement { indices, .. } | OpKind::StoreElement { indices, .. } => {
                dynamic(indices)
            }
            OpKind::DmaStart(c) => dynamic(&c.src_starts) || dynamic(&c.dst_starts),
            _ => false,
        };
        own || op.kind.regions().into_iter().any(has_dynamic_starts)
    })
}
