use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn count(x: &Ref<f32>, o: &mut RefMut<f32>) {
    let mut t = x.load();
    let mut n = 0;
    while n < 4 {
        t = t * 2.0;
        n += 1;
    }
    o.store(t);
}

fn main() {}
