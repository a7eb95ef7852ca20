//! One cached executable run many times with new inputs computes with those inputs, not with
//! an earlier call's: the XLA CPU plugin's XNNPACK dots reused weights packed from a previous
//! execution whose weight buffer had the same address (found as a nondeterministic wrong
//! gradient in convnext's training step). The runtime compiles with XNNPACK off on `cpu`.

mod common;
use common::{max_rel_err, random_f64};
use tessera_runtime::{CompileOptions, DType, HostTensor};

const M: usize = 32;
const K: usize = 1536;
const N: usize = 384;

fn addmm_module() -> String {
    format!(
        r#"module {{
  func.func public @main(%b: tensor<{N}xf32>, %x: tensor<{M}x{K}xf32>, %w: tensor<{K}x{N}xf32>) -> tensor<{M}x{N}xf32> {{
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>) -> tensor<{M}x{N}xf32>
    %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<{N}xf32>) -> tensor<{M}x{N}xf32>
    %2 = stablehlo.add %0, %1 : tensor<{M}x{N}xf32>
    return %2 : tensor<{M}x{N}xf32>
  }}
}}"#
    )
}

/// f32-rounded draws, so the float64 reference sees exactly what the device does.
fn draws(n: usize, seed: u64) -> Vec<f64> {
    random_f64(n, seed)
        .into_iter()
        .map(|v| v as f32 as f64)
        .collect()
}

#[test]
fn a_cached_dot_uses_each_calls_weights() {
    let c = common::cpu();
    let module = addmm_module();
    // Without the fix, 9-99% of calls (measured over 200) computed with the previous call's
    // weights, the first of them within the first 2-5 calls; 16 calls all must match.
    for call in 0..16u64 {
        let exe = c
            .compile_cached(&module, &CompileOptions::default())
            .unwrap();
        let (b, x, w) = (
            draws(N, 3 * call),
            draws(M * K, 3 * call + 1),
            draws(K * N, 3 * call + 2),
        );
        let up = |shape: &[usize], v: &[f64]| {
            c.upload(&HostTensor::from_f64(DType::F32, shape.to_vec(), v))
                .unwrap()
        };
        let ins = [up(&[N], &b), up(&[M, K], &x), up(&[K, N], &w)];
        let out = exe.execute(&ins.iter().collect::<Vec<_>>()).unwrap();
        let got = out[0].to_host().unwrap();
        let mut want: Vec<f64> = (0..M * N).map(|i| b[i % N]).collect();
        for i in 0..M {
            for k in 0..K {
                let xv = x[i * K + k];
                for j in 0..N {
                    want[i * N + j] += xv * w[k * N + j];
                }
            }
        }
        let err = max_rel_err(&got, &want);
        // f32 dot of 1,536 terms of magnitude <= 4: rounding stays far below 1e-3; a stale
        // weight matrix gives errors of order 10.
        assert!(err < 1e-3, "call {call}: max relative error {err}");
    }
}
