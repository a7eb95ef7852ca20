//! Element-offset block dims (`BlockSpec::element`, Pallas' `pl.Element`): the index map's
//! result for those dims is an element offset, not a block index, so windows may overlap or
//! leave gaps and the array need not be a multiple of the block. A sliding-window row sum
//! (step `i` sums rows `[stride * i, stride * i + 8)`), a copy into overlapping output
//! windows and a gather of rows at scalar-prefetched offsets match float64 / exact references
//! on the interpreter and on the XLA CPU plugin (Auto and the grid loop). On TPU an element
//! offset along a window's last two (tiled) dims must be provably tile-aligned (libtpu's
//! rule, checked early by Tessera); the aligned variants and leading-dim windows verify
//! with jaxlib, have the structure Pallas emits for the same kernel
//! (`tools/pallas_structure.py --element`) and libtpu compiles them for v5e, v6e and tpu7x.
//! Misuse is reported at the user's line.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, MosaicError, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::{batched_form_applies, emit_kernel_as, Form};
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

const ROWS: usize = 8;
const LANES: usize = 128;

/// Column sums of the window, written to every row of the output block.
#[tpu_kernel]
fn window_sums(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load().sum(0, true).broadcast_to([8, 128]));
}

/// Rows of x the windows cover: `steps` windows of `rows` rows, `stride` rows apart.
fn covered_rows(steps: usize, stride: usize, rows: usize) -> usize {
    (steps - 1) * stride + rows
}

/// Step `i` sums rows `[stride * i, stride * i + rows)` of x into output block `i`.
fn window_launch(steps: usize, stride: usize, rows: usize) -> Launch {
    let s = stride as i32;
    window_sums::launch()
        .grid([steps])
        .input(BlockSpec::new([rows, LANES], move |i| (i * s, 0)).element([0])) // WINDOW
        .output(
            BlockSpec::new([ROWS, LANES], |i| (i, 0)),
            [steps * ROWS, LANES],
        )
}

#[tpu_kernel]
fn copy(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load());
}

/// Block `i` of x (`rows` rows) copied to output rows `[stride * i, stride * i + rows)`:
/// later steps overwrite the rows they share with earlier ones (the grid runs in order).
fn scatter_launch(steps: usize, stride: usize, rows: usize) -> Launch {
    let s = stride as i32;
    copy::launch()
        .grid([steps])
        .input(BlockSpec::new([rows, LANES], |i| (i, 0)))
        .output(
            BlockSpec::new([rows, LANES], move |i| (i * s, 0)).element([0]),
            [covered_rows(steps, stride, rows), LANES],
        )
        .semantics([Arbitrary])
}

#[tpu_kernel]
fn rows_plus_one(_starts: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load() + 1.0);
}

/// Step `i` reads rows `[starts[i], starts[i] + 8)` of x (any row, read from SMEM).
fn gather_launch(n: usize) -> Launch {
    rows_plus_one::launch()
        .grid([n])
        .input(
            BlockSpec::prefetch([ROWS, LANES], |g, p| (p[0].load_scalar([g[0]]), 0)) // GATHER
                .element([0]),
        )
        .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [n * ROWS, LANES])
}

