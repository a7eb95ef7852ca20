//! Scoped scratch (Pallas' `pl.run_scoped`): a VMEM buffer and a DMA semaphore allocated for
//! one region of the body. The row copy runs exactly on the interpreter and the CPU plugin,
//! lowers to a `tpu.region` that jaxlib verifies and libtpu compiles for v5e, v6e and tpu7x,
//! and has the structure Pallas emits for the same kernel.

mod support;

use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt};

const ROWS: usize = 8;
const LANES: usize = 128;

#[tpu_kernel]
fn scoped_rows(starts: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let row = starts.load_scalar([program_id(0)]);
    let block = run_scoped(Vmem::<f32>::new([ROWS, LANES]), |buf: Scratch<f32>| {
        run_scoped(DmaSemaphores::new(1), |sems: Scratch<i32>| {
            let load = async_copy(x.at((row, 0), [ROWS, LANES]), buf.all(), sems.sem(0));
            load.start();
            load.wait();
        });
        buf.load()
    });
    o.store(block + 1.0);
}

fn scoped_launch(n: usize) -> Launch {
    scoped_rows::launch()
        .grid([n])
        .input(BlockSpec::any())
        .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [n * ROWS, LANES])
}

#[test]
fn scoped_scratch_has_the_structure_pallas_emits() {
    let program = scoped_launch(4)
        .trace_program(&[(DType::I32, vec![4]), (DType::F32, vec![40, LANES])])
        .expect("traces");
    // No scratch operands (the buffer and semaphore live in the body's `tpu.region`), the
    // HBM input without a window, the output's window and index map.
    let args = ["--scoped", "4", "40"];
    if let Some(pallas) =
        support::assert_pallas_structure("scoped-pallas", &program, &args, "scoped")
    {
        assert_eq!(pallas["scratch_operands"], 0);
    }
}

#[test]
fn scoped_scratch_rows_match_on_every_device_and_compile_for_tpus() {
    let (n, v) = (4, 40);
    let (starts_t, x, want) = support::row_blocks_plus_one(13, n, v, ROWS, LANES);
    let launch = scoped_launch(n);
    for (device, out) in [
        ("interp", launch.run(&Device::interp(), &[&starts_t, &x])),
        ("cpu", launch.run(&support::cpu(), &[&starts_t, &x])),
    ] {
        let out = out.unwrap_or_else(|e| panic!("{device}: {e}"));
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
    let program = launch
        .trace_program(&[(DType::I32, vec![n]), (DType::F32, vec![v, LANES])])
        .expect("traces");
    let m = lower_to_mosaic(&program, TpuGeneration::V6e).expect("lowers");
    for needle in [
        "\"tpu.region\"",
        "\"memref.alloca\"",
        "\"tpu.sem_alloc\"",
        "\"tpu.yield\"",
    ] {
        assert!(m.readable.contains(needle), "{needle} in:\n{}", m.readable);
    }
    support::check_mosaic_of("scoped", &program);
    support::compiles_for_every_topology(&program);
}
