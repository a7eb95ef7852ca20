use tessera_macros::tpu_kernel;
use tessera_lowering::prelude::*;

// Shifts and bitwise ops take integers: bitcast a float tile to reach its bits.
#[tpu_kernel]
fn halve_exponent(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load() >> 1);
}

fn main() {}