fn random(rng: &mut rand::rngs::StdRng, m: usize, n: usize) -> HostTensor {
    let data: Vec<f32> = (0..m * n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    HostTensor::from_vec(vec![m, n], data)
}

/// (steps, stride, rows): overlapping windows (36 rows), windows with gaps between them
/// (38 rows), 35 rows (not a multiple of the block) and the TPU-legal overlap of 16-row
/// windows every 8 rows (72 rows).
const CASES: [(usize, usize, usize); 4] = [(8, 4, 8), (4, 10, 8), (10, 3, 8), (8, 8, 16)];

/// The window sum TPUs take (offsets along the tiled row dim are multiples of 8).
const TPU_CASE: (usize, usize, usize) = (8, 8, 16);

#[test]
fn overlapping_element_windows_sum_rows_like_float64_everywhere() {
    for (seed, (steps, stride, rows)) in CASES.into_iter().enumerate() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed as u64 + 160);
        let x = random(&mut rng, covered_rows(steps, stride, rows), LANES);
        let xs = x.to_f64_vec();
        let want: Vec<f64> = (0..steps)
            .flat_map(|i| {
                let sums: Vec<f64> = (0..LANES)
                    .map(|c| (0..rows).map(|r| xs[(stride * i + r) * LANES + c]).sum())
                    .collect();
                std::iter::repeat_n(sums, ROWS).flatten()
            })
            .collect();
        // f32 sums of `rows` terms in [-1, 1): |error| <= rows * rows * 2^-24.
        let tol = (rows * rows) as f64 * f64::from(f32::EPSILON) / 2.0;
        let launch = window_launch(steps, stride, rows);
        for (device, out) in support::run_everywhere(&launch, &[&x]) {
            let worst = support::max_abs_error(&out[0].to_f64_vec(), &want);
            assert!(
                worst <= tol,
                "{device} {steps}x{stride}x{rows}: {worst} > {tol}"
            );
        }
    }
}

#[test]
fn auto_gathers_element_inputs_and_runs_element_outputs_in_the_grid_loop() {
    // An input with element dims is no re-layout: the batched form gathers each step's
    // window (Auto picks it: no while loop).
    let program = window_program((8, 4, ROWS));
    assert_eq!(batched_form_applies(&program), Ok(()));
    let auto = emit_kernel_as(&program, Form::Auto).expect("emits");
    assert!(!auto.contains("stablehlo.while"), "{auto}");
    assert!(auto.contains("stablehlo.gather"), "{auto}");
    // An output with element dims may be written by several steps: batched refuses (and
    // folded with it), so Auto runs the grid loop.
    let (steps, stride, rows) = (6, 4, ROWS);
    let scatter = scatter_launch(steps, stride, rows)
        .trace_program(&[(DType::F32, vec![steps * ROWS, LANES])])
        .expect("traces");
    let reason = batched_form_applies(&scatter).expect_err("not batchable");
    assert!(reason.contains("element offsets"), "{reason}");
    let auto = emit_kernel_as(&scatter, Form::Auto).expect("emits");
    assert!(auto.contains("stablehlo.while"), "{auto}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(170);
    let x = random(&mut rng, steps * ROWS, LANES);
    let xs = x.to_f64_vec();
    // Output row r comes from the last step whose window holds it.
    let want: Vec<f64> = (0..covered_rows(steps, stride, rows))
        .flat_map(|r| {
            let i = (r / stride).min(steps - 1);
            let src = i * rows + (r - i * stride);
            xs[src * LANES..(src + 1) * LANES].to_vec()
        })
        .collect();
    support::run_everywhere_exact(&scatter_launch(steps, stride, rows), &[&x], &want);
    let cpu = support::cpu();
    let refused = scatter_launch(steps, stride, rows).run_as(&cpu, &[&x], Form::Batched);
    assert!(
        matches!(&refused, Err(RuntimeError::Emit(e)) if e.to_string().contains("element offsets")),
        "{refused:?}"
    );
}

#[test]
fn element_offsets_read_from_smem_gather_any_row_and_are_checked_when_run() {
    let (n, v) = (6, 30);
    let (starts, x, want) = support::row_blocks_plus_one(180, n, v, ROWS, LANES);
    support::run_everywhere_exact(&gather_launch(n), &[&starts, &x], &want);
    let cpu = support::cpu();
    for form in [Form::Auto, Form::GridLoop] {
        let out = gather_launch(n)
            .run_checked(&cpu, &[&starts, &x], form, true)
            .expect("in bounds");
        assert_eq!(out[0].to_f64_vec(), want, "{form:?} checked");
    }
    // The last row a window of 8 may start at is 22 (30 - 8): 23 is out of bounds.
    let bad = HostTensor::from_vec(vec![n], vec![0, 22, 23, 5, 1, 2]);
    let at = format!("element_blocks_tests.rs:{}:", line_of("// GATHER"));
    let interp = gather_launch(n)
        .run(&Device::interp(), &[&bad, &x])
        .expect_err("the interpreter refuses the window")
        .to_string();
    assert!(interp.contains(&at), "{interp}");
    assert!(
        interp.contains("block [23, 0] (element offsets in dims [0])"),
        "{interp}"
    );
    for form in [Form::Auto, Form::GridLoop] {
        let err = gather_launch(n)
            .run_checked(&cpu, &[&bad, &x], form, true)
            .expect_err("checked mode refuses the window");
        assert!(
            matches!(err, RuntimeError::StartOutOfBounds { .. }),
            "{form:?}: {err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(&at), "{form:?}: {text}");
        assert!(
            text.contains(
                "the index map of `x` gives element offset 23 at dim 0 at grid step (2), out of \
                 bounds for a block of 8 in an array of shape [30, 128] (the CPU plugin would \
                 have clamped it to 22)"
            ),
            "{form:?}: {text}"
        );
    }
}

/// The line of this file holding `marker` (1-based).
fn line_of(marker: &str) -> usize {
    let src = include_str!("element_blocks_tests.rs");
    1 + src
        .lines()
        .position(|l| l.contains(marker) && !l.contains("line_of("))
        .expect("marker in this file")
}

fn window_program((steps, stride, rows): (usize, usize, usize)) -> KernelProgram {
    window_launch(steps, stride, rows)
        .trace_program(&[(DType::F32, vec![covered_rows(steps, stride, rows), LANES])])
        .expect("traces")
}

/// Step `i` sums `[4, 8, 128]` slabs `2i .. 2i + 4` of x: element offsets along a leading
/// dim, which TPUs take at any value (the sliding sum of the CPU tests, one dim up).
#[tpu_kernel]
fn slab_sums(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load().sum(0, false));
}

/// Step `i` reads the `[2, 8, 128]` slabs at `starts[i]` (any slab, read from SMEM).
#[tpu_kernel]
fn slabs_plus_one(_starts: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load() + 1.0);
}

