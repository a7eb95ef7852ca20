use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn unwrap_or_bail(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let Some(t) = Some(x.load()) else {
        panic!("no tile");
    };
    o.store(t);
}

fn main() {}
