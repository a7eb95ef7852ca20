//! The carried scan (a row cumsum across column blocks, the earlier blocks' total carried in
//! VMEM scratch along the sequential axis) is emitted as one whole-row cumsum under
//! `Form::Auto` (`lowering/src/stablehlo/kernel/carried.rs`); a kernel that only looks like it
//! keeps the grid loop. Both run on the interpreter and the XLA CPU plugin against float64
//! references on seeded random inputs, with one, two, three and four column steps.

mod support;

use rand::{Rng, SeedableRng};
use tessera_lowering::prelude::*;
use tessera_lowering::stablehlo::emit_kernel;
use tessera_lowering::HostTensor;
use tessera_macros::tpu_kernel;

const ROWS: usize = 8;
const LANES: usize = 128;

#[tpu_kernel]
fn carried_cumsum(x: &Ref<f32>, o: &mut RefMut<f32>, carry: &mut Scratch<f32>) {
    if program_id(1).eq(0) {
        carry.store(zeros());
    }
    let t = x.load();
    let before = carry.load();
    o.store(t.cumsum(1) + before);
    carry.store(before + t.sum(1, true));
}

/// Near miss: the carry adds each block's maximum, not its total.
#[tpu_kernel]
fn carried_max_offsets(x: &Ref<f32>, o: &mut RefMut<f32>, carry: &mut Scratch<f32>) {
    if program_id(1).eq(0) {
        carry.store(zeros());
    }
    let t = x.load();
    let before = carry.load();
    o.store(t.cumsum(1) + before);
    carry.store(before + t.max(1, true));
}

fn launch(kernel: Launch, rows: usize, cols: usize, bc: usize) -> Launch {
    kernel
        .grid([rows / ROWS, cols / bc])
        .input(BlockSpec::new([ROWS, bc], |i, j| (i, j)))
        .output(BlockSpec::new([ROWS, bc], |i, j| (i, j)), [rows, cols])
        .scratch(Vmem::<f32>::new([ROWS, bc]))
        .semantics([Parallel, Arbitrary])
}

/// Float64 reference: per row, each column block's cumsum plus `offset` of the earlier
/// blocks (their total, or the sum of their maxima).
fn reference(x: &[f64], cols: usize, bc: usize, block_offset: fn(&[f64]) -> f64) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|row| {
            let mut carry = 0.0;
            let mut out = Vec::with_capacity(cols);
            for block in row.chunks(bc) {
                let mut run = 0.0;
                for v in block {
                    run += v;
                    out.push(run + carry);
                }
                carry += block_offset(block);
            }
            out
        })
        .collect()
}

fn check(kernel: fn() -> Launch, carried: bool, seed: u64, block_offset: fn(&[f64]) -> f64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for steps in 1..=4 {
        let (rows, bc) = (16, LANES);
        let cols = steps * bc;
        let l = launch(kernel(), rows, cols, bc);
        let program = l
            .trace_program(&[(DType::F32, vec![rows, cols])])
            .expect("traces");
        let text = emit_kernel(&program).expect("emits");
        // With one column step the carry is never read: any such kernel is one scan.
        let carried = carried || steps == 1;
        assert_eq!(
            !text.contains("stablehlo.while"),
            carried,
            "{steps} steps: rewritten must be {carried}\n{text}"
        );
        let xf: Vec<f32> = (0..rows * cols).map(|_| rng.gen_range(-1.0..1.0)).collect();
        let x = HostTensor::from_vec(vec![rows, cols], xf);
        let xs = x.to_f64_vec();
        let want = reference(&xs, cols, bc, block_offset);
        let abs: Vec<f64> = xs.iter().map(|v| v.abs()).collect();
        let scale = reference(&abs, cols, bc, |b| b.iter().sum());
        // Form::Auto and the grid loop on the CPU plugin, and the interpreter.
        for (device, out) in support::run_everywhere(&l, &[&x]) {
            for (e, ((got, want), s)) in out[0]
                .to_f64_vec()
                .iter()
                .zip(&want)
                .zip(&scale)
                .enumerate()
            {
                // f32 partial sums of up to `cols` terms of |x| < 1.
                let tol = cols as f64 * f64::from(f32::EPSILON) * s.max(1.0);
                assert!(
                    (got - want).abs() <= tol,
                    "{device}, {steps} steps: element {e}: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn a_carried_row_cumsum_is_one_whole_row_scan_and_matches_float64() {
    check(carried_cumsum::launch, true, 21, |b| b.iter().sum());
}

#[test]
fn a_carry_of_block_maxima_keeps_the_grid_loop_and_matches_float64() {
    check(carried_max_offsets::launch, false, 22, |b| {
        b.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    });
}
