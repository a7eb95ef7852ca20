use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn partial(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut acc = x.load();
    for i in range(8) {
        if i == 4 {
            acc = acc * 0.5;
        }
        break;
    }
    o.store(acc);
}

fn main() {}
