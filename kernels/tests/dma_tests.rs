//! HBM refs and manual DMA (Pallas' `memory_space=pl.ANY` and `pltpu.make_async_copy`): a
//! kernel whose input and output stay in HBM copies row blocks into VMEM at offsets read
//! from SMEM, adds 1 and copies them back. It runs on the interpreter and the XLA CPU plugin
//! against an exact reference, its Mosaic verifies with jaxlib's tpu dialect, libtpu
//! compiles it for v5e, v6e and tpu7x, and it has the structure Pallas emits for the same
//! kernel. Also: blocks prefetched by DMA across grid steps, and an in-place KV-cache append
//! into an aliased HBM output. Misuse: `dma_misuse_tests.rs`; scoped scratch:
//! `scoped_scratch_tests.rs`.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt};

const ROWS: usize = 8;
const LANES: usize = 128;

/// Step `i`: rows `starts[i] .. + 8` of `x` (HBM) into VMEM, plus 1, out to rows `8 i ..`
/// of `o` (HBM). Two semaphores: one per direction.
#[tpu_kernel]
fn dma_rows(
    starts: &Prefetch<i32>,
    x: &Ref<f32>,
    o: &mut RefMut<f32>,
    buf: &mut Scratch<f32>,
    sems: &mut Scratch<i32>,
) {
    let i = program_id(0);
    let row = starts.load_scalar([i]);
    let load = async_copy(x.at((row, 0), [ROWS, LANES]), buf.all(), sems.sem(0));
    load.start();
    load.wait();
    buf.store(buf.load() + 1.0);
    let out = i * ROWS as i32;
    let back = async_copy(buf.all(), o.at((out, 0), [ROWS, LANES]), sems.sem(1));
    back.start();
    back.wait();
}

fn dma_launch(n: usize) -> Launch {
    dma_rows::launch()
        .grid([n])
        .input(BlockSpec::any())
        .output(BlockSpec::any(), [n * ROWS, LANES])
        .scratch(Vmem::<f32>::new([ROWS, LANES]))
        .scratch(DmaSemaphores::new(2))
        .semantics([Arbitrary])
}

/// Step `i` doubles row block `starts[i]` of `x` (HBM, `[blocks, 8, 128]`), which step
/// `i - 1` started copying into VMEM slot `i % 2`: the DMA for the next step is in flight
/// while this one computes, across the grid step boundary (as Pallas kernels prefetch).
#[tpu_kernel]
fn prefetched_blocks(
    starts: &Prefetch<i32>,
    x: &Ref<f32>,
    o: &mut RefMut<f32>,
    buf: &mut Scratch<f32>,
    sems: &mut Scratch<i32>,
) {
    let i = program_id(0);
    if i.eq(0) {
        fetch(starts, x, buf, sems, i).start();
    }
    if (i + 1).lt(num_programs(0)) {
        fetch(starts, x, buf, sems, i + 1).start();
    }
    fetch(starts, x, buf, sems, i).wait();
    let block = buf.load_slice((i % 2, 0, 0), [1, ROWS, LANES]);
    o.store(block.reshape([ROWS, LANES]) * 2.0);
}

/// The copy of step `step`'s block into slot `step % 2`, on semaphore `step % 2`.
#[track_caller]
fn fetch(
    starts: &Prefetch<i32>,
    x: &Ref<f32>,
    buf: &Scratch<f32>,
    sems: &Scratch<i32>,
    step: Scalar<i32>,
) -> AsyncCopy<f32> {
    let slot = step % 2;
    let src = x.at((starts.load_scalar([step]), 0, 0), [1, ROWS, LANES]);
    async_copy(src, buf.at((slot, 0, 0), [1, ROWS, LANES]), sems.sem(slot))
}

fn prefetched_launch(n: usize) -> Launch {
    prefetched_blocks::launch()
        .grid([n])
        .input(BlockSpec::any())
        .output(BlockSpec::new([ROWS, LANES], |i| (i, 0)), [n * ROWS, LANES])
        .scratch(Vmem::<f32>::new([2, ROWS, LANES]))
        .scratch(DmaSemaphores::new(2))
        .semantics([Arbitrary])
}

#[test]
fn blocks_prefetched_by_dma_across_grid_steps_match_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let (n, v) = (6, 5);
    let xs: Vec<f32> = (0..v * ROWS * LANES)
        .map(|_| rng.gen_range(-4.0..4.0))
        .collect();
    let x = HostTensor::from_vec(vec![v, ROWS, LANES], xs.clone());
    let starts: Vec<i32> = (0..n).map(|_| rng.gen_range(0..v as i32)).collect();
    let starts_t = HostTensor::from_vec(vec![n], starts.clone());
    let block = ROWS * LANES;
    let want: Vec<f64> = starts
        .iter()
        .flat_map(|&s| {
            xs[s as usize * block..][..block]
                .iter()
                .map(|&e| f64::from(e * 2.0))
        })
        .collect();
    let launch = prefetched_launch(n);
    for (device, out) in [
        ("interp", launch.run(&Device::interp(), &[&starts_t, &x])),
        ("cpu", launch.run(&support::cpu(), &[&starts_t, &x])),
    ] {
        let out = out.unwrap_or_else(|e| panic!("{device}: {e}"));
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
    let program = launch
        .trace_program(&[(DType::I32, vec![n]), (DType::F32, vec![v, ROWS, LANES])])
        .expect("traces");
    support::check_mosaic_of("prefetched", &program);
    support::compiles_for_every_topology(&program);
}

