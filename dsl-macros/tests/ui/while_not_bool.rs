use tessera_macros::tpu_kernel;
use tessera_lowering::prelude::*;

// A `while` condition is a `bool` or a traced `Scalar<bool>`: a count read from SMEM is not.
#[tpu_kernel]
fn drain(n: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut left = n.load_scalar([0]);
    let mut acc = x.load();
    while left {
        acc = acc * 0.5;
        left = left - 1;
    }
    o.store(acc);
}

fn main() {}
