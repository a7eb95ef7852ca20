use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn writes_indices(idx: &mut Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    o.store(x.load());
}

fn main() {}
