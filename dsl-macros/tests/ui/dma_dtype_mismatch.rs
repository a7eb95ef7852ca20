use tessera_lowering::prelude::*;
use tessera_macros::tpu_kernel;

// A DMA moves bytes between windows of one element type: copying f32 rows into an i32
// buffer is a type error at the copy.
#[tpu_kernel]
fn copy_rows(x: &Ref<f32>, o: &mut RefMut<f32>, buf: &mut Scratch<i32>, sems: &mut Scratch<i32>) {
    let c = async_copy(x.all(), buf.all(), sems.sem(0));
    c.start();
    c.wait();
    o.store(0.0);
}

fn main() {}
