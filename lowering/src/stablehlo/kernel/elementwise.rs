//! Elementwise launches: where the body is elementwise and every operand is cut into blocks
//! the same way, the result does not depend on which elements share a block, so the batched
//! form may re-lay arrays out by a plain row-major reshape (a free bitcast in XLA) instead of
//! the reshape + transpose that gathers true blocks. Any bijection applied to all inputs and
//! undone on all outputs gives the same elements; the reshape is the cheapest one.

use super::batched::DimMap;
use super::plan::Plan;
use crate::ir::{OpKind, Operation};

/// True when the plain reshape is legal for `plan` given each operand's index-map reading
/// (`maps`, inputs then outputs): all grid axes parallel, no scratch, every operand has the
/// same array, block and maps, each map has every grid axis (so every operand's blocks carry
/// the same leading grid dims), and every body op is elementwise on whole blocks (whole-ref
/// loads and stores, splat constants, scalar broadcasts): no `program_id`, iota, slices,
/// reductions, dots, reshapes or regions, whose results would depend on where an element
/// sits in its block or in the grid.
pub(super) fn applies(plan: &Plan, maps: &[Vec<DimMap>]) -> bool {
    let mut operands = plan.inputs.iter().chain(&plan.outputs).zip(maps);
    let Some((first, first_maps)) = operands.next() else {
        return false;
    };
    plan.parallel.iter().all(|&p| p)
        && plan.scratch.is_empty()
        && (0..plan.grid.len()).all(|a| first_maps.contains(&DimMap::Axis(a)))
        && operands
            .all(|(o, m)| m == first_maps && o.block == first.block && o.array == first.array)
        && plan.body.body.ops.iter().all(elementwise)
}

fn elementwise(op: &Operation) -> bool {
    match &op.kind {
        OpKind::Constant { .. }
        | OpKind::Load { .. }
        | OpKind::Store { .. }
        | OpKind::Unary { .. }
        | OpKind::Binary { .. }
        | OpKind::Compare { .. }
        | OpKind::Select { .. }
        | OpKind::Cast { .. } => true,
        OpKind::Broadcast { dims, .. } => dims.is_empty(),
        _ => false,
    }
}
