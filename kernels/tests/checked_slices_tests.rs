//! Checked slices on the CPU forms: a traced start out of bounds (`load_slice`,
//! `store_slice`, element reads and writes, DMA windows, data-dependent index maps; in grid
//! loops, `fori` and `while` loops and `while` conditions; in the grid-loop and batched
//! forms) is an error at the kernel's line, the line the interpreter (the oracle) reports,
//! naming the first grid step where it failed, instead of the window StableHLO's
//! `dynamic_slice` clamps into bounds. In bounds, checked
//! modules give the interpreter's results exactly; unchecked ones keep the clamping
//! (documented behaviour of `TESSERA_CHECKED_SLICES=0`, the release default). Kernels with
//! no traced start emit the same module checked or not.

mod support;

use rand::{Rng, SeedableRng};
use std::cell::Cell;
use tessera_kernels::shipped;
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::{
    batched_form_applies, emit_kernel_as, emit_kernel_checked, Access, Form,
};
use tessera_lowering::{DType, HostTensor};
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

const ROWS: usize = 8;
const LANES: usize = 128;
/// Row blocks of the arrays the kernels read at traced rows.
const BLOCKS: usize = 4;

/// `file:line:` of the line of this file ending in `// marker`.
fn line_of(marker: &str) -> String {
    let line = include_str!("checked_slices_tests.rs")
        .lines()
        .position(|l| l.ends_with(&format!("// {marker}")))
        .expect("marker in this file")
        + 1;
    format!("kernels/tests/checked_slices_tests.rs:{line}:")
}

fn random_f32(rng: &mut rand::rngs::StdRng, shape: Vec<usize>) -> HostTensor {
    let n = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.gen_range(-4.0..4.0)).collect();
    HostTensor::from_vec(shape, data)
}

fn i32s(values: &[i32]) -> HostTensor {
    HostTensor::from_vec(vec![values.len()], values.to_vec())
}

/// Runs `launch` out of bounds: the interpreter and the checked CPU form (in `forms`) must
/// both fail at the line marked `marker`; the CPU error names the start and the clamp.
fn fails_at(launch: &Launch, inputs: &[&HostTensor], forms: &[Form], marker: &str, want: &str) {
    let at = line_of(marker);
    let interp = launch
        .run(&Device::interp(), inputs)
        .expect_err("the interpreter refuses the window")
        .to_string();
    assert!(interp.starts_with(&at), "interpreter: {interp}\nwant {at}");
    let cpu = Device::cpu().expect("CPU plugin");
    for &form in forms {
        let err = launch
            .run_checked(&cpu, inputs, form, true)
            .expect_err("checked mode refuses the window");
        assert!(
            matches!(err, RuntimeError::StartOutOfBounds { .. }),
            "{form:?}: {err:?}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with(&at) && text.contains(want),
            "{form:?}: {text}\nwant {at} ... {want}"
        );
        // The default (debug builds: on) agrees.
        let default = launch.run_as(&cpu, inputs, form).expect_err("on in tests");
        assert_eq!(default.to_string(), text, "{form:?}");
    }
}

/// Runs `launch` in bounds: the CPU forms, checked and not, give the interpreter's bytes.
fn matches_interp(launch: &Launch, inputs: &[&HostTensor], forms: &[Form]) {
    let want = launch.run(&Device::interp(), inputs).expect("interpreter");
    let cpu = Device::cpu().expect("CPU plugin");
    for &form in forms {
        for checked in [true, false] {
            let got = launch
                .run_checked(&cpu, inputs, form, checked)
                .unwrap_or_else(|e| panic!("{form:?} checked={checked}: {e}"));
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.shape(), w.shape(), "{form:?} checked={checked}");
                assert_eq!(g.bytes(), w.bytes(), "{form:?} checked={checked}");
            }
        }
    }
}

const LOOP_FORMS: [Form; 2] = [Form::Auto, Form::GridLoop];

/// `o = x[s .. s + 8]`, `s = start[0]`.
#[tpu_kernel]
fn load_rows(start: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let s = start.load_scalar([0]);
    o.store(x.load_slice((s, 0), [ROWS, LANES])); // LOAD ROWS
}

