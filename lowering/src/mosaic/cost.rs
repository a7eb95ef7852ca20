//! The `cost_estimate` of a `tpu_custom_call`, computed from the IR: XLA's scheduler uses
//! it to overlap the kernel with its neighbours (without it a custom call looks free).

use super::checks::used_axes;
use crate::ir::KernelProgram;
use crate::ir::{CostClass, Func, Literal, OpKind, Region, Type, ValueId};
use std::collections::HashMap;

/// Per launch (all grid steps), as XLA's `CostEstimate` wants it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CostEstimate {
    pub flops: u64,
    pub transcendentals: u64,
    pub bytes_accessed: u64,
}

impl CostEstimate {
    pub fn to_json(&self) -> String {
        format!(
            "{{\"flops\": {}, \"transcendentals\": {}, \"bytes_accessed\": {}}}",
            self.flops, self.transcendentals, self.bytes_accessed
        )
    }
}

/// Flops and transcendentals of one grid step times the number of steps; bytes are each
/// operand's distinct blocks (steps along axes its index map ignores reuse the resident
/// block, as Mosaic's pipeline skips those copies).
pub fn estimate(program: &KernelProgram) -> CostEstimate {
    let consts = constants(&program.body);
    let (flops, transcendentals) = region_cost(&program.body, &program.body.body, &consts);
    let steps = program.num_steps() as u64;
    let bytes_accessed = program
        .inputs
        .iter()
        .chain(&program.outputs)
        .map(|o| {
            let used = used_axes(&o.index_map);
            let visits: usize = program
                .grid
                .iter()
                .enumerate()
                .filter(|(a, _)| used.contains(a))
                .map(|(_, &g)| g)
                .product();
            (o.dtype.size_bytes() * o.block_shape.iter().product::<usize>() * visits) as u64
        })
        .sum();
    CostEstimate {
        flops: flops * steps,
        transcendentals: transcendentals * steps,
        bytes_accessed,
    }
}

fn constants(f: &Func) -> HashMap<ValueId, i64> {
    let mut out = HashMap::new();
    fn walk(r: &Region, out: &mut HashMap<ValueId, i64>) {
        for op in &r.ops {
            if let (
                OpKind::Constant {
                    value: Literal::Int(i),
                },
                [v],
            ) = (&op.kind, op.results.as_slice())
            {
                out.insert(*v, *i);
            }
            op.kind
                .regions()
                .into_iter()
                .for_each(|inner| walk(inner, out));
        }
    }
    walk(&f.body, &mut out);
    out
}

/// (flops, transcendentals) of one execution of `r`. Loops with constant bounds count
/// their trip count; others count once. An `if` counts its costlier branch.
fn region_cost(f: &Func, r: &Region, consts: &HashMap<ValueId, i64>) -> (u64, u64) {
    // Vector work only: scalar index arithmetic runs on the scalar unit alongside.
    let elems = |v: ValueId| match f.ty(v) {
        Type::Value { shape, .. } if !shape.is_empty() => shape.iter().product::<usize>() as u64,
        _ => 0,
    };
    let mut total = (0u64, 0u64);
    for op in &r.ops {
        let out = op.results.first().map_or(0, |v| elems(*v));
        let (fl, tr) = match &op.kind {
            OpKind::Dot {
                lhs, transpose_lhs, ..
            } => {
                let k = match f.ty(*lhs).shape() {
                    [a, b] => (if *transpose_lhs { *a } else { *b }) as u64,
                    _ => 0,
                };
                (2 * out * k, 0)
            }
            OpKind::Unary { op: u, .. } if u.info().cost == CostClass::Transcendental => (out, out),
            OpKind::Binary { op: b, .. } if b.info().cost == CostClass::Transcendental => {
                (out, out)
            }
            OpKind::Unary { .. }
            | OpKind::Binary { .. }
            | OpKind::Compare { .. }
            | OpKind::Select { .. } => (out, 0),
            OpKind::Reduce { x, .. } | OpKind::Scan { x, .. } => (elems(*x), 0),
            OpKind::If {
                then_region,
                else_region,
                ..
            } => {
                let (a, b) = (
                    region_cost(f, then_region, consts),
                    region_cost(f, else_region, consts),
                );
                (a.0.max(b.0), a.1.max(b.1))
            }
            OpKind::Fori { lo, hi, body, .. } => {
                let trips = match (consts.get(lo), consts.get(hi)) {
                    (Some(l), Some(h)) => (h - l).max(0) as u64,
                    _ => 1,
                };
                let (a, b) = region_cost(f, body, consts);
                (a * trips, b * trips)
            }
            // The trip count is data: one trip is the estimate's floor.
            OpKind::While { cond, body, .. } => {
                let (a, b) = region_cost(f, cond, consts);
                let (c, d) = region_cost(f, body, consts);
                (a + c, b + d)
            }
            OpKind::RunScoped { body } => region_cost(f, body, consts),
            _ => (0, 0),
        };
        total = (total.0 + fl, total.1 + tr);
    }
    total
}
