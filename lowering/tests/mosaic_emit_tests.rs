//! Kernel -> Mosaic text, structurally (no Python): the kernel func's signature and
//! attributes, the op each IR op becomes, both spellings, and clean errors for what
//! Mosaic cannot do. `mosaic_jax_tests.rs` verifies the same text with jaxlib.

mod common;
mod mosaic_support;

use mosaic_support::*;
use std::collections::HashSet;
use tessera_lowering::kernel::{Generic, Kernel, KernelInfo};
use tessera_lowering::mosaic::{lower_to_mosaic, MosaicError, TpuGeneration, MOSAIC_VERSION};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{KernelTracer, TraceError};

fn serialized(p: &tessera_lowering::trace::KernelProgram) -> String {
    lower_to_mosaic(p, TpuGeneration::V5e)
        .expect("lowers")
        .serialized
}

/// The quoted op names of a module's text (`"stable_mosaic.arith.addf"` -> that string).
fn op_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = match l.find(" = \"") {
                Some(i) if l.starts_with('%') => &l[i + 3..],
                _ => l,
            };
            l.strip_prefix('"')
                .and_then(|r| r.split('"').next())
                .map(str::to_string)
        })
        .collect()
}

#[test]
fn matmul_kernel_func_matches_pallas_layout() {
    let text = serialized(&matmul_program(DType::F32, 256, 256, 384, 128));
    assert!(
        text.starts_with(&format!(
            "module attributes {{stable_mosaic.version = {MOSAIC_VERSION} : i64}} {{"
        )),
        "{text}"
    );
    let vmem = "memref<128x128xf32, #tpu.memory_space<vmem>>";
    let sig = format!("function_type = (i32, i32, i32, {vmem}, {vmem}, {vmem}, {vmem}) -> ()");
    for needle in [
        sig.as_str(),
        "dimension_semantics = [#tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<arbitrary>]",
        "iteration_bounds = array<i64: 2, 2, 3>",
        "scalar_prefetch = 0 : i64",
        "scratch_operands = 1 : i64",
        "sym_name = \"matmul\"",
        "tpu.core_type = #tpu.core_type<tc>",
        "window_params = [{transform_indices = @transform_0, window_bounds = array<i64: 128, 128>}, {transform_indices = @transform_1, window_bounds = array<i64: 128, 128>}, {transform_indices = @transform_2, window_bounds = array<i64: 128, 128>}]",
        "\"stable_mosaic.tpu.matmul\"",
        "dimension_numbers = #tpu.dot_dimension_numbers<[1], [0], [0], [1], [0, 0, 1, 1], [], []>",
        "-> vector<128x128xf32>",
        "\"stable_mosaic.scf.if\"",
        "function_type = (i32, i32, i32) -> (i32, i32), sym_name = \"transform_0\"",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in\n{text}");
    }
    // transform_1 returns (k, j): the index map `|_i, j, k| [k, j]`.
    let t1 = text
        .split("sym_name = \"transform_0\"")
        .nth(1)
        .expect("transform_1 follows");
    assert!(
        t1.contains("\"stable_mosaic.func.return\"(%") && t1.lines().nth(2).is_some(),
        "{t1}"
    );
}

#[test]
fn bf16_matmul_accumulates_in_f32() {
    let text = serialized(&matmul_program(DType::BF16, 256, 256, 256, 128));
    let mm = text
        .lines()
        .find(|l| l.contains("tpu.matmul"))
        .expect("a matmul");
    assert!(
        mm.contains("(vector<128x128xbf16>, vector<128x128xbf16>, vector<128x128xf32>) -> vector<128x128xf32>"),
        "{mm}"
    );
    assert!(
        text.contains("\"stable_mosaic.arith.truncf\""),
        "the f32 accumulator is cast back to bf16:\n{text}"
    );
}