fn load_rows_launch() -> Launch {
    load_rows::launch()
        .input(BlockSpec::new([BLOCKS * ROWS, LANES], || [0, 0]))
        .output(BlockSpec::new([ROWS, LANES], || [0, 0]), [ROWS, LANES])
}

#[test]
fn a_load_slice_past_the_end_or_before_the_start_is_an_error_at_its_line() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let x = random_f32(&mut rng, vec![BLOCKS * ROWS, LANES]);
    let launch = load_rows_launch();
    for s in [0, 5, 24] {
        matches_interp(&launch, &[&i32s(&[s]), &x], &LOOP_FORMS);
    }
    fails_at(
        &launch,
        &[&i32s(&[28]), &x],
        &LOOP_FORMS,
        "LOAD ROWS",
        "`load_slice` start 28 out of bounds: window of 8 at dim 0 of a ref of shape [32, 128] \
         (the CPU plugin would have clamped it to 24)",
    );
    fails_at(
        &launch,
        &[&i32s(&[-3]), &x],
        &LOOP_FORMS,
        "LOAD ROWS",
        "`load_slice` start -3 out of bounds: window of 8 at dim 0",
    );
}

/// `o = x[s .. s + 8]` if `start[1] > 0`, else `o = x[0 .. 8]`, with `s = start[0]`: the
/// check state flows out of both branches of an `if`, inside a grid loop of two steps.
#[tpu_kernel]
fn load_rows_if(start: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let s = start.load_scalar([0]);
    o.store(x.load_slice((0, 0), [ROWS, LANES]));
    if start.load_scalar([1]).gt(program_id(0)) {
        o.store(x.load_slice((s, 0), [ROWS, LANES])); // IF SLICE
    }
}

#[test]
fn a_load_slice_out_of_bounds_in_a_branch_taken_is_an_error_at_its_line() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(10);
    let x = random_f32(&mut rng, vec![BLOCKS * ROWS, LANES]);
    let launch = load_rows_if::launch()
        .grid([2])
        .input(BlockSpec::new([BLOCKS * ROWS, LANES], |_| (0, 0)))
        .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [2 * ROWS, LANES])
        .semantics([Arbitrary]);
    // In bounds where the branch runs; out of bounds only where it never runs (start[1] = 0):
    // no error, as on the interpreter.
    for start in [[3, 2], [24, 1], [100, 0], [-5, 0]] {
        matches_interp(&launch, &[&i32s(&start), &x], &LOOP_FORMS);
    }
    // Taken on step 0 only, where 29 is out of bounds.
    fails_at(
        &launch,
        &[&i32s(&[29, 1]), &x],
        &LOOP_FORMS,
        "IF SLICE",
        "`load_slice` start 29 out of bounds at grid step (0): window of 8 at dim 0 of a ref of \
         shape [32, 128]",
    );
}

#[test]
fn checked_mode_off_keeps_the_clamping_of_dynamic_slice() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let x = random_f32(&mut rng, vec![BLOCKS * ROWS, LANES]);
    let cpu = Device::cpu().expect("CPU plugin");
    let launch = load_rows_launch();
    for (s, clamped) in [(28, 24), (1000, 24), (-3, 0)] {
        let out = launch
            .run_checked(&cpu, &[&i32s(&[s]), &x], Form::GridLoop, false)
            .expect("unchecked: clamped");
        let rows = &x.to_f64_vec()[clamped * LANES..(clamped + ROWS) * LANES];
        assert_eq!(out[0].to_f64_vec(), rows, "start {s}");
    }
}

/// `o = 0` but rows `s .. s + 8` = `x`.
#[tpu_kernel]
fn store_rows(start: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let s = start.load_scalar([0]);
    o.store(full::<f32>([BLOCKS * ROWS, LANES], 0.0));
    o.store_slice((s, 0), x.load()); // STORE ROWS
}

