//! StableHLO programs compiled and run on the real XLA CPU plugin, checked against float64
//! references computed here.

mod common;
use common::programs::run;
use common::{max_rel_err, random_f64};
use tessera_runtime::DType;

const F32_TOL: f64 = 1e-5;

#[test]
fn elementwise_chain() {
    let m = r#"module @chain {
  func.func public @main(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.multiply %x, %y : tensor<4x8xf32>
    %1 = stablehlo.exponential %0 : tensor<4x8xf32>
    %2 = stablehlo.tanh %x : tensor<4x8xf32>
    %3 = stablehlo.subtract %1, %2 : tensor<4x8xf32>
    %4 = stablehlo.maximum %3, %y : tensor<4x8xf32>
    return %4 : tensor<4x8xf32>
  }
}"#;
    let (x, y) = (random_f64(32, 1), random_f64(32, 2));
    let want: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(a, b)| ((a * b).exp() - a.tanh()).max(*b))
        .collect();
    let out = run(
        m,
        &[(DType::F32, vec![4, 8], x), (DType::F32, vec![4, 8], y)],
    );
    assert!(
        max_rel_err(&out[0], &want) < F32_TOL,
        "{}",
        max_rel_err(&out[0], &want)
    );
}

#[test]
fn broadcast_row_vector() {
    let m = r#"module @bcast {
  func.func public @main(%x: tensor<3x5xf32>, %b: tensor<5xf32>) -> tensor<3x5xf32> {
    %0 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<5xf32>) -> tensor<3x5xf32>
    %1 = stablehlo.add %x, %0 : tensor<3x5xf32>
    return %1 : tensor<3x5xf32>
  }
}"#;
    let (x, b) = (random_f64(15, 3), random_f64(5, 4));
    let want: Vec<f64> = (0..15).map(|i| x[i] + b[i % 5]).collect();
    let out = run(m, &[(DType::F32, vec![3, 5], x), (DType::F32, vec![5], b)]);
    assert!(max_rel_err(&out[0], &want) < F32_TOL);
}

#[test]
fn row_sum_reduction() {
    let m = r#"module @rowsum {
  func.func public @main(%x: tensor<6x7xf32>) -> tensor<6xf32> {
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<6x7xf32>, tensor<f32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}"#;
    let x = random_f64(42, 5);
    let want: Vec<f64> = (0..6).map(|r| x[r * 7..r * 7 + 7].iter().sum()).collect();
    let out = run(m, &[(DType::F32, vec![6, 7], x)]);
    assert!(max_rel_err(&out[0], &want) < F32_TOL);
}

fn matmul_ref(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

#[test]
fn dot_general_matmul() {
    let m = r#"module @mm {
  func.func public @main(%a: tensor<16x32xf32>, %b: tensor<32x8xf32>) -> tensor<16x8xf32> {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
    return %0 : tensor<16x8xf32>
  }
}"#;
    let (a, b) = (random_f64(16 * 32, 6), random_f64(32 * 8, 7));
    let want = matmul_ref(&a, &b, 16, 32, 8);
    let out = run(
        m,
        &[(DType::F32, vec![16, 32], a), (DType::F32, vec![32, 8], b)],
    );
    assert!(max_rel_err(&out[0], &want) < F32_TOL);
}

#[test]
fn while_loop_accumulates() {
    // x_{k+1} = x_k * 0.5 + 1, ten times.
    let m = r#"module @loop {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %c10 = stablehlo.constant dense<10> : tensor<i32>
    %half = stablehlo.constant dense<5.000000e-01> : tensor<8xf32>
    %one = stablehlo.constant dense<1.000000e+00> : tensor<8xf32>
    %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<8xf32>
     cond {
      %lt = stablehlo.compare LT, %i, %c10 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %m = stablehlo.multiply %v, %half : tensor<8xf32>
      %a = stablehlo.add %m, %one : tensor<8xf32>
      %n = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %n, %a : tensor<i32>, tensor<8xf32>
    }
    return %r#1 : tensor<8xf32>
  }
}"#;
    let x = random_f64(8, 8);
    let want: Vec<f64> = x
        .iter()
        .map(|&v| (0..10).fold(v, |a, _| a * 0.5 + 1.0))
        .collect();
    let out = run(m, &[(DType::F32, vec![8], x)]);
    assert!(max_rel_err(&out[0], &want) < F32_TOL);
}

