//! Input/output aliasing (Pallas' `input_output_aliases`): a KV-cache-style update that adds
//! new row blocks into a cache at positions read from SMEM, in place. Blocks the kernel never
//! visits keep the cache's values, because the output is the cache's buffer. Runs on the
//! interpreter and the XLA CPU plugin against an exact reference; its custom call carries
//! the alias to XLA, jaxlib verifies its Mosaic, and libtpu compiles it for v5e, v6e and
//! tpu7x. Bad aliases are reported at the `.alias` call.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, tpu_custom_call, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

const ROWS: usize = 8;
const LANES: usize = 128;

/// `cache[pos[i]] += new[i]` for each row block `i`, written through the aliased output.
#[tpu_kernel]
fn add_into_cache(_pos: &Prefetch<i32>, cache: &Ref<f32>, new: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(cache.load() + new.load());
}

fn at_position() -> BlockSpec {
    BlockSpec::prefetch([ROWS, LANES], |g, p| (p[0].load_scalar([g[0]]), 0))
}

fn cache_launch(blocks: usize, n_new: usize) -> Launch {
    add_into_cache::launch()
        .grid([n_new])
        .input(at_position())
        .input(BlockSpec::new([ROWS, LANES], |i| (i, 0)))
        .output(at_position(), [blocks * ROWS, LANES])
        .alias(0, 0)
}

fn random_f32(rng: &mut rand::rngs::StdRng, shape: Vec<usize>) -> HostTensor {
    let n = shape.iter().product();
    // Multiples of 1/8 in [-4, 4): every sum of two is exact in f32.
    let data: Vec<f32> = (0..n)
        .map(|_| rng.gen_range(-32..32) as f32 / 8.0)
        .collect();
    HostTensor::from_vec(shape, data)
}

#[test]
fn an_in_place_cache_update_keeps_unvisited_blocks_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let (blocks, n_new) = (6, 3);
    let cache = random_f32(&mut rng, vec![blocks * ROWS, LANES]);
    let new = random_f32(&mut rng, vec![n_new * ROWS, LANES]);
    // Distinct positions, out of order.
    let pos = vec![4i32, 1, 5];
    let pos_t = HostTensor::from_vec(vec![n_new], pos.clone());
    let mut want = cache.to_f64_vec();
    let nv = new.to_f64_vec();
    let block = ROWS * LANES;
    for (i, &p) in pos.iter().enumerate() {
        for e in 0..block {
            want[p as usize * block + e] += nv[i * block + e];
        }
    }
    let launch = cache_launch(blocks, n_new);
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    let inputs = [&pos_t, &cache, &new];
    let runs = [
        ("interp", launch.run(&Device::interp(), &inputs)),
        ("cpu auto", launch.run_as(&cpu, &inputs, Form::Auto)),
        (
            "cpu grid loop",
            launch.run_as(&cpu, &inputs, Form::GridLoop),
        ),
    ];
    for (device, out) in runs {
        let out = out.unwrap_or_else(|e| panic!("{device}: {e}"));
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
}

fn program() -> KernelProgram {
    cache_launch(6, 3)
        .trace_program(&[
            (DType::I32, vec![3]),
            (DType::F32, vec![6 * ROWS, LANES]),
            (DType::F32, vec![3 * ROWS, LANES]),
        ])
        .expect("traces")
}

#[test]
fn the_custom_call_carries_the_alias_and_libtpu_compiles_it() {
    let program = program();
    let kernel = lower_to_mosaic(&program, TpuGeneration::V6e).unwrap();
    let module = tpu_custom_call(&program, &kernel).unwrap().into_text();
    // Operand 1: the cache, after the scalar-prefetch array.
    assert!(
        module.contains("output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 1, operand_tuple_indices = []>]"),
        "{module}"
    );
    support::compiles_for_every_topology(&program);
}

#[test]
fn the_cache_update_mosaic_verifies_with_jaxlib() {
    let Some(py) = support::jax_python() else {
        return;
    };
    let m = lower_to_mosaic(&program(), TpuGeneration::V5e).unwrap();
    support::verify_mosaic(&py, "alias", "add_into_cache.mlir", &m.serialized);
}

fn launch_error(launch: &Launch, line: u32) -> TraceError {
    let pos = HostTensor::from_vec(vec![1], vec![0i32]);
    let cache = HostTensor::zeros(DType::F32, vec![ROWS, LANES]);
    let new = HostTensor::zeros(DType::F32, vec![ROWS, LANES]);
    let error = match launch.run(&Device::interp(), &[&pos, &cache, &new]) {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {other:?}"),
    };
    let text = error.to_string();
    assert!(
        text.contains(&format!("aliasing_tests.rs:{line}:")),
        "{text}"
    );
    error
}

#[test]
fn an_aliased_input_of_the_wrong_shape_is_reported_at_the_alias_call() {
    let launch = add_into_cache::launch()
        .grid([1])
        .input(at_position())
        .input(BlockSpec::new([ROWS, LANES], |i| (i, 0)))
        .output(at_position(), [2 * ROWS, LANES])
        .alias(0, 0);
    let line = line!() - 1;
    let error = launch_error(&launch, line);
    assert!(error.to_string().contains("shape must match"), "{error}");
}

#[test]
fn an_alias_of_a_missing_output_is_reported_at_the_alias_call() {
    let launch = cache_launch(1, 1).alias(1, 3);
    let line = line!() - 1;
    let error = launch_error(&launch, line);
    assert!(error.to_string().contains("1 outputs"), "{error}");
}