#[test]
fn a_store_slice_past_the_end_is_an_error_at_its_line() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let x = random_f32(&mut rng, vec![ROWS, LANES]);
    let launch = store_rows::launch()
        .input(BlockSpec::new([ROWS, LANES], || [0, 0]))
        .output(
            BlockSpec::new([BLOCKS * ROWS, LANES], || [0, 0]),
            [BLOCKS * ROWS, LANES],
        );
    for s in [0, 13, 24] {
        matches_interp(&launch, &[&i32s(&[s]), &x], &LOOP_FORMS);
    }
    fails_at(
        &launch,
        &[&i32s(&[25]), &x],
        &LOOP_FORMS,
        "STORE ROWS",
        "`store_slice` start 25 out of bounds: window of 8 at dim 0 of a ref of shape [32, 128] \
         (the CPU plugin would have clamped it to 24)",
    );
}

/// `o = 0` but `o[at[2], at[3]] = x[at[0], at[1]]`.
#[tpu_kernel]
fn move_element(at: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(full::<f32>([ROWS, LANES], 0.0));
    let v = x.load_scalar((at.load_scalar([0]), at.load_scalar([1]))); // READ ELEMENT
    o.store_scalar((at.load_scalar([2]), at.load_scalar([3])), v); // WRITE ELEMENT
}

#[test]
fn traced_element_reads_and_writes_out_of_bounds_are_errors_at_their_lines() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let x = random_f32(&mut rng, vec![ROWS, LANES]);
    let launch = move_element::launch()
        .input(BlockSpec::new([ROWS, LANES], || [0, 0]))
        .output(BlockSpec::new([ROWS, LANES], || [0, 0]), [ROWS, LANES]);
    for at in [[0, 0, 7, 127], [3, 100, 0, 5], [7, 127, 7, 127]] {
        matches_interp(&launch, &[&i32s(&at), &x], &LOOP_FORMS);
    }
    fails_at(
        &launch,
        &[&i32s(&[8, 0, 0, 0]), &x],
        &LOOP_FORMS,
        "READ ELEMENT",
        "`load_element` start 8 out of bounds: window of 1 at dim 0 of a ref of shape [8, 128] \
         (the CPU plugin would have clamped it to 7)",
    );
    fails_at(
        &launch,
        &[&i32s(&[0, 0, 2, 200]), &x],
        &LOOP_FORMS,
        "WRITE ELEMENT",
        "`store_element` start 200 out of bounds: window of 1 at dim 1 of a ref of shape \
         [8, 128] (the CPU plugin would have clamped it to 127)",
    );
}

/// Step `i` copies rows `starts[i] .. + 8` of `x` (HBM) by DMA to row block `i` of `o`.
#[tpu_kernel]
fn dma_rows(
    starts: &Prefetch<i32>,
    x: &Ref<f32>,
    o: &mut RefMut<f32>,
    buf: &mut Scratch<f32>,
    sems: &mut Scratch<i32>,
) {
    let i = program_id(0);
    let load = async_copy(
        x.at((starts.load_scalar([i]), 0), [ROWS, LANES]),
        buf.all(),
        sems.sem(0),
    );
    load.start(); // DMA IN
    load.wait();
    let back = async_copy(
        buf.all(),
        o.at((i * ROWS as i32, 0), [ROWS, LANES]),
        sems.sem(1),
    );
    back.start();
    back.wait();
}

#[test]
fn a_dma_window_out_of_bounds_on_a_later_grid_step_is_an_error_at_its_line() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let x = random_f32(&mut rng, vec![BLOCKS * ROWS, LANES]);
    let steps = 4;
    let launch = dma_rows::launch()
        .grid([steps])
        .input(BlockSpec::any())
        .output(BlockSpec::any(), [steps * ROWS, LANES])
        .scratch(Vmem::<f32>::new([ROWS, LANES]))
        .scratch(DmaSemaphores::new(2))
        .semantics([Arbitrary]);
    matches_interp(&launch, &[&i32s(&[24, 0, 3, 17]), &x], &LOOP_FORMS);
    // Steps 0 and 1 are in bounds; step 2 is not (step 3 neither: the first failure wins).
    fails_at(
        &launch,
        &[&i32s(&[0, 8, 30, -1]), &x],
        &LOOP_FORMS,
        "DMA IN",
        "`dma_start` source start 30 out of bounds at grid step (2): window of 8 at dim 0 of a \
         ref of shape [32, 128] (the CPU plugin would have clamped it to 24)",
    );
}

