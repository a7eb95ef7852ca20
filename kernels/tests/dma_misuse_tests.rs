//! Manual-DMA misuse, each an error at the user's line (the tracer's for what is known at
//! trace time, the interpreter's race detection for the protocol, as Pallas' interpret mode):
//! reading an HBM ref directly, a second wait, a wait on a copy never started, a read of a
//! destination (or a write of a source) before the wait, a busy semaphore, windows of
//! different shapes, a semaphore index out of range, a copy never waited for, one left in
//! flight on a pipelined block across steps or past the end of its `run_scoped` region.

use tessera_lowering::prelude::*;
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

/// The line of this file holding `marker` (a comment in a kernel below).
fn line_of(marker: &str) -> usize {
    include_str!("dma_misuse_tests.rs")
        .lines()
        .position(|l| l.contains(marker) && !l.contains("line_of"))
        .expect("marker in this file")
        + 1
}

fn misuse_error(launch: Launch, inputs: &[&HostTensor]) -> String {
    match launch.run(&Device::interp(), inputs) {
        Ok(_) => panic!("expected an error"),
        Err(e @ RuntimeError::Trace(_)) => e.to_string(),
        Err(e) => e.to_string(),
    }
}

fn assert_at(message: &str, marker: &str, says: &str) {
    let at = format!("dma_misuse_tests.rs:{}:", line_of(marker));
    assert!(message.contains(&at), "expected {at} in: {message}");
    assert!(message.contains(says), "expected `{says}` in: {message}");
}

#[tpu_kernel]
fn reads_hbm(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load()); // misuse: reads hbm
}

#[tpu_kernel]
fn waits_twice(x: &Ref<f32>, o: &mut RefMut<f32>, sems: &mut Scratch<i32>) {
    let c = async_copy(x.all(), o.all(), sems.sem(0));
    c.start();
    c.wait();
    c.wait(); // misuse: waits twice
}

#[tpu_kernel]
fn waits_unstarted(x: &Ref<f32>, o: &mut RefMut<f32>, sems: &mut Scratch<i32>) {
    let c = async_copy(x.all(), o.all(), sems.sem(0));
    c.wait(); // misuse: never started
}

#[tpu_kernel]
fn reads_before_wait(
    x: &Ref<f32>,
    o: &mut RefMut<f32>,
    buf: &mut Scratch<f32>,
    sems: &mut Scratch<i32>,
) {
    let c = async_copy(x.all(), buf.all(), sems.sem(0));
    c.start();
    o.store(buf.load()); // misuse: reads before wait
    c.wait();
}

#[tpu_kernel]
fn writes_source_in_flight(
    _x: &Ref<f32>,
    o: &mut RefMut<f32>,
    buf: &mut Scratch<f32>,
    sems: &mut Scratch<i32>,
) {
    buf.store(1.0);
    let c = async_copy(buf.all(), o.all(), sems.sem(0));
    c.start();
    buf.store(2.0); // misuse: writes source in flight
    c.wait();
}

#[tpu_kernel]
fn reuses_busy_semaphore(x: &Ref<f32>, o: &mut RefMut<f32>, sems: &mut Scratch<i32>) {
    let first = async_copy(x.at((0, 0), [8, 128]), o.at((0, 0), [8, 128]), sems.sem(0));
    let second = async_copy(x.at((8, 0), [8, 128]), o.at((8, 0), [8, 128]), sems.sem(0));
    first.start();
    second.start(); // misuse: busy semaphore
    first.wait();
    second.wait();
}

#[tpu_kernel]
fn mismatched_windows(x: &Ref<f32>, o: &mut RefMut<f32>, sems: &mut Scratch<i32>) {
    let c = async_copy(x.at((0, 0), [8, 128]), o.at((0, 0), [16, 128]), sems.sem(0)); // misuse: shapes
    c.start();
    c.wait();
}

#[tpu_kernel]
fn semaphore_out_of_range(x: &Ref<f32>, o: &mut RefMut<f32>, sems: &mut Scratch<i32>) {
    let c = async_copy(x.all(), o.all(), sems.sem(2));
    c.start(); // misuse: semaphore 2 of 2
    c.wait();
}

#[tpu_kernel]
fn traced_semaphore_out_of_range(
    k: &Prefetch<i32>,
    x: &Ref<f32>,
    o: &mut RefMut<f32>,
    sems: &mut Scratch<i32>,
) {
    let c = async_copy(x.all(), o.all(), sems.sem(k.load_scalar([0])));
    c.start(); // misuse: traced semaphore index
    c.wait();
}

#[tpu_kernel]
fn never_waited(x: &Ref<f32>, o: &mut RefMut<f32>, sems: &mut Scratch<i32>) {
    let c = async_copy(x.all(), o.all(), sems.sem(0));
    c.start(); // misuse: never waited
}

const SHAPE: [usize; 2] = [16, 128];

fn hbm_copy(kernel: Launch, sems: usize) -> Launch {
    kernel
        .input(BlockSpec::any())
        .output(BlockSpec::any(), SHAPE)
        .scratch(DmaSemaphores::new(sems))
}

fn x() -> HostTensor {
    HostTensor::zeros(DType::F32, SHAPE.to_vec())
}

#[test]
fn reading_an_hbm_ref_directly_is_an_error_at_its_line() {
    let launch = reads_hbm::launch()
        .input(BlockSpec::any())
        .output(BlockSpec::new(SHAPE, || [0, 0]), SHAPE);
    let e = misuse_error(launch, &[&x()]);
    assert_at(
        &e,
        "misuse: reads hbm",
        "an HBM ref must be copied to VMEM by DMA before it is read",
    );
}