#[test]
fn every_op_is_renamed_in_the_serialized_form_and_plain_in_the_readable_one() {
    for (name, p) in all_programs() {
        let k = lower_to_mosaic(&p, TpuGeneration::V6e).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ser = op_names(&k.serialized);
        assert!(!ser.is_empty(), "{name}");
        for op in &ser {
            assert!(
                op.starts_with("stable_mosaic."),
                "{name}: `{op}` is not in serialized form"
            );
        }
        let readable = op_names(&k.readable);
        let stripped: Vec<String> = ser
            .iter()
            .map(|o| o.trim_start_matches("stable_mosaic.").to_string())
            .collect();
        assert_eq!(
            readable, stripped,
            "{name}: the two forms differ in more than names"
        );
    }
}

#[test]
fn every_value_is_defined_once() {
    for (name, p) in all_programs() {
        let text = serialized(&p);
        let mut seen = HashSet::new();
        for line in text.lines().map(str::trim_start) {
            let defs: Vec<&str> = if let Some(args) = line.strip_prefix("^bb0(") {
                args.split(", %")
                    .map(|a| a.trim_start_matches('%').split(':').next().unwrap_or(""))
                    .collect()
            } else if let Some(def) = line.strip_prefix('%') {
                vec![def.split([' ', ':']).next().unwrap_or("")]
            } else {
                vec![]
            };
            for d in defs {
                assert!(
                    seen.insert(d.to_string()),
                    "{name}: %{d} defined twice in\n{text}"
                );
            }
        }
    }
}

#[test]
fn softmax_reduces_rows_with_multi_reduction() {
    let text = serialized(&softmax_program(DType::F32, 64, 256, 16));
    for needle in [
        "kind = #vector.kind<maximumf>, reduction_dims = array<i64: 1>",
        "kind = #vector.kind<add>, reduction_dims = array<i64: 1>",
        "value = dense<0xFF800000> : vector<16xf32>",
        "\"stable_mosaic.vector.shape_cast\"",
        "(vector<16x1xf32>) -> vector<16x256xf32>",
        "\"stable_mosaic.math.exp\"",
        "\"stable_mosaic.arith.divf\"",
        "iteration_bounds = array<i64: 4>",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in\n{text}");
    }
}

#[test]
fn fori_becomes_scf_for_with_iter_args_and_dynamic_slices() {
    let (_, p) = all_programs()
        .into_iter()
        .find(|(n, _)| n.starts_with("chunk_mean/"))
        .expect("chunk_mean");
    let text = serialized(&p);
    let for_line = text
        .lines()
        .find(|l| l.contains("scf.for"))
        .expect("a loop");
    assert!(
        for_line.contains(":2 = \"stable_mosaic.scf.for\""),
        "two carried values: {for_line}"
    );
    for needle in [
        "\"stable_mosaic.arith.index_cast\"",
        "-> vector<8x128xf32>",
        "\"stable_mosaic.scf.yield\"",
        "(i32, i32, i32, vector<8x128xf32>, f32) -> (vector<8x128xf32>, f32)",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in\n{text}");
    }
}

#[test]
fn integer_kernel_uses_signed_ops_iota_and_smem() {
    let (_, p) = all_programs()
        .into_iter()
        .find(|(n, _)| n.starts_with("int_ops/"))
        .expect("int_ops");
    let text = serialized(&p);
    for needle in [
        "\"stable_mosaic.tpu.iota\"() {dimensions = array<i32: 1>} : () -> vector<8x128xi32>",
        "\"stable_mosaic.memref.store\"",
        "\"stable_mosaic.memref.load\"",
        "memref<4xi32, #tpu.memory_space<smem>>",
        "scratch_operands = 1 : i64",
        "\"stable_mosaic.arith.remsi\"",
        "\"stable_mosaic.arith.divsi\"",
        "\"stable_mosaic.arith.maxsi\"",
        "\"stable_mosaic.arith.select\"",
        "\"stable_mosaic.arith.xori\"",
        "\"stable_mosaic.arith.sitofp\"",
        "\"stable_mosaic.arith.fptosi\"",
        "{predicate = 4 : i64}",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in\n{text}");
    }
}