/// Copies the block the index map picked: a gather of row blocks.
#[tpu_kernel]
fn gather_rows(_idx: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load());
}

/// Block `idx[i]` for step `i`.
fn gather_map(g: &[Scalar<i32>], p: &[Prefetch<i32>]) -> (Scalar<i32>, i32) {
    (p[0].load_scalar([g[0]]), 0)
}

#[test]
fn an_index_map_reading_smem_out_of_bounds_on_a_later_step_is_an_error_at_its_blockspec() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(6);
    let x = random_f32(&mut rng, vec![BLOCKS * ROWS, LANES]);
    let n_out = 5;
    let launch = gather_rows::launch()
        .grid([n_out])
        .input(BlockSpec::prefetch([ROWS, LANES], gather_map)) // GATHER MAP
        .output(
            BlockSpec::new([ROWS, LANES], |i| (i, 0)),
            [n_out * ROWS, LANES],
        );
    matches_interp(&launch, &[&i32s(&[3, 0, 0, 2, 1]), &x], &LOOP_FORMS);
    fails_at(
        &launch,
        &[&i32s(&[3, 0, 1, 4, 2]), &x],
        &LOOP_FORMS,
        "GATHER MAP",
        "the index map of `x` gives block 4 at dim 0 at grid step (3), out of bounds for blocks of \
         8 in an array of shape [32, 128] (the CPU plugin would have clamped it to the block at \
         element 24)",
    );
    fails_at(
        &launch,
        &[&i32s(&[0, 1, 2, 3, -1]), &x],
        &LOOP_FORMS,
        "GATHER MAP",
        "gives block -1 at dim 0 at grid step (4)",
    );
}

/// `o = sum(x[0 .. n])` with `n` from SMEM, as a `fori` loop.
#[tpu_kernel]
fn sum_fori(n: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut acc = full::<f32>([1, ROWS, LANES], 0.0);
    for i in range(n.load_scalar([0])) {
        acc = acc + x.load_slice((i, 0, 0), [1, ROWS, LANES]); // FORI SLICE
    }
    o.store(acc);
}

/// `o = sum(x[0 .. n])` with `n` from SMEM, as a `while` loop.
#[tpu_kernel]
fn sum_while(n: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let count = n.load_scalar([0]);
    let mut i = scalar::<i32>(0);
    let mut acc = full::<f32>([1, ROWS, LANES], 0.0);
    while i.lt(count) {
        acc = acc + x.load_slice((i, 0, 0), [1, ROWS, LANES]); // WHILE SLICE
        i = i + 1;
    }
    o.store(acc);
}

/// `o = sum(x[0 .. k])` for the first `k` with `w[k] <= 0`: the condition reads SMEM at the
/// loop's counter, so without a 0 in `w` its last evaluation reads past `w`'s end.
#[tpu_kernel]
fn sum_while_positive(w: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut i = scalar::<i32>(0);
    let mut acc = full::<f32>([1, ROWS, LANES], 0.0);
    while positive(w, i) {
        acc = acc + x.load_slice((i, 0, 0), [1, ROWS, LANES]);
        i = i + 1;
    }
    o.store(acc);
}

/// `w[i] > 0` (a helper without `#[track_caller]`: errors name this line).
fn positive(w: &Prefetch<i32>, i: Scalar<i32>) -> Scalar<bool> {
    w.load_scalar([i]).gt(0) // WHILE CONDITION
}

