//! Pipeline depth per BlockSpec (Pallas' `pipeline_mode=pl.Buffered(n)`): rows of `x` times
//! one weight tile that every grid step reuses. `buffered(1)` (Mosaic's `synchronous`) keeps
//! one VMEM window instead of two, which the VMEM budget counts; `buffered(2)` is the default
//! depth, spelled out (`double_buffered`). Results are the same on the interpreter and the
//! XLA CPU plugin at every depth (exact), the Mosaic has Pallas' window params
//! (`tools/pallas_structure.py --buffered`) and verifies with jaxlib, libtpu compiles it for
//! v5e, v6e and tpu7x, and depths Mosaic's pipeline lacks are errors at the `buffered` call.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, MosaicError, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::{IndexMapFn, KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

#[tpu_kernel]
fn scale_rows(x: &Ref<f32>, w: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load() * w.load());
}

/// Pipeline depths of (x, w, o); `None` is the default.
type Depths = [Option<usize>; 3];

#[track_caller]
fn spec<A, F: IndexMapFn<A>>(shape: [usize; 2], map: F, depth: Option<usize>) -> BlockSpec {
    let spec = BlockSpec::new(shape, map);
    match depth {
        Some(n) => spec.buffered(n),
        None => spec,
    }
}

/// `[m, n]` rows in `bm`-row blocks, times the `[bm, n]` weight tile at every step.
fn launch(m: usize, n: usize, bm: usize, [dx, dw, d_o]: Depths) -> Launch {
    scale_rows::launch()
        .grid([m / bm])
        .input(spec([bm, n], |i| (i, 0), dx))
        .input(spec([bm, n], |_i| (0, 0), dw))
        .output(spec([bm, n], |i| (i, 0), d_o), [m, n])
}

const PALLAS_DEPTHS: Depths = [Some(2), Some(1), None];

#[test]
fn results_are_the_same_at_every_depth_on_the_interpreter_and_cpu() {
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    let (m, n, bm) = (64, 256, 16);
    let mut rng = rand::rngs::StdRng::seed_from_u64(81);
    let xs: Vec<f32> = (0..m * n).map(|_| rng.gen_range(-2.0..2.0)).collect();
    let ws: Vec<f32> = (0..bm * n).map(|_| rng.gen_range(-2.0..2.0)).collect();
    // One f32 rounding of the exact product (f64 holds it exactly): the result is exact.
    let want: Vec<f64> = xs
        .iter()
        .enumerate()
        .map(|(k, &x)| f64::from((f64::from(x) * f64::from(ws[k % (bm * n)])) as f32))
        .collect();
    let x = HostTensor::from_vec(vec![m, n], xs);
    let w = HostTensor::from_vec(vec![bm, n], ws);
    for depths in [[None; 3], [Some(1); 3], [Some(2); 3], PALLAS_DEPTHS] {
        let launch = launch(m, n, bm, depths);
        let runs = [
            ("interp", launch.run(&Device::interp(), &[&x, &w])),
            ("cpu auto", launch.run_as(&cpu, &[&x, &w], Form::Auto)),
            (
                "cpu grid loop",
                launch.run_as(&cpu, &[&x, &w], Form::GridLoop),
            ),
        ];
        for (device, out) in runs {
            let got = out.unwrap_or_else(|e| panic!("{device} {depths:?}: {e}"))[0].to_f64_vec();
            assert_eq!(got, want, "{device} {depths:?}");
        }
    }
}

#[track_caller]
fn program(m: usize, n: usize, bm: usize, depths: Depths) -> KernelProgram {
    launch(m, n, bm, depths)
        .trace_program(&[(DType::F32, vec![m, n]), (DType::F32, vec![bm, n])])
        .expect("traces")
}

#[test]
fn the_vmem_budget_counts_each_window_once_per_buffer() {
    // 1 MiB windows: [256, 1024] f32.
    let (m, n, bm) = (1024, 1024, 256);
    let mib = 1 << 20;
    let cases = [
        ([None; 3], 6 * mib),
        ([Some(2); 3], 6 * mib),
        (PALLAS_DEPTHS, 5 * mib),
        ([Some(1); 3], 3 * mib),
    ];
    for (depths, windows) in cases {
        let kernel = lower_to_mosaic(&program(m, n, bm, depths), TpuGeneration::V5e).unwrap();
        assert_eq!(kernel.vmem.windows, windows, "{depths:?}");
        assert_eq!(kernel.vmem.scratch, 0);
    }
    // 16 MiB windows ([4096, 1024] f32) on tpu7x (64 MiB of VMEM per TensorCore): double
    // buffering needs 96 MiB and is refused at the launch; single buffering needs 48 MiB,
    // and the custom call asks for a 60 MiB scoped limit (footprint + 1/4, in MiB).
    let (m, bm) = (8192, 4096);
    let line = line!() + 1;
    let double = program(m, n, bm, [None; 3]);
    let err = lower_to_mosaic(&double, TpuGeneration::Tpu7x).unwrap_err();
    let MosaicError::VmemBudget {
        needed,
        windows,
        limit,
        loc,
        ..
    } = &err
    else {
        panic!("expected a VMEM budget error, got {err}")
    };
    assert_eq!(
        (*needed, *windows, *limit),
        (96 * mib, 96 * mib, 64 * mib),
        "{err}"
    );
    assert_eq!(loc.line, line, "{err}");
    assert!(
        err.to_string().contains("once per pipeline buffer"),
        "{err}"
    );
    let single = lower_to_mosaic(&program(m, n, bm, [Some(1); 3]), TpuGeneration::Tpu7x)
        .expect("single-buffered windows fit");
    assert_eq!(single.vmem.windows, 48 * mib);
    assert_eq!(single.vmem_limit_bytes(), Some(60 * mib));
}

