//! The carried scan as one whole-array scan. Pallas computes a cumsum across blocks with a
//! scratch `carry` that the blocks' running totals pass through: a kernel whose last grid
//! axis `r` is the only `arbitrary` one and whose body, per output block,
//! - zeroes `carry` on the first `r` step,
//! - writes `cumsum(x block, axis) + carry` to its one output on every step, and
//! - adds the block's total along `axis` (`sum(x, axis, keepdims)`, broadcast or not) to
//!   `carry` for the next step,
//!
//! while `x`'s and the output's blocks move along `axis` with `program_id(r)` and sit alike
//! on every other dim, computes `o = cumsum(x, axis)` over the whole axis. The grid loop
//! runs that as one `while` trip per block (measured 0.87x of one whole-row scan on the CPU
//! plugin for a 256x256 f32 row cumsum in 8x128 blocks; batched or unrolled forms were
//! slower still), so it is emitted as the scan that the kernel's own `cumsum` lowers to,
//! along the full axis. Sums are then rounded in XLA's order instead of block by block.
//!
//! The body is evaluated symbolically per kind of `r` step as in `accumulate.rs` (whose
//! evaluator this shares); any other body, dtype mix or layout keeps its loop.

use super::accumulate::{carried_steps, Eval, Step, Sym};
use super::batched::{dim_maps, DimMap};
use super::error::EmitError;
use super::plan::Plan;
use crate::ir::discharge::{discharge, Discharged};
use crate::ir::{Loc, OpKind, ReduceOp, Region, ValueId};
use crate::stablehlo::{FuncBuilder, Module, TensorType};

/// The module computing `plan` as one whole-array scan, or `None` where the pattern does not
/// hold.
pub(super) fn emit(plan: &Plan) -> Result<Option<Module>, EmitError> {
    let body = discharge(plan.body)?;
    let Some((x, axis)) = find(plan, &body) else {
        return Ok(None);
    };
    let o = &plan.outputs[0];
    let mut f = FuncBuilder::new("main");
    // The scan is the kernel's `cumsum`: its ops carry that line.
    f.set_loc(scan_loc(&plan.body.body));
    let args: Vec<_> = plan
        .inputs
        .iter()
        .map(|i| f.arg(TensorType::new(i.array.clone(), i.dtype)))
        .collect();
    let out = f.scan_kind(&args[x], ReduceOp::Sum.info().stablehlo, axis)?;
    if out.shape() != o.array.as_slice() {
        return Err(EmitError::internal(format!(
            "scan of {:?} gives {:?}, not the output {:?}",
            plan.inputs[x].array,
            out.shape(),
            o.array
        )));
    }
    Ok(Some(f.finish(&[&out])?))
}

/// The location of the first `cumsum` in `region` (or its nested regions).
fn scan_loc(region: &Region) -> Option<Loc> {
    region.ops.iter().find_map(|op| match op.kind {
        OpKind::Scan {
            op: ReduceOp::Sum, ..
        } => Some(op.loc),
        _ => op.kind.regions().into_iter().find_map(scan_loc),
    })
}

/// The scanned input and axis: `o = cumsum(inputs[x], axis)`.
fn find(plan: &Plan, body: &Discharged) -> Option<(usize, usize)> {
    let (r, steps) = carried_steps(plan)?;
    let (o, carry) = (&plan.outputs[0], &plan.scratch[0]);
    // One float dtype throughout, and a carry the shape of the output block.
    if !o.dtype.is_float() || carry.dtype != o.dtype || carry.shape != o.block {
        return None;
    }
    let (carry, out) = (carry.param, o.param);
    let mut found: Option<(ValueId, usize)> = None;
    // `a + b` in either order, with `a` as given; `b` when it matches.
    let added = |s: &Sym, a: &Sym| -> Option<Sym> {
        match s {
            Sym::Add(l, rr) if **l == *a => Some((**rr).clone()),
            Sym::Add(l, rr) if **rr == *a => Some((**l).clone()),
            _ => None,
        }
    };
    for step in steps {
        let refs = Eval::run(plan, body, step)?;
        let (carry_end, out_end) = (refs.get(&carry)?, refs.get(&out)?);
        // What the carry holds when the step begins.
        let before = match step {
            Step::Only | Step::First => Sym::Zero,
            Step::Middle | Step::Last => Sym::Initial(carry),
        };
        let scan = added(out_end, &before)?;
        let Sym::Scan { x, axis } = scan else {
            return None;
        };
        let Sym::Initial(x) = *x else {
            return None;
        };
        match found {
            None => found = Some((x, axis)),
            Some(f) if f == (x, axis) => {}
            Some(_) => return None,
        }
        // The carry leaves a step holding its total so far; after the last it is dead.
        if matches!(step, Step::First | Step::Middle) {
            let total = added(carry_end, &before)?;
            let want = Sym::Total {
                x: Box::new(Sym::Initial(x)),
                axis,
            };
            if total != want {
                return None;
            }
        }
    }
    let (x, axis) = found?;
    let xi = plan.inputs.iter().position(|i| i.param == x)?;
    tiles(plan, xi, axis, r).then_some((xi, axis))
}

/// Whether `x`'s and the output's blocks are laid out alike, with `axis` following `r` and
/// every other dim a parallel axis or whole, and every parallel axis with more than one
/// step picks a different output block.
fn tiles(plan: &Plan, xi: usize, axis: usize, r: usize) -> bool {
    let (x, o) = (&plan.inputs[xi], &plan.outputs[0]);
    let (Ok(xm), Ok(om)) = (dim_maps(plan, x), dim_maps(plan, o)) else {
        return false;
    };
    if x.dtype != o.dtype || x.block != o.block || x.array != o.array || axis >= o.block.len() {
        return false;
    }
    let dims_ok = (0..o.block.len()).all(|d| {
        let laid_out = match om[d] {
            DimMap::Axis(a) => (a == r) == (d == axis),
            DimMap::Const(c) => d != axis && c == 0 && o.block[d] == o.array[d],
        };
        laid_out && xm[d] == om[d]
    });
    let every_axis_used = (0..r).all(|a| plan.grid[a] == 1 || om.contains(&DimMap::Axis(a)));
    dims_ok && every_axis_used
}
