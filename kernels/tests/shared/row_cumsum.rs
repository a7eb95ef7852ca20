//! The carried row cumulative sum of scan_tests.rs, shared with the kernels bench.
// Each includer uses a part of it.
#![allow(dead_code)]

use tessera_lowering::prelude::*;
use tessera_lowering::trace::Launch;
use tessera_lowering::DType;
use tessera_macros::tpu_kernel;

/// Rows per block: one f32 sublane tile.
pub const ROWS: usize = 8;

/// Row cumulative sum of one `(row block, column block)`: the block's own scan plus the
/// total of the row's earlier column blocks, which `carry` holds (column axis sequential).
#[tpu_kernel]
pub fn row_cumsum_f32(x: &Ref<f32>, o: &mut RefMut<f32>, carry: &mut Scratch<f32>) {
    if program_id(1).eq(0) {
        carry.store(zeros());
    }
    let t = x.load();
    let before = carry.load();
    o.store(t.cumsum(1) + before);
    carry.store(before + t.sum(1, true));
}

#[tpu_kernel]
pub fn row_cumsum_i32(x: &Ref<i32>, o: &mut RefMut<i32>, carry: &mut Scratch<i32>) {
    if program_id(1).eq(0) {
        carry.store(zeros());
    }
    let t = x.load();
    let before = carry.load();
    o.store(t.cumsum(1) + before);
    carry.store(before + t.sum(1, true));
}

/// `[rows, cols]` in `[ROWS, bc]` blocks, columns sequential.
pub fn cumsum_launch(kernel: Launch, dtype: DType, rows: usize, cols: usize, bc: usize) -> Launch {
    let scratch = if dtype == DType::I32 {
        Vmem::<i32>::new([ROWS, bc])
    } else {
        Vmem::<f32>::new([ROWS, bc])
    };
    kernel
        .grid([rows / ROWS, cols / bc])
        .input(BlockSpec::new([ROWS, bc], |i, j| (i, j)))
        .output(BlockSpec::new([ROWS, bc], |i, j| (i, j)), [rows, cols])
        .scratch(scratch)
        .semantics([Parallel, Arbitrary])
}
