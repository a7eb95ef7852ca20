//! The grouped matmul of grouped_matmul_tests.rs, shared with the kernels bench.
// Each includer uses a part of it.
#![allow(dead_code)]

use tessera_lowering::prelude::*;
use tessera_lowering::trace::Launch;
use tessera_macros::tpu_kernel;

/// Rows and columns per output block.
pub const BM: usize = 8;
pub const BN: usize = 128;

/// One `(row block, column block)` of the output visits every group along the last,
/// sequential grid axis: it zeroes its f32 accumulator on the first, takes the rows of each
/// group it overlaps (groups it does not overlap skip the MXU) and writes out on the last.
#[tpu_kernel]
pub fn grouped_matmul(
    offs: &Prefetch<i32>,
    x: &Ref<f32>,
    w: &Ref<f32>,
    o: &mut RefMut<f32>,
    acc: &mut Scratch<f32>,
) {
    let g = program_id(2);
    if g.eq(0) {
        acc.store(zeros());
    }
    let lo = offs.load_scalar([g]);
    let hi = offs.load_scalar([g + 1]);
    let first = program_id(0) * BM as i32;
    if lo.lt(first + BM as i32) & hi.gt(first) {
        let rows = iota::<i32>([BM, BN], 0) + first;
        let mine = rows.ge(lo) & rows.lt(hi);
        acc.store(where_(mine, dot(x.load(), w.load()), acc.load()));
    }
    if g.eq(num_programs(2) - 1) {
        o.store(acc.load());
    }
}

/// `x: [m, k]`, `w: [groups, k, n]`, offsets `[groups + 1]`.
pub fn gmm_launch(m: usize, k: usize, n: usize, groups: usize) -> Launch {
    grouped_matmul::launch()
        .grid([m / BM, n / BN, groups])
        .input(BlockSpec::new([BM, k], |i, _j, _g| (i, 0)))
        .input(BlockSpec::new([1, k, BN], |_i, j, g| (g, 0, j)).squeeze([0]))
        .output(BlockSpec::new([BM, BN], |i, j, _g| (i, j)), [m, n])
        .scratch(Vmem::<f32>::new([BM, BN]))
        .semantics([Parallel, Parallel, Arbitrary])
}
