use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn unrolled(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut acc = x.load();
    for j in 0..4 {
        if j == 2 {
            break;
        }
        acc = acc + x.load();
    }
    o.store(acc);
}

fn main() {}
