//! Row layer norm of a `[rows, cols]` array with a `[cols]` weight and bias.

use crate::spec::{problem, row_blocks};
use crate::ShippedKernel;
use tessera_lowering::prelude::*;
use tessera_lowering::trace::Launch;
use tessera_macros::tpu_kernel;

/// The epsilon added to the variance (PyTorch's `nn.LayerNorm` default).
pub const EPS: f64 = 1e-5;

/// `o = (x - mean) / sqrt(var + EPS) * w + b` per row (biased variance, like PyTorch).
/// Statistics and the affine step are f32; the result is rounded to `T` once.
#[tpu_kernel]
pub fn layer_norm<T: Float>(x: &Ref<T>, w: &Ref<T>, b: &Ref<T>, o: &mut RefMut<T>) {
    let v = x.load().cast::<f32>();
    let inv_n = 1.0 / x.shape()[1] as f64;
    let centered = v - v.sum(1, true) * inv_n;
    let var = (centered * centered).sum(1, true) * inv_n;
    let normed = centered * rsqrt(var + EPS);
    o.store((normed * w.load().cast::<f32>() + b.load().cast::<f32>()).cast::<T>());
}

pub(crate) const SHIPPED: ShippedKernel = ShippedKernel {
    name: "layer_norm",
    about: "row layer norm (eps 1e-5) with weight and bias",
    default_shape: &[512, 1024],
    problem_dims: &["rows", "cols"],
    input_shapes,
    launch,
    reference,
    sum_len: |_| 1,
};

fn input_shapes(shape: &[usize]) -> Vec<Vec<usize>> {
    let cols = shape.last().copied().unwrap_or(0);
    vec![shape.to_vec(), vec![cols], vec![cols]]
}

fn launch(shape: &[usize]) -> Result<Launch, String> {
    let [rows, cols] = problem(&SHIPPED, shape)?;
    let (steps, block) = row_blocks(rows, cols);
    // Every step reads the whole weight and bias.
    let whole = || BlockSpec::new([cols], |_i| [0]);
    Ok(layer_norm::launch()
        .grid([steps])
        .input(block.clone())
        .input(whole())
        .input(whole())
        .output(block, [rows, cols]))
}

fn reference(inputs: &[Vec<f64>], shape: &[usize]) -> Vec<Vec<f64>> {
    let (x, w, b) = (&inputs[0], &inputs[1], &inputs[2]);
    let n = shape[1] as f64;
    let out = x
        .chunks(shape[1])
        .flat_map(|row| {
            let mean = row.iter().sum::<f64>() / n;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
            let scale = 1.0 / (var + EPS).sqrt();
            row.iter()
                .zip(w)
                .zip(b)
                .map(move |((v, w), b)| (v - mean) * scale * w + b)
        })
        .collect();
    vec![out]
}