#[test]
fn the_mosaic_has_pallas_pipeline_modes_and_verifies_with_jaxlib() {
    let (m, n, bm) = (64, 256, 16);
    let p = program(m, n, bm, PALLAS_DEPTHS);
    let kernel = lower_to_mosaic(&p, TpuGeneration::V5e).unwrap();
    let text = &kernel.readable;
    for window in [
        "{pipeline_mode = #tpu.pipeline_mode<double_buffered>, transform_indices = @transform_0, window_bounds = array<i64: 16, 256>}",
        "{pipeline_mode = #tpu.pipeline_mode<synchronous>, transform_indices = @transform_1, window_bounds = array<i64: 16, 256>}",
        "{transform_indices = @transform_2, window_bounds = array<i64: 16, 256>}",
    ] {
        assert!(text.contains(window), "{window} in\n{text}");
    }
    support::check_mosaic_of("buffered", &p);
    let args = ["--buffered", "64", "256", "16"];
    support::assert_pallas_structure("buffered-structure", &p, &args, "buffered");
}

#[test]
fn libtpu_compiles_single_and_double_buffered_windows_for_three_generations() {
    for depths in [PALLAS_DEPTHS, [Some(1); 3]] {
        support::compiles_for_every_topology(&program(256, 512, 64, depths));
    }
}

fn trace_error(launch: &Launch, m: usize, n: usize, bm: usize) -> TraceError {
    let x = HostTensor::zeros(DType::F32, vec![m, n]);
    let w = HostTensor::zeros(DType::F32, vec![bm, n]);
    support::interp_trace_error(launch, &[&x, &w])
}

#[test]
fn depths_the_pipeline_lacks_are_errors_at_the_buffered_call() {
    let (m, n, bm) = (32, 128, 8);
    for depth in [0, 3, 4] {
        let line = line!() + 4;
        let bad = scale_rows::launch()
            .grid([m / bm])
            .input(BlockSpec::new([bm, n], |i| (i, 0)))
            .input(BlockSpec::new([bm, n], |_i| (0, 0)).buffered(depth))
            .output(BlockSpec::new([bm, n], |i| (i, 0)), [m, n]);
        let error = trace_error(&bad, m, n, bm);
        let text = error.to_string();
        assert!(matches!(error, TraceError::Launch { .. }), "{text}");
        assert!(
            text.contains(&format!("buffered_tests.rs:{line}:")),
            "{text}"
        );
        assert!(
            text.contains(&format!("input `w`: `buffered({depth})`")),
            "{text}"
        );
        assert!(
            text.contains("1 (synchronous) or 2 (double-buffered)"),
            "{text}"
        );
    }
}

/// Copies `x` (HBM) to `o` (HBM) by one DMA.
#[tpu_kernel]
fn copy_hbm(x: &Ref<f32>, o: &mut RefMut<f32>, sems: &mut Scratch<i32>) {
    let copy = async_copy(x.at((0, 0), [8, 128]), o.at((0, 0), [8, 128]), sems.sem(0));
    copy.start();
    copy.wait();
}

#[test]
fn an_hbm_operand_has_no_pipeline_to_buffer() {
    let line = line!() + 2;
    let bad = copy_hbm::launch()
        .input(BlockSpec::any().buffered(1))
        .output(BlockSpec::any(), [8, 128])
        .scratch(DmaSemaphores::new(1));
    let x = HostTensor::zeros(DType::F32, vec![8, 128]);
    let error = match bad.run(&Device::interp(), &[&x]) {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {:?}", other.map(|_| ())),
    };
    let text = error.to_string();
    assert!(
        text.contains(&format!("buffered_tests.rs:{line}:")),
        "{text}"
    );
    assert!(text.contains("no window and no pipeline"), "{text}");
}
