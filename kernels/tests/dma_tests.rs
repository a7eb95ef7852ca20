//! HBM refs and manual DMA (Pallas' `memory_space=pl.ANY` and `pltpu.make_async_copy`): a
//! kernel whose input and output stay in HBM copies row blocks into VMEM at offsets read
//! from SMEM, adds 1 and copies them back. It runs on the interpreter and the XLA CPU plugin
//! against an exact reference, its Mosaic verifies with jaxlib's tpu dialect, libtpu
//! compiles it for v5e, v6e and tpu7x, and it has the structure Pallas emits for the same
//! kernel. DMA misuse is reported at this file's lines.

mod support;

use rand::{Rng, SeedableRng};
use std::process::Command;
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError, TpuTarget};

const TOPOLOGIES: [&str; 3] = ["v5e:2x2", "v6e:2x2", "tpu7x:2x2x1"];
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
        ("cpu", launch.run(&cpu(), &[&starts_t, &x])),
    ] {
        let out = out.unwrap_or_else(|e| panic!("{device}: {e}"));
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
    let program = launch
        .trace_program(&[(DType::I32, vec![n]), (DType::F32, vec![v, ROWS, LANES])])
        .expect("traces");
    let (dir, file) = write_module("prefetched", &program);
    if let Some(text) = jax_tool("check_mosaic.py", std::slice::from_ref(&file)) {
        assert!(text.contains(": OK"), "{text}");
    }
    std::fs::remove_dir_all(dir).ok();
    for topology in TOPOLOGIES {
        let target = TpuTarget::aot(topology).unwrap_or_else(|e| panic!("{topology}: {e}"));
        let out = target
            .compile_program(&program)
            .unwrap_or_else(|e| panic!("prefetched_blocks on {topology}: {e}"));
        assert!(out.code_bytes > 0, "{topology}");
    }
}

/// `dma_rows` with a blocked output and its VMEM buffer and DMA semaphore scoped to the body
/// (Pallas' `run_scoped`); the buffer's contents leave the scope as its result.
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
    let (dir, file) = write_module("scoped-pallas", &program);
    let Some(ours) = jax_tool("pallas_structure.py", &["--module".into(), file.clone()]) else {
        return;
    };
    let args: Vec<String> = ["--scoped", "4", "40"].map(String::from).to_vec();
    let pallas = jax_tool("pallas_structure.py", &args).expect("jax is there: the first call ran");
    let ours: serde_json::Value = serde_json::from_str(&ours).expect("JSON");
    let pallas: serde_json::Value = serde_json::from_str(&pallas).expect("JSON");
    // No scratch operands (the buffer and semaphore live in the body's `tpu.region`), the
    // HBM input without a window, the output's window and index map.
    assert_eq!(
        ours[&file], pallas["scoped"],
        "Tessera (left) vs Pallas (right)"
    );
    assert_eq!(pallas["scoped"]["scratch_operands"], 0);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn scoped_scratch_rows_match_on_every_device_and_compile_for_tpus() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    let (n, v) = (4, 40);
    let xs: Vec<f32> = (0..v * LANES).map(|_| rng.gen_range(-4.0..4.0)).collect();
    let x = HostTensor::from_vec(vec![v, LANES], xs.clone());
    let starts: Vec<i32> = (0..n)
        .map(|_| rng.gen_range(0..=(v - ROWS) as i32))
        .collect();
    let starts_t = HostTensor::from_vec(vec![n], starts.clone());
    let want: Vec<f64> = starts
        .iter()
        .flat_map(|&s| {
            let s = s as usize * LANES;
            xs[s..s + ROWS * LANES].iter().map(|&e| f64::from(e + 1.0))
        })
        .collect();
    let launch = scoped_launch(n);
    for (device, out) in [
        ("interp", launch.run(&Device::interp(), &[&starts_t, &x])),
        ("cpu", launch.run(&cpu(), &[&starts_t, &x])),
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
    let (dir, file) = write_module("scoped", &program);
    if let Some(text) = jax_tool("check_mosaic.py", std::slice::from_ref(&file)) {
        assert!(text.contains(": OK"), "{text}");
    }
    std::fs::remove_dir_all(dir).ok();
    for topology in TOPOLOGIES {
        let target = TpuTarget::aot(topology).unwrap_or_else(|e| panic!("{topology}: {e}"));
        let out = target
            .compile_program(&program)
            .unwrap_or_else(|e| panic!("scoped_rows on {topology}: {e}"));
        assert!(out.code_bytes > 0, "{topology}");
    }
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
        "dma_tests.rs:{}:",
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
        ("cpu", launch.run(&cpu(), &refs)),
    ] {
        let out = out.unwrap_or_else(|e| panic!("{device}: {e}"));
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
    let types: Vec<(DType, Vec<usize>)> = inputs
        .iter()
        .map(|t| (t.dtype(), t.shape().to_vec()))
        .collect();
    let program = launch.trace_program(&types).expect("traces");
    let (dir, file) = write_module("append", &program);
    if let Some(text) = jax_tool("check_mosaic.py", std::slice::from_ref(&file)) {
        assert!(text.contains(": OK"), "{text}");
    }
    std::fs::remove_dir_all(dir).ok();
    for topology in TOPOLOGIES {
        let target = TpuTarget::aot(topology).unwrap_or_else(|e| panic!("{topology}: {e}"));
        let out = target
            .compile_program(&program)
            .unwrap_or_else(|e| panic!("append_rows on {topology}: {e}"));
        assert!(out.code_bytes > 0, "{topology}");
    }
}

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

