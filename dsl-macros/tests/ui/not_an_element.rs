use tessera_lowering::prelude::*;
use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn strings(x: &Ref<String>, o: &mut RefMut<f32>) {
    o.store(zeros());
}

fn main() {}
