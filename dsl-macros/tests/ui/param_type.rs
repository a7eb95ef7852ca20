use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn host_vec(x: &Vec<f32>, o: &mut RefMut<f32>) {
    o.store(zeros());
}

fn main() {}
