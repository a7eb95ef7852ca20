//! The IR's verifier, structural hash and text dump.

mod common;

use common::kernels::*;
use tessera_lowering::ir::{self, Func, Loc, OpKind, Operation, Region, Type, ValueId};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::KernelProgram;

fn softmax_program(m: usize, n: usize, bm: usize) -> KernelProgram {
    softmax::launch()
        .grid([m / bm])
        .input(BlockSpec::new([bm, n], |i| (i, 0)))
        .output(BlockSpec::new([bm, n], |i| (i, 0)), [m, n])
        .trace_program(&[(DType::F32, vec![m, n])])
        .unwrap()
}

fn matmul_program(b: usize) -> KernelProgram {
    matmul::launch()
        .grid([2, 2, 2])
        .input(BlockSpec::new([b, b], |i, _j, k| [i, k]))
        .input(BlockSpec::new([b, b], |_i, j, k| [k, j]))
        .output(BlockSpec::new([b, b], |i, j, _k| [i, j]), [2 * b, 2 * b])
        .scratch(Vmem::<f32>::new([b, b]))
        .semantics([Parallel, Parallel, Arbitrary])
        .trace_program(&[
            (DType::F32, vec![2 * b, 2 * b]),
            (DType::F32, vec![2 * b, 2 * b]),
        ])
        .unwrap()
}

fn loc(line: u32) -> Loc {
    Loc {
        file: "hand.rs",
        line,
        column: 1,
    }
}

/// `func @f(%0: tile<8x128xf32>, %1: tile<128x8xf32>) -> tile<8x8xf32>` computing a dot.
fn dot_func(rhs_shape: [usize; 2]) -> Func {
    Func {
        name: "f".into(),
        values: vec![
            Type::tile(DType::F32, [8, 128]),
            Type::tile(DType::F32, rhs_shape),
            Type::tile(DType::F32, [8, 8]),
        ],
        body: Region {
            args: vec![ValueId(0), ValueId(1)],
            ops: vec![Operation {
                results: vec![ValueId(2)],
                kind: OpKind::Dot {
                    lhs: ValueId(0),
                    rhs: ValueId(1),
                    transpose_lhs: false,
                    transpose_rhs: false,
                },
                loc: loc(7),
            }],
            yields: vec![ValueId(2)],
        },
        loc: loc(1),
    }
}

#[test]
fn verifier_accepts_traced_programs() {
    for p in [softmax_program(16, 128, 8), matmul_program(32)] {
        ir::verify(&p.body).unwrap();
        for o in p.inputs.iter().chain(&p.outputs) {
            ir::verify(&o.index_map).unwrap();
        }
    }
    ir::verify(&dot_func([128, 8])).unwrap();
}

#[test]
fn verifier_reports_op_and_location() {
    let err = ir::verify(&dot_func([64, 8])).unwrap_err();
    assert_eq!(err.op, "dot");
    assert_eq!(err.loc, loc(7));
    assert!(
        err.to_string()
            .starts_with("hand.rs:7:1: `dot`: contracting dims differ"),
        "{err}"
    );
}

#[test]
fn verifier_reports_use_before_definition() {
    let mut f = softmax_program(16, 128, 8).body;
    f.body.ops.remove(0);
    let err = ir::verify(&f).unwrap_err();
    assert!(
        err.message
            .contains("used outside the region that defines it"),
        "{err}"
    );
}

#[test]
fn verifier_reports_region_arity() {
    let mut p = matmul_program(32);
    let op = p
        .body
        .body
        .ops
        .iter_mut()
        .find(|o| matches!(o.kind, OpKind::If { .. }))
        .unwrap();
    if let OpKind::If { then_region, .. } = &mut op.kind {
        then_region.yields.push(ValueId(0));
    }
    let err = ir::verify(&p.body).unwrap_err();
    assert_eq!(err.op, "if");
    assert!(
        err.message
            .contains("then region yields 1 values, expected 0"),
        "{err}"
    );
}

