//! Conveniences of kernel bodies (#16 item 2.10): static slices of tile values, `o += x` on
//! refs, and `<`/`<=`/`>`/`>=`/`==`/`!=` on traced values (the macro rewrites them; Rust
//! values keep Rust's meaning). Each kernel runs on the interpreter and the XLA CPU plugin
//! against an exact reference computed here, its Mosaic verifies with jaxlib's tpu dialect,
//! and libtpu compiles it for v5e, v6e and tpu7x. A slice that does not fit is reported at
//! this file's line; a strided slice runs on the CPU forms and is refused for TPU at its line.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, MosaicError, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

const ROWS: usize = 8;
const LANES: usize = 128;

/// The two lane-halves of each `[8, 256]` block: `o = 2 * max(left, right) - 1` through
/// `o += ..`, a helper's `*o *= ..`, `*o -= ..`, and `positive` counting with Rust and traced `if`s.
#[tpu_kernel]
fn halves(x: &Ref<f32>, o: &mut RefMut<f32>, positive: &mut RefMut<i32>) {
    let t = x.load();
    let left = t.slice([0, 0], [ROWS, LANES]);
    let right = t.slice([0, LANES], [ROWS, LANES]);
    o.store(left);
    o += where_(left < right, right - left, 0.0);
    double(o);
    *o -= 1;
    positive.store(where_(0.0 < left, 1, 0));
    for k in 0..3 {
        // Rust values: Rust's `!=`, a Rust `if`.
        if k != 1 && LANES >= 128 {
            positive += 10;
        }
    }
    // Traced: both branches update the same ref.
    if program_id(0) == 1 {
        positive *= -1;
    } else {
        positive -= 0;
    }
}

/// Outside kernel bodies `*o *= x` is `MulAssign` on the ref (a load, the op, a store).
#[track_caller]
fn double(o: &mut RefMut<f32>) {
    *o *= 2.0;
}

fn halves_launch(rows: usize) -> Launch {
    halves::launch()
        .grid([rows / ROWS])
        .input(BlockSpec::new([ROWS, 2 * LANES], |i| (i, 0)))
        .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [rows, LANES])
        .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [rows, LANES])
}

/// Every comparison as one bit of `o`, traced on both sides, against a literal on either
/// side, a scalar against a tile, and a `while` whose traced condition is a `<`.
#[tpu_kernel]
fn comparisons(x: &Ref<i32>, y: &Ref<i32>, o: &mut RefMut<i32>) {
    let (a, b) = (x.load(), y.load());
    let mut bits = where_(a < b, 1, 0);
    bits = bits | where_(a <= b, 2, 0);
    bits = bits | where_(a > b, 4, 0);
    bits = bits | where_(a >= b, 8, 0);
    bits = bits | where_(a == b, 16, 0);
    bits = bits | where_(a != b, 32, 0);
    bits = bits | where_(a > 0, 64, 0);
    bits = bits | where_(0 >= a, 128, 0);
    bits = bits | where_(program_id(0) < a, 256, 0);
    o.store(bits);
    let mut i = scalar::<i32>(0);
    while i < 3 {
        o += 1000;
        i += 1;
    }
}

/// A generic kernel: `>` on a tile of the kernel's element type.
#[tpu_kernel]
fn relu<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
    let t = x.load();
    o.store(where_(t > 0.0, t, 0.0));
}

/// Odd columns: a strided slice (CPU forms and interpreter; not Mosaic).
#[tpu_kernel]
fn odd_columns(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load().slice_strided([0, 1], [ROWS, LANES], [1, 2]));
}

const STRIDED_LINE: u32 = line!() - 3;

/// Columns 200 .. 328 of a 256-column block.
#[tpu_kernel]
fn slice_too_far(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load().slice([0, 200], [ROWS, LANES]));
}

const TOO_FAR_LINE: u32 = line!() - 3;

/// An unaligned window (rows 3.., lanes 5..) of a `[16, 256]` block, and one element of it
/// as a scalar added to the whole window.
#[tpu_kernel]
fn unaligned_window(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let w = x.load().slice([3, 5], [ROWS, LANES]);
    o.store(w + w.element([2, 7]));
}

fn unaligned_launch(steps: usize) -> Launch {
    unaligned_window::launch()
        .grid([steps])
        .input(BlockSpec::new([2 * ROWS, 2 * LANES], |i| (i, 0)))
        .output(
            BlockSpec::new([ROWS, LANES], |i| (i, 0)),
            [steps * ROWS, LANES],
        )
}

