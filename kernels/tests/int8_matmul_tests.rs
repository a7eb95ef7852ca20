//! Quantized matmul: int8 x int8 blocks accumulated exactly in int32 (`dot_i8`, the MXU's
//! integer mode), dequantized with a per-row f32 scale. Runs on the interpreter and the XLA
//! CPU plugin against an exact reference (int32 sums are exact; the dequantizing multiply
//! is one f32 rounding, done the same way), its Mosaic verifies with jaxlib, and libtpu
//! compiles it for v5e, v6e and tpu7x.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt};

/// `o = f32(x @ y) * scale` with `x @ y` summed in int32 and `scale` one value per row.
#[tpu_kernel]
fn int8_matmul(x: &Ref<i8>, y: &Ref<i8>, scale: &Ref<f32>, o: &mut RefMut<f32>) {
    let acc = dot_i8(x.load(), y.load());
    o.store(acc.cast::<f32>() * scale.load());
}

/// Row blocks of `bm` (a multiple of 32, int8's sublane tile) over the whole `k` and `n`.
fn launch(m: usize, k: usize, n: usize, bm: usize) -> Launch {
    int8_matmul::launch()
        .grid([m / bm])
        .input(BlockSpec::new([bm, k], |i| (i, 0)))
        .input(BlockSpec::new([k, n], |_i| (0, 0)))
        .input(BlockSpec::new([bm, 1], |i| (i, 0)))
        .output(BlockSpec::new([bm, n], |i| (i, 0)), [m, n])
}

fn int8s(rng: &mut rand::rngs::StdRng, shape: Vec<usize>) -> HostTensor {
    let n = shape.iter().product();
    let data: Vec<i8> = (0..n).map(|_| rng.gen_range(-128..=127)).collect();
    HostTensor::from_vec(shape, data)
}

#[test]
fn int8_matmul_with_per_row_dequant_is_exact_on_every_device() {
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    for (seed, (m, k, n, bm)) in [(64, 256, 128, 32), (96, 512, 256, 32)]
        .into_iter()
        .enumerate()
    {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed as u64);
        let x = int8s(&mut rng, vec![m, k]);
        let y = int8s(&mut rng, vec![k, n]);
        let scales: Vec<f32> = (0..m).map(|_| rng.gen_range(0.001..0.1)).collect();
        let scale = HostTensor::from_vec(vec![m, 1], scales.clone());
        let (xs, ys) = (x.to_f64_vec(), y.to_f64_vec());
        // |sum| <= 512 * 128^2 = 2^23: exact in int32 and in f32.
        let want: Vec<f64> = (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                let acc: f64 = (0..k).map(|l| xs[i * k + l] * ys[l * n + j]).sum();
                f64::from(acc as f32 * scales[i])
            })
            .collect();
        let l = launch(m, k, n, bm);
        let inputs = [&x, &y, &scale];
        let runs = [
            ("interp", l.run(&Device::interp(), &inputs)),
            ("cpu auto", l.run_as(&cpu, &inputs, Form::Auto)),
            ("cpu grid loop", l.run_as(&cpu, &inputs, Form::GridLoop)),
        ];
        for (device, out) in runs {
            let out = out.unwrap_or_else(|e| panic!("{device}: {e}"));
            assert_eq!(out[0].to_f64_vec(), want, "{device} {m}x{k}x{n}");
        }
    }
}

fn program() -> KernelProgram {
    let (m, k, n) = (64, 256, 128);
    launch(m, k, n, 32)
        .trace_program(&[
            (DType::I8, vec![m, k]),
            (DType::I8, vec![k, n]),
            (DType::F32, vec![m, 1]),
        ])
        .expect("traces")
}

#[test]
fn int8_matmul_mosaic_verifies_with_jaxlib() {
    let Some(py) = support::jax_python() else {
        return;
    };
    let m = lower_to_mosaic(&program(), TpuGeneration::V5e).unwrap();
    assert!(
        m.readable.contains("vector<32x256xi8>") && m.readable.contains("vector<32x128xi32>"),
        "{}",
        m.readable
    );
    support::verify_mosaic(&py, "int8", "int8_matmul.mlir", &m.serialized);
}

#[test]
fn int8_matmul_compiles_with_libtpu_for_three_generations() {
    let program = program();
    support::compiles_for_every_topology(&program);
}

#[test]
fn the_backend_for_a_tpu_is_the_mosaic_custom_call() {
    use tessera_lowering::backend::{lower, Backend, Lowered, Target};
    let program = program();
    let tpu = Backend::for_target(Target::Tpu(TpuGeneration::V6e), Form::Auto, true);
    assert_eq!(tpu, Backend::Mosaic(TpuGeneration::V6e));
    let lowered = lower(&program, tpu).unwrap();
    assert!(
        matches!(&lowered, Lowered::Mosaic { kernel, .. } if kernel.generation == TpuGeneration::V6e)
    );
    let text = lowered.module().expect("a module");
    assert!(
        text.contains("call_target_name = \"tpu_custom_call\""),
        "{text}"
    );
    let cpu = Backend::for_target(Target::StableHlo, Form::GridLoop, false);
    let lowered = lower(&program, cpu).unwrap();
    assert!(lowered.checks().is_empty());
    let text = lowered.module().expect("a module");
    assert!(
        text.contains("\"stablehlo.while\"") && !text.contains("tpu_custom_call"),
        "{text}"
    );
    let interp = Backend::for_target(Target::Interpreter, Form::Auto, true);
    let lowered = lower(&program, interp).unwrap();
    assert_eq!(lowered, Lowered::Interpreted);
    let err = lowered.into_module().unwrap_err().to_string();
    assert!(err.contains("lowers them to no module"), "{err}");
}