/// `o = sum(x[0 .. k])` for the first `k` with `w[k] != k`: without one in `w`, the
/// condition's last evaluation reads past `w`'s end, and the window clamped into bounds
/// would end the loop (`w[3] != 4`): only the check after the loop can see it.
#[tpu_kernel]
fn sum_identity_prefix(w: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut i = scalar::<i32>(0);
    let mut acc = full::<f32>([1, ROWS, LANES], 0.0);
    while is_index(w, i) {
        acc = acc + x.load_slice((i, 0, 0), [1, ROWS, LANES]);
        i = i + 1;
    }
    o.store(acc);
}

/// `w[i] == i`.
fn is_index(w: &Prefetch<i32>, i: Scalar<i32>) -> Scalar<bool> {
    w.load_scalar([i]).eq(i) // LAST CONDITION
}

fn slabs(kernel: Launch) -> Launch {
    kernel
        .input(BlockSpec::new([BLOCKS, ROWS, LANES], || [0, 0, 0]))
        .output(
            BlockSpec::new([1, ROWS, LANES], || [0, 0, 0]),
            [1, ROWS, LANES],
        )
}

#[test]
fn slices_out_of_bounds_in_a_later_loop_trip_are_errors_at_their_lines() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let x = random_f32(&mut rng, vec![BLOCKS, ROWS, LANES]);
    let n = BLOCKS as i32;
    for (launch, marker) in [
        (slabs(sum_fori::launch()), "FORI SLICE"),
        (slabs(sum_while::launch()), "WHILE SLICE"),
    ] {
        for k in [0, 2, n] {
            matches_interp(&launch, &[&i32s(&[k]), &x], &LOOP_FORMS);
        }
        fails_at(
            &launch,
            &[&i32s(&[n + 2]), &x],
            &LOOP_FORMS,
            marker,
            "`load_slice` start 4 out of bounds: window of 1 at dim 0 of a ref of shape \
             [4, 8, 128] (the CPU plugin would have clamped it to 3)",
        );
    }
}

#[test]
fn a_while_condition_reading_out_of_bounds_on_its_last_evaluation_is_an_error_at_its_line() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(8);
    let x = random_f32(&mut rng, vec![BLOCKS, ROWS, LANES]);
    let launch = slabs(sum_while_positive::launch());
    for w in [[0, 1, 1, 1, 1, 1], [5, 1, 0, 2, 1, 1], [1, 1, 1, 1, -1, 7]] {
        matches_interp(&launch, &[&i32s(&w), &x], &LOOP_FORMS);
    }
    // Four trips in bounds; the condition's fifth evaluation reads w[4] of 4.
    fails_at(
        &launch,
        &[&i32s(&[1, 2, 3, 4]), &x],
        &LOOP_FORMS,
        "WHILE CONDITION",
        "`load_element` start 4 out of bounds: window of 1 at dim 0 of a ref of shape [4]",
    );
    let launch = slabs(sum_identity_prefix::launch());
    for w in [[5, 1, 2, 3], [0, 1, 0, 3], [0, 1, 2, -3]] {
        matches_interp(&launch, &[&i32s(&w), &x], &LOOP_FORMS);
    }
    fails_at(
        &launch,
        &[&i32s(&[0, 1, 2, 3]), &x],
        &LOOP_FORMS,
        "LAST CONDITION",
        "`load_element` start 4 out of bounds: window of 1 at dim 0 of a ref of shape [4] (the \
         CPU plugin would have clamped it to 3)",
    );
}

thread_local! {
    /// The row shift of [`shifted_rows`], in units of the grid's extent.
    static SHIFT: Cell<i32> = const { Cell::new(2) };
}

/// Step `i`: `o[i] = x[i][s .. s + 8]` with `s = num_programs * SHIFT`: a traced start the
/// same in every step, so the batched form applies.
#[tpu_kernel]
fn shifted_rows(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let s = num_programs(0) * SHIFT.with(Cell::get);
    o.store(x.load_slice((s, 0), [ROWS, LANES])); // BATCHED SLICE
}

