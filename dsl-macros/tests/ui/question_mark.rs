use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn fallible(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let t = x.try_load()?;
    o.store(t);
}

fn main() {}
