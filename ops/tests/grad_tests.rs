//! Backward ops of activations, losses, batch norm, slicing and attention, against float64
//! references computed here from their formulas (seeded inputs, tolerance 1e-5 relative for
//! f32 results).

mod common;

use common::*;

const TOL: f64 = 1e-5;

fn f32s(shape: &[usize], v: &[f64]) -> A {
    t(DType::F32, shape, v)
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn activation_backwards_match_their_derivatives() {
    let x = draws(12, 1, -5.0, 5.0);
    let g = draws(12, 2, -1.0, 1.0);
    let cases: Vec<(&str, Vec<A>, Box<dyn Fn(f64, f64) -> f64>)> = vec![
        (
            "silu_backward",
            vec![],
            Box::new(|g, x| g * sigmoid(x) * (1.0 + x * (1.0 - sigmoid(x)))),
        ),
        (
            "hardswish_backward",
            vec![],
            Box::new(|g, x| {
                if x < -3.0 {
                    0.0
                } else if x <= 3.0 {
                    g * (x / 3.0 + 0.5)
                } else {
                    g
                }
            }),
        ),
        (
            "hardsigmoid_backward",
            vec![],
            Box::new(|g, x| if x > -3.0 && x < 3.0 { g / 6.0 } else { 0.0 }),
        ),
        (
            "mish_backward",
            vec![],
            Box::new(|g, x| {
                let t = (1.0 + x.exp()).ln().tanh();
                g * (t + x * sigmoid(x) * (1.0 - t * t))
            }),
        ),
        (
            "leaky_relu_backward",
            vec![ArgValue::Float(0.1), ArgValue::Bool(false)],
            Box::new(|g, x| if x > 0.0 { g } else { 0.1 * g }),
        ),
        (
            "softplus_backward",
            vec![ArgValue::Float(2.0), ArgValue::Float(4.0)],
            Box::new(|g, x| {
                let z = (2.0 * x).exp();
                if 2.0 * x > 4.0 {
                    g
                } else {
                    g * z / (z + 1.0)
                }
            }),
        ),
        (
            "hardtanh_backward",
            vec![ArgValue::Float(-1.0), ArgValue::Float(2.0)],
            Box::new(|g, x| if x <= -1.0 || x >= 2.0 { 0.0 } else { g }),
        ),
        (
            "softshrink_backward",
            vec![ArgValue::Float(1.5)],
            Box::new(|g, x| if x.abs() <= 1.5 { 0.0 } else { g }),
        ),
    ];
    for (op, extra, f) in cases {
        let mut args = vec![f32s(&[3, 4], &g), f32s(&[3, 4], &x)];
        args.extend(extra);
        let out = run(op, args, vec![]).unwrap_or_else(|e| panic!("{op}: {e}"));
        let want: Vec<f64> = g.iter().zip(&x).map(|(&g, &x)| f(g, x)).collect();
        assert_close(&values(&out[0]), &want, TOL);
    }
}

#[test]
fn elu_backward_from_input_or_result() {
    let x = draws(8, 3, -3.0, 3.0);
    let g = draws(8, 4, -1.0, 1.0);
    let (alpha, scale, iscale) = (0.7, 1.3, 0.9);
    let scalars = || {
        vec![
            ArgValue::Float(alpha),
            ArgValue::Float(scale),
            ArgValue::Float(iscale),
        ]
    };
    let mut args = vec![f32s(&[8], &g)];
    args.extend(scalars());
    args.extend([ArgValue::Bool(false), f32s(&[8], &x)]);
    let out = run("elu_backward", args, vec![]).unwrap();
    let want: Vec<f64> = g
        .iter()
        .zip(&x)
        .map(|(&g, &x)| {
            if x <= 0.0 {
                g * iscale * alpha * scale * (x * iscale).exp()
            } else {
                g * scale
            }
        })
        .collect();
    assert_close(&values(&out[0]), &want, TOL);
    // From the result y = elu(x): the same gradient.
    let y: Vec<f64> = x
        .iter()
        .map(|&x| {
            if x <= 0.0 {
                alpha * scale * ((x * iscale).exp() - 1.0)
            } else {
                scale * x
            }
        })
        .collect();
    let mut args = vec![f32s(&[8], &g)];
    args.extend(scalars());
    args.extend([ArgValue::Bool(true), f32s(&[8], &y)]);
    assert_close(
        &values(&run("elu_backward", args, vec![]).unwrap()[0]),
        &want,
        1e-4,
    );
    // A negative alpha from the result is PyTorch's error.
    let args = vec![
        f32s(&[1], &[1.0]),
        ArgValue::Float(-1.0),
        ArgValue::Float(1.0),
        ArgValue::Float(1.0),
        ArgValue::Bool(true),
        f32s(&[1], &[1.0]),
    ];
    let e = run("elu_backward", args, vec![]).unwrap_err().to_string();
    assert!(e.contains("negative slope"), "{e}");
}

#[test]
fn glu_and_its_backward() {
    let x = draws(12, 5, -2.0, 2.0);
    let out = run("glu", vec![f32s(&[2, 6], &x), ArgValue::Int(1)], vec![]).unwrap();
    let want: Vec<f64> = (0..2)
        .flat_map(|r| (0..3).map(move |c| (r, c)))
        .map(|(r, c)| x[r * 6 + c] * sigmoid(x[r * 6 + c + 3]))
        .collect();
    assert_close(&values(&out[0]), &want, TOL);
    let g = draws(6, 6, -1.0, 1.0);
    let out = run(
        "glu_backward",
        vec![f32s(&[2, 3], &g), f32s(&[2, 6], &x), ArgValue::Int(-1)],
        vec![],
    )
    .unwrap();
    let mut want = vec![0.0; 12];
    for r in 0..2 {
        for c in 0..3 {
            let (a, b, gg) = (x[r * 6 + c], x[r * 6 + c + 3], g[r * 3 + c]);
            want[r * 6 + c] = gg * sigmoid(b);
            want[r * 6 + c + 3] = gg * a * sigmoid(b) * (1.0 - sigmoid(b));
        }
    }
    assert_close(&values(&out[0]), &want, TOL);
    let e = run("glu", vec![f32s(&[5], &[0.0; 5]), ArgValue::Int(0)], vec![])
        .unwrap_err()
        .to_string();
    assert!(e.contains("Halving dimension must be even"), "{e}");
}

#[test]
fn slice_and_select_backward_write_into_zeros() {
    let g = f32s(&[2, 2], &[1., 2., 3., 4.]);
    let out = run(
        "slice_backward",
        vec![
            g,
            ints(&[2, 5]),
            ArgValue::Int(1),
            ArgValue::Int(1),
            ArgValue::Int(5),
            ArgValue::Int(2),
        ],
        vec![],
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).shape(), &[2, 5]);
    assert_eq!(
        values(&out[0]),
        vec![0., 1., 0., 2., 0., 0., 3., 0., 4., 0.]
    );
    let g = f32s(&[3], &[7., 8., 9.]);
    let out = run(
        "select_backward",
        vec![g, ints(&[2, 3]), ArgValue::Int(0), ArgValue::Int(-1)],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&out[0]), vec![0., 0., 0., 7., 8., 9.]);
    let g = f32s(&[2], &[1., 2.]);
    let out = run(
        "diagonal_backward",
        vec![
            g,
            ints(&[2, 3]),
            ArgValue::Int(1),
            ArgValue::Int(0),
            ArgValue::Int(1),
        ],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&out[0]), vec![0., 1., 0., 0., 0., 2.]);
}

