//! `ir::discharge`: refs become SSA versions that regions carry, and no ref op is left.

mod common;

use common::kernels::*;
use std::borrow::Cow;
use tessera_lowering::ir::discharge::{discharge, Kind, Op, Region as VRegion};
use tessera_lowering::ir::{Func, Loc, Offset, OpKind, Operation, Region, Type, ValueId};
use tessera_lowering::prelude::*;

fn matmul_program() -> tessera_lowering::trace::KernelProgram {
    matmul::launch()
        .grid([2, 2, 2])
        .input(BlockSpec::new([8, 128], |i, _j, k| [i, k]))
        .input(BlockSpec::new([128, 128], |_i, j, k| [k, j]))
        .output(BlockSpec::new([8, 128], |i, j, _k| [i, j]), [16, 256])
        .scratch(Vmem::<f32>::new([8, 128]))
        .semantics([Parallel, Parallel, Arbitrary])
        .trace_program(&[(DType::F32, vec![16, 256]), (DType::F32, vec![256, 256])])
        .unwrap()
}

/// Every op of `region` (nested ones too), depth first.
fn all_ops<'r, 'a>(region: &'r VRegion<'a>, out: &mut Vec<&'r Op<'a>>) {
    for op in &region.ops {
        out.push(op);
        match &op.kind {
            Kind::If {
                then_region,
                else_region,
                ..
            } => {
                all_ops(then_region, out);
                all_ops(else_region, out);
            }
            Kind::Fori { body, .. } => all_ops(body, out),
            Kind::While { cond, body, .. } => {
                all_ops(cond, out);
                all_ops(body, out);
            }
            _ => {}
        }
    }
}

#[test]
fn the_accumulator_body_becomes_values_with_versions_carried_by_its_ifs() {
    let p = matmul_program();
    let d = discharge(&p.body).unwrap();
    let mut ops = Vec::new();
    all_ops(&d.body, &mut ops);
    // Traced ops left as they are (their kinds borrowed) touch no ref and open no region.
    for op in &ops {
        if let Kind::Value(kind) = &op.kind {
            assert!(matches!(kind, Cow::Borrowed(k) if std::ptr::eq(*k, &op.origin.kind)));
            let refs = kind.operands().into_iter().any(|v| d.ty(v).is_ref());
            assert!(!refs && kind.regions().is_empty(), "{kind:?}");
        }
    }
    let (x, y, o, acc) = match p.body.params() {
        [x, y, o, acc] => (*x, *y, *o, *acc),
        other => panic!("params {other:?}"),
    };
    // Each `if` stores one ref: its version is the `if`'s one result, and both branches
    // yield it (the empty one, the version from before).
    let ifs: Vec<_> = d
        .body
        .ops
        .iter()
        .filter_map(|op| match &op.kind {
            Kind::If {
                then_region,
                else_region,
                ..
            } => Some((op, then_region, else_region)),
            _ => None,
        })
        .collect();
    assert_eq!(ifs.len(), 2);
    for (op, then_r, else_r) in &ifs {
        assert_eq!(op.results.len(), 1);
        assert_eq!((then_r.yields.len(), else_r.yields.len()), (1, 1));
        assert!(!d.ty(op.results[0]).is_ref());
    }
    assert_eq!(
        ifs[0].2.yields,
        vec![acc],
        "acc's version before the first if"
    );
    // Inputs are never written; the output's last version is the second `if`'s result.
    assert_eq!(d.finals[&x], x);
    assert_eq!(d.finals[&y], y);
    assert_eq!(d.finals[&o], ifs[1].0.results[0]);
    assert_ne!(d.finals[&acc], acc);
}

fn loc() -> Loc {
    Loc {
        file: "hand.rs",
        line: 1,
        column: 1,
    }
}

fn op(results: Vec<u32>, kind: OpKind) -> Operation {
    Operation {
        results: results.into_iter().map(ValueId).collect(),
        kind,
        loc: loc(),
    }
}

