//! Scans and index reductions along an axis: a row cumulative sum over rows longer than one
//! block (the running total of earlier column blocks carried in VMEM scratch along a
//! sequential grid axis), in f32 and i32, and row argmax/argmin. Each runs on the interpreter
//! and the XLA CPU plugin against a float64 or exact integer reference, its Mosaic verifies
//! with jaxlib's tpu dialect, and libtpu compiles it for v5e, v6e and tpu7x. Misuse is
//! reported at this file's lines.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::{emit_kernel, Form};
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;

#[path = "shared/row_cumsum.rs"]
mod row_cumsum;
use row_cumsum::{cumsum_launch, row_cumsum_f32, row_cumsum_i32};
use tessera_runtime::{Device, LaunchExt, RuntimeError};

use row_cumsum::ROWS;
const LANES: usize = 128;

/// Whole rows per block, every step parallel: running sum, maximum and minimum of each row,
/// and the running sum down each column of the block (along the sublanes). On the CPU plugin
/// this folds into whole-array scans.
#[tpu_kernel]
fn row_scans(
    x: &Ref<f32>,
    total: &mut RefMut<f32>,
    high: &mut RefMut<f32>,
    low: &mut RefMut<f32>,
    down: &mut RefMut<f32>,
) {
    let t = x.load();
    total.store(cumsum(t, -1));
    high.store(t.cummax(1));
    low.store(t.cummin(1));
    down.store(t.cumsum(0));
}

fn row_scans_launch(rows: usize, cols: usize) -> Launch {
    let spec = || BlockSpec::new([ROWS, cols], |i| (i, 0));
    row_scans::launch()
        .grid([rows / ROWS])
        .input(spec())
        .output(spec(), [rows, cols])
        .output(spec(), [rows, cols])
        .output(spec(), [rows, cols])
        .output(spec(), [rows, cols])
}

/// The index of each row's first maximum and first minimum, side by side in two lanes
/// groups: `o[:, 0]` argmax, `o[:, 1]` argmin (as `[rows, 1]` outputs).
#[tpu_kernel]
fn row_arg_extremes(x: &Ref<f32>, hi: &mut RefMut<i32>, lo: &mut RefMut<i32>) {
    let t = x.load();
    hi.store(t.argmax(1, true));
    lo.store(t.argmin(-1, true));
}

fn arg_launch(rows: usize, cols: usize) -> Launch {
    row_arg_extremes::launch()
        .grid([rows / ROWS])
        .input(BlockSpec::new([ROWS, cols], |i| (i, 0)))
        .output(BlockSpec::new([ROWS, 1], |i| (i, 0)), [rows, 1])
        .output(BlockSpec::new([ROWS, 1], |i| (i, 0)), [rows, 1])
}

/// Row cumulative sums in float64.
fn cumsum_reference(x: &[f64], cols: usize) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|row| {
            row.iter().scan(0.0, |acc, v| {
                *acc += v;
                Some(*acc)
            })
        })
        .collect()
}