fn odd_columns_launch(rows: usize) -> Launch {
    odd_columns::launch()
        .grid([rows / ROWS])
        .input(BlockSpec::new([ROWS, 2 * LANES], |i| (i, 0)))
        .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [rows, LANES])
}

fn comparisons_launch(rows: usize) -> Launch {
    let spec = || BlockSpec::new([ROWS, LANES], |i| (i, 0));
    comparisons::launch()
        .grid([rows / ROWS])
        .input(spec())
        .input(spec())
        .output(spec(), [rows, LANES])
}

fn relu_launch(rows: usize) -> Launch {
    let spec = || BlockSpec::new([ROWS, LANES], |i| (i, 0));
    relu::launch()
        .grid([rows / ROWS])
        .input(spec())
        .output(spec(), [rows, LANES])
}

#[test]
fn slices_ref_updates_and_comparisons_of_halves_are_exact_everywhere() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let rows = 3 * ROWS;
    // Quarter steps: 2 * max - 1 is exact in f32.
    let xf: Vec<f32> = (0..rows * 2 * LANES)
        .map(|_| rng.gen_range(-40..40) as f32 * 0.25)
        .collect();
    let x = HostTensor::from_vec(vec![rows, 2 * LANES], xf.clone());
    let mut want_o = Vec::new();
    let mut want_positive = Vec::new();
    for r in 0..rows {
        for c in 0..LANES {
            let (l, rt) = (xf[r * 2 * LANES + c], xf[r * 2 * LANES + LANES + c]);
            want_o.push(2.0 * f64::from(l.max(rt)) - 1.0);
            let count = i32::from(l > 0.0) + 20;
            want_positive.push(f64::from(if r / ROWS == 1 { -count } else { count }));
        }
    }
    for (device, out) in support::run_everywhere(&halves_launch(rows), &[&x]) {
        assert_eq!(out[0].to_f64_vec(), want_o, "{device}: o");
        assert_eq!(out[1].to_f64_vec(), want_positive, "{device}: positive");
    }
}

#[test]
fn every_comparison_operator_is_traced_with_its_meaning() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(22);
    let rows = 2 * ROWS;
    // Few values, so equal pairs are common.
    let xa: Vec<i32> = (0..rows * LANES).map(|_| rng.gen_range(-3..4)).collect();
    let xb: Vec<i32> = (0..rows * LANES).map(|_| rng.gen_range(-3..4)).collect();
    let want: Vec<f64> = xa
        .iter()
        .zip(&xb)
        .enumerate()
        .map(|(e, (&a, &b))| {
            let step = (e / LANES / ROWS) as i32;
            let bit = |c: bool, v: i32| if c { v } else { 0 };
            let bits = bit(a < b, 1)
                | bit(a <= b, 2)
                | bit(a > b, 4)
                | bit(a >= b, 8)
                | bit(a == b, 16)
                | bit(a != b, 32)
                | bit(a > 0, 64)
                | bit(0 >= a, 128)
                | bit(step < a, 256);
            f64::from(bits + 3000)
        })
        .collect();
    let a = HostTensor::from_vec(vec![rows, LANES], xa);
    let b = HostTensor::from_vec(vec![rows, LANES], xb);
    for (device, out) in support::run_everywhere(&comparisons_launch(rows), &[&a, &b]) {
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
}

#[test]
fn a_generic_kernel_compares_tiles_of_its_element_type() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(23);
    let rows = 2 * ROWS;
    let xf: Vec<f32> = (0..rows * LANES)
        .map(|_| rng.gen_range(-1.0..1.0))
        .collect();
    let want: Vec<f64> = xf.iter().map(|&v| f64::from(v.max(0.0))).collect();
    let x = HostTensor::from_vec(vec![rows, LANES], xf);
    for (device, out) in support::run_everywhere(&relu_launch(rows), &[&x]) {
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
}