#[test]
fn the_batched_form_chosen_by_auto_checks_its_traced_starts() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let steps = 4;
    let x = random_f32(&mut rng, vec![steps * 2 * ROWS, LANES]);
    let launch = shifted_rows::launch()
        .grid([steps])
        .input(BlockSpec::new([2 * ROWS, LANES], |i| (i, 0)))
        .output(
            BlockSpec::new([ROWS, LANES], |i| (i, 0)),
            [steps * ROWS, LANES],
        );
    let sig = [(DType::F32, vec![steps * 2 * ROWS, LANES])];
    let forms = [Form::Auto, Form::Batched, Form::GridLoop];
    for shift in [0, 1, 2] {
        SHIFT.with(|c| c.set(shift));
        let program = launch.trace_program(&sig).expect("traces");
        assert_eq!(
            batched_form_applies(&program),
            Ok(()),
            "Auto picks the batched form"
        );
        let checked = emit_kernel_checked(&program, Form::Auto).expect("emits");
        assert_eq!(checked.checks.len(), 1, "one traced start");
        assert_eq!(
            checked.checks[0].access,
            Access::Op {
                op: "load_slice",
                side: None
            }
        );
        matches_interp(&launch, &[&x], &forms);
    }
    SHIFT.with(|c| c.set(3));
    fails_at(
        &launch,
        &[&x],
        &forms,
        "BATCHED SLICE",
        "`load_slice` start 12 out of bounds at grid step (0): window of 8 at dim 0 of a ref of \
         shape [16, 128] (the CPU plugin would have clamped it to 8)",
    );
}

thread_local! {
    /// The row stride of [`strided_rows`] per step of grid axis 0.
    static STRIDE: Cell<i32> = const { Cell::new(4) };
}

/// Step `(i, j)`: `o[i, j] = x[j][s .. s + 8]` with `s = program_id(0) * STRIDE`: a start
/// that grows along axis 0 and is the same along axis 1.
#[tpu_kernel]
fn strided_rows(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let s = program_id(0) * STRIDE.with(Cell::get);
    o.store(x.load_slice((s, 0), [ROWS, LANES])); // STRIDED SLICE
}

/// Step `(i, j)`: `o[i, j] = x[s .. s + 8]` with `s = starts[2 * i + j]`: a start of its own
/// per step.
#[tpu_kernel]
fn per_step_rows(starts: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let step = program_id(0) * 2 + program_id(1);
    o.store(x.load_slice((starts.load_scalar([step]), 0), [ROWS, LANES])); // PER STEP SLICE
}

#[test]
fn the_error_names_the_first_grid_step_whose_start_is_out_of_bounds() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(10);
    // Grid (3, 2), axis 0 `arbitrary` (looped by the batched form), axis 1 parallel
    // (batched): steps (0, *) and (1, *) are in bounds, (2, *) not. The batched form, whose
    // start is the same at every index of axis 1, names index 0 there, as the grid loop does.
    let x = random_f32(&mut rng, vec![2 * 2 * ROWS, LANES]);
    let launch = strided_rows::launch()
        .grid([3, 2])
        .input(BlockSpec::new([2 * ROWS, LANES], |_, j| (j, 0)))
        .output(
            BlockSpec::new([ROWS, LANES], |i, j| (i, j)),
            [3 * ROWS, 2 * LANES],
        )
        .semantics([Arbitrary, Parallel]);
    let program = launch
        .trace_program(&[(DType::F32, vec![2 * 2 * ROWS, LANES])])
        .expect("traces");
    assert_eq!(batched_form_applies(&program), Ok(()));
    let forms = [Form::Auto, Form::Batched, Form::GridLoop];
    STRIDE.with(|c| c.set(4));
    matches_interp(&launch, &[&x], &forms);
    STRIDE.with(|c| c.set(5));
    fails_at(
        &launch,
        &[&x],
        &forms,
        "STRIDED SLICE",
        "`load_slice` start 10 out of bounds at grid step (2, 0): window of 8 at dim 0 of a ref \
         of shape [16, 128] (the CPU plugin would have clamped it to 8)",
    );

    // Every step its own start (grid loop only): step (1, 1) is the first out of bounds,
    // (2, 1) the second; the first is reported.
    let x = random_f32(&mut rng, vec![BLOCKS * ROWS, LANES]);
    let launch = per_step_rows::launch()
        .grid([3, 2])
        .input(BlockSpec::new([BLOCKS * ROWS, LANES], |_, _| (0, 0)))
        .output(
            BlockSpec::new([ROWS, LANES], |i, j| (i, j)),
            [3 * ROWS, 2 * LANES],
        );
    matches_interp(&launch, &[&i32s(&[0, 1, 24, 9, 3, 17]), &x], &LOOP_FORMS);
    fails_at(
        &launch,
        &[&i32s(&[0, 1, 24, 25, 3, -1]), &x],
        &LOOP_FORMS,
        "PER STEP SLICE",
        "`load_slice` start 25 out of bounds at grid step (1, 1): window of 8",
    );
}

