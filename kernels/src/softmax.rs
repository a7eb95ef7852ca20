//! Row softmax of a `[rows, cols]` array, in blocks of whole rows.

use crate::spec::{problem, row_blocks};
use crate::ShippedKernel;
use tessera_lowering::prelude::*;
use tessera_lowering::trace::Launch;
use tessera_macros::tpu_kernel;

/// `o = exp(x - max) / sum(exp(x - max))` per row, in f32 (the max keeps `exp` finite).
#[tpu_kernel]
pub fn softmax<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
    let v = x.load().cast::<f32>();
    let e = exp(v - v.max(1, true));
    o.store((e / e.sum(1, true)).cast::<T>());
}

pub(crate) const SHIPPED: ShippedKernel = ShippedKernel {
    name: "softmax",
    about: "row softmax, blocks of whole rows",
    default_shape: &[512, 1024],
    problem_dims: &["rows", "cols"],
    input_shapes: |s| vec![s.to_vec()],
    launch,
    reference,
    sum_len: |_| 1,
};

fn launch(shape: &[usize]) -> Result<Launch, String> {
    let [rows, cols] = problem(&SHIPPED, shape)?;
    let (steps, block) = row_blocks(rows, cols);
    Ok(softmax::launch()
        .grid([steps])
        .input(block.clone())
        .output(block, [rows, cols]))
}

fn reference(inputs: &[Vec<f64>], shape: &[usize]) -> Vec<Vec<f64>> {
    let out = inputs[0]
        .chunks(shape[1])
        .flat_map(|row| {
            let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = row.iter().map(|v| (v - max).exp()).sum();
            row.iter().map(move |v| (v - max).exp() / total)
        })
        .collect();
    vec![out]
}
