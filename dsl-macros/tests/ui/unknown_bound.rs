use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn copyable<T: Copy>(x: &Ref<T>, o: &mut RefMut<T>) {
    o.store(x.load());
}

fn main() {}
