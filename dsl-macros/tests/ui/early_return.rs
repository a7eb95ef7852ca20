use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn first_only(x: &Ref<f32>, o: &mut RefMut<f32>) {
    if program_id(0) != 0 {
        return;
    }
    o.store(x.load());
}

fn main() {}
