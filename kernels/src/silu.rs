//! SiLU (swish) of a `[rows, cols]` array, fused into one kernel.

use crate::{spec, ShippedKernel};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::Launch;
use tessera_macros::tpu_kernel;

/// `o = x * sigmoid(x)`, computed in f32 and rounded once to `T` (bf16 `exp` would lose
/// most of its digits before the product).
#[tpu_kernel]
pub fn silu<T: Float>(x: &Ref<T>, o: &mut RefMut<T>) {
    let v = x.load().cast::<f32>();
    o.store((v * sigmoid(v)).cast::<T>());
}

pub(crate) const SHIPPED: ShippedKernel = ShippedKernel {
    name: "silu",
    about: "fused x * sigmoid(x)",
    default_shape: &[512, 1024],
    problem_dims: &["rows", "cols"],
    input_shapes: |s| vec![s.to_vec()],
    launch,
    reference,
    sum_len: |_| 1,
};

fn launch(shape: &[usize]) -> Result<Launch, String> {
    spec::elementwise(&SHIPPED, silu::launch(), shape, 1)
}

fn reference(inputs: &[Vec<f64>], _shape: &[usize]) -> Vec<Vec<f64>> {
    vec![inputs[0].iter().map(|x| x / (1.0 + (-x).exp())).collect()]
}