#[test]
fn bf16_program_within_bf16_tolerance() {
    let m = r#"module @bf {
  func.func public @main(%x: tensor<64xbf16>, %y: tensor<64xbf16>) -> tensor<64xbf16> {
    %0 = stablehlo.multiply %x, %y : tensor<64xbf16>
    %1 = stablehlo.add %0, %x : tensor<64xbf16>
    return %1 : tensor<64xbf16>
  }
}"#;
    // Inputs rounded to bf16 first, so the reference sees what the device sees.
    let round = |v: Vec<f64>| -> Vec<f64> {
        v.into_iter()
            .map(|a| half::bf16::from_f64(a).to_f64())
            .collect()
    };
    let (x, y) = (round(random_f64(64, 9)), round(random_f64(64, 10)));
    let want: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a * b + a).collect();
    let out = run(m, &[(DType::BF16, vec![64], x), (DType::BF16, vec![64], y)]);
    assert_eq!(out[0].dtype(), DType::BF16);
    let err = max_rel_err(&out[0], &want);
    assert!(err < 1e-2, "bf16 error {err}");
}

#[test]
fn multiple_outputs_of_mixed_dtypes() {
    let m = r#"module @multi {
  func.func public @main(%x: tensor<10xf32>) -> (tensor<10xf32>, tensor<10xi1>, tensor<f32>) {
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<10xf32>
    %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %neg = stablehlo.negate %x : tensor<10xf32>
    %pos = stablehlo.compare GT, %x, %zero : (tensor<10xf32>, tensor<10xf32>) -> tensor<10xi1>
    %mx = stablehlo.reduce(%x init: %z) applies stablehlo.maximum across dimensions = [0] : (tensor<10xf32>, tensor<f32>) -> tensor<f32>
    return %neg, %pos, %mx : tensor<10xf32>, tensor<10xi1>, tensor<f32>
  }
}"#;
    let x = random_f64(10, 11);
    let out = run(m, &[(DType::F32, vec![10], x.clone())]);
    assert_eq!(out.len(), 3);
    assert!(max_rel_err(&out[0], &x.iter().map(|v| -v).collect::<Vec<_>>()) < F32_TOL);
    assert_eq!(out[1].dtype(), DType::Bool);
    assert_eq!(
        out[1].to_f64_vec(),
        x.iter()
            .map(|&v| if v > 0.0 { 1.0 } else { 0.0 })
            .collect::<Vec<_>>()
    );
    assert_eq!(out[2].shape(), &[] as &[usize]);
    assert!(max_rel_err(&out[2], &[x.iter().cloned().fold(0.0, f64::max)]) < F32_TOL);
}

#[test]
fn every_dtype_round_trips_through_the_device() {
    let c = common::cpu();
    for d in DType::ALL {
        let vals: Vec<f64> = vec![0.0, 1.0, 0.0, 1.0, 1.0, 0.0];
        let t = tessera_runtime::HostTensor::from_f64(d, vec![2, 3], &vals);
        let b = c.upload(&t).unwrap();
        assert_eq!((b.dtype(), b.shape()), (d, &[2usize, 3][..]));
        assert_eq!(b.to_host().unwrap(), t, "{d}");
    }
}

#[test]
fn integer_and_f64_programs() {
    let m = r#"module @ints {
  func.func public @main(%a: tensor<5xi32>, %b: tensor<5xi32>, %x: tensor<5xf64>) -> (tensor<5xi32>, tensor<5xf64>) {
    %0 = stablehlo.multiply %a, %b : tensor<5xi32>
    %1 = stablehlo.sqrt %x : tensor<5xf64>
    return %0, %1 : tensor<5xi32>, tensor<5xf64>
  }
}"#;
    let a = vec![1.0, -2.0, 3.0, 40.0, 7.0];
    let b = vec![5.0, 6.0, -7.0, 8.0, 0.0];
    let x: Vec<f64> = random_f64(5, 12).iter().map(|v| v.abs()).collect();
    let out = run(
        m,
        &[
            (DType::I32, vec![5], a.clone()),
            (DType::I32, vec![5], b.clone()),
            (DType::F64, vec![5], x.clone()),
        ],
    );
    assert_eq!(
        out[0].to_f64_vec(),
        a.iter().zip(&b).map(|(p, q)| p * q).collect::<Vec<_>>()
    );
    assert!(max_rel_err(&out[1], &x.iter().map(|v| v.sqrt()).collect::<Vec<_>>()) < 1e-12);
}
