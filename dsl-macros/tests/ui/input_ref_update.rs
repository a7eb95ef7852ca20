use tessera_lowering::prelude::*;
use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn bump(x: &Ref<f32>, o: &mut RefMut<f32>) {
    // `+=` updates output and scratch refs; an input block is read-only.
    x += 1.0;
    o.store(x.load());
}

fn main() {}