#[test]
fn an_unaligned_window_and_one_element_of_it_are_exact_everywhere() {
    let steps = 2;
    let xf: Vec<f32> = (0..steps * 2 * ROWS * 2 * LANES)
        .map(|i| i as f32)
        .collect();
    let at = |s: usize, r: usize, c: usize| xf[(s * 2 * ROWS + r) * 2 * LANES + c];
    let want: Vec<f64> = (0..steps)
        .flat_map(|s| {
            let e = at(s, 3 + 2, 5 + 7);
            (0..ROWS).flat_map(move |r| (0..LANES).map(move |c| f64::from(at(s, 3 + r, 5 + c) + e)))
        })
        .collect();
    let x = HostTensor::from_vec(vec![steps * 2 * ROWS, 2 * LANES], xf.clone());
    for (device, out) in support::run_everywhere(&unaligned_launch(steps), &[&x]) {
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
}

#[test]
fn a_strided_slice_runs_on_the_cpu_forms_and_is_refused_for_tpu_at_its_line() {
    let rows = 2 * ROWS;
    let xf: Vec<f32> = (0..rows * 2 * LANES).map(|i| i as f32).collect();
    let want: Vec<f64> = (0..rows)
        .flat_map(|r| (0..LANES).map(move |c| (r * 2 * LANES + 1 + 2 * c) as f64))
        .collect();
    let x = HostTensor::from_vec(vec![rows, 2 * LANES], xf);
    let launch = odd_columns_launch(rows);
    for (device, out) in support::run_everywhere(&launch, &[&x]) {
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
    let program = launch
        .trace_program(&[(DType::F32, vec![rows, 2 * LANES])])
        .expect("traces");
    // The rows dim holds the grid steps and is taken whole: the folded form slices the
    // whole array once.
    let text = tessera_lowering::stablehlo::emit_kernel(&program).expect("emits");
    let slice = text
        .lines()
        .find(|l| l.contains("stablehlo.slice"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(slice.contains("tensor<16x256xf32>"), "{slice}");
    match lower_to_mosaic(&program, TpuGeneration::V6e) {
        Err(e @ MosaicError::Unsupported { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains(&format!("conveniences_tests.rs:{STRIDED_LINE}:"))
                    && message.contains("unit strides"),
                "{message}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_slice_that_does_not_fit_is_reported_at_its_line() {
    let x = HostTensor::zeros(DType::F32, vec![ROWS, 2 * LANES]);
    let launch = slice_too_far::launch()
        .input(BlockSpec::new([ROWS, 2 * LANES], || (0, 0)))
        .output(BlockSpec::new([ROWS, LANES], || (0, 0)), [ROWS, LANES]);
    let error: TraceError = match launch.run(&Device::interp(), &[&x]) {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {other:?}"),
    };
    let message = error.to_string();
    assert!(
        message.contains(&format!("conveniences_tests.rs:{TOO_FAR_LINE}:"))
            && message.contains("128 elements from 200"),
        "{message}"
    );
}

fn programs() -> Vec<(&'static str, KernelProgram)> {
    let rows = 2 * ROWS;
    vec![
        (
            "halves",
            halves_launch(rows)
                .trace_program(&[(DType::F32, vec![rows, 2 * LANES])])
                .expect("traces"),
        ),
        (
            "comparisons",
            comparisons_launch(rows)
                .trace_program(&[
                    (DType::I32, vec![rows, LANES]),
                    (DType::I32, vec![rows, LANES]),
                ])
                .expect("traces"),
        ),
        (
            "unaligned_window",
            unaligned_launch(2)
                .trace_program(&[(DType::F32, vec![4 * ROWS, 2 * LANES])])
                .expect("traces"),
        ),
        (
            "relu",
            relu_launch(rows)
                .trace_program(&[(DType::F32, vec![rows, LANES])])
                .expect("traces"),
        ),
    ]
}

#[test]
fn conveniences_lower_to_mosaic_that_jaxlib_verifies() {
    for (name, program) in programs() {
        let m = lower_to_mosaic(&program, TpuGeneration::V6e).expect("lowers");
        if name == "halves" {
            assert_eq!(
                m.readable
                    .matches("\"vector.extract_strided_slice\"")
                    .count(),
                2,
                "{}",
                m.readable
            );
        }
        if let Some(py) = support::jax_python() {
            support::verify_mosaic(
                &py,
                "conveniences-mosaic",
                &format!("{name}.mlir"),
                &m.serialized,
            );
        }
    }
}

#[test]
fn conveniences_compile_with_libtpu_for_three_generations() {
    for (name, program) in programs() {
        eprintln!("{name}");
        support::compiles_for_every_topology(&program);
    }
}
