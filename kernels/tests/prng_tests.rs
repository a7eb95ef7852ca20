//! Random bits in a kernel (Pallas' `pltpu.prng_seed` / `pltpu.prng_random_bits`). The
//! interpreter and the XLA CPU plugin share one documented counter-based generator
//! (`tessera_lowering::ir::prng`), so they agree bit for bit, and both match that generator
//! evaluated here; a TPU draws from its hardware PRNG (other bits, same distribution).
//! Tests: exact agreement, determinism per seed, different seeds and draws differ,
//! uniformity of the bits as floats, a seed per loop iteration, Mosaic verified by jaxlib,
//! libtpu compiles for v5e, v6e and tpu7x, and misuse at the user's line.

mod support;

use tessera_lowering::ir::prng;
use tessera_lowering::mosaic::{lower_to_mosaic, TpuGeneration};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::{KernelProgram, TraceError};
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt, RuntimeError};

/// Raw bits and the same draw's top 24 bits as floats in [0, 1); one stream per grid step.
#[tpu_kernel]
fn draw(seed: &Prefetch<i32>, bits: &mut RefMut<i32>, uniform: &mut RefMut<f32>) {
    prng_seed((seed.load_scalar([0]), program_id(0)));
    let b = prng_random_bits(bits.shape());
    bits.store(b);
    uniform.store(b.shift_right_logical(8).cast::<f32>() * (1.0 / 16_777_216.0));
}

fn draw_launch(rows: usize, block: usize) -> Launch {
    draw::launch()
        .grid([rows / block])
        .output(BlockSpec::new([block, 128], |i| (i, 0)), [rows, 128])
        .output(BlockSpec::new([block, 128], |i| (i, 0)), [rows, 128])
}

/// The generator's bits for seeds `(seed, step)`, draw site 0, `[block, 128]` per step.
fn expected_bits(seed: i32, rows: usize, block: usize) -> Vec<f64> {
    (0..rows / block)
        .flat_map(|step| {
            let key = prng::seed_key(&[seed as u32, step as u32]);
            let stream = prng::stream_key(key, 0);
            (0..block * 128).map(move |e| f64::from(prng::bits(stream, e as u32) as i32))
        })
        .collect()
}

fn run_all(launch: &Launch, inputs: &[&HostTensor]) -> Vec<(&'static str, Vec<HostTensor>)> {
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    [
        ("interp", launch.run(&Device::interp(), inputs)),
        ("cpu auto", launch.run_as(&cpu, inputs, Form::Auto)),
        ("cpu grid loop", launch.run_as(&cpu, inputs, Form::GridLoop)),
    ]
    .into_iter()
    .map(|(d, out)| (d, out.unwrap_or_else(|e| panic!("{d}: {e}"))))
    .collect()
}

#[test]
fn interpreter_and_cpu_give_the_generators_bits_exactly() {
    for (seed, rows, block) in [(7, 64, 16), (-123_456, 32, 32), (0, 48, 8)] {
        let want = expected_bits(seed, rows, block);
        let s = HostTensor::from_vec(vec![1], vec![seed]);
        for (device, out) in run_all(&draw_launch(rows, block), &[&s]) {
            assert_eq!(out[0].to_f64_vec(), want, "{device} seed {seed}");
            let uniform: Vec<f64> = want
                .iter()
                .map(|&b| f64::from(((b as i32 as u32) >> 8) as f32 * (1.0 / 16_777_216.0)))
                .collect();
            assert_eq!(out[1].to_f64_vec(), uniform, "{device} seed {seed}");
        }
    }
}

fn bits_of(seed: i32) -> Vec<f64> {
    let s = HostTensor::from_vec(vec![1], vec![seed]);
    draw_launch(64, 16).run(&Device::interp(), &[&s]).unwrap()[0].to_f64_vec()
}

#[test]
fn a_seed_replays_its_bits_and_other_seeds_and_steps_differ() {
    assert_eq!(bits_of(5), bits_of(5));
    let (a, b) = (bits_of(5), bits_of(6));
    let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
    // Independent 32-bit draws agree with probability 2^-32 each: none of 8192 should.
    assert_eq!(same, 0, "seeds 5 and 6 share {same} of {} words", a.len());
    // Grid steps seed with their index: step blocks differ too.
    let (first, second) = a.split_at(16 * 128);
    assert!(first.iter().zip(second).all(|(x, y)| x != y));
}

