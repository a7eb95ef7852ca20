//! `while` loops with traced conditions: a loop whose trip count is read from SMEM, and one
//! that follows a chain of indices in SMEM until it ends (a trip count no formula gives).
//! Each runs on the interpreter and the XLA CPU plugin against an exact reference (the
//! kernels add f32 values in a fixed order, which the reference repeats), its Mosaic
//! (`scf.while`) verifies with jaxlib's tpu dialect, and libtpu compiles it for v5e, v6e and
//! tpu7x. Misuse is reported at this file's lines.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;

#[path = "shared/sum_while.rs"]
mod sum_while;
use sum_while::{sum_launch, whole, LANES, ROWS};
use tessera_runtime::{Device, LaunchExt, RuntimeError};

/// Sums the slabs of `x` along the chain `head[0] -> next[head] -> ...` until an index of
/// -1: the trip count is the chain's length, known only by walking it.
#[tpu_kernel]
fn chain_sum(head: &Prefetch<i32>, next: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut node = head.load_scalar([0]);
    let mut acc = full::<f32>([1, ROWS, LANES], 0.0);
    while node.ge(0) {
        acc = acc + x.load_slice((node, 0, 0), [1, ROWS, LANES]);
        node = next.load_scalar([node]);
    }
    o.store(acc);
}

fn chain_launch(k: usize) -> Launch {
    let (input, output) = whole(k);
    chain_sum::launch()
        .input(input)
        .output(output, [1, ROWS, LANES])
}

fn random_f32(rng: &mut rand::rngs::StdRng, shape: Vec<usize>) -> HostTensor {
    let n = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.gen_range(-4.0..4.0)).collect();
    HostTensor::from_vec(shape, data)
}

/// The slabs of `xs` (`[k, ROWS, LANES]`) at `order`, summed in that order in f32 (the
/// kernel's order, so the comparison is exact).
fn slab_sum(xs: &[f64], order: &[usize]) -> Vec<f64> {
    (0..ROWS * LANES)
        .map(|e| {
            order
                .iter()
                .fold(0f32, |acc, &i| acc + xs[i * ROWS * LANES + e] as f32) as f64
        })
        .collect()
}

#[test]
fn a_while_loop_whose_trip_count_is_read_from_smem_matches_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    let k = 6;
    let x = random_f32(&mut rng, vec![k, ROWS, LANES]);
    let xs = x.to_f64_vec();
    for n in [0, 1, 4, k as i32] {
        let n_t = HostTensor::from_vec(vec![1], vec![n]);
        let order: Vec<usize> = (0..n as usize).collect();
        support::run_everywhere_exact(&sum_launch(k), &[&n_t, &x], &slab_sum(&xs, &order));
    }
}

#[test]
fn a_while_loop_following_a_chain_in_smem_matches_on_every_device() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(19);
    let k = 7;
    let x = random_f32(&mut rng, vec![k, ROWS, LANES]);
    let xs = x.to_f64_vec();
    // Seeded chains of every length 0..=k through a shuffled subset of the slabs.
    for len in 0..=k {
        let mut slabs: Vec<usize> = (0..k).collect();
        for i in (1..k).rev() {
            slabs.swap(i, rng.gen_range(0..=i));
        }
        let chain = &slabs[..len];
        let mut next = vec![-1i32; k];
        for w in chain.windows(2) {
            next[w[0]] = w[1] as i32;
        }
        let head = chain.first().map_or(-1, |&h| h as i32);
        let head_t = HostTensor::from_vec(vec![1], vec![head]);
        let next_t = HostTensor::from_vec(vec![k], next);
        support::run_everywhere_exact(
            &chain_launch(k),
            &[&head_t, &next_t, &x],
            &slab_sum(&xs, chain),
        );
    }
}

fn programs() -> Vec<(&'static str, KernelProgram)> {
    let k = 4;
    let x = (DType::F32, vec![k, ROWS, LANES]);
    vec![
        (
            "sum_while",
            sum_launch(k)
                .trace_program(&[(DType::I32, vec![1]), x.clone()])
                .expect("traces"),
        ),
        (
            "chain_sum",
            chain_launch(k)
                .trace_program(&[(DType::I32, vec![1]), (DType::I32, vec![k]), x])
                .expect("traces"),
        ),
    ]
}

#[test]
fn while_loops_lower_to_scf_while_that_jaxlib_verifies() {
    for (name, program) in programs() {
        let m = lower_to_mosaic(&program, TpuGeneration::V6e).expect("lowers");
        assert!(
            m.readable.contains("\"scf.while\""),
            "{name}: {}",
            m.readable
        );
        assert!(m.readable.contains("\"scf.condition\""), "{name}");
        if let Some(py) = support::jax_python() {
            support::verify_mosaic(&py, "while-mosaic", &format!("{name}.mlir"), &m.serialized);
        }
    }
}

