use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn read_only_out(x: &Ref<f32>, o: &RefMut<f32>) {
    o.store(x.load());
}

fn main() {}