#[test]
fn the_bits_are_uniform() {
    // 2^20 draws on the CPU plugin (the interpreter gives the same bits, tested above).
    let (rows, block) = (8192, 1024);
    let s = HostTensor::from_vec(vec![1], vec![2024]);
    let cpu = Device::cpu().unwrap();
    let out = draw_launch(rows, block).run(&cpu, &[&s]).unwrap();
    let n = (rows * 128) as f64;
    let u = out[1].to_f64_vec();
    let mean = u.iter().sum::<f64>() / n;
    let var = u.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    // U[0, 1): mean 1/2 (standard error 0.29 / 1024 = 2.8e-4), variance 1/12 (standard
    // error about 8e-5); the bounds are over 7 standard errors.
    assert!((mean - 0.5).abs() < 2e-3, "mean {mean}");
    assert!((var - 1.0 / 12.0).abs() < 6e-4, "variance {var}");
    // 16 equal bins: chi-square with 15 degrees of freedom; 50 is beyond p = 1e-5.
    let mut bins = [0f64; 16];
    u.iter().for_each(|x| bins[(x * 16.0) as usize] += 1.0);
    let expected = n / 16.0;
    let chi2: f64 = bins.iter().map(|c| (c - expected).powi(2) / expected).sum();
    assert!(chi2 < 50.0, "chi-square {chi2} over {bins:?}");
    // Every bit position is set half the time (standard error 0.5 / 1024).
    let bits = out[0].to_f64_vec();
    for k in 0..32 {
        let ones = bits
            .iter()
            .filter(|&&b| (b as i32 as u32 >> k) & 1 == 1)
            .count() as f64;
        assert!((ones / n - 0.5).abs() < 5e-3, "bit {k}: {}", ones / n);
    }
}

/// Each loop iteration seeds with its index and draws one 8-row slab.
#[tpu_kernel]
fn loop_draws(seed: &Prefetch<i32>, o: &mut RefMut<i32>) {
    for i in range(4) {
        prng_seed((seed.load_scalar([0]), i));
        o.store_slice((i * 8, 0), prng_random_bits([8, 128]));
    }
}

#[test]
fn a_seed_per_loop_iteration_gives_each_iteration_its_bits() {
    let launch = loop_draws::launch().output(BlockSpec::new([32, 128], || (0, 0)), [32, 128]);
    let want: Vec<f64> = (0..4u32)
        .flat_map(|i| {
            let stream = prng::stream_key(prng::seed_key(&[31, i]), 0);
            (0..8 * 128).map(move |e| f64::from(prng::bits(stream, e) as i32))
        })
        .collect();
    let s = HostTensor::from_vec(vec![1], vec![31]);
    for (device, out) in run_all(&launch, &[&s]) {
        assert_eq!(out[0].to_f64_vec(), want, "{device}");
    }
}

fn program() -> KernelProgram {
    draw_launch(64, 16)
        .trace_program(&[(DType::I32, vec![1])])
        .expect("traces")
}

#[test]
fn the_mosaic_uses_the_tpu_prng_and_verifies_with_jaxlib() {
    let m = lower_to_mosaic(&program(), TpuGeneration::V5e).unwrap();
    assert!(
        m.readable.contains("tpu.prng_set_seed_32"),
        "{}",
        m.readable
    );
    assert!(
        m.readable.contains("tpu.prng_random_bits") && m.readable.contains("vector<16x128xi32>"),
        "{}",
        m.readable
    );
    support::check_mosaic_of("prng", &program());
}

#[test]
fn the_prng_kernel_compiles_with_libtpu_for_three_generations() {
    support::compiles_for_every_topology(&program());
}

#[tpu_kernel]
fn unseeded(o: &mut RefMut<i32>) {
    o.store(prng_random_bits([8, 128]));
}

#[tpu_kernel]
fn rank_one(o: &mut RefMut<i32>) {
    prng_seed([1]);
    o.store(prng_random_bits([128]).broadcast_to([8, 128]));
}

#[tpu_kernel]
fn seeded_outside_the_loop(o: &mut RefMut<i32>) {
    prng_seed([3]);
    for i in range(2) {
        o.store_slice((i * 4, 0), prng_random_bits([4, 128]));
    }
}

fn error_of(launch: Launch) -> TraceError {
    let launch = launch.output(BlockSpec::new([8, 128], || (0, 0)), [8, 128]);
    match launch.run(&Device::interp(), &[]) {
        Err(RuntimeError::Trace(e)) => *e,
        other => panic!("expected a trace error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn misuse_is_an_error_at_the_draw() {
    let source = include_str!("prng_tests.rs");
    let line_of = |needle: &str| 1 + source.lines().position(|l| l.contains(needle)).unwrap();
    let cases = [
        (
            error_of(unseeded::launch()),
            line_of("o.store(prng_random_bits([8, 128]));"),
            "no `prng_seed` before it",
        ),
        (
            error_of(rank_one::launch()),
            line_of("prng_random_bits([128])"),
            "rank >= 2",
        ),
        (
            error_of(seeded_outside_the_loop::launch()),
            line_of("prng_random_bits([4, 128])"),
            "a draw inside a loop needs a seed set inside the loop",
        ),
    ];
    for (error, line, message) in cases {
        let text = error.to_string();
        assert!(text.contains(&format!("prng_tests.rs:{line}:")), "{text}");
        assert!(text.contains(message), "{text}");
    }
}