#[test]
fn squeezing_an_hbm_operand_is_an_error_at_its_block_spec() {
    let (spec, line) = (BlockSpec::any().squeeze([0]), line!());
    let launch = waits_twice::launch()
        .input(spec)
        .output(BlockSpec::any(), SHAPE)
        .scratch(DmaSemaphores::new(1));
    let e = misuse_error(launch, &[&x()]);
    assert!(e.contains(&format!("dma_misuse_tests.rs:{line}:")), "{e}");
    assert!(e.contains("no dims to squeeze"), "{e}");
}

#[test]
fn a_dma_waited_twice_is_an_error_at_the_second_wait() {
    let e = misuse_error(hbm_copy(waits_twice::launch(), 1), &[&x()]);
    assert_at(&e, "misuse: waits twice", "waits twice");
}

#[test]
fn a_wait_on_a_copy_never_started_is_an_error_at_the_wait() {
    let e = misuse_error(hbm_copy(waits_unstarted::launch(), 1), &[&x()]);
    assert_at(&e, "misuse: never started", "never started");
}

#[test]
fn reading_a_dma_destination_before_the_wait_is_an_error_at_the_read() {
    let launch = reads_before_wait::launch()
        .input(BlockSpec::any())
        .output(BlockSpec::new(SHAPE, || [0, 0]), SHAPE)
        .scratch(Vmem::<f32>::new(SHAPE))
        .scratch(DmaSemaphores::new(1));
    let e = misuse_error(launch, &[&x()]);
    assert_at(&e, "misuse: reads before wait", "before waiting");
}

#[test]
fn writing_a_dma_source_before_the_wait_is_an_error_at_the_write() {
    let launch = writes_source_in_flight::launch()
        .input(BlockSpec::any())
        .output(BlockSpec::any(), SHAPE)
        .scratch(Vmem::<f32>::new(SHAPE))
        .scratch(DmaSemaphores::new(1));
    let e = misuse_error(launch, &[&x()]);
    assert_at(
        &e,
        "misuse: writes source in flight",
        "while it is in flight",
    );
}

#[test]
fn a_second_copy_on_a_busy_semaphore_is_an_error_at_its_start() {
    let e = misuse_error(hbm_copy(reuses_busy_semaphore::launch(), 1), &[&x()]);
    assert_at(&e, "misuse: busy semaphore", "already has a copy in flight");
}

#[test]
fn a_dma_between_windows_of_different_shapes_is_an_error_at_the_copy() {
    let e = misuse_error(hbm_copy(mismatched_windows::launch(), 1), &[&x()]);
    assert_at(&e, "misuse: shapes", "a DMA copies one shape");
}

#[test]
fn a_semaphore_index_out_of_range_is_an_error_at_its_line() {
    let e = misuse_error(hbm_copy(semaphore_out_of_range::launch(), 2), &[&x()]);
    assert_at(&e, "misuse: semaphore 2 of 2", "semaphore index");
    let k = HostTensor::from_vec(vec![1], vec![3i32]);
    let e = misuse_error(
        hbm_copy(traced_semaphore_out_of_range::launch(), 2),
        &[&k, &x()],
    );
    assert_at(
        &e,
        "misuse: traced semaphore index",
        "semaphore index 3 is out of range for an array of 2",
    );
}

#[test]
fn a_copy_never_waited_for_is_an_error_at_its_start() {
    let e = misuse_error(hbm_copy(never_waited::launch(), 1), &[&x()]);
    assert_at(&e, "misuse: never waited", "never waited for");
}

#[tpu_kernel]
fn scope_ends_in_flight(x: &Ref<f32>, o: &mut RefMut<f32>) {
    // misuse: the next line's scope ends in flight
    run_scoped(DmaSemaphores::new(1), |sems: Scratch<i32>| {
        async_copy(x.all(), o.all(), sems.sem(0)).start();
    });
}

#[test]
fn a_dma_on_scoped_scratch_in_flight_when_the_scope_ends_is_an_error() {
    let launch = scope_ends_in_flight::launch()
        .input(BlockSpec::any())
        .output(BlockSpec::any(), SHAPE);
    let e = misuse_error(launch, &[&x()]);
    let at = format!(
        "dma_misuse_tests.rs:{}:",
        line_of("misuse: the next line's scope") + 1
    );
    assert!(e.contains(&at), "expected {at} in: {e}");
    assert!(
        e.contains("still in flight when the `run_scoped` region ends"),
        "{e}"
    );
}

/// A KV-cache append in place: the cache stays in HBM, aliased input -> output, and step
/// `i` copies its new row block (a pipelined VMEM block) by DMA to rows `pos[i] ..` of the
/// cache; rows no step writes keep their values.

#[tpu_kernel]
fn block_copy_left_in_flight(x: &Ref<f32>, o: &mut RefMut<f32>, sems: &mut Scratch<i32>) {
    let c = async_copy(x.all(), o.all(), sems.sem(0));
    c.start(); // misuse: pipelined block in flight
    if program_id(0).gt(0) {
        c.wait();
    }
}

#[test]
fn a_copy_into_a_pipelined_block_left_in_flight_across_steps_is_an_error() {
    let launch = block_copy_left_in_flight::launch()
        .grid([2])
        .input(BlockSpec::any())
        .output(BlockSpec::new(SHAPE, |_| [0, 0]), SHAPE)
        .scratch(DmaSemaphores::new(1))
        .semantics([Arbitrary]);
    let e = misuse_error(launch, &[&x()]);
    assert_at(
        &e,
        "misuse: pipelined block in flight",
        "still in flight at the end of its grid step",
    );
}
