//! Grouped matmul over ragged groups (the MoE kernel): rows `offs[g] .. offs[g + 1]` of `x`
//! (sorted by group) are multiplied by `w[g]`, the group offsets passed by scalar prefetch.
//! Groups need not align with row blocks, so a row block straddling groups takes each
//! group's rows with a row mask (a select on the tile). It runs on the interpreter and the
//! XLA CPU plugin against a float64 reference, its Mosaic verifies with jaxlib's tpu dialect,
//! and libtpu compiles it for v5e, v6e and tpu7x. Misuse is reported at this file's lines.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;

#[path = "shared/grouped_matmul.rs"]
mod grouped_matmul;
use grouped_matmul::gmm_launch;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

fn random_f32(rng: &mut rand::rngs::StdRng, shape: Vec<usize>) -> HostTensor {
    let n = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    HostTensor::from_vec(shape, data)
}

/// Offsets of `groups` seeded ragged groups covering `m` rows: sizes drawn at random, some
/// empty, most not multiples of the row block.
fn ragged_offsets(rng: &mut rand::rngs::StdRng, m: usize, groups: usize) -> Vec<i32> {
    let mut cuts: Vec<i32> = (0..groups - 1)
        .map(|_| rng.gen_range(0..=m as i32))
        .collect();
    cuts.sort_unstable();
    [vec![0], cuts, vec![m as i32]].concat()
}

/// float64 `x[r] @ w[g]` for each row `r` of group `g`, and the bound on f32's error for
/// each element: k * eps * sum |x w| (any summation order of k products).
fn reference(
    x: &[f64],
    w: &[f64],
    offs: &[i32],
    (m, k, n): (usize, usize, usize),
) -> (Vec<f64>, Vec<f64>) {
    let (mut out, mut bound) = (vec![0.0; m * n], vec![0.0; m * n]);
    for (g, pair) in offs.windows(2).enumerate() {
        for r in pair[0] as usize..pair[1] as usize {
            for c in 0..n {
                let terms = (0..k).map(|l| x[r * k + l] * w[(g * k + l) * n + c]);
                out[r * n + c] = terms.clone().sum();
                bound[r * n + c] =
                    k as f64 * f64::from(f32::EPSILON) * terms.map(f64::abs).sum::<f64>();
            }
        }
    }
    (out, bound)
}

#[test]
fn grouped_matmul_over_ragged_groups_matches_float64_on_every_device() {
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    let mut rng = rand::rngs::StdRng::seed_from_u64(23);
    for (m, k, n, groups) in [(64, 128, 128, 5), (40, 256, 256, 3), (16, 128, 128, 1)] {
        for _ in 0..2 {
            let offs = ragged_offsets(&mut rng, m, groups);
            let x = random_f32(&mut rng, vec![m, k]);
            let w = random_f32(&mut rng, vec![groups, k, n]);
            let offs_t = HostTensor::from_vec(vec![groups + 1], offs.clone());
            let (want, bound) = reference(&x.to_f64_vec(), &w.to_f64_vec(), &offs, (m, k, n));
            let launch = gmm_launch(m, k, n, groups);
            let inputs = [&offs_t, &x, &w];
            let runs = [
                ("interp", launch.run(&Device::interp(), &inputs)),
                ("cpu auto", launch.run_as(&cpu, &inputs, Form::Auto)),
                (
                    "cpu grid loop",
                    launch.run_as(&cpu, &inputs, Form::GridLoop),
                ),
                ("cpu batched", launch.run_as(&cpu, &inputs, Form::Batched)),
            ];
            for (device, out) in runs {
                let got = out.unwrap_or_else(|e| panic!("{device}: {e}"))[0].to_f64_vec();
                for (e, ((g, w), b)) in got.iter().zip(&want).zip(&bound).enumerate() {
                    assert!(
                        (g - w).abs() <= *b,
                        "{device} {m}x{k}x{n} offsets {offs:?}: element {e}: {g} vs {w}"
                    );
                }
            }
        }
    }
}

fn program() -> KernelProgram {
    let (m, k, n, groups) = (64, 128, 256, 4);
    gmm_launch(m, k, n, groups)
        .trace_program(&[
            (DType::I32, vec![groups + 1]),
            (DType::F32, vec![m, k]),
            (DType::F32, vec![groups, k, n]),
        ])
        .expect("traces")
}

#[test]
fn grouped_matmul_lowers_to_mosaic_that_jaxlib_verifies() {
    let m = lower_to_mosaic(&program(), TpuGeneration::V6e).expect("lowers");
    assert!(
        m.readable.contains("scalar_prefetch = 1 : i64"),
        "{}",
        m.readable
    );
    assert!(m.readable.contains("\"tpu.matmul\""), "{}", m.readable);
    if let Some(py) = support::jax_python() {
        support::verify_mosaic(&py, "gmm-mosaic", "grouped_matmul.mlir", &m.serialized);
    }
}

#[test]
fn grouped_matmul_compiles_with_libtpu_for_three_generations() {
    support::compiles_for_every_topology(&program());
}

#[test]
fn float_group_offsets_are_reported_at_the_run_call() {
    let (m, k, n, groups) = (16, 128, 128, 2);
    let offs = HostTensor::from_vec(vec![groups + 1], vec![0f32, 8.0, 16.0]);
    let x = HostTensor::zeros(DType::F32, vec![m, k]);
    let w = HostTensor::zeros(DType::F32, vec![groups, k, n]);
    let launch = gmm_launch(m, k, n, groups);
    let (result, line) = (launch.run(&Device::interp(), &[&offs, &x, &w]), line!());
    let error: TraceError = match result {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {other:?}"),
    };
    let message = error.to_string();
    assert!(
        message.contains(&format!("grouped_matmul_tests.rs:{line}:")) && message.contains("f32"),
        "{message}"
    );
}

#[test]
fn grouped_matmul_has_the_structure_pallas_emits() {
    // The same problem as `program()`: m, k, n, groups. Same grid, semantics, scalar-prefetch
    // and scratch counts, argument types (grid indices, the SMEM offsets, the VMEM windows
    // with the squeezed group dim, the accumulator), window bounds and index maps.
    let args = ["--gmm", "64", "128", "256", "4"];
    if let Some(pallas) = support::assert_pallas_structure("gmm-pallas", &program(), &args, "gmm") {
        assert_eq!(pallas["scalar_prefetch"], 1);
    }
}

/// On the CPU plugin the grid's parallel points run side by side (the overlap test, which
/// differs between row blocks, is if-converted into a select), looping only over the groups:
/// the accumulator is zeroed on each point's first group, so it stays private to the point.
#[test]
fn grouped_matmul_runs_batched_on_the_cpu_plugin() {
    use tessera_lowering::stablehlo::{emit_kernel, emit_kernel_as};
    let p = program();
    let auto = emit_kernel(&p).expect("emits");
    assert_eq!(auto, emit_kernel_as(&p, Form::Batched).expect("batched"));
    assert!(auto.contains("stablehlo.select"));
    // One loop, over the 4 groups.
    assert_eq!(auto.matches("\"stablehlo.while\"").count(), 1);
    assert!(auto.contains("dense<4> : tensor<i32>"), "{auto}");
}
