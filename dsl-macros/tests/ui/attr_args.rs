use tessera_macros::tpu_kernel;

#[tpu_kernel(grid = 4)]
fn gridded(x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load());
}

fn main() {}
