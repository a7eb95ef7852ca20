//! Elementwise add of two `[rows, cols]` arrays.

use crate::{spec, ShippedKernel};
use tessera_lowering::prelude::*;
use tessera_lowering::trace::Launch;
use tessera_macros::tpu_kernel;

/// `o = x + y` in the inputs' dtype (one rounding, as in Pallas).
#[tpu_kernel]
pub fn add<T: Float>(x: &Ref<T>, y: &Ref<T>, o: &mut RefMut<T>) {
    o.store(x.load() + y.load());
}

pub(crate) const SHIPPED: ShippedKernel = ShippedKernel {
    name: "add",
    about: "elementwise x + y",
    default_shape: &[512, 1024],
    problem_dims: &["rows", "cols"],
    input_shapes: |s| vec![s.to_vec(), s.to_vec()],
    launch,
    reference,
    sum_len: |_| 1,
};

fn launch(shape: &[usize]) -> Result<Launch, String> {
    spec::elementwise(&SHIPPED, add::launch(), shape, 2)
}

fn reference(inputs: &[Vec<f64>], _shape: &[usize]) -> Vec<Vec<f64>> {
    vec![inputs[0]
        .iter()
        .zip(&inputs[1])
        .map(|(x, y)| x + y)
        .collect()]
}