/// `dma_rows` with a blocked output and its VMEM buffer and DMA semaphore scoped to the body
/// (Pallas' `run_scoped`); the buffer's contents leave the scope as its result.
#[tpu_kernel]
fn append_rows(
    pos: &Prefetch<i32>,
    new: &Ref<f32>,
    _cache: &Ref<f32>,
    out: &mut RefMut<f32>,
    sems: &mut Scratch<i32>,
) {
    let at = pos.load_scalar([program_id(0)]);
    let c = async_copy(new.all(), out.at((at, 0), [ROWS, LANES]), sems.sem(0));
    c.start();
    c.wait();
}

#[test]
fn an_in_place_cache_append_by_dma_keeps_unwritten_rows_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let (n, rows) = (3, 64);
    let cache: Vec<f32> = (0..rows * LANES)
        .map(|_| rng.gen_range(-4.0..4.0))
        .collect();
    let new: Vec<f32> = (0..n * ROWS * LANES)
        .map(|_| rng.gen_range(-4.0..4.0))
        .collect();
    // Distinct, unaligned positions that do not overlap.
    let pos = vec![3i32, 20, 41];
    let mut want: Vec<f64> = cache.iter().map(|&e| f64::from(e)).collect();
    for (i, &p) in pos.iter().enumerate() {
        let (dst, src) = (p as usize * LANES, i * ROWS * LANES);
        for e in 0..ROWS * LANES {
            want[dst + e] = f64::from(new[src + e]);
        }
    }
    let inputs = [
        HostTensor::from_vec(vec![n], pos),
        HostTensor::from_vec(vec![n * ROWS, LANES], new),
        HostTensor::from_vec(vec![rows, LANES], cache),
    ];
    let refs: Vec<&HostTensor> = inputs.iter().collect();
    let launch = append_rows::launch()
        .grid([n])
        .input(BlockSpec::new([ROWS, LANES], |i| (i, 0)))
        .input(BlockSpec::any())
        .output(BlockSpec::any(), [rows, LANES])
        .alias(1, 0)
        .scratch(DmaSemaphores::new(1))
        .semantics([Arbitrary]);
    for (device, out) in [
        ("interp", launch.run(&Device::interp(), &refs)),
        ("cpu", launch.run(&support::cpu(), &refs)),
    ] {
        let out = out.unwrap_or_else(|e| panic!("{device}: {e}"));
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
    let types: Vec<(DType, Vec<usize>)> = inputs
        .iter()
        .map(|t| (t.dtype(), t.shape().to_vec()))
        .collect();
    let program = launch.trace_program(&types).expect("traces");
    support::check_mosaic_of("append", &program);
    support::compiles_for_every_topology(&program);
}

#[test]
fn rows_copied_by_dma_at_prefetched_offsets_match_on_every_device() {
    let (n, v) = (5, 64);
    let (starts_t, x, want) = support::row_blocks_plus_one(5, n, v, ROWS, LANES);
    let launch = dma_launch(n);
    let runs = [
        ("interp", launch.run(&Device::interp(), &[&starts_t, &x])),
        (
            "cpu auto",
            launch.run_as(&support::cpu(), &[&starts_t, &x], Form::Auto),
        ),
        (
            "cpu grid loop",
            launch.run_as(&support::cpu(), &[&starts_t, &x], Form::GridLoop),
        ),
    ];
    for (device, out) in runs {
        let out = out.unwrap_or_else(|e| panic!("{device}: {e}"));
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
}

fn program() -> KernelProgram {
    dma_launch(4)
        .trace_program(&[(DType::I32, vec![4]), (DType::F32, vec![64, LANES])])
        .expect("traces")
}

#[test]
fn the_ir_dump_shows_hbm_operands_and_dma_ops() {
    let text = program().to_string();
    for needle in [
        "input x: f32[64, 128] in hbm",
        "output o: f32[32, 128] in hbm",
        "scratch sems: i32[2] in semaphore_mem",
        "dma_start",
        "dma_wait",
        "sizes [8, 128] sem",
    ] {
        assert!(text.contains(needle), "{needle} in:\n{text}");
    }
}

#[test]
fn the_dma_kernel_lowers_to_enqueue_and_wait_on_hbm_refs() {
    let m = lower_to_mosaic(&program(), TpuGeneration::V6e).expect("lowers");
    let text = &m.readable;
    for needle in [
        "\"tpu.enqueue_dma\"",
        "\"tpu.wait_dma2\"",
        "\"tpu.memref_slice\"",
        "\"tpu.memref_squeeze\"",
        "memref<64x128xf32, #tpu.memory_space<any>>",
        "memref<32x128xf32, #tpu.memory_space<any>>",
        "memref<2x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>",
        "window_params = [{}, {}]",
    ] {
        assert!(text.contains(needle), "{needle} in:\n{text}");
    }
}

#[test]
fn the_dma_kernel_mosaic_verifies_with_jaxlib() {
    support::check_mosaic_of("verify", &program());
}

#[test]
fn the_dma_kernel_has_the_structure_pallas_emits() {
    // Same grid, semantics, scalar prefetch, scratch count, argument types (the SMEM array,
    // the two `any` memrefs, the VMEM buffer, the semaphore array) and windowless params.
    support::assert_pallas_structure("pallas", &program(), &["--dma", "4", "64"], "dma");
}

#[test]
fn the_dma_kernel_compiles_with_libtpu_for_three_generations() {
    support::compiles_for_every_topology(&program());
}
