//! Scalar prefetch (Pallas' `PrefetchScalarGridSpec`): integer arrays in SMEM before the grid
//! runs, read by the body and by data-dependent index maps. Each test kernel runs on the
//! interpreter and on the XLA CPU plugin against an exact reference (the kernels only move
//! and add data, so results are exact in f32), its Mosaic verifies with jaxlib's tpu dialect
//! (`tools/check_mosaic.py`), and libtpu compiles it for v5e, v6e and tpu7x. Misuse is
//! reported at this file's lines.

mod support;

use rand::{Rng, SeedableRng};
use std::process::Command;
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::{emit_kernel_as, emit_kernel_checked, Form};
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError, TpuTarget};

/// Rows per gathered block: one f32 sublane tile.
const ROWS: usize = 8;
const LANES: usize = 128;

/// Copies the block the index map picked: a gather of row blocks.
#[tpu_kernel]
fn gather_rows(_idx: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load());
}

/// Output block `i` is row block `idx[i]` of `x` (a row-block gather; the index map reads
/// the prefetched indices).
fn gather_launch(n_out: usize) -> Launch {
    gather_rows::launch()
        .grid([n_out])
        .input(BlockSpec::prefetch([ROWS, LANES], |g, p| {
            (p[0].load_scalar([g[0]]), 0)
        }))
        .output(
            BlockSpec::new([ROWS, LANES], |i| (i, 0)),
            [n_out * ROWS, LANES],
        )
}

/// `o = sum(x[0 .. n])` over the leading dim, with `n` read from SMEM: a loop whose trip
/// count is data.
#[tpu_kernel]
fn sum_first_n(n: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let count = n.load_scalar([0]);
    let mut acc = full::<f32>([1, ROWS, LANES], 0.0);
    for i in range(count) {
        acc = acc + x.load_slice((i, 0, 0), [1, ROWS, LANES]);
    }
    o.store(acc);
}

fn sum_launch(k: usize) -> Launch {
    sum_first_n::launch()
        .input(BlockSpec::new([k, ROWS, LANES], || [0, 0, 0]))
        .output(
            BlockSpec::new([1, ROWS, LANES], || [0, 0, 0]),
            [1, ROWS, LANES],
        )
}

fn random_f32(rng: &mut rand::rngs::StdRng, shape: Vec<usize>) -> HostTensor {
    let n = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.gen_range(-4.0..4.0)).collect();
    HostTensor::from_vec(shape, data)
}

#[test]
fn gather_of_row_blocks_by_prefetched_indices_matches_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (v, n_out) = (6, 5);
    let x = random_f32(&mut rng, vec![v * ROWS, LANES]);
    // Repeats and out-of-order indices: a gather, not a permutation.
    let idx: Vec<i32> = (0..n_out).map(|_| rng.gen_range(0..v as i32)).collect();
    let idx_t = HostTensor::from_vec(vec![n_out], idx.clone());
    let xs = x.to_f64_vec();
    let want: Vec<f64> = idx
        .iter()
        .flat_map(|&b| xs[b as usize * ROWS * LANES..(b as usize + 1) * ROWS * LANES].to_vec())
        .collect();
    support::run_everywhere_exact(&gather_launch(n_out), &[&idx_t, &x], &want);
    // Unchecked, every step's block is gathered at once; checked, the grid loop runs it and
    // checks each block index the map reads from SMEM.
    let program = gather_launch(n_out)
        .trace_program(&[
            (DType::I32, vec![n_out]),
            (DType::F32, vec![v * ROWS, LANES]),
        ])
        .expect("traces");
    let auto = emit_kernel_as(&program, Form::Auto).expect("emits");
    assert!(auto.contains("\"stablehlo.gather\"") && !auto.contains("\"stablehlo.while\""));
    let checked = emit_kernel_checked(&program, Form::Auto).expect("emits");
    assert!(checked.text.contains("\"stablehlo.while\""));
    assert!(!checked.checks.is_empty());
}