#[test]
fn kernels_without_traced_starts_emit_the_same_module_checked_or_not() {
    let mut unchecked_kernels = 0;
    for k in shipped() {
        let program = support::default_program(k);
        for form in [Form::Auto, Form::GridLoop] {
            let plain = emit_kernel_as(&program, form).expect("emits");
            let checked = emit_kernel_checked(&program, form).expect("emits");
            if checked.checks.is_empty() {
                assert_eq!(checked.text, plain, "{} {form:?}", k.name);
            } else {
                assert_ne!(checked.text, plain, "{} {form:?}", k.name);
            }
        }
        let checks = emit_kernel_checked(&program, Form::Auto)
            .expect("emits")
            .checks;
        unchecked_kernels += usize::from(checks.is_empty());
    }
    assert!(
        unchecked_kernels > 0,
        "some shipped kernels have no traced start"
    );
}

#[test]
fn a_kernel_checked_only_in_its_index_maps_matches_unless_a_block_is_out_of_bounds() {
    // The gather's body has no traced start: its only checks are the index map's.
    let program = gather_rows::launch()
        .grid([2])
        .input(BlockSpec::prefetch([ROWS, LANES], gather_map))
        .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [2 * ROWS, LANES])
        .trace_program(&[
            (DType::I32, vec![2]),
            (DType::F32, vec![BLOCKS * ROWS, LANES]),
        ])
        .expect("traces");
    let checked = emit_kernel_checked(&program, Form::Auto).expect("emits");
    let kinds: Vec<String> = checked
        .checks
        .iter()
        .map(|c| c.access.to_string())
        .collect();
    // The map's SMEM read, then the block index it gives (rows; the lane dim is static 0).
    assert_eq!(
        kinds,
        ["`load_element`", "index map of `x`", "index map of `x`"]
    );
}

/// `o = x + 1`.
#[tpu_kernel]
fn plus_one(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load() + 1.0);
}

#[test]
fn grids_too_large_to_check_at_trace_time_check_their_blocks_in_the_grid_loop_only() {
    // 2^15 steps: more than the tracer evaluates index maps over. The batched form's maps are
    // in-bounds re-layouts by construction, so its module has nothing to check; the grid
    // loop's maps are run-time values and are checked when it runs.
    let steps = 1 << 15;
    let program = plus_one::launch()
        .grid([steps])
        .input(BlockSpec::new([ROWS, LANES], |i| (i, 0)))
        .output(
            BlockSpec::new([ROWS, LANES], |i| (i, 0)),
            [steps * ROWS, LANES],
        )
        .trace_program(&[(DType::F32, vec![steps * ROWS, LANES])])
        .expect("traces");
    let auto = emit_kernel_checked(&program, Form::Auto).expect("emits");
    assert!(auto.checks.is_empty());
    assert_eq!(
        auto.text,
        emit_kernel_as(&program, Form::Auto).expect("emits")
    );
    let looped = emit_kernel_checked(&program, Form::GridLoop).expect("emits");
    let kinds: Vec<String> = looped.checks.iter().map(|c| c.access.to_string()).collect();
    assert_eq!(
        kinds,
        [
            "index map of `x`",
            "index map of `x`",
            "index map of `o`",
            "index map of `o`"
        ]
    );
}