#[test]
fn row_cumsum_of_integers_is_exact_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let (rows, cols, bc) = (16, 3 * LANES, LANES);
    // i32: any values (sums wrap like the reference's i32 arithmetic would not: keep them
    // in range, |sum| < 2^31).
    let xi: Vec<i32> = (0..rows * cols)
        .map(|_| rng.gen_range(-1_000_000..1_000_000))
        .collect();
    let x = HostTensor::from_vec(vec![rows, cols], xi.clone());
    let want = cumsum_reference(&x.to_f64_vec(), cols);
    let launch = cumsum_launch(row_cumsum_i32::launch(), DType::I32, rows, cols, bc);
    for (device, out) in support::run_everywhere(&launch, &[&x]) {
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
    // f32 holding integers: every partial sum is an integer below 2^24, so any summation
    // order gives the float64 result exactly.
    let xf: Vec<f32> = (0..rows * cols)
        .map(|_| rng.gen_range(-1000..1000) as f32)
        .collect();
    let x = HostTensor::from_vec(vec![rows, cols], xf);
    let want = cumsum_reference(&x.to_f64_vec(), cols);
    let launch = cumsum_launch(row_cumsum_f32::launch(), DType::F32, rows, cols, bc);
    for (device, out) in support::run_everywhere(&launch, &[&x]) {
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
}

#[test]
fn row_cumsum_of_random_floats_matches_float64() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let (rows, cols, bc) = (8, 4 * LANES, 2 * LANES);
    let xf: Vec<f32> = (0..rows * cols).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let x = HostTensor::from_vec(vec![rows, cols], xf);
    let xs = x.to_f64_vec();
    let want = cumsum_reference(&xs, cols);
    // Bound: f32 sums of up to 512 terms of |x| < 1, each partial rounded: error below
    // n * eps * sum|x| (eps = 2^-24), checked per element against the running sum of |x|.
    let abs_sums = cumsum_reference(&xs.iter().map(|v| v.abs()).collect::<Vec<_>>(), cols);
    let launch = cumsum_launch(row_cumsum_f32::launch(), DType::F32, rows, cols, bc);
    for (device, out) in support::run_everywhere(&launch, &[&x]) {
        for (e, ((got, want), scale)) in out[0]
            .to_f64_vec()
            .iter()
            .zip(&want)
            .zip(&abs_sums)
            .enumerate()
        {
            let tol = cols as f64 * f64::from(f32::EPSILON) * scale.max(1.0);
            assert!(
                (got - want).abs() <= tol,
                "{device}: element {e}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn whole_row_scans_are_exact_in_every_form() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let (rows, cols) = (16, 2 * LANES);
    let xf: Vec<f32> = (0..rows * cols)
        .map(|_| rng.gen_range(-1000..1000) as f32)
        .collect();
    let x = HostTensor::from_vec(vec![rows, cols], xf);
    let xs = x.to_f64_vec();
    let running = |f: fn(f64, f64) -> f64| -> Vec<f64> {
        xs.chunks(cols)
            .flat_map(|row| {
                row.iter().scan(None, move |acc: &mut Option<f64>, &v| {
                    *acc = Some(acc.map_or(v, |a| f(a, v)));
                    *acc
                })
            })
            .collect()
    };
    // Down the columns of each 8-row block.
    let mut down = xs.clone();
    for r in 0..rows {
        if r % ROWS != 0 {
            for c in 0..cols {
                down[r * cols + c] += down[(r - 1) * cols + c];
            }
        }
    }
    let want = [
        cumsum_reference(&xs, cols),
        running(f64::max),
        running(f64::min),
        down,
    ];
    let launch = row_scans_launch(rows, cols);
    let mut runs = support::run_everywhere(&launch, &[&x]);
    runs.push((
        "cpu batched",
        launch
            .run_as(&support::cpu(), &[&x], Form::Batched)
            .expect("the batched form applies"),
    ));
    for (device, out) in runs {
        for (k, name) in ["cumsum", "cummax", "cummin", "cumsum down"]
            .iter()
            .enumerate()
        {
            assert_eq!(out[k].to_f64_vec(), want[k], "{device}: {name}");
        }
    }
}

#[test]
fn row_argmax_and_argmin_pick_the_first_extreme_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    let (rows, cols) = (16, 2 * LANES);
    // Few distinct values, so most rows have ties: the first index must win.
    let mut xf: Vec<f32> = (0..rows * cols)
        .map(|_| rng.gen_range(-20..20) as f32 * 0.25)
        .collect();
    // A NaN counts as the extreme of its row (NumPy's and JAX's argmax/argmin).
    xf[3 * cols + 77] = f32::NAN;
    let x = HostTensor::from_vec(vec![rows, cols], xf.clone());
    let first = |row: &[f32], better: fn(f32, f32) -> bool| {
        let mut best = 0;
        for (i, &v) in row.iter().enumerate() {
            if row[best].is_nan() {
                break;
            }
            if v.is_nan() || better(v, row[best]) {
                best = i;
            }
        }
        best as f64
    };
    let want_hi: Vec<f64> = xf.chunks(cols).map(|r| first(r, |a, b| a > b)).collect();
    let want_lo: Vec<f64> = xf.chunks(cols).map(|r| first(r, |a, b| a < b)).collect();
    assert_eq!(want_hi[3], 77.0);
    for (device, out) in support::run_everywhere(&arg_launch(rows, cols), &[&x]) {
        assert_eq!(out[0].to_f64_vec(), want_hi, "{device}: argmax");
        assert_eq!(out[1].to_f64_vec(), want_lo, "{device}: argmin");
    }
}

fn programs() -> Vec<(&'static str, KernelProgram)> {
    let (rows, cols) = (16, 2 * LANES);
    vec![
        (
            "row_cumsum_f32",
            cumsum_launch(row_cumsum_f32::launch(), DType::F32, rows, cols, LANES)
                .trace_program(&[(DType::F32, vec![rows, cols])])
                .expect("traces"),
        ),
        (
            "row_cumsum_i32",
            cumsum_launch(row_cumsum_i32::launch(), DType::I32, rows, cols, LANES)
                .trace_program(&[(DType::I32, vec![rows, cols])])
                .expect("traces"),
        ),
        (
            "row_scans",
            row_scans_launch(rows, cols)
                .trace_program(&[(DType::F32, vec![rows, cols])])
                .expect("traces"),
        ),
        (
            "row_arg_extremes",
            arg_launch(rows, cols)
                .trace_program(&[(DType::F32, vec![rows, cols])])
                .expect("traces"),
        ),
    ]
}

#[test]
fn scans_lower_to_mosaic_rotates_that_jaxlib_verifies() {
    for (name, program) in programs() {
        let m = lower_to_mosaic(&program, TpuGeneration::V6e).expect("lowers");
        if name.starts_with("row_cumsum") || name == "row_scans" {
            // One Hillis-Steele step per power of two below the scanned dim: log2(128) = 7
            // for the column blocks; log2(256) = 8 for each of the three whole-row scans and
            // log2(8) = 3 down the sublanes.
            let rotates = if name == "row_scans" { 3 * 8 + 3 } else { 7 };
            assert_eq!(
                m.readable.matches("\"tpu.dynamic_rotate\"").count(),
                rotates,
                "{name}: {}",
                m.readable
            );
        }
        if let Some(py) = support::jax_python() {
            support::verify_mosaic(&py, "scan-mosaic", &format!("{name}.mlir"), &m.serialized);
        }
    }
}

#[test]
fn scans_compile_with_libtpu_for_three_generations() {
    for (name, program) in programs() {
        eprintln!("{name}");
        support::compiles_for_every_topology(&program);
    }
}

/// A kernel whose scan axis is out of range for its 2-D tile.
// The carried scan (row_cumsum_f32's pattern) is emitted as one whole-row cumsum under
// `Form::Auto` (`lowering/src/stablehlo/kernel/carried.rs`); a kernel that only looks like it
// keeps the grid loop. Both run on the interpreter and the XLA CPU plugin against float64
// references on seeded random inputs, with one, two, three and four column steps.

/// Near miss: the carry adds each block's maximum, not its total.
#[tpu_kernel]
fn carried_max_offsets(x: &Ref<f32>, o: &mut RefMut<f32>, carry: &mut Scratch<f32>) {
    if program_id(1).eq(0) {
        carry.store(zeros());
    }
    let t = x.load();
    let before = carry.load();
    o.store(t.cumsum(1) + before);
    carry.store(before + t.max(1, true));
}

/// Float64 reference: per row, each column block's cumsum plus `offset` of the earlier
/// blocks (their total, or the sum of their maxima).
fn carried_reference(
    x: &[f64],
    cols: usize,
    bc: usize,
    block_offset: fn(&[f64]) -> f64,
) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|row| {
            let mut carry = 0.0;
            let mut out = Vec::with_capacity(cols);
            for block in row.chunks(bc) {
                let mut run = 0.0;
                for v in block {
                    run += v;
                    out.push(run + carry);
                }
                carry += block_offset(block);
            }
            out
        })
        .collect()
}

