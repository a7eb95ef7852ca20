use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn maybe(x: &Ref<f32>, o: &mut RefMut<f32>) {
    if let Some(t) = Some(x.load()) {
        o.store(t);
    }
}

fn main() {}
