use tessera_lowering::prelude::*;
use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn mixed(x: &Ref<f32>, y: &Ref<i32>, o: &mut RefMut<f32>) {
    // `<` on tiles is traced, but both sides share one element type: cast first.
    let m = x.load() < y.load();
    o.store(where_(m, x.load(), 0.0));
}

fn main() {}
