//! Tiled matmul `[m, k] @ [k, n]` on a 3-D grid `(m/bm, n/bn, k/bk)`.

use crate::spec::{lane_block, problem, sublane_block};
use crate::ShippedKernel;
use tessera_lowering::prelude::*;
use tessera_lowering::trace::Launch;
use tessera_macros::tpu_kernel;

/// One `(bm, bn)` output block accumulates over the k axis (grid axis 2, the last and
/// sequential one) in an f32 scratch: zeroed on the first k step, written out on the last,
/// so the output is rounded to `T` once.
#[tpu_kernel]
pub fn matmul<T: Float>(x: &Ref<T>, y: &Ref<T>, o: &mut RefMut<T>, acc: &mut Scratch<f32>) {
    if program_id(2).eq(0) {
        acc.store(zeros());
    }
    acc.store(acc.load() + dot(x.load(), y.load()));
    if program_id(2).eq(num_programs(2) - 1) {
        o.store(acc.load().cast::<T>());
    }
}

pub(crate) const SHIPPED: ShippedKernel = ShippedKernel {
    name: "matmul",
    about: "tiled x @ y, f32 accumulator in VMEM scratch",
    default_shape: &[256, 256, 256],
    problem_dims: &["m", "n", "k"],
    input_shapes,
    launch,
    reference,
    sum_len: |s| s.get(2).copied().unwrap_or(1),
};

fn input_shapes(shape: &[usize]) -> Vec<Vec<usize>> {
    match shape {
        [m, n, k] => vec![vec![*m, *k], vec![*k, *n]],
        _ => Vec::new(),
    }
}

fn launch(shape: &[usize]) -> Result<Launch, String> {
    let [m, n, k] = problem(&SHIPPED, shape)?;
    // k is x's lane dim and y's sublane dim: the lane rule is the stricter one.
    Ok(launch_with_blocks(
        [m, n, k],
        [sublane_block(m), lane_block(n), lane_block(k)],
    ))
}

/// The matmul launch for problem `[m, n, k]` with blocks `[bm, bn, bk]` (the autotuner's
/// entry point; the blocks must divide the problem).
pub fn launch_with_blocks([m, n, k]: [usize; 3], [bm, bn, bk]: [usize; 3]) -> Launch {
    matmul::launch()
        .grid([m / bm, n / bn, k / bk])
        .input(BlockSpec::new([bm, bk], |i, _j, k| [i, k]))
        .input(BlockSpec::new([bk, bn], |_i, j, k| [k, j]))
        .output(BlockSpec::new([bm, bn], |i, j, _k| [i, j]), [m, n])
        .scratch(Vmem::<f32>::new([bm, bn]))
        .semantics([Parallel, Parallel, Arbitrary])
}

fn reference(inputs: &[Vec<f64>], shape: &[usize]) -> Vec<Vec<f64>> {
    let (x, y) = (&inputs[0], &inputs[1]);
    let (n, k) = (shape[1], shape[2]);
    let mut out = vec![0.0; shape[0] * n];
    for (row, o) in x.chunks(k).zip(out.chunks_mut(n)) {
        for (xv, y_row) in row.iter().zip(y.chunks(n)) {
            for (ov, yv) in o.iter_mut().zip(y_row) {
                *ov += xv * yv;
            }
        }
    }
    vec![out]
}
