use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn halve(n: &Prefetch<i32>, x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut left = n.load_scalar([0]);
    let mut acc = x.load();
    while left.gt(0) {
        acc = acc * 0.5;
        left = left - 1;
        break;
    }
    o.store(acc);
}

fn main() {}
