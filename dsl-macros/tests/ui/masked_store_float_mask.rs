use tessera_macros::tpu_kernel;
use tessera_lowering::prelude::*;

// A store mask is a tile of bools (a comparison), not the values themselves.
#[tpu_kernel]
fn keep_positive(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let v = x.load();
    o.store_masked(v, v);
}

fn main() {}