/// `fori i in lo..hi { o[i] = v }` over a ref param `o`, then a DMA `o[0..2] -> s[0..2]`.
fn loop_and_dma() -> Func {
    let v = ValueId;
    let body = Region {
        args: vec![v(5)],
        ops: vec![op(
            vec![],
            OpKind::StoreElement {
                dst: v(0),
                indices: vec![Offset::Dynamic(v(5))],
                value: v(4),
            },
        )],
        yields: vec![],
    };
    let dma = tessera_lowering::ir::DmaCopy {
        src: v(0),
        src_starts: vec![Offset::Static(0)],
        dst: v(1),
        dst_starts: vec![Offset::Static(0)],
        sizes: vec![2],
        sem: v(6),
        sem_index: Offset::Static(0),
    };
    let vmem = tessera_lowering::ir::MemorySpace::Vmem;
    let r = |n| Type::Ref {
        dtype: DType::F32,
        shape: vec![n],
        space: vmem,
    };
    Func {
        name: "f".into(),
        values: vec![
            r(8),
            r(2),
            Type::index(),
            Type::index(),
            Type::scalar(DType::F32),
            Type::index(),
            Type::Ref {
                dtype: DType::I32,
                shape: vec![1],
                space: tessera_lowering::ir::MemorySpace::Semaphore,
            },
        ],
        body: Region {
            args: vec![v(0), v(1), v(6)],
            ops: vec![
                op(
                    vec![2],
                    OpKind::Constant {
                        value: tessera_lowering::ir::Literal::Int(0),
                    },
                ),
                op(
                    vec![3],
                    OpKind::Constant {
                        value: tessera_lowering::ir::Literal::Int(8),
                    },
                ),
                op(
                    vec![4],
                    OpKind::Constant {
                        value: tessera_lowering::ir::Literal::Float(1.0),
                    },
                ),
                op(
                    vec![],
                    OpKind::Fori {
                        lo: v(2),
                        hi: v(3),
                        init: vec![],
                        body,
                    },
                ),
                op(vec![], OpKind::DmaStart(dma.clone())),
                op(vec![], OpKind::DmaWait(dma)),
            ],
            yields: vec![],
        },
        loc: loc(),
    }
}

#[test]
fn loops_carry_the_versions_they_store_and_a_dma_is_a_window_then_an_update() {
    let f = loop_and_dma();
    let d = discharge(&f).unwrap();
    let kinds: Vec<&Kind> = d.body.ops.iter().map(|op| &op.kind).collect();
    // 3 constants, the loop, the DMA's window and update; the wait is gone.
    assert_eq!(kinds.len(), 6, "{kinds:?}");
    let (fori, window, update) = (&d.body.ops[3], &d.body.ops[4], &d.body.ops[5]);
    let Kind::Fori { init, body, .. } = &fori.kind else {
        panic!("{:?}", fori.kind)
    };
    // The loop carries `o` from its param version; the body's store makes the yielded one.
    assert_eq!(init, &vec![ValueId(0)]);
    assert_eq!(body.args.len(), 2);
    assert_eq!(fori.results.len(), 1);
    let Kind::Update { x, value, .. } = &body.ops[0].kind else {
        panic!("{:?}", body.ops[0].kind)
    };
    assert_eq!((*x, *value), (body.args[1], ValueId(4)));
    assert_eq!(body.yields, body.ops[0].results);
    assert_eq!(d.ty(body.yields[0]), &Type::tile(DType::F32, [8]));
    // The DMA reads the loop's version of `o` and writes `s`'s next one.
    let Kind::Window { x, sizes, .. } = &window.kind else {
        panic!("{:?}", window.kind)
    };
    assert_eq!((*x, sizes.as_slice()), (fori.results[0], &[2][..]));
    let Kind::Update { x, value, .. } = &update.kind else {
        panic!("{:?}", update.kind)
    };
    assert_eq!((*x, *value), (ValueId(1), window.results[0]));
    assert_eq!(d.finals[&ValueId(0)], fori.results[0]);
    assert_eq!(d.finals[&ValueId(1)], update.results[0]);
}