#[test]
fn verifier_reports_store_type_mismatch() {
    let mut p = softmax_program(16, 128, 8);
    // Store the f32 tile into the bf16-declared output: retype the output ref.
    let out = p.body.params()[1];
    p.body.values[out.0 as usize] = Type::Ref {
        dtype: DType::BF16,
        shape: vec![8, 128],
        space: ir::MemorySpace::Vmem,
    };
    let err = ir::verify(&p.body).unwrap_err();
    assert_eq!(err.op, "store");
    assert!(
        err.message
            .contains("stored value has type tile<8x128xf32>, expected tile<8x128xbf16>"),
        "{err}"
    );
}

#[test]
fn hash_is_stable_across_traces_and_locations() {
    // Two traces from different call sites: same structure, same hash.
    let (a, b) = (softmax_program(16, 128, 8), softmax_program(16, 128, 8));
    let c = softmax::launch()
        .grid([2])
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [16, 128])
        .trace_program(&[(DType::F32, vec![16, 128])])
        .unwrap();
    assert_eq!(a.structural_hash(), b.structural_hash());
    assert_eq!(a.structural_hash(), c.structural_hash());
    assert_ne!(
        a.body.loc,
        Loc {
            file: "",
            line: 0,
            column: 0
        }
    );
    assert_ne!(
        a.structural_hash(),
        softmax_program(32, 128, 8).structural_hash()
    );
    assert_ne!(
        a.structural_hash(),
        softmax_program(16, 128, 16).structural_hash()
    );
    assert_ne!(
        matmul_program(32).structural_hash(),
        matmul_program(64).structural_hash()
    );
}

#[test]
fn hash_ignores_value_numbering() {
    let f = matmul_program(32).body;
    let mut g = f.clone();
    // Renumber every value v -> n - 1 - v.
    let n = f.values.len() as u32;
    let map = |v: &mut ValueId| *v = ValueId(n - 1 - v.0);
    fn walk(r: &mut Region, map: &dyn Fn(&mut ValueId)) {
        r.args.iter_mut().for_each(map);
        r.yields.iter_mut().for_each(map);
        for op in &mut r.ops {
            op.results.iter_mut().for_each(map);
            op.loc = Loc {
                file: "elsewhere.rs",
                line: 1,
                column: 1,
            };
            match &mut op.kind {
                OpKind::Load { src } => map(src),
                OpKind::Store { dst, value } => {
                    map(dst);
                    map(value)
                }
                OpKind::Binary { lhs, rhs, .. }
                | OpKind::Compare { lhs, rhs, .. }
                | OpKind::Dot { lhs, rhs, .. } => {
                    map(lhs);
                    map(rhs)
                }
                OpKind::Cast { x } | OpKind::Broadcast { x, .. } => map(x),
                OpKind::If {
                    cond,
                    then_region,
                    else_region,
                } => {
                    map(cond);
                    walk(then_region, map);
                    walk(else_region, map);
                }
                _ => {}
            }
        }
    }
    walk(&mut g.body, &map);
    g.values.reverse();
    ir::verify(&g).unwrap();
    assert_ne!(f, g);
    assert_eq!(ir::structural_hash(&f), ir::structural_hash(&g));
    // The hash is pinned: it keys on-disk caches, so a change must be deliberate.
    assert_eq!(
        ir::structural_hash(&dot_func([128, 8])),
        PINNED_DOT_HASH,
        "{:#x}",
        ir::structural_hash(&dot_func([128, 8]))
    );
}

const PINNED_DOT_HASH: u64 = 0x2ee9_8401_f08c_7e8e;

#[test]
fn dump_is_readable() {
    let p = matmul_program(32);
    let text = p.to_string();
    for needle in [
        "kernel matmul grid [2, 2, 2] semantics [parallel, parallel, arbitrary]",
        "input x: f32[64, 64] in blocks [32, 32]",
        "func @x_index_map(%0: i32, %1: i32, %2: i32) -> (i32, i32)",
        "scratch acc: f32[32, 32] in vmem",
        "dot %",
        ": tile<32x32xf32>  // lowering/tests/common/kernels.rs:",
    ] {
        assert!(text.contains(needle), "`{needle}` not in:\n{text}");
    }
}
