//! Sample StableHLO programs with float64 references: what `tessera demo` runs on the
//! default device before kernels exist, and a quick health check of a plugin.

use tessera_runtime::DType;

/// A program, the types of its inputs, and a float64 reference of its (single) output.
pub struct Sample {
    pub name: &'static str,
    pub module: String,
    pub inputs: Vec<(DType, Vec<usize>)>,
    pub reference: fn(&[Vec<f64>]) -> Vec<f64>,
    /// Relative tolerance of the output vs the reference.
    pub tolerance: f64,
}

pub fn all() -> Vec<Sample> {
    vec![
        matmul(256, 256, 256),
        softmax(128, 512),
        gelu(4096),
        newton_sqrt(1024),
    ]
}

fn matmul(m: usize, k: usize, n: usize) -> Sample {
    Sample {
        name: "matmul 256x256x256 (dot_general)",
        module: format!(
            "module @matmul {{
  func.func public @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
    return %0 : tensor<{m}x{n}xf32>
  }}
}}"
        ),
        inputs: vec![(DType::F32, vec![m, k]), (DType::F32, vec![k, n])],
        reference: |x| {
            let (a, b) = (&x[0], &x[1]);
            let (m, k) = (256, 256);
            let n = b.len() / k;
            let mut c = vec![0.0; m * n];
            for i in 0..m {
                for p in 0..k {
                    let av = a[i * k + p];
                    for j in 0..n {
                        c[i * n + j] += av * b[p * n + j];
                    }
                }
            }
            c
        },
        tolerance: 1e-5,
    }
}

fn softmax(r: usize, c: usize) -> Sample {
    Sample {
        name: "row softmax 128x512 (reduce, broadcast)",
        module: format!(
            "module @softmax {{
  func.func public @main(%x: tensor<{r}x{c}xf32>) -> tensor<{r}x{c}xf32> {{
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %mx = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<{r}x{c}xf32>, tensor<f32>) -> tensor<{r}xf32>
    %mxb = stablehlo.broadcast_in_dim %mx, dims = [0] : (tensor<{r}xf32>) -> tensor<{r}x{c}xf32>
    %sh = stablehlo.subtract %x, %mxb : tensor<{r}x{c}xf32>
    %e = stablehlo.exponential %sh : tensor<{r}x{c}xf32>
    %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<{r}x{c}xf32>, tensor<f32>) -> tensor<{r}xf32>
    %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<{r}xf32>) -> tensor<{r}x{c}xf32>
    %y = stablehlo.divide %e, %sb : tensor<{r}x{c}xf32>
    return %y : tensor<{r}x{c}xf32>
  }}
}}"
        ),
        inputs: vec![(DType::F32, vec![r, c])],
        reference: |x| {
            let c = 512;
            x[0].chunks(c)
                .flat_map(|row| {
                    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = row.iter().map(|v| (v - m).exp()).collect();
                    let s: f64 = e.iter().sum();
                    e.into_iter().map(move |v| v / s)
                })
                .collect()
        },
        tolerance: 1e-5,
    }
}

fn gelu(n: usize) -> Sample {
    Sample {
        name: "gelu (tanh form) on 4096 elements",
        module: format!(
            "module @gelu {{
  func.func public @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
    %half = stablehlo.constant dense<5.000000e-01> : tensor<{n}xf32>
    %one = stablehlo.constant dense<1.000000e+00> : tensor<{n}xf32>
    %k = stablehlo.constant dense<0.797884583> : tensor<{n}xf32>
    %c = stablehlo.constant dense<4.471500e-02> : tensor<{n}xf32>
    %x2 = stablehlo.multiply %x, %x : tensor<{n}xf32>
    %x3 = stablehlo.multiply %x2, %x : tensor<{n}xf32>
    %cx3 = stablehlo.multiply %c, %x3 : tensor<{n}xf32>
    %in = stablehlo.add %x, %cx3 : tensor<{n}xf32>
    %kin = stablehlo.multiply %k, %in : tensor<{n}xf32>
    %t = stablehlo.tanh %kin : tensor<{n}xf32>
    %onet = stablehlo.add %one, %t : tensor<{n}xf32>
    %hx = stablehlo.multiply %half, %x : tensor<{n}xf32>
    %y = stablehlo.multiply %hx, %onet : tensor<{n}xf32>
    return %y : tensor<{n}xf32>
  }}
}}"
        ),
        inputs: vec![(DType::F32, vec![n])],
        reference: |x| {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            x[0].iter()
                .map(|&v| 0.5 * v * (1.0 + (k * (v + 0.044715 * v * v * v)).tanh()))
                .collect()
        },
        tolerance: 1e-5,
    }
}

fn newton_sqrt(n: usize) -> Sample {
    Sample {
        name: "sqrt(|x|+1) by 12 Newton steps (while loop)",
        module: format!(
            "module @newton {{
  func.func public @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %c12 = stablehlo.constant dense<12> : tensor<i32>
    %one = stablehlo.constant dense<1.000000e+00> : tensor<{n}xf32>
    %half = stablehlo.constant dense<5.000000e-01> : tensor<{n}xf32>
    %ax = stablehlo.abs %x : tensor<{n}xf32>
    %a = stablehlo.add %ax, %one : tensor<{n}xf32>
    %r:2 = stablehlo.while(%i = %c0, %g = %a) : tensor<i32>, tensor<{n}xf32>
     cond {{
      %lt = stablehlo.compare LT, %i, %c12 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    }} do {{
      %q = stablehlo.divide %a, %g : tensor<{n}xf32>
      %s = stablehlo.add %g, %q : tensor<{n}xf32>
      %h = stablehlo.multiply %s, %half : tensor<{n}xf32>
      %ni = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %ni, %h : tensor<i32>, tensor<{n}xf32>
    }}
    return %r#1 : tensor<{n}xf32>
  }}
}}"
        ),
        inputs: vec![(DType::F32, vec![n])],
        reference: |x| x[0].iter().map(|v| (v.abs() + 1.0).sqrt()).collect(),
        tolerance: 1e-5,
    }
}
