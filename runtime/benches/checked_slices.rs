//! The cost of checked slices (`TESSERA_CHECKED_SLICES`, on in debug builds) on the XLA CPU
//! plugin: a row gather whose grid loop reads, each step, a window of `x` at a start read
//! from SMEM, compiled as the checked module and as the unchecked one. Both run interleaved
//! (execute and download the outputs, as `run_program` does; the checked one also reads its
//! check state), and the medians and their ratio unchecked/checked are printed; so is the
//! ratio for whole `run_program_checked` calls (emission and upload included).
//!
//! Run: `cargo bench -p tessera-runtime --bench checked_slices`.

use std::time::{Duration, Instant};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::{emit_kernel_as, emit_kernel_checked, Form};
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::{DType, HostTensor};
use tessera_macros::tpu_kernel;
use tessera_runtime::{run_program_checked, Buffer, CompileOptions, Device, Executable};

const ROWS: usize = 8;
const LANES: usize = 128;
const SOURCE_ROWS: usize = 4096;
const STEPS: usize = 512;
const REPS: usize = 200;

/// Step `i`: `o[i] = x[starts[i] .. + 8]`.
#[tpu_kernel]
fn gather_windows(starts: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let s = starts.load_scalar([program_id(0)]);
    o.store(x.load_slice((s, 0), [ROWS, LANES]));
}

fn program() -> KernelProgram {
    gather_windows::launch()
        .grid([STEPS])
        .input(BlockSpec::new([SOURCE_ROWS, LANES], |_| (0, 0)))
        .output(
            BlockSpec::new([ROWS, LANES], |i| (i, 0)),
            [STEPS * ROWS, LANES],
        )
        .trace_program(&[
            (DType::I32, vec![STEPS]),
            (DType::F32, vec![SOURCE_ROWS, LANES]),
        ])
        .expect("traces")
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// One launch as `run_program` makes it: execute, then download every output.
fn launch(exe: &Executable, inputs: &[&Buffer]) -> Duration {
    let t = Instant::now();
    let outs = exe.execute(inputs).expect("runs");
    for o in &outs {
        o.to_host().expect("downloads");
    }
    t.elapsed()
}

fn main() {
    let device = Device::cpu().expect("CPU plugin");
    let client = device.client().expect("client");
    let program = program();
    let plain = emit_kernel_as(&program, Form::Auto).expect("emits");
    let checked = emit_kernel_checked(&program, Form::Auto).expect("emits");
    assert_eq!(checked.checks.len(), 2, "the SMEM read and the window");
    let options = CompileOptions::default();
    let plain_exe = client.compile_cached(&plain, &options).expect("compiles");
    let checked_exe = client
        .compile_cached(&checked.text, &options)
        .expect("compiles");

    // Seeded starts, all in bounds (a linear congruential walk over the rows).
    let starts: Vec<i32> = (0..STEPS)
        .map(|i| ((i * 2_654_435_761usize) % (SOURCE_ROWS - ROWS + 1)) as i32)
        .collect();
    let starts = HostTensor::from_vec(vec![STEPS], starts);
    let xs: Vec<f32> = (0..SOURCE_ROWS * LANES).map(|e| (e % 97) as f32).collect();
    let x = HostTensor::from_vec(vec![SOURCE_ROWS, LANES], xs);
    let bufs = [client.upload(&starts).unwrap(), client.upload(&x).unwrap()];
    let refs: Vec<&Buffer> = bufs.iter().collect();

    for _ in 0..10 {
        launch(&plain_exe, &refs);
        launch(&checked_exe, &refs);
    }
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..REPS {
        off.push(launch(&plain_exe, &refs));
        on.push(launch(&checked_exe, &refs));
    }
    let (off, on) = (median(off), median(on));
    println!(
        "gather_windows {STEPS} steps, executable: unchecked {off:?}, checked {on:?}, \
         unchecked/checked {:.3}",
        off.as_secs_f64() / on.as_secs_f64()
    );

    let inputs = [&starts, &x];
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..REPS {
        for (checked, times) in [(false, &mut off), (true, &mut on)] {
            let t = Instant::now();
            run_program_checked(&program, &device, &inputs, Form::Auto, checked).expect("runs");
            times.push(t.elapsed());
        }
    }
    let (off, on) = (median(off), median(on));
    println!(
        "gather_windows {STEPS} steps, run_program: unchecked {off:?}, checked {on:?}, \
         unchecked/checked {:.3}",
        off.as_secs_f64() / on.as_secs_f64()
    );
}
