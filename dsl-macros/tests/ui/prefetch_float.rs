use tessera_macros::tpu_kernel;
use tessera_lowering::prelude::*;

// Scalar prefetch fills SMEM words with block indices and offsets: i32 only.
#[tpu_kernel]
fn scaled(scale: &Prefetch<f32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load() * scale.load_scalar([0]));
}

fn main() {}
