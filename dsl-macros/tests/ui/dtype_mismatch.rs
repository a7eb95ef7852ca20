use tessera_lowering::prelude::*;
use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn mixed(x: &Ref<f32>, y: &Ref<bf16>, o: &mut RefMut<f32>) {
    o.store(x.load() + y.load());
}

fn main() {}
