use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn twice(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let double = |t| t + t;
    o.store(double(x.load()));
}

fn main() {}
