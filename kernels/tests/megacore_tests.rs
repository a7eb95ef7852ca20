//! Megacore: a `CoreParallel` grid axis (Pallas' `pltpu.CORE_PARALLEL`) splits a tiled matmul
//! across the chip's TensorCores. It runs like `Parallel` on the interpreter and the XLA CPU
//! plugin (against float64), its Mosaic carries `#tpu.dimension_semantics<core_parallel>` and
//! verifies with jaxlib, and libtpu compiles it where the core count fits: v5p runs two
//! TensorCores as one device (a 2-step core axis); v5e, v6e and tpu7x run a kernel on one
//! (a 1-step core axis compiles; more steps are refused by Tessera, naming the generation,
//! before libtpu would). Misuse is reported at the `.semantics(..)` call.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, MosaicError, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError, TpuTarget};

/// One `(bm, n)` output block accumulating over the k axis (grid axis 2) in f32 scratch.
#[tpu_kernel]
fn core_matmul(x: &Ref<f32>, y: &Ref<f32>, o: &mut RefMut<f32>, acc: &mut Scratch<f32>) {
    if program_id(2).eq(0) {
        acc.store(zeros());
    }
    acc.store(acc.load() + dot(x.load(), y.load()));
    if program_id(2).eq(num_programs(2) - 1) {
        o.store(acc.load());
    }
}

/// `[m, k] @ [k, n]` on a grid (core, row block within the core's half, k block): core `c`
/// owns rows `c * m / cores ..`, as a Pallas megacore kernel splits its leading axis.
fn launch(cores: usize, (m, k, n): (usize, usize, usize), (bm, bk): (usize, usize)) -> Launch {
    let per_core = m / (cores * bm);
    core_matmul::launch()
        .grid([cores, per_core, k / bk])
        .input(BlockSpec::new([bm, bk], move |c, i, kk| {
            (c * per_core as i32 + i, kk)
        }))
        .input(BlockSpec::new([bk, n], |_c, _i, kk| (kk, 0)))
        .output(
            BlockSpec::new([bm, n], move |c, i, _kk| (c * per_core as i32 + i, 0)),
            [m, n],
        )
        .scratch(Vmem::<f32>::new([bm, n]))
        .semantics([CoreParallel, Parallel, Arbitrary])
}

fn random_f32(rng: &mut rand::rngs::StdRng, shape: Vec<usize>) -> HostTensor {
    let n = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    HostTensor::from_vec(shape, data)
}

fn reference(x: &[f64], y: &[f64], (m, k, n): (usize, usize, usize)) -> Vec<f64> {
    let mut o = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            o[i * n + j] = (0..k).map(|l| x[i * k + l] * y[l * n + j]).sum();
        }
    }
    o
}

#[test]
fn the_core_parallel_matmul_matches_float64_on_the_interpreter_and_cpu() {
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    for (seed, (cores, dims, blocks)) in [
        (2, (64, 256, 128), (16, 128)),
        (1, (32, 384, 256), (8, 128)),
        (2, (256, 128, 128), (32, 128)),
    ]
    .into_iter()
    .enumerate()
    {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed as u64 + 40);
        let (m, k, n) = dims;
        let x = random_f32(&mut rng, vec![m, k]);
        let y = random_f32(&mut rng, vec![k, n]);
        let want = reference(&x.to_f64_vec(), &y.to_f64_vec(), dims);
        let launch = launch(cores, dims, blocks);
        let runs = [
            ("interp", launch.run(&Device::interp(), &[&x, &y])),
            ("cpu auto", launch.run_as(&cpu, &[&x, &y], Form::Auto)),
            (
                "cpu grid loop",
                launch.run_as(&cpu, &[&x, &y], Form::GridLoop),
            ),
        ];
        // f32 products of magnitude <= 1 summed over k terms: |error| <= k * k * 2^-23.
        let tol = (k * k) as f64 * f32::EPSILON as f64;
        for (device, out) in runs {
            let got = out.unwrap_or_else(|e| panic!("{device}: {e}"))[0].to_f64_vec();
            let worst = support::max_abs_error(&got, &want);
            assert!(
                worst <= tol,
                "{device} {cores} cores {dims:?}: max error {worst} > {tol}"
            );
        }
    }
}

fn program(cores: usize) -> KernelProgram {
    let (m, k, n) = (256, 256, 128);
    launch(cores, (m, k, n), (64, 128))
        .trace_program(&[(DType::F32, vec![m, k]), (DType::F32, vec![k, n])])
        .expect("traces")
}