fn cpu() -> Device {
    Device::cpu().expect("the XLA CPU plugin is installed (see runtime's plugin tests)")
}

#[test]
fn rows_copied_by_dma_at_prefetched_offsets_match_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let (n, v) = (5, 64);
    let xs: Vec<f32> = (0..v * LANES).map(|_| rng.gen_range(-4.0..4.0)).collect();
    let x = HostTensor::from_vec(vec![v, LANES], xs.clone());
    // Any row offset (not only multiples of 8), repeats allowed.
    let starts: Vec<i32> = (0..n)
        .map(|_| rng.gen_range(0..=(v - ROWS) as i32))
        .collect();
    let starts_t = HostTensor::from_vec(vec![n], starts.clone());
    // x + 1 is exact in f32 for these values.
    let want: Vec<f64> = starts
        .iter()
        .flat_map(|&s| {
            let s = s as usize * LANES;
            xs[s..s + ROWS * LANES].iter().map(|&e| f64::from(e + 1.0))
        })
        .collect();
    let launch = dma_launch(n);
    let runs = [
        ("interp", launch.run(&Device::interp(), &[&starts_t, &x])),
        (
            "cpu auto",
            launch.run_as(&cpu(), &[&starts_t, &x], Form::Auto),
        ),
        (
            "cpu grid loop",
            launch.run_as(&cpu(), &[&starts_t, &x], Form::GridLoop),
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

fn jax_tool(tool: &str, args: &[String]) -> Option<String> {
    let py = support::jax_python()?;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tools")
        .join(tool);
    let out = support::output(Command::new(py).arg(path).args(args));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{tool}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(text)
}

fn write_module(name: &str, program: &KernelProgram) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("tessera-dma-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.mlir"));
    let m = lower_to_mosaic(program, TpuGeneration::V5e).unwrap();
    std::fs::write(&file, &m.serialized).unwrap();
    let path = file.to_string_lossy().to_string();
    (dir, path)
}

#[test]
fn the_dma_kernel_mosaic_verifies_with_jaxlib() {
    let (dir, file) = write_module("verify", &program());
    let Some(text) = jax_tool("check_mosaic.py", std::slice::from_ref(&file)) else {
        return;
    };
    assert!(text.contains(": OK"), "{text}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_dma_kernel_has_the_structure_pallas_emits() {
    let (dir, file) = write_module("pallas", &program());
    let Some(ours) = jax_tool("pallas_structure.py", &["--module".into(), file.clone()]) else {
        return;
    };
    let pallas = jax_tool(
        "pallas_structure.py",
        &["--dma".into(), "4".into(), "64".into()],
    )
    .expect("jax is there: the first call ran");
    let ours: serde_json::Value = serde_json::from_str(&ours).expect("JSON");
    let pallas: serde_json::Value = serde_json::from_str(&pallas).expect("JSON");
    // Same grid, semantics, scalar prefetch, scratch count, argument types (the SMEM array,
    // the two `any` memrefs, the VMEM buffer, the semaphore array) and windowless params.
    assert_eq!(
        ours[&file], pallas["dma"],
        "Tessera (left) vs Pallas (right)"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_dma_kernel_compiles_with_libtpu_for_three_generations() {
    for topology in TOPOLOGIES {
        let target = TpuTarget::aot(topology).unwrap_or_else(|e| panic!("{topology}: {e}"));
        let out = target
            .compile_program(&program())
            .unwrap_or_else(|e| panic!("dma_rows on {topology}: {e}"));
        assert!(out.code_bytes > 0, "{topology}");
    }
}

// ---- misuse, each reported at the line marked in its kernel ----

/// The line of this file holding `marker` (a comment in a kernel below).
fn line_of(marker: &str) -> usize {
    include_str!("dma_tests.rs")
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
    let at = format!("dma_tests.rs:{}:", line_of(marker));
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
    assert!(e.contains(&format!("dma_tests.rs:{line}:")), "{e}");
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