#[test]
fn a_loop_whose_trip_count_is_read_from_smem_matches_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let k = 5;
    let x = random_f32(&mut rng, vec![k, ROWS, LANES]);
    let xs = x.to_f64_vec();
    for n in [0, 1, 3, k as i32] {
        let n_t = HostTensor::from_vec(vec![1], vec![n]);
        // Sums of up to 5 values in [-4, 4): exact in f32 only up to rounding; compare in
        // f32 by summing in the kernel's order.
        let want: Vec<f64> = (0..ROWS * LANES)
            .map(|e| {
                (0..n as usize).fold(0f32, |acc, i| acc + xs[i * ROWS * LANES + e] as f32) as f64
            })
            .collect();
        support::run_everywhere_exact(&sum_launch(k), &[&n_t, &x], &want);
    }
}

#[test]
fn a_gather_along_a_sequential_axis_runs_batched() {
    // Row block `idx[i]`, column block `j` (sequential): the batched form gathers the blocks
    // of every (i, j) at once and loops over j.
    let (v, n_out) = (5, 4);
    let launch = gather_rows::launch()
        .grid([n_out, 2])
        .input(BlockSpec::prefetch([ROWS, LANES], |g, p| {
            (p[0].load_scalar([g[0]]), g[1])
        }))
        .output(
            BlockSpec::new([ROWS, LANES], |i, j| (i, j)),
            [n_out * ROWS, 2 * LANES],
        )
        .semantics([Parallel, Arbitrary]);
    let mut rng = rand::rngs::StdRng::seed_from_u64(8);
    let x = random_f32(&mut rng, vec![v * ROWS, 2 * LANES]);
    let idx: Vec<i32> = (0..n_out).map(|_| rng.gen_range(0..v as i32)).collect();
    let idx_t = HostTensor::from_vec(vec![n_out], idx.clone());
    let (xs, row) = (x.to_f64_vec(), 2 * LANES);
    let want: Vec<f64> = idx
        .iter()
        .flat_map(|&b| xs[b as usize * ROWS * row..(b as usize + 1) * ROWS * row].to_vec())
        .collect();
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    // Checked, the blocks the map reads from SMEM are checked by the grid loop (Auto picks
    // it; Batched refuses).
    for (form, checked) in [
        (Form::Batched, false),
        (Form::Auto, false),
        (Form::Auto, true),
        (Form::GridLoop, true),
    ] {
        let out = launch
            .run_checked(&cpu, &[&idx_t, &x], form, checked)
            .expect("runs");
        assert_eq!(out[0].to_f64_vec(), want, "{form:?} checked {checked}");
    }
    let refused = launch.run_checked(&cpu, &[&idx_t, &x], Form::Batched, true);
    assert!(
        matches!(&refused, Err(RuntimeError::Emit(e)) if e.to_string().contains("checked then by the grid loop")),
        "{refused:?}"
    );
}

fn programs() -> Vec<(&'static str, KernelProgram)> {
    let i32s = |shape: Vec<usize>| (DType::I32, shape);
    let f32s = |shape: Vec<usize>| (DType::F32, shape);
    vec![
        (
            "gather_rows",
            gather_launch(4)
                .trace_program(&[i32s(vec![4]), f32s(vec![6 * ROWS, LANES])])
                .expect("traces"),
        ),
        (
            "sum_first_n",
            sum_launch(4)
                .trace_program(&[i32s(vec![1]), f32s(vec![4, ROWS, LANES])])
                .expect("traces"),
        ),
    ]
}

#[test]
fn scalar_prefetch_kernels_lower_to_mosaic_with_prefetch_operands() {
    for (name, program) in programs() {
        let m = lower_to_mosaic(&program, TpuGeneration::V6e).expect("lowers");
        assert!(m.readable.contains("scalar_prefetch = 1 : i64"), "{name}");
        // The prefetch array is the kernel's first ref (after the grid indices) and every
        // index map's last param, in SMEM.
        assert!(
            m.readable
                .contains("memref<4xi32, #tpu.memory_space<smem>>")
                || m.readable
                    .contains("memref<1xi32, #tpu.memory_space<smem>>"),
            "{name}: {}",
            m.readable
        );
    }
    let gather = &programs()[0].1;
    let m = lower_to_mosaic(gather, TpuGeneration::V6e).unwrap();
    assert!(m.readable.contains("\"memref.load\""), "{}", m.readable);
}

