use tessera_lowering::prelude::*;
use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn first_block(x: &Ref<f32>, o: &mut RefMut<f32>) {
    // `==` is Rust's PartialEq (it must return `bool`): traced comparisons are `.eq(..)`.
    if program_id(0) == 0 {
        o.store(x.load());
    }
}

fn main() {}