#[test]
fn loss_backwards() {
    // nll_loss_backward, mean over rows with weights, one row ignored.
    let x = f32s(&[3, 4], &draws(12, 7, -1.0, 0.0));
    let target = ArgValue::Tensor(HostTensor::from_vec::<i64>(vec![3], vec![1, 3, 0]));
    let w = [0.5, 2.0, 1.0, 4.0];
    let total = w[1] + w[3];
    let args = vec![
        f32s(&[], &[1.5]),
        x,
        target,
        f32s(&[4], &w),
        ArgValue::Int(1),
        ArgValue::Int(0),
        f32s(&[], &[total]),
    ];
    let out = run("nll_loss_backward", args, vec![]).unwrap();
    let mut want = vec![0.0; 12];
    want[1] = -w[1] * 1.5 / total;
    want[4 + 3] = -w[3] * 1.5 / total;
    assert_close(&values(&out[0]), &want, TOL);
    // mse_loss_backward, sum: 2 (x - t) g.
    let (x, tt) = (draws(6, 8, -2.0, 2.0), draws(6, 9, -2.0, 2.0));
    let out = run(
        "mse_loss_backward",
        vec![
            f32s(&[], &[0.5]),
            f32s(&[2, 3], &x),
            f32s(&[2, 3], &tt),
            ArgValue::Int(2),
        ],
        vec![],
    )
    .unwrap();
    let want: Vec<f64> = x
        .iter()
        .zip(&tt)
        .map(|(a, b)| 2.0 * (a - b) * 0.5)
        .collect();
    assert_close(&values(&out[0]), &want, TOL);
    // Integer gradients are a listed refusal.
    let i = |v: &[f64]| t(DType::I64, &[v.len()], v);
    let e = run(
        "mse_loss_backward",
        vec![
            t(DType::I64, &[], &[1.0]),
            i(&[1., 2.]),
            i(&[0., 0.]),
            ArgValue::Int(2),
        ],
        vec![],
    )
    .unwrap_err();
    assert!(e.to_string().contains("not implemented"), "{e}");
    // huber_loss_backward, mean, delta 1: clipped slope outside [-1, 1].
    let x = [-3.0, -0.5, 0.25, 2.0];
    let out = run(
        "huber_loss_backward",
        vec![
            f32s(&[], &[1.0]),
            f32s(&[4], &x),
            f32s(&[4], &[0.0; 4]),
            ArgValue::Int(1),
            ArgValue::Float(1.0),
        ],
        vec![],
    )
    .unwrap();
    assert_close(&values(&out[0]), &[-0.25, -0.125, 0.0625, 0.25], TOL);
}

