//! Squeezed block dims (Pallas' `None` in a block shape): a batched matmul whose batch dim is
//! squeezed, so the body sees 2-D blocks. It runs on the interpreter and the XLA CPU plugin
//! against a float64 reference, its Mosaic verifies with jaxlib and has the structure Pallas
//! emits for the same kernel (`tools/pallas_structure.py --bmm`), and libtpu compiles it for
//! v5e, v6e and tpu7x. Misuse is reported at the BlockSpec's line.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

/// One batch's row block of `x @ y`; the batch dim is squeezed out of every block.
#[tpu_kernel]
fn batched_matmul(x: &Ref<f32>, y: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(dot(x.load(), y.load()));
}

/// `[b, m, k] @ [b, k, n]` on a grid of (batch, row block).
fn bmm_launch(b: usize, m: usize, k: usize, n: usize, bm: usize) -> Launch {
    batched_matmul::launch()
        .grid([b, m / bm])
        .input(BlockSpec::new([1, bm, k], |bi, i| (bi, i, 0)).squeeze([0]))
        .input(BlockSpec::new([1, k, n], |bi, _i| (bi, 0, 0)).squeeze([0]))
        .output(
            BlockSpec::new([1, bm, n], |bi, i| (bi, i, 0)).squeeze([0]),
            [b, m, n],
        )
}

fn random_f32(rng: &mut rand::rngs::StdRng, shape: Vec<usize>) -> HostTensor {
    let n = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    HostTensor::from_vec(shape, data)
}

fn reference(x: &[f64], y: &[f64], (b, m, k, n): (usize, usize, usize, usize)) -> Vec<f64> {
    let mut o = vec![0.0; b * m * n];
    for bi in 0..b {
        for i in 0..m {
            for j in 0..n {
                o[(bi * m + i) * n + j] = (0..k)
                    .map(|l| x[(bi * m + i) * k + l] * y[(bi * k + l) * n + j])
                    .sum();
            }
        }
    }
    o
}

#[test]
fn batched_matmul_with_a_squeezed_batch_dim_matches_float64_on_every_device() {
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    for (seed, (b, m, k, n, bm)) in [(3, 128, 256, 128, 64), (2, 16, 128, 256, 8)]
        .into_iter()
        .enumerate()
    {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed as u64);
        let x = random_f32(&mut rng, vec![b, m, k]);
        let y = random_f32(&mut rng, vec![b, k, n]);
        let want = reference(&x.to_f64_vec(), &y.to_f64_vec(), (b, m, k, n));
        let launch = bmm_launch(b, m, k, n, bm);
        let runs = [
            ("interp", launch.run(&Device::interp(), &[&x, &y])),
            ("cpu auto", launch.run_as(&cpu, &[&x, &y], Form::Auto)),
            (
                "cpu grid loop",
                launch.run_as(&cpu, &[&x, &y], Form::GridLoop),
            ),
            ("cpu batched", launch.run_as(&cpu, &[&x, &y], Form::Batched)),
        ];
        // f32 products summed over k terms of magnitude <= 1: |error| <= k * 2^-24 * k.
        let tol = (k * k) as f64 * f32::EPSILON as f64;
        for (device, out) in runs {
            let got = out.unwrap_or_else(|e| panic!("{device}: {e}"))[0].to_f64_vec();
            let worst = support::max_abs_error(&got, &want);
            assert!(
                worst <= tol,
                "{device} {b}x{m}x{k}x{n}: max error {worst} > {tol}"
            );
        }
    }
}

/// `o = 2x` on `[m, b, n]` arrays in `[bm, 1, n]` blocks whose middle dim is squeezed.
#[tpu_kernel]
fn double(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load() * 2.0);
}

#[test]
fn a_squeezed_middle_dim_on_a_sequential_axis_runs_in_every_form() {
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    let (m, b, n, bm) = (32, 3, 128, 8);
    let spec = || BlockSpec::new([bm, 1, n], |j, i| (i, j, 0)).squeeze([1]);
    // The batch axis is sequential: the batched form carries the output through its loop.
    let launch = double::launch()
        .grid([b, m / bm])
        .input(spec())
        .output(spec(), [m, b, n])
        .semantics([Arbitrary, Parallel]);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let x = random_f32(&mut rng, vec![m, b, n]);
    let want: Vec<f64> = x.to_f64_vec().iter().map(|v| 2.0 * v).collect();
    for (device, out) in [
        ("interp", launch.run(&Device::interp(), &[&x])),
        ("cpu auto", launch.run_as(&cpu, &[&x], Form::Auto)),
        ("cpu grid loop", launch.run_as(&cpu, &[&x], Form::GridLoop)),
        ("cpu batched", launch.run_as(&cpu, &[&x], Form::Batched)),
    ] {
        let got = out.unwrap_or_else(|e| panic!("{device}: {e}"))[0].to_f64_vec();
        assert_eq!(got, want, "{device}");
    }
}

fn program() -> KernelProgram {
    let (b, m, k, n) = (3, 128, 256, 128);
    bmm_launch(b, m, k, n, 128)
        .trace_program(&[(DType::F32, vec![b, m, k]), (DType::F32, vec![b, k, n])])
        .expect("traces")
}

#[test]
fn the_squeezed_matmul_verifies_with_jaxlib_and_has_pallas_structure() {
    let m = lower_to_mosaic(&program(), TpuGeneration::V5e).unwrap();
    // The window keeps the squeezed dim (size 1), as Pallas' does.
    assert!(
        m.readable
            .contains("memref<1x128x256xf32, #tpu.memory_space<vmem>>"),
        "{}",
        m.readable
    );
    support::check_mosaic_of("squeezed", &program());
    let args = ["--bmm", "3", "128", "256", "128"];
    support::assert_pallas_structure("squeezed", &program(), &args, "bmm");
}

#[test]
fn the_squeezed_matmul_compiles_with_libtpu_for_three_generations() {
    let program = program();
    support::compiles_for_every_topology(&program);
}

#[test]
fn squeezing_a_block_dim_that_is_not_1_is_reported_at_the_block_spec() {
    let x = HostTensor::zeros(DType::F32, vec![2, 8, 128]);
    let y = HostTensor::zeros(DType::F32, vec![2, 128, 128]);
    let bad = BlockSpec::new([2, 8, 128], |_b, _i| (0, 0, 0)).squeeze([0]);
    let line = line!() - 1;
    let launch = batched_matmul::launch()
        .grid([2, 1])
        .input(bad)
        .input(BlockSpec::new([1, 128, 128], |b, _i| (b, 0, 0)).squeeze([0]))
        .output(
            BlockSpec::new([1, 8, 128], |b, i| (b, i, 0)).squeeze([0]),
            [2, 8, 128],
        );
    let error = match launch.run(&Device::interp(), &[&x, &y]) {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {other:?}"),
    };
    let text = error.to_string();
    assert!(matches!(error, TraceError::Launch { .. }), "{text}");
    assert!(
        text.contains(&format!("block_dims_tests.rs:{line}:")),
        "{text}"
    );
    assert!(text.contains("squeezed"), "{text}");
}