#[test]
fn the_mosaic_marks_the_core_axis_and_verifies_with_jaxlib() {
    for (cores, generation) in [(2, TpuGeneration::V5p), (1, TpuGeneration::V5e)] {
        let m = lower_to_mosaic(&program(cores), generation).expect("lowers");
        assert!(
            m.readable.contains(
                "dimension_semantics = [#tpu.dimension_semantics<core_parallel>, \
                 #tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<arbitrary>]"
            ),
            "{}",
            m.readable
        );
        let bounds = format!("iteration_bounds = array<i64: {cores}, {}, 2>", 4 / cores);
        assert!(m.readable.contains(&bounds), "{}", m.readable);
        if let Some(py) = support::jax_python() {
            let tag = format!("megacore-{generation}");
            support::verify_mosaic(&py, &tag, "megacore.mlir", &m.serialized);
        }
    }
}

#[test]
fn libtpu_compiles_a_two_core_axis_for_v5p_and_a_one_core_axis_everywhere() {
    let target = TpuTarget::aot("v5p:2x2x1").expect("v5p topology");
    let out = target.compile_program(&program(2)).expect("v5p compiles");
    assert!(out.code_bytes > 0);
    support::compiles_for_every_topology(&program(1));
}

#[test]
fn a_core_axis_that_does_not_fit_the_generation_is_refused_at_the_semantics_call() {
    let (m, k, n) = (256, 256, 128);
    let arrays = [(DType::F32, vec![m, k]), (DType::F32, vec![k, n])];
    let line = line!() + 1;
    let two = launch(2, (m, k, n), (64, 128)).semantics([CoreParallel, Parallel, Arbitrary]);
    let one = launch(1, (m, k, n), (64, 128)).semantics([CoreParallel, Parallel, Arbitrary]);
    let (two, one) = (
        two.trace_program(&arrays).unwrap(),
        one.trace_program(&arrays).unwrap(),
    );
    let cases = [
        (&two, line, "v5e:2x2", "v5e", 1),
        (&two, line, "v6e:2x2", "v6e", 1),
        (&two, line, "tpu7x:2x2x1", "tpu7x", 1),
        (&two, line, "v4:2x2x2", "v4", 1),
        (&one, line + 1, "v5p:2x2x1", "v5p", 2),
    ];
    for (program, line, topology, name, cores) in cases {
        // Through the libtpu target: Tessera's check answers before libtpu compiles.
        let target = TpuTarget::aot(topology).expect("topology");
        let err = match target.compile_program(program) {
            Err(RuntimeError::Mosaic(e)) => *e,
            other => panic!(
                "{topology}: expected a Mosaic error, got {:?}",
                other.map(|_| ())
            ),
        };
        let text = err.to_string();
        assert!(
            matches!(err, MosaicError::CoreParallel { axis: 0, .. }),
            "{text}"
        );
        assert!(
            text.contains(&format!("megacore_tests.rs:{line}:")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{name} runs a kernel on {cores} TensorCore")),
            "{text}"
        );
    }
}

#[test]
fn two_core_parallel_axes_are_an_error_at_the_semantics_call() {
    let x = HostTensor::zeros(DType::F32, vec![64, 256]);
    let y = HostTensor::zeros(DType::F32, vec![256, 128]);
    let line = line!() + 2;
    let bad =
        launch(2, (64, 256, 128), (16, 128)).semantics([CoreParallel, CoreParallel, Arbitrary]);
    let error = match bad.run(&Device::interp(), &[&x, &y]) {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {:?}", other.map(|_| ())),
    };
    let text = error.to_string();
    assert!(matches!(error, TraceError::Launch { .. }), "{text}");
    assert!(
        text.contains(&format!("megacore_tests.rs:{line}:")),
        "{text}"
    );
    assert!(
        text.contains("more than one grid axis `CoreParallel`"),
        "{text}"
    );
}

#[test]
fn a_reduction_axis_marked_core_parallel_is_an_error_at_the_semantics_call() {
    // The k axis (2) is the output's reduction axis.
    let line = line!() + 2;
    let program = launch(1, (64, 256, 128), (16, 128))
        .semantics([Parallel, Parallel, CoreParallel])
        .trace_program(&[(DType::F32, vec![64, 256]), (DType::F32, vec![256, 128])])
        .expect("traces");
    let err = lower_to_mosaic(&program, TpuGeneration::V5p).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, MosaicError::ReductionAxis { axis: 2, .. }),
        "{text}"
    );
    assert!(
        text.contains(&format!("megacore_tests.rs:{line}:")),
        "{text}"
    );
    assert!(
        text.contains("must be `Arbitrary`, not `CoreParallel`"),
        "{text}"
    );
}