#[test]
fn scalar_prefetch_kernels_mosaic_verifies_with_jaxlib() {
    let Some(py) = std::env::var_os("TESSERA_JAX_PYTHON").filter(|p| !p.is_empty()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the jaxlib checks: set TESSERA_JAX_PYTHON"
        );
        return eprintln!("skipped: set TESSERA_JAX_PYTHON to a Python with jax");
    };
    let dir = support::temp_dir("prefetch-mosaic");
    let mut files = Vec::new();
    for (name, program) in programs() {
        let m = lower_to_mosaic(&program, TpuGeneration::V6e).unwrap();
        let f = dir.path().join(format!("{name}.mlir"));
        std::fs::write(&f, &m.serialized).unwrap();
        files.push(f);
    }
    let tool = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/check_mosaic.py");
    let out = support::output(Command::new(py).arg(tool).args(&files));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "jaxlib rejects emitted Mosaic:\n{text}"
    );
    assert_eq!(text.matches(": OK").count(), files.len(), "{text}");
}

#[test]
fn scalar_prefetch_kernels_compile_with_libtpu_for_three_generations() {
    for topology in support::TOPOLOGIES {
        let target = TpuTarget::aot(topology).unwrap_or_else(|e| panic!("{topology}: {e}"));
        for (name, program) in programs() {
            let out = target
                .compile_program(&program)
                .unwrap_or_else(|e| panic!("{name} on {topology}: {e}"));
            assert!(out.code_bytes > 0, "{name} on {topology}");
        }
    }
}

fn trace_error_at(result: Result<Vec<HostTensor>, RuntimeError>, line: u32) -> TraceError {
    let error = match result {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {other:?}"),
    };
    let message = error.to_string();
    assert!(
        message.contains(&format!("scalar_prefetch_tests.rs:{line}:")),
        "{message}"
    );
    error
}

#[test]
fn a_float_array_passed_for_scalar_prefetch_is_reported_at_the_run_call() {
    let idx = HostTensor::zeros(DType::F32, vec![2]);
    let x = HostTensor::zeros(DType::F32, vec![ROWS, LANES]);
    let launch = gather_launch(2);
    let (result, line) = (launch.run(&Device::interp(), &[&idx, &x]), line!());
    let error = trace_error_at(result, line);
    assert!(
        matches!(
            error,
            TraceError::DTypeMismatch {
                expected: DType::I32,
                got: DType::F32,
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error.to_string().contains("scalar-prefetch `_idx`"),
        "{error}"
    );
}

#[test]
fn a_missing_prefetch_array_is_reported_at_the_run_call() {
    let x = HostTensor::zeros(DType::F32, vec![ROWS, LANES]);
    let (result, line) = (gather_launch(1).run(&Device::interp(), &[&x]), line!());
    let error = trace_error_at(result, line);
    assert!(
        matches!(
            error,
            TraceError::OperandCount {
                expected: 2,
                got: 1,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn a_prefetched_block_index_out_of_range_is_an_error_on_the_interpreter() {
    let idx = HostTensor::from_vec(vec![2], vec![0i32, 3]);
    let x = HostTensor::zeros(DType::F32, vec![2 * ROWS, LANES]);
    let err = gather_launch(2)
        .run(&Device::interp(), &[&idx, &x])
        .expect_err("block 3 of 2 is out of bounds");
    let text = err.to_string();
    assert!(text.contains("out of bounds"), "{text}");
    assert!(text.contains("scalar_prefetch_tests.rs"), "{text}");
}

#[test]
fn the_gather_has_the_structure_pallas_emits() {
    let (n_out, v) = (4, 6);
    let program = gather_launch(n_out)
        .trace_program(&[
            (DType::I32, vec![n_out]),
            (DType::F32, vec![v * ROWS, LANES]),
        ])
        .expect("traces");
    // Same grid, semantics, scalar-prefetch count, argument types (grid index, the SMEM
    // array, the VMEM windows), window bounds and index maps (the input's first block index
    // is a `memref.load` from the prefetched array, as in Pallas).
    let (n_out, v) = (n_out.to_string(), v.to_string());
    let args = ["--gather", n_out.as_str(), v.as_str()];
    if let Some(pallas) =
        support::assert_pallas_structure("prefetch-pallas", &program, &args, "gather")
    {
        assert_eq!(pallas["scalar_prefetch"], 1);
    }
}