#[test]
fn float_kernel_covers_transposes_scalars_and_math() {
    let (_, p) = all_programs()
        .into_iter()
        .find(|(n, _)| n.starts_with("float_ops/"))
        .expect("float_ops");
    let text = serialized(&p);
    for needle in [
        // x @ y^T: both operands contract their dim 1.
        "#tpu.dot_dimension_numbers<[1], [1], [0], [0], [0, 0, 1, 0], [], []>",
        "\"stable_mosaic.vector.transpose\"",
        "permutation = array<i64: 1, 0>",
        "reduction_dims = array<i64: 1, 2>",
        "\"stable_mosaic.vector.extract\"",
        "-> vector<1x1xf32>",
        "\"stable_mosaic.math.tanh\"",
        "\"stable_mosaic.math.powf\"",
        "\"stable_mosaic.math.erf\"",
        "\"stable_mosaic.math.rsqrt\"",
        "\"stable_mosaic.math.floor\"",
        "\"stable_mosaic.arith.cmpf\"",
        "dimension_semantics = [#tpu.dimension_semantics<arbitrary>]",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in\n{text}");
    }
    // libtpu's scalar unit has no `math` ops: a scalar pow runs on a 1x1 vector.
    let pow = text
        .lines()
        .find(|l| l.contains("math.powf") && l.contains("vector<1x1xf32>"))
        .is_some();
    assert!(pow, "scalar pow is lifted to vector<1x1xf32>:\n{text}");
    let if_line = text.lines().find(|l| l.contains("scf.if")).expect("an if");
    assert!(
        if_line.trim_start().starts_with('%'),
        "the if yields a value: {if_line}"
    );
}

#[test]
fn readable_matmul_uses_current_attribute_names() {
    let k = lower_to_mosaic(
        &matmul_program(DType::F32, 256, 256, 256, 128),
        TpuGeneration::V5e,
    )
    .expect("lowers");
    assert!(
        k.readable.contains("\"tpu.matmul\"") && k.readable.contains("transpose_lhs_hint = false"),
        "{}",
        k.readable
    );
    assert!(
        k.serialized
            .contains("transpose_lhs = false, transpose_rhs = false"),
        "{}",
        k.serialized
    );
}

kernel!(
    smem_block_load,
    [
        p("x", In, DType::F32),
        p("o", Out, DType::F32),
        p("s", Scr, DType::F32)
    ],
    |t| {
        let (x, o, s) = (
            t.input::<f32>(0)?,
            t.output::<f32>(0)?,
            t.scratch::<f32>(0)?,
        );
        let v = s.load();
        o.store(x.load() + v.sum(0, false).to_scalar());
    }
);
const SMEM_LOAD_LINE: u32 = line!() - 4;

#[test]
fn vector_load_from_smem_is_a_clean_unsupported_error_at_the_users_line() {
    let p = Launch::new(&smem_block_load)
        .grid([1])
        .input(BlockSpec::new([8, 128], |i| (i, 0)))
        .output(BlockSpec::new([8, 128], |i| (i, 0)), [8, 128])
        .scratch(Smem::<f32>::new([16]))
        .trace_program(&[(DType::F32, vec![8, 128])])
        .expect("traces");
    let err = lower_to_mosaic(&p, TpuGeneration::V5e).unwrap_err();
    match &err {
        MosaicError::Unsupported { op, loc, .. } => {
            assert_eq!(*op, "load");
            assert_eq!((loc.file, loc.line), (file!(), SMEM_LOAD_LINE), "{err}");
        }
        other => panic!("expected Unsupported, got {other}"),
    }
    assert!(
        err.to_string().contains("not supported on TPU") && err.to_string().contains("SMEM"),
        "{err}"
    );
}

#[test]
fn an_empty_grid_runs_as_one_step() {
    let p = add_program(DType::F32, 8, 128, 8, 128);
    let text = serialized(&p);
    assert!(
        text.contains("iteration_bounds = array<i64: 1, 1>"),
        "{text}"
    );
    // libtpu takes window params only with explicit iteration bounds (tpu_aot_tests compiles
    // a gridless launch): a grid of one step, whose index the index maps ignore.
    let q = mosaic_support::single_step_add();
    let text = serialized(&q);
    assert!(
        text.contains("iteration_bounds = array<i64: 1>")
            && text.contains("dimension_semantics = [#tpu.dimension_semantics<arbitrary>]"),
        "{text}"
    );
    assert!(
        text.contains("function_type = (i32) -> (i32, i32), sym_name = \"transform_0\""),
        "{text}"
    );
}
