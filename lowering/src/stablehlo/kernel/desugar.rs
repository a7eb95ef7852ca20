//! IR-to-IR rewrites run before the StableHLO translators, so that they see fewer op kinds.
//! With refs discharged into values, a masked store is a select against the block's current
//! contents: `store_masked(dst, mask, v)` becomes `store(dst, select(mask, v, load(dst)))`.
//! (Mosaic keeps the op: a masked `tpu.vector_store`.)

use crate::ir::{Func, KernelProgram, OpKind, Operation, Region, Type, ValueId};
use std::borrow::Cow;

/// `program` with every `store_masked` rewritten; borrowed when it has none.
pub(super) fn without_masked_stores(program: &KernelProgram) -> Cow<'_, KernelProgram> {
    if !has_masked_store(&program.body.body) {
        return Cow::Borrowed(program);
    }
    let mut owned = program.clone();
    let Func { values, body, .. } = &mut owned.body;
    rewrite(body, values);
    Cow::Owned(owned)
}

fn has_masked_store(r: &Region) -> bool {
    r.ops.iter().any(|op| {
        matches!(op.kind, OpKind::StoreMasked { .. })
            || op.kind.regions().into_iter().any(has_masked_store)
    })
}

fn rewrite(region: &mut Region, values: &mut Vec<Type>) {
    let mut ops = Vec::with_capacity(region.ops.len());
    for mut op in std::mem::take(&mut region.ops) {
        for inner in op.kind.regions_mut() {
            rewrite(inner, values);
        }
        let OpKind::StoreMasked { dst, mask, value } = op.kind else {
            ops.push(op);
            continue;
        };
        let ty = values[value.0 as usize].clone();
        let mut fresh = || {
            values.push(ty.clone());
            ValueId((values.len() - 1) as u32)
        };
        let (old, merged) = (fresh(), fresh());
        let loc = op.loc;
        ops.push(Operation {
            results: vec![old],
            kind: OpKind::Load { src: dst },
            loc,
        });
        ops.push(Operation {
            results: vec![merged],
            kind: OpKind::Select {
                cond: mask,
                on_true: value,
                on_false: old,
            },
            loc,
        });
        ops.push(Operation {
            results: vec![],
            kind: OpKind::Store { dst, value: merged },
            loc,
        });
    }
    region.ops = ops;
}
