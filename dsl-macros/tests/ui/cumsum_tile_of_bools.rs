use tessera_macros::tpu_kernel;
use tessera_lowering::prelude::*;

// Scans add or compare elements: a tile of bools has no cumulative sum (cast it first).
#[tpu_kernel]
fn count_hits(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let hits = x.load().gt(0.0);
    o.store(hits.cumsum(1).cast::<f32>());
}

fn main() {}