/// Batch statistics of `x [N, C]` per channel: (mean, biased variance).
fn moments(x: &[f64], n: usize, c: usize) -> (Vec<f64>, Vec<f64>) {
    let mean: Vec<f64> = (0..c)
        .map(|j| (0..n).map(|i| x[i * c + j]).sum::<f64>() / n as f64)
        .collect();
    let var: Vec<f64> = (0..c)
        .map(|j| {
            (0..n)
                .map(|i| (x[i * c + j] - mean[j]).powi(2))
                .sum::<f64>()
                / n as f64
        })
        .collect();
    (mean, var)
}

#[test]
fn native_batch_norm_and_backward_in_training() {
    let (n, c, eps) = (5, 3, 1e-5);
    let x = draws(n * c, 10, -2.0, 2.0);
    let w = draws(c, 11, 0.5, 1.5);
    let b = draws(c, 12, -0.5, 0.5);
    let (mean, var) = moments(&x, n, c);
    let invstd: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
    let args = vec![
        f32s(&[n, c], &x),
        f32s(&[c], &w),
        f32s(&[c], &b),
        f32s(&[c], &[0.0; 3]),
        f32s(&[c], &[1.0; 3]),
        ArgValue::Bool(true),
        ArgValue::Float(0.1),
        ArgValue::Float(eps),
    ];
    let r = call(
        "native_batch_norm",
        args,
        vec![],
        &Device::cpu().unwrap(),
        CallOptions::default(),
    )
    .unwrap();
    let y: Vec<f64> = (0..n * c)
        .map(|k| (x[k] - mean[k % c]) * invstd[k % c] * w[k % c] + b[k % c])
        .collect();
    assert_close(&values(&r.outputs[0]), &y, 1e-4);
    assert_close(&values(&r.outputs[1]), &mean, TOL);
    assert_close(&values(&r.outputs[2]), &invstd, 1e-4);
    // The running statistics are written back (unbiased variance), as PyTorch's kernel does.
    assert_eq!(r.returns, 3);
    assert_eq!(r.writes, vec![(3, 3), (4, 4)]);
    let unbiased: Vec<f64> = var
        .iter()
        .map(|v| 0.9 + 0.1 * v * n as f64 / (n - 1) as f64)
        .collect();
    assert_close(&values(&r.outputs[4]), &unbiased, 1e-4);
    // Backward against the closed form.
    let g = draws(n * c, 13, -1.0, 1.0);
    let args = vec![
        f32s(&[n, c], &g),
        f32s(&[n, c], &x),
        f32s(&[c], &w),
        ArgValue::None,
        ArgValue::None,
        f32s(&[c], &mean),
        f32s(&[c], &invstd),
        ArgValue::Bool(true),
        ArgValue::Float(eps),
        ArgValue::BoolList(vec![true, true, false]),
    ];
    let out = run("native_batch_norm_backward", args, vec![]).unwrap();
    let gsum: Vec<f64> = (0..c).map(|j| (0..n).map(|i| g[i * c + j]).sum()).collect();
    let dotp: Vec<f64> = (0..c)
        .map(|j| {
            (0..n)
                .map(|i| g[i * c + j] * (x[i * c + j] - mean[j]))
                .sum()
        })
        .collect();
    let gi: Vec<f64> = (0..n * c)
        .map(|k| {
            let j = k % c;
            let nn = n as f64;
            (g[k] - gsum[j] / nn - (x[k] - mean[j]) * invstd[j] * invstd[j] * dotp[j] / nn)
                * invstd[j]
                * w[j]
        })
        .collect();
    assert_close(&values(&out[0]), &gi, 1e-4);
    let gw: Vec<f64> = (0..c).map(|j| dotp[j] * invstd[j]).collect();
    assert_close(&values(&out[1]), &gw, 1e-4);
    assert_eq!(out[2], Output::None, "masked out: None, as in PyTorch");
}