/// Kernels with element windows that TPUs take, by name.
fn tpu_programs() -> Vec<(&'static str, KernelProgram)> {
    let f32s = |shape: Vec<usize>| (DType::F32, shape);
    vec![
        ("element-window", window_program(TPU_CASE)),
        (
            "element-scatter",
            scatter_launch(6, 8, 16)
                .trace_program(&[f32s(vec![6 * 16, LANES])])
                .expect("traces"),
        ),
        (
            "element-slabs",
            slab_sums::launch()
                .grid([8])
                .input(BlockSpec::new([4, ROWS, LANES], |i| (i * 2, 0, 0)).element([0]))
                .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [8 * ROWS, LANES])
                .trace_program(&[f32s(vec![18, ROWS, LANES])])
                .expect("traces"),
        ),
        (
            "element-slab-gather",
            slabs_plus_one::launch()
                .grid([4])
                .input(
                    BlockSpec::prefetch([2, ROWS, LANES], |g, p| (p[0].load_scalar([g[0]]), 0, 0))
                        .element([0]),
                )
                .output(
                    BlockSpec::new([2, ROWS, LANES], |i| (i, 0, 0)),
                    [8, ROWS, LANES],
                )
                .trace_program(&[(DType::I32, vec![4]), f32s(vec![7, ROWS, LANES])])
                .expect("traces"),
        ),
    ]
}

#[test]
fn element_windows_verify_with_jaxlib_and_compile_with_libtpu() {
    for (tag, program) in tpu_programs() {
        let m = lower_to_mosaic(&program, TpuGeneration::V5e).expect("lowers");
        assert!(
            m.readable
                .contains("window_kind = #tpu.element_window<[0, 0"),
            "{tag}: {}",
            m.readable
        );
        support::check_mosaic_of(tag, &program);
        support::compiles_for_every_topology(&program);
    }
}

#[test]
fn the_window_sum_has_the_structure_pallas_emits_for_pl_element() {
    let program = window_program(TPU_CASE);
    let args = ["--element", "8", "8", "16"];
    support::assert_pallas_structure("element-structure", &program, &args, "element");
}

