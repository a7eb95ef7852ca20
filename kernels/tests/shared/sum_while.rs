//! The `while` of while_tests.rs whose trip count is read from SMEM, shared with the kernels
//! bench.
// Each includer uses a part of it.
#![allow(dead_code)]

use tessera_lowering::prelude::*;
use tessera_lowering::trace::Launch;
use tessera_macros::tpu_kernel;

pub const ROWS: usize = 8;
pub const LANES: usize = 128;

/// `o = sum(x[0 .. n])` over the leading dim, `n` read from SMEM, as a `while` on a
/// carried counter.
#[tpu_kernel]
pub fn sum_while(n: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let count = n.load_scalar([0]);
    let mut i = scalar::<i32>(0);
    let mut acc = full::<f32>([1, ROWS, LANES], 0.0);
    while i.lt(count) {
        acc = acc + x.load_slice((i, 0, 0), [1, ROWS, LANES]);
        i = i + 1;
    }
    o.store(acc);
}

pub fn whole(k: usize) -> (BlockSpec, BlockSpec) {
    (
        BlockSpec::new([k, ROWS, LANES], || [0, 0, 0]),
        BlockSpec::new([1, ROWS, LANES], || [0, 0, 0]),
    )
}

pub fn sum_launch(k: usize) -> Launch {
    let (input, output) = whole(k);
    sum_while::launch()
        .input(input)
        .output(output, [1, ROWS, LANES])
}
