//! One client and one executable shared by four threads, 1,000 executions each.

mod common;
use std::sync::Arc;
use tessera_runtime::{CompileOptions, DType, HostTensor};

#[test]
fn four_threads_share_a_client_and_an_executable() {
    let c = common::cpu();
    let m = r#"module @scale {
  func.func public @main(%x: tensor<64xf32>, %s: tensor<f32>) -> tensor<64xf32> {
    %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %0 = stablehlo.multiply %x, %b : tensor<64xf32>
    return %0 : tensor<64xf32>
  }
}"#;
    let exe = Arc::new(c.compile(m, &CompileOptions::default()).unwrap());
    let x = common::random_f64(64, 42);
    let xb = Arc::new(
        c.upload(&HostTensor::from_f64(DType::F32, vec![64], &x))
            .unwrap(),
    );
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (c, exe, xb, x) = (c.clone(), exe.clone(), xb.clone(), x.clone());
            std::thread::spawn(move || {
                for i in 0..1000 {
                    let s = (t * 1000 + i) as f64 * 0.001;
                    let sb = c
                        .upload(&HostTensor::from_f64(DType::F32, vec![], &[s]))
                        .unwrap();
                    let out = exe
                        .execute(&[&xb, &sb])
                        .unwrap()
                        .remove(0)
                        .to_host()
                        .unwrap();
                    let want: Vec<f64> = x.iter().map(|v| v * (s as f32 as f64)).collect();
                    assert!(
                        common::max_rel_err(&out, &want) < 1e-6,
                        "thread {t} iteration {i}"
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread finished without panicking");
    }
}