fn check_carried(
    kernel: fn() -> Launch,
    carried: bool,
    seed: u64,
    block_offset: fn(&[f64]) -> f64,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for steps in 1..=4 {
        let (rows, bc) = (16, LANES);
        let cols = steps * bc;
        let l = cumsum_launch(kernel(), DType::F32, rows, cols, bc);
        let program = l
            .trace_program(&[(DType::F32, vec![rows, cols])])
            .expect("traces");
        let text = emit_kernel(&program).expect("emits");
        // With one column step the carry is never read: any such kernel is one scan.
        let carried = carried || steps == 1;
        assert_eq!(
            !text.contains("stablehlo.while"),
            carried,
            "{steps} steps: rewritten must be {carried}\n{text}"
        );
        let xf: Vec<f32> = (0..rows * cols).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let x = HostTensor::from_vec(vec![rows, cols], xf);
        let xs = x.to_f64_vec();
        let want = carried_reference(&xs, cols, bc, block_offset);
        let abs: Vec<f64> = xs.iter().map(|v| v.abs()).collect();
        let scale = carried_reference(&abs, cols, bc, |b| b.iter().sum());
        // Form::Auto and the grid loop on the CPU plugin, and the interpreter.
        for (device, out) in support::run_everywhere(&l, &[&x]) {
            for (e, ((got, want), s)) in out[0]
                .to_f64_vec()
                .iter()
                .zip(&want)
                .zip(&scale)
                .enumerate()
            {
                // f32 partial sums of up to `cols` terms of |x| < 1.
                let tol = cols as f64 * f64::from(f32::EPSILON) * s.max(1.0);
                assert!(
                    (got - want).abs() <= tol,
                    "{device}, {steps} steps: element {e}: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn a_carried_row_cumsum_is_one_whole_row_scan_and_matches_float64() {
    check_carried(row_cumsum_f32::launch, true, 21, |b| b.iter().sum());
}

#[test]
fn a_carry_of_block_maxima_keeps_the_grid_loop_and_matches_float64() {
    check_carried(carried_max_offsets::launch, false, 22, |b| {
        b.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    });
}

#[tpu_kernel]
fn cumsum_bad_axis(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load().cumsum(2));
}

const BAD_AXIS_LINE: u32 = line!() - 3;

/// `argmax` over two axes at once (it takes one).
#[tpu_kernel]
fn argmax_two_axes(x: &Ref<f32>, o: &mut RefMut<i32>) {
    o.store(x.load().argmax([0, 1], true));
}

const TWO_AXES_LINE: u32 = line!() - 3;

fn trace_error(result: Result<Vec<HostTensor>, RuntimeError>) -> TraceError {
    match result {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {other:?}"),
    }
}

#[test]
fn a_scan_on_a_bad_axis_is_reported_at_its_line() {
    let x = HostTensor::zeros(DType::F32, vec![ROWS, LANES]);
    let launch = cumsum_bad_axis::launch()
        .input(BlockSpec::new([ROWS, LANES], || (0, 0)))
        .output(BlockSpec::new([ROWS, LANES], || (0, 0)), [ROWS, LANES]);
    let message = trace_error(launch.run(&Device::interp(), &[&x])).to_string();
    assert!(
        message.contains(&format!("scan_tests.rs:{BAD_AXIS_LINE}:"))
            && message.contains("`cumsum`")
            && message.contains("axis 2 is out of range for shape [8, 128]"),
        "{message}"
    );
    let launch = argmax_two_axes::launch()
        .input(BlockSpec::new([ROWS, LANES], || (0, 0)))
        .output(BlockSpec::new([1, 1], || (0, 0)), [1, 1]);
    let message = trace_error(launch.run(&Device::interp(), &[&x])).to_string();
    assert!(
        message.contains(&format!("scan_tests.rs:{TWO_AXES_LINE}:"))
            && message.contains("`argmax`: takes one axis, got [0, 1]"),
        "{message}"
    );
}
