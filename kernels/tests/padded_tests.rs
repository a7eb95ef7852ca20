//! Padded edge blocks (`BlockSpec::padded`, Pallas' arrays not divisible by the block): the
//! grid covers each array with `ceil(array / block)` blocks, reads past the end are masked
//! by the kernel (`load_masked`), writes past the end are dropped. An elementwise kernel and
//! a masked row sum over ragged `[m, n]` arrays match exact / float64 references on the
//! interpreter (which pads with NaN, so an unmasked read of padding would show) and on the
//! XLA CPU plugin (every form); their Mosaic verifies with jaxlib and libtpu compiles it for
//! v5e, v6e and tpu7x. Misuse is reported at the user's line.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::Form;
use tessera_lowering::trace::KernelProgram;
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;
use tessera_runtime::{Device, LaunchExt};

#[tpu_kernel]
fn affine(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load() * 2.0 + 1.0);
}

fn affine_launch(m: usize, n: usize, (bm, bn): (usize, usize)) -> Launch {
    affine::launch()
        .grid([m.div_ceil(bm), n.div_ceil(bn)])
        .input(BlockSpec::new([bm, bn], |i, j| (i, j)).padded())
        .output(BlockSpec::new([bm, bn], |i, j| (i, j)).padded(), [m, n])
}

/// Sums of each row's first `cols[0]` columns, accumulated over column blocks (axis 1).
#[tpu_kernel]
fn row_sums(cols: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let width = x.shape()[1] as i32;
    let j = program_id(1);
    if j.eq(0) {
        o.store(zeros());
    }
    let col = iota::<i32>(x.shape(), 1) + j * width;
    let v = x.load_masked(col.lt(cols.load_scalar([0])), 0.0);
    o.store(o.load() + v.sum(1, true));
}

fn row_sums_launch(m: usize, n: usize, (bm, bn): (usize, usize)) -> Launch {
    row_sums::launch()
        .grid([m.div_ceil(bm), n.div_ceil(bn)])
        .input(BlockSpec::new([bm, bn], |i, j| (i, j)).padded())
        .output(BlockSpec::new([bm, 1], |i, _j| (i, 0)).padded(), [m, 1])
        .semantics([Parallel, Arbitrary])
}

fn random(rng: &mut rand::rngs::StdRng, m: usize, n: usize) -> HostTensor {
    let data: Vec<f32> = (0..m * n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    HostTensor::from_vec(vec![m, n], data)
}

fn runs(launch: &Launch, inputs: &[&HostTensor]) -> Vec<(&'static str, Vec<f64>)> {
    let cpu = Device::cpu().expect("the XLA CPU plugin is installed");
    [
        ("interp", launch.run(&Device::interp(), inputs)),
        ("cpu auto", launch.run_as(&cpu, inputs, Form::Auto)),
        ("cpu grid loop", launch.run_as(&cpu, inputs, Form::GridLoop)),
    ]
    .into_iter()
    .map(|(d, out)| {
        (
            d,
            out.unwrap_or_else(|e| panic!("{d}: {e}"))[0].to_f64_vec(),
        )
    })
    .collect()
}

const SHAPES: [(usize, usize, (usize, usize)); 3] = [
    (100, 200, (16, 128)),
    (9, 130, (8, 128)),
    (64, 384, (16, 128)),
];

#[test]
fn an_elementwise_kernel_on_ragged_arrays_is_exact_everywhere() {
    for (seed, (m, n, blocks)) in SHAPES.into_iter().enumerate() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed as u64 + 60);
        let x = random(&mut rng, m, n);
        let want: Vec<f64> = x
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&v| f64::from(v * 2.0 + 1.0))
            .collect();
        for (device, got) in runs(&affine_launch(m, n, blocks), &[&x]) {
            assert_eq!(got, want, "{device} {m}x{n} in {blocks:?}");
        }
    }
}

#[test]
fn a_masked_row_sum_over_ragged_blocks_matches_float64_everywhere() {
    for (seed, (m, n, blocks)) in SHAPES.into_iter().enumerate() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed as u64 + 70);
        let x = random(&mut rng, m, n);
        let xs = x.to_f64_vec();
        let cols = HostTensor::from_vec(vec![1], vec![n as i32]);
        let want: Vec<f64> = xs.chunks(n).map(|r| r.iter().sum()).collect();
        // f32 sums of n terms of magnitude < 1: |error| <= n * n * 2^-24.
        let tol = (n * n) as f64 * f64::from(f32::EPSILON) / 2.0;
        for (device, got) in runs(&row_sums_launch(m, n, blocks), &[&cols, &x]) {
            let worst = support::max_abs_error(&got, &want);
            assert!(worst <= tol, "{device} {m}x{n}: max error {worst} > {tol}");
        }
    }
}

#[test]
fn reading_padding_unmasked_shows_on_the_interpreter() {
    // Masking at a column count beyond the array reads the padding: NaN on the interpreter.
    let (m, n) = (16, 130);
    let x = HostTensor::zeros(DType::F32, vec![m, n]);
    let cols = HostTensor::from_vec(vec![1], vec![256]);
    let out = row_sums_launch(m, n, (8, 128))
        .run(&Device::interp(), &[&cols, &x])
        .unwrap();
    assert!(out[0].to_f64_vec().iter().all(|v| v.is_nan()));
}

fn programs() -> Vec<KernelProgram> {
    let (m, n) = (100, 200);
    vec![
        affine_launch(m, n, (16, 128))
            .trace_program(&[(DType::F32, vec![m, n])])
            .expect("traces"),
        row_sums_launch(m, n, (16, 128))
            .trace_program(&[(DType::I32, vec![1]), (DType::F32, vec![m, n])])
            .expect("traces"),
    ]
}

#[test]
fn padded_kernels_verify_with_jaxlib_and_compile_with_libtpu() {
    for (k, program) in programs().iter().enumerate() {
        assert_eq!(program.grid, [7, 2]);
        support::check_mosaic_of(&format!("padded-{k}"), program);
        support::compiles_for_every_topology(program);
    }
}

#[test]
fn a_partial_block_without_padded_and_a_padded_hbm_operand_are_errors_at_the_line() {
    let x = HostTensor::zeros(DType::F32, vec![100, 200]);
    let line = line!() + 3;
    let unpadded = affine::launch()
        .grid([7, 2])
        .input(BlockSpec::new([16, 128], |i, j| (i, j)))
        .output(
            BlockSpec::new([16, 128], |i, j| (i, j)).padded(),
            [100, 200],
        );
    let text = support::interp_trace_error(&unpadded, &[&x]).to_string();
    assert!(text.contains(&format!("padded_tests.rs:{line}:")), "{text}");
    assert!(
        text.contains("`BlockSpec::padded()` allows a partial last block"),
        "{text}"
    );

    let line = line!() + 2;
    let hbm = affine::launch()
        .input(BlockSpec::any().padded())
        .output(BlockSpec::new([100, 200], || (0, 0)), [100, 200]);
    let text = support::interp_trace_error(&hbm, &[&x]).to_string();
    assert!(text.contains(&format!("padded_tests.rs:{line}:")), "{text}");
    assert!(text.contains("no edge blocks to pad"), "{text}");
}