/// Attention of one head: `softmax(q k^T * scale) v` and the row log-sum-exp, in f64.
fn attention(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    l: usize,
    s: usize,
    e: usize,
    causal: bool,
) -> (Vec<f64>, Vec<f64>) {
    let scale = 1.0 / (e as f64).sqrt();
    let mut out = vec![0.0; l * e];
    let mut lse = vec![0.0; l];
    for i in 0..l {
        let sc: Vec<f64> = (0..s)
            .map(|j| {
                if causal && j > i {
                    f64::NEG_INFINITY
                } else {
                    (0..e).map(|d| q[i * e + d] * k[j * e + d]).sum::<f64>() * scale
                }
            })
            .collect();
        let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = sc.iter().map(|x| (x - m).exp()).sum();
        lse[i] = m + z.ln();
        for j in 0..s {
            let p = (sc[j] - m).exp() / z;
            for d in 0..e {
                out[i * e + d] += p * v[j * e + d];
            }
        }
    }
    (out, lse)
}

#[test]
fn flash_attention_for_cpu_forward_and_backward() {
    let inputs = check_causal_flash_attention((1, 1), 20);
    let e_ = run(
        "_scaled_dot_product_flash_attention_for_cpu",
        inputs,
        vec![("dropout_p", ArgValue::Float(0.5))],
    )
    .unwrap_err();
    assert!(e_.to_string().contains("dropout"), "{e_}");
}

/// Grouped-query attention of `hq` query heads over `hk` key/value heads (`[hq, L, E]`,
/// `[hk, S, E]`, `[hk, S, E]` flattened): query head `h` attends with key/value head
/// `h / (hq / hk)`. The outputs and log-sum-exps of all query heads, flattened.
#[allow(clippy::too_many_arguments)]
fn gqa_attention(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (hq, hk): (usize, usize),
    l: usize,
    s: usize,
    e: usize,
    causal: bool,
) -> (Vec<f64>, Vec<f64>) {
    let (mut out, mut lse) = (vec![], vec![]);
    for h in 0..hq {
        let kv = h / (hq / hk);
        let (o, m) = attention(
            &q[h * l * e..(h + 1) * l * e],
            &k[kv * s * e..(kv + 1) * s * e],
            &v[kv * s * e..(kv + 1) * s * e],
            l,
            s,
            e,
            causal,
        );
        out.extend(o);
        lse.extend(m);
    }
    (out, lse)
}

