use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn pick(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let t = x.load();
    match 1 {
        0 => o.store(t),
        _ => o.store(t * 2.0),
    }
}

fn main() {}