#[test]
fn unaligned_element_offsets_along_tiled_dims_are_refused_for_tpu_at_the_blockspec() {
    // libtpu: "Couldn't prove that tiling (8) divides index returned by transform_indices on
    // dimension 0" for rows at `i * 4` or read from SMEM (measured for v5e, v6e and tpu7x);
    // the CPU forms and the interpreter run them (the tests above).
    let rows_at_4 = window_program((8, 4, ROWS));
    let gather = gather_launch(6)
        .trace_program(&[(DType::I32, vec![6]), (DType::F32, vec![30, LANES])])
        .expect("traces");
    let at = |marker: &str| format!("element_blocks_tests.rs:{}:", line_of(marker));
    for (program, at) in [(rows_at_4, at("// WINDOW")), (gather, at("// GATHER"))] {
        let err = lower_to_mosaic(&program, TpuGeneration::V5e).expect_err("refused");
        assert!(
            matches!(
                err,
                MosaicError::UnalignedElementOffset {
                    dim: 0,
                    multiple: 8,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(&at), "{text}");
        assert!(text.contains("must be provably a multiple of 8"), "{text}");
    }
}

/// The trace error of running `launch` on the interpreter.
fn trace_error(launch: &Launch, inputs: &[&HostTensor]) -> String {
    support::interp_trace_error(launch, inputs).to_string()
}

#[test]
fn an_element_offset_past_the_end_is_an_error_at_the_blockspec() {
    let x = HostTensor::zeros(DType::F32, vec![36, LANES]);
    // Step 8 would start at row 32: rows 32..40 of 36.
    let launch = window_sums::launch()
        .grid([9])
        .input(BlockSpec::new([ROWS, LANES], |i| (i * 4, 0)).element([0])) // PAST END
        .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [72, LANES]);
    let text = trace_error(&launch, &[&x]);
    let at = format!("element_blocks_tests.rs:{}:", line_of("// PAST END"));
    assert!(text.contains(&at), "{text}");
    assert!(
        text.contains("at grid index [8] the index map gives [32, 0] (element offsets in dims [0]"),
        "{text}"
    );
    assert!(text.contains("largest in range per dim: [28, 0]"), "{text}");
}

#[test]
fn misused_element_dims_are_errors_at_the_element_call() {
    let x = HostTensor::zeros(DType::F32, vec![36, LANES]);
    let spec = |i: Scalar<i32>| (i * 4, 0);
    let cases = [
        (
            BlockSpec::new([ROWS, LANES], spec).element([5]), // RANK
            "RANK",
            "element dim 5 is not a dim of the rank-2 block [8, 128]",
        ),
        (
            BlockSpec::new([ROWS, LANES], spec).padded().element([0]), // PADDED
            "PADDED",
            "`element([0])` with `padded()`",
        ),
        (
            BlockSpec::any().element([0]), // ANY
            "ANY",
            "`element([0])` on an HBM operand (`BlockSpec::any()`)",
        ),
    ];
    for (input, marker, want) in cases {
        let launch = window_sums::launch()
            .grid([8])
            .input(input)
            .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [64, LANES]);
        let text = trace_error(&launch, &[&x]);
        let at = format!(
            "element_blocks_tests.rs:{}:",
            line_of(&format!("// {marker}"))
        );
        assert!(text.contains(&at), "{marker}: {text}");
        assert!(text.contains(want), "{marker}: {text}");
    }
    // A squeezed dim's index already is an element offset (block size 1).
    let x3 = HostTensor::zeros(DType::F32, vec![4, ROWS, LANES]);
    let squeezed = copy::launch()
        .grid([4])
        .input(
            BlockSpec::new([1, ROWS, LANES], |i| (i, 0, 0))
                .squeeze([0])
                .element([0]), // SQUEEZED
        )
        .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [4 * ROWS, LANES]);
    let text = trace_error(&squeezed, &[&x3]);
    let at = format!("element_blocks_tests.rs:{}:", line_of("// SQUEEZED"));
    assert!(text.contains(&at), "{text}");
    assert!(text.contains("element dim 0 is also squeezed"), "{text}");
}
