use tessera_macros::tpu_kernel;

#[tpu_kernel]
fn produce(x: &Ref<f32>) -> Tile<f32> {
    x.load()
}

fn main() {}
