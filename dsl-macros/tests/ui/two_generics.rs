use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn mixed<T: Float, U: Float>(x: &Ref<T>, y: &Ref<U>, o: &mut RefMut<T>) {
    o.store(x.load());
}

fn main() {}