#[test]
fn while_loops_compile_with_libtpu_for_three_generations() {
    for (name, program) in programs() {
        eprintln!("{name}");
        support::compiles_for_every_topology(&program);
    }
}

#[test]
fn the_stablehlo_of_a_while_loop_is_a_stablehlo_while() {
    let program = &programs()[1].1;
    let text = tessera_lowering::stablehlo::emit_kernel(program).expect("emits");
    assert!(text.contains("stablehlo.while"), "{text}");
}

/// A `while` on a Rust condition: runs at trace time, like a Rust loop (three doublings).
#[tpu_kernel]
fn unrolled_doubling(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut t = x.load();
    let mut n = 0;
    while n < 3 {
        t = t * 2.0;
        n += 1;
    }
    o.store(t);
}

#[test]
fn a_while_on_a_rust_condition_unrolls_at_trace_time() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(41);
    let x = random_f32(&mut rng, vec![ROWS, LANES]);
    let spec = || BlockSpec::new([ROWS, LANES], || (0, 0));
    let launch = unrolled_doubling::launch()
        .input(spec())
        .output(spec(), [ROWS, LANES]);
    let program = launch
        .trace_program(&[(DType::F32, vec![ROWS, LANES])])
        .expect("traces");
    let text = program.to_string();
    assert!(!text.contains("while iter("), "{text}");
    assert_eq!(text.matches(" mul ").count(), 3, "{text}");
    let want: Vec<f64> = x.to_f64_vec().iter().map(|v| v * 8.0).collect();
    support::run_everywhere_exact(&launch, &[&x], &want);
}

/// A `while` whose condition stores into a ref (conditions only compute).
#[tpu_kernel]
fn storing_condition(n: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut i = scalar::<i32>(0);
    while stores_then_compares(o, i, n.load_scalar([0])) {
        i = i + 1;
    }
    o.store(x.load());
}

const STORING_LINE: u32 = line!() - 6;

fn stores_then_compares(o: &RefMut<f32>, i: Scalar<i32>, n: Scalar<i32>) -> Scalar<bool> {
    o.store(zeros());
    i.lt(n)
}

/// A `while` whose body changes a carried value's type (its shape grows).
#[tpu_kernel]
fn growing_carry(n: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut i = scalar::<i32>(0);
    let mut acc = x.load().sum(1, true);
    while i.lt(n.load_scalar([0])) {
        acc = acc + x.load();
        i = i + 1;
    }
    o.store(acc);
}

const GROWING_LINE: u32 = line!() - 7;

/// A `while` whose condition never turns false.
#[tpu_kernel]
fn spin(n: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut i = n.load_scalar([0]);
    while i.ge(0) {
        i = i * 1;
    }
    o.store(x.load());
}

#[test]
fn a_while_that_never_ends_is_an_error_on_the_interpreter_not_a_hang() {
    let n = HostTensor::from_vec(vec![1], vec![0i32]);
    let x = HostTensor::zeros(DType::F32, vec![ROWS, LANES]);
    let spec = || BlockSpec::new([ROWS, LANES], || (0, 0));
    let launch = spin::launch().input(spec()).output(spec(), [ROWS, LANES]);
    let message = match launch.run(&Device::interp(), &[&n, &x]) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("an endless loop finished"),
    };
    assert!(
        message.contains("while_tests.rs:")
            && message.contains("without its condition turning false"),
        "{message}"
    );
}

fn trace_error(result: Result<Vec<HostTensor>, RuntimeError>, line: u32) -> String {
    let error: TraceError = match result {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {other:?}"),
    };
    let message = error.to_string();
    assert!(
        message.contains(&format!("while_tests.rs:{line}:")),
        "{message}"
    );
    message
}

#[test]
fn a_condition_that_stores_and_a_carry_that_changes_type_are_reported_at_the_while() {
    let n = HostTensor::from_vec(vec![1], vec![2i32]);
    let x = HostTensor::zeros(DType::F32, vec![ROWS, LANES]);
    let spec = || BlockSpec::new([ROWS, LANES], || (0, 0));
    let launch = storing_condition::launch()
        .input(spec())
        .output(spec(), [ROWS, LANES]);
    let message = trace_error(launch.run(&Device::interp(), &[&n, &x]), STORING_LINE);
    assert!(message.contains("condition stores into a ref"), "{message}");
    let launch = growing_carry::launch()
        .input(spec())
        .output(spec(), [ROWS, LANES]);
    let message = trace_error(launch.run(&Device::interp(), &[&n, &x]), GROWING_LINE);
    assert!(
        message.contains("enters the loop as tile<8x1xf32> and leaves the body as tile<8x128xf32>"),
        "{message}"
    );
}
