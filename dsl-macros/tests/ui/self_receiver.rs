use tessera_macros::tpu_kernel;

struct Holder;

impl Holder {
    #[tpu_kernel]
    fn method(&self, x: &Ref<f32>, o: &mut RefMut<f32>) {
        o.store(x.load());
    }
}

fn main() {}