#[test]
fn flash_attention_for_cpu_with_fewer_key_value_heads() {
    check_causal_flash_attention((4, 2), 30);
}

/// Causal CPU flash attention of `hq` query heads over `hk` key/value heads (L=3, S=4, E=2,
/// inputs drawn from `seed`): the forward (out, logsumexp) against the f64 reference, and the
/// backward's gradient of sum(out * g) against central differences of it (dk and dv have the
/// key's heads, each summed over its group of query heads). Returns the inputs.
fn check_causal_flash_attention((hq, hk): (usize, usize), seed: u64) -> Vec<A> {
    let (l, s, e) = (3, 4, 2);
    let q = draws(hq * l * e, seed, -1.0, 1.0);
    let k = draws(hk * s * e, seed + 1, -1.0, 1.0);
    let v = draws(hk * s * e, seed + 2, -1.0, 1.0);
    let args = || {
        vec![
            f32s(&[1, hq, l, e], &q),
            f32s(&[1, hk, s, e], &k),
            f32s(&[1, hk, s, e], &v),
        ]
    };
    let out = run(
        "_scaled_dot_product_flash_attention_for_cpu",
        args(),
        vec![("is_causal", ArgValue::Bool(true))],
    )
    .unwrap();
    let (o, lse) = gqa_attention(&q, &k, &v, (hq, hk), l, s, e, true);
    assert_eq!(tensor(&out[0]).shape(), &[1, hq, l, e]);
    assert_close(&values(&out[0]), &o, TOL);
    assert_close(&values(&out[1]), &lse, TOL);
    let g = draws(hq * l * e, seed + 3, -1.0, 1.0);
    let mut bargs = vec![f32s(&[1, hq, l, e], &g)];
    bargs.extend(args());
    bargs.extend([
        f32s(&[1, hq, l, e], &o),
        f32s(&[1, hq, l], &lse),
        ArgValue::Float(0.0),
        ArgValue::Bool(true),
    ]);
    let grads = run(
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        bargs,
        vec![],
    )
    .unwrap();
    assert_eq!(tensor(&grads[1]).shape(), &[1, hk, s, e]);
    assert_eq!(tensor(&grads[2]).shape(), &[1, hk, s, e]);
    let f = |q: &[f64], k: &[f64], v: &[f64]| -> f64 {
        gqa_attention(q, k, v, (hq, hk), l, s, e, true)
            .0
            .iter()
            .zip(&g)
            .map(|(a, b)| a * b)
            .sum()
    };
    for (which, num) in central_differences(f, [&q, &k, &v]).iter().enumerate() {
        assert_close(&values(&grads[which]), num, 1e-4);
    }
    args()
}

#[test]
fn flash_attention_for_cpu_refuses_ill_defined_head_counts() {
    // (query heads, key heads, value heads): torch's kernel crashes (Hk > Hq) or reads out of
    // bounds (Hk not dividing Hq, Hv != Hk) on these.
    for (hq, hk, hv) in [(4, 3, 3), (2, 4, 4), (4, 2, 1), (4, 2, 4), (4, 0, 0)] {
        let z = |h: usize| f32s(&[1, h, 3, 2], &vec![0.5; h * 6]);
        let err = run(
            "_scaled_dot_product_flash_attention_for_cpu",
            vec![z(hq), z(hk), z(hv)],
            vec![],
        )
        .unwrap_err();
        assert!(err.to_string().contains("number of heads"), "{err}");
    }
}

/// The gradient of `f(q, k, v)` with respect to each of its three inputs, by central
/// differences (step 1e-6, float64: errors ~1e-9, far inside the tests' 1e-4).
fn central_differences(
    f: impl Fn(&[f64], &[f64], &[f64]) -> f64,
    inputs: [&Vec<f64>; 3],
) -> [Vec<f64>; 3] {
    let h = 1e-6;
    std::array::from_fn(|which| {
        (0..inputs[which].len())
            .map(|i| {
                let at = |d: f64| {
                    let mut x = inputs.map(|t| t.clone());
                    x[which][i] += d;
                    f(&x[0], &x[1], &x[2])
                };
                (at(h) - at(-h)) / (2.0 * h)
            })
            .collect()
    })
}
