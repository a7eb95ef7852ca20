//! Output buffers take their dtype and shape from `@main`'s signature once the first launch
//! showed PJRT agrees with it: every launch, first or later, must give the same types and
//! values (several dtypes and ranks, a scalar among them).

mod common;

use tessera_runtime::{CompileOptions, DType, HostTensor};

const MIXED: &str = "module {
  func.func public @main(%x: tensor<2x3xf32>, %n: tensor<4xi32>)
      -> (tensor<2x3xf32>, tensor<i1>, tensor<4xi32>, tensor<3x2xf32>) {
    %0 = stablehlo.multiply %x, %x : tensor<2x3xf32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0, 1]
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
    %p = stablehlo.compare GT, %s, %z : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %1 = stablehlo.add %n, %n : tensor<4xi32>
    %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
    return %0, %p, %1, %t : tensor<2x3xf32>, tensor<i1>, tensor<4xi32>, tensor<3x2xf32>
  }
}";

#[test]
fn every_launch_gives_the_same_output_types_and_values() {
    let c = common::cpu();
    let exe = c.compile(MIXED, &CompileOptions::default()).unwrap();
    assert!(
        exe.signature().is_some(),
        "the test needs a signature Tessera reads"
    );
    for launch in 0..3 {
        let sign = if launch % 2 == 0 { 1.0 } else { -1.0 };
        let xs: Vec<f32> = (0..6).map(|i| sign * (i as f32 + 0.5)).collect();
        let ns: Vec<i32> = vec![launch, -3, 7, 1 << 20];
        let x = c
            .upload(&HostTensor::from_vec(vec![2, 3], xs.clone()))
            .unwrap();
        let n = c
            .upload(&HostTensor::from_vec(vec![4], ns.clone()))
            .unwrap();
        let outs = exe.execute(&[&x, &n]).unwrap();
        let types: Vec<(DType, Vec<usize>)> = outs
            .iter()
            .map(|b| (b.dtype(), b.shape().to_vec()))
            .collect();
        assert_eq!(
            types,
            vec![
                (DType::F32, vec![2, 3]),
                (DType::Bool, vec![]),
                (DType::I32, vec![4]),
                (DType::F32, vec![3, 2]),
            ],
            "launch {launch}"
        );
        let squares: Vec<f32> = xs.iter().map(|v| v * v).collect();
        assert_eq!(outs[0].to_host().unwrap().to_vec::<f32>().unwrap(), squares);
        assert_eq!(
            outs[1].to_host().unwrap().to_vec::<bool>().unwrap(),
            vec![sign > 0.0]
        );
        let twice: Vec<i32> = ns.iter().map(|v| v + v).collect();
        assert_eq!(outs[2].to_host().unwrap().to_vec::<i32>().unwrap(), twice);
        let t: Vec<f32> = (0..6).map(|k| xs[(k % 2) * 3 + k / 2]).collect();
        assert_eq!(outs[3].to_host().unwrap().to_vec::<f32>().unwrap(), t);
    }
}
