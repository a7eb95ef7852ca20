//! Donated inputs: a module that aliases a result to an argument (`tf.aliasing_output`, as
//! JAX marks donated arguments) may write the result into the donated buffer's memory;
//! without donation the input stays valid.

mod common;

use tessera_runtime::{CompileOptions, HostTensor};

const ADD_ONE_IN_PLACE: &str = "module {
  func.func public @main(%x: tensor<1024xf32> {tf.aliasing_output = 0 : i32}, %y: tensor<1024xf32>) -> (tensor<1024xf32>) {
    %0 = stablehlo.add %x, %y : tensor<1024xf32>
    return %0 : tensor<1024xf32>
  }
}";

fn inputs(
    c: &tessera_runtime::Client,
) -> (Vec<f32>, tessera_runtime::Buffer, tessera_runtime::Buffer) {
    let x: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    let y = vec![0.5f32; 1024];
    let up = |v: &[f32]| {
        c.upload(&HostTensor::from_vec(vec![1024], v.to_vec()))
            .unwrap()
    };
    let want = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    (want, up(&x), up(&y))
}

#[test]
fn a_donated_input_is_consumed_and_a_kept_one_stays_valid() {
    let c = common::cpu();
    let exe = c
        .compile(ADD_ONE_IN_PLACE, &CompileOptions::default())
        .unwrap();

    // Not donated: the aliased input is still readable and can be passed again.
    let (want, x, y) = inputs(&c);
    let before = x.to_host().unwrap();
    for _ in 0..2 {
        let out = exe.execute(&[&x, &y]).unwrap();
        assert_eq!(out[0].to_host().unwrap().to_vec::<f32>().unwrap(), want);
    }
    assert_eq!(x.to_host().unwrap(), before);

    // Donated: same result; the donated buffer is gone, and reading it is an error, not a crash.
    let (want, x, y) = inputs(&c);
    let out = exe.execute_donating(&[&x, &y], &[0]).unwrap();
    assert_eq!(out[0].to_host().unwrap().to_vec::<f32>().unwrap(), want);
    let err = x.to_host().unwrap_err().to_string();
    assert!(err.contains("delete") || err.contains("donat"), "{err}");
    assert_eq!(
        y.to_host().unwrap().to_vec::<f32>().unwrap(),
        vec![0.5; 1024]
    );
}
