use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn spin(x: &Ref<f32>, o: &mut RefMut<f32>) {
    loop {
        o.store(x.load());
    }
}

fn main() {}
