use tessera_lowering::prelude::*;
use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn forgot_mut(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let t = x.load();
    if program_id(0).eq(0) {
        t = t * 2.0;
    }
    o.store(t);
}

fn main() {}
