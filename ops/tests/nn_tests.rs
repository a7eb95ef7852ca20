//! nn ops on the XLA CPU plugin, against values computed by hand.

mod common;

use common::*;

fn f32s(shape: &[usize], v: &[f64]) -> A {
    t(DType::F32, shape, v)
}

fn vals(o: &Output) -> Vec<f64> {
    tensor(o).to_f64_vec()
}

fn close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x - y).abs() <= 1e-5 * (1.0 + y.abs()) || (x.is_nan() && y.is_nan()),
            "{a:?} vs {b:?}"
        );
    }
}

fn iota(n: usize) -> Vec<f64> {
    (1..=n).map(|v| v as f64).collect()
}

fn conv_args(x: A, w: A, bias: A, transposed: bool) -> Vec<A> {
    conv_args_at(x, w, bias, transposed, 1, 0)
}

/// `convolution`'s arguments with `stride` and `padding` along both spatial dims.
fn conv_args_at(x: A, w: A, bias: A, transposed: bool, stride: i64, padding: i64) -> Vec<A> {
    vec![
        x,
        w,
        bias,
        ints(&[stride, stride]),
        ints(&[padding, padding]),
        ints(&[1, 1]),
        ArgValue::Bool(transposed),
        ints(&[0, 0]),
        ArgValue::Int(1),
    ]
}

/// `convolution_backward`'s arguments (stride 1, `padding`, 2-d), gradients as `mask` says.
fn conv_backward_args(g: A, x: A, w: A, bias_sizes: A, padding: i64, mask: [bool; 3]) -> Vec<A> {
    vec![
        g,
        x,
        w,
        bias_sizes,
        ints(&[1, 1]),
        ints(&[padding, padding]),
        ints(&[1, 1]),
        ArgValue::Bool(false),
        ints(&[0, 0]),
        ArgValue::Int(1),
        ArgValue::BoolList(mask.to_vec()),
    ]
}

#[test]
fn convolution_forward_transposed_and_bias() {
    let x = f32s(&[1, 1, 3, 3], &iota(9));
    let w = f32s(&[1, 1, 2, 2], &[1.0; 4]);
    let out = run(
        "convolution",
        conv_args(x, w.clone(), f32s(&[1], &[0.5]), false),
        vec![],
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).shape(), &[1, 1, 2, 2]);
    close(&vals(&out[0]), &[12.5, 16.5, 24.5, 28.5]);
    let x = f32s(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let out = run("convolution", conv_args(x, w, ArgValue::None, true), vec![]).unwrap();
    close(&vals(&out[0]), &[1., 3., 2., 4., 10., 6., 3., 7., 4.]);
}

#[test]
fn convolution_backward_gives_all_three_gradients() {
    let x = f32s(&[1, 1, 3, 3], &iota(9));
    let w = f32s(&[1, 1, 2, 2], &[1.0; 4]);
    let g = f32s(&[1, 1, 2, 2], &[1.0; 4]);
    let args = conv_backward_args(g, x, w, ints(&[1]), 0, [true; 3]);
    let out = run("convolution_backward", args, vec![]).unwrap();
    close(&vals(&out[0]), &[1., 2., 1., 2., 4., 2., 1., 2., 1.]);
    close(&vals(&out[1]), &[12., 16., 24., 28.]);
    close(&vals(&out[2]), &[4.]);
}

#[test]
fn convolution_rejects_mismatched_channels() {
    let x = f32s(&[1, 2, 3, 3], &[0.0; 18]);
    let w = f32s(&[1, 1, 2, 2], &[1.0; 4]);
    let e = run("convolution", conv_args(x, w, ArgValue::None, false), vec![])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("expected input[1, 2, 3, 3] to have 1 channels, but got 2 channels instead"),
        "{e}"
    );
}

#[test]
fn max_pool_returns_plane_offsets_and_propagates_nan() {
    let x = f32s(
        &[1, 1, 4, 4],
        &[1., 5., 2., 0., 3., 4., f64::NAN, 1., 0., 0., 7., 7., 9., 0., 7., 1.],
    );
    let out = run("max_pool2d_with_indices", vec![x, ints(&[2, 2])], vec![]).unwrap();
    let v = vals(&out[0]);
    assert_eq!(v[0], 5.0);
    assert!(v[1].is_nan());
    assert_eq!(&v[2..], &[9.0, 7.0]);
    assert_eq!(tensor(&out[1]).dtype(), DType::I64);
    assert_eq!(vals(&out[1]), vec![1., 6., 12., 10.]);
}

#[test]
fn avg_pool_padding_and_ceil_mode() {
    let x = f32s(&[1, 1, 3, 3], &iota(9));
    // count_include_pad=False: corner window [1, 2, 4, 5] over 4 valid elements.
    let args = vec![
        x.clone(),
        ints(&[2, 2]),
        ints(&[2, 2]),
        ints(&[1, 1]),
        ArgValue::Bool(false),
        ArgValue::Bool(false),
    ];
    let out = run("avg_pool2d", args, vec![]).unwrap();
    close(&vals(&out[0]), &[1.0, 2.5, 5.5, 7.0]);
    let args = vec![
        x,
        ints(&[2, 2]),
        ints(&[2, 2]),
        ints(&[0, 0]),
        ArgValue::Bool(true),
        ArgValue::Bool(true),
    ];
    let out = run("avg_pool2d", args, vec![]).unwrap();
    close(&vals(&out[0]), &[3.0, 4.5, 7.5, 9.0]);
}

#[test]
fn adaptive_avg_pool_uneven_windows() {
    let x = f32s(&[1, 1, 5], &iota(5));
    let out = run("adaptive_avg_pool1d", vec![x, ints(&[3])], vec![]).unwrap();
    // windows [0, 2), [1, 4), [3, 5)
    close(&vals(&out[0]), &[1.5, 3.0, 4.5]);
}

#[test]
fn reflection_and_replication_padding() {
    let x = f32s(&[1, 3], &[1., 2., 3.]);
    let out = run("reflection_pad1d", vec![x.clone(), ints(&[2, 1])], vec![]).unwrap();
    close(&vals(&out[0]), &[3., 2., 1., 2., 3., 2.]);
    let x2 = f32s(&[1, 2, 2], &[1., 2., 3., 4.]);
    let out = run("replication_pad2d", vec![x2, ints(&[1, 0, 0, 1])], vec![]).unwrap();
    close(&vals(&out[0]), &[1., 1., 2., 3., 3., 4., 3., 3., 4.]);
    let e = run("reflection_pad1d", vec![x, ints(&[3, 0])], vec![])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Padding size should be less than the corresponding input dimension"),
        "{e}"
    );
}

#[test]
fn layer_norm_statistics_have_torch_shapes() {
    let x = f32s(&[2, 2], &[1., 3., 2., 2.]);
    let out = run(
        "native_layer_norm",
        vec![x, ints(&[2]), ArgValue::None, ArgValue::None, ArgValue::Float(0.0)],
        vec![],
    )
    .unwrap();
    close(&vals(&out[0]), &[-1., 1., f64::NAN, f64::NAN]);
    assert_eq!(tensor(&out[1]).shape(), &[2, 1]);
    close(&vals(&out[1]), &[2., 2.]);
    assert_eq!(vals(&out[2])[0], 1.0);
}

#[test]
fn batch_norm_eval_has_empty_statistics() {
    let x = f32s(&[2, 1], &[1., 3.]);
    let args = vec![
        x,
        ArgValue::None,
        ArgValue::None,
        f32s(&[1], &[1.0]),
        f32s(&[1], &[4.0]),
        ArgValue::Float(0.1),
        ArgValue::Float(0.0),
    ];
    let out = run("_native_batch_norm_legit_no_training", args, vec![]).unwrap();
    close(&vals(&out[0]), &[0.0, 1.0]);
    assert_eq!(tensor(&out[1]).shape(), &[0]);
}

#[test]
fn upsampling() {
    let x = f32s(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let out = run(
        "upsample_nearest2d.vec",
        vec![x.clone(), ints(&[4, 4]), ArgValue::None],
        vec![],
    )
    .unwrap();
    close(&vals(&out[0])[..4], &[1., 1., 2., 2.]);
    let out = run(
        "upsample_bilinear2d.vec",
        vec![x, ints(&[3, 3]), ArgValue::Bool(true), ArgValue::None],
        vec![],
    )
    .unwrap();
    close(&vals(&out[0]), &[1., 1.5, 2., 2., 2.5, 3., 3., 3.5, 4.]);
}

#[test]
fn nll_loss_ignores_and_weights() {
    let x = f32s(&[3, 2], &[-1., -2., -3., -4., -5., -6.]);
    let tgt = t(DType::I64, &[3], &[1., -100., 0.]);
    let w = f32s(&[2], &[1.0, 3.0]);
    let out = run(
        "nll_loss_forward",
        vec![x, tgt, w, ArgValue::Int(1), ArgValue::Int(-100)],
        vec![],
    )
    .unwrap();
    // (3 * 2 + 1 * 5) / (3 + 1)
    close(&vals(&out[0]), &[11.0 / 4.0]);
    close(&vals(&out[1]), &[4.0]);
}

#[test]
fn causal_attention_first_row_sees_one_key() {
    let q = f32s(&[1, 2, 1], &[1., 1.]);
    let k = f32s(&[1, 2, 1], &[1., 2.]);
    let v = f32s(&[1, 2, 1], &[10., 20.]);
    let out = run(
        "scaled_dot_product_attention",
        vec![q, k, v],
        vec![("is_causal", ArgValue::Bool(true))],
    )
    .unwrap();
    let r = vals(&out[0]);
    assert_eq!(r[0], 10.0);
    let p = 1.0 / (1.0 + (-1.0f64).exp());
    close(&r[1..], &[10.0 * (1.0 - p) + 20.0 * p]);
}

#[test]
fn embedding_bag_modes() {
    let w = f32s(&[4, 1], &[1., 2., 3., 4.]);
    let idx = t(DType::I64, &[4], &[0., 3., 1., 2.]);
    let off = t(DType::I64, &[2], &[0., 2.]);
    let bag = |mode: i64| {
        vec![
            w.clone(),
            idx.clone(),
            off.clone(),
            ArgValue::Bool(false),
            ArgValue::Int(mode),
            ArgValue::Bool(false),
            ArgValue::None,
            ArgValue::Bool(false),
            ArgValue::Int(-1),
        ]
    };
    let out = run("_embedding_bag", bag(0), vec![]).unwrap();
    close(&vals(&out[0]), &[5., 5.]);
    let out = run("_embedding_bag", bag(1), vec![]).unwrap();
    close(&vals(&out[0]), &[2.5, 2.5]);
    assert_eq!(vals(&out[1]), vec![0., 0., 1., 1.]);
    assert_eq!(vals(&out[2]), vec![2., 2.]);
    let out = run("_embedding_bag", bag(2), vec![]).unwrap();
    close(&vals(&out[0]), &[4., 3.]);
    assert_eq!(vals(&out[3]), vec![3., 2.]);
}

#[test]
fn col2im_adds_overlapping_blocks() {
    // One channel, 2x1 kernel, output 3x1: blocks at rows 0 and 1 overlap on row 1.
    let x = f32s(&[1, 2, 2], &[1., 2., 10., 20.]);
    let out = run(
        "col2im",
        vec![
            x,
            ints(&[3, 1]),
            ints(&[2, 1]),
            ints(&[1, 1]),
            ints(&[0, 0]),
            ints(&[1, 1]),
        ],
        vec![],
    )
    .unwrap();
    close(&vals(&out[0]), &[1., 12., 20.]);
}

#[test]
fn grid_sampler_identity_grid() {
    let x = f32s(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let grid = f32s(&[1, 1, 2, 2], &[-1., -1., 1., 1.]);
    for mode in [0, 1, 2] {
        let args = vec![
            x.clone(),
            grid.clone(),
            ArgValue::Int(mode),
            ArgValue::Int(0),
            ArgValue::Bool(true),
        ];
        let out = run("grid_sampler_2d", args, vec![]).unwrap();
        close(&vals(&out[0]), &[1., 4.]);
    }
}

/// `x [N, C, H, W]` (*) `w [O, C, KH, KW]` in f64, zero padding `p`, stride `s`.
fn conv2d_f64(x: &[f64], xs: [usize; 4], w: &[f64], ws: [usize; 4], p: usize, s: usize)
    -> Vec<f64> {
    let [n, c, h, wd] = xs;
    let [o, _, kh, kw] = ws;
    let (oh, ow) = ((h + 2 * p - kh) / s + 1, (wd + 2 * p - kw) / s + 1);
    let mut y = vec![0.0; n * o * oh * ow];
    for b in 0..n {
        for oc in 0..o {
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = 0.0;
                    for ci in 0..c {
                        for di in 0..kh {
                            for dj in 0..kw {
                                // The input element under this tap, None in the padding.
                                let r = (i * s + di).checked_sub(p).filter(|&r| r < h);
                                let q = (j * s + dj).checked_sub(p).filter(|&q| q < wd);
                                if let (Some(r), Some(q)) = (r, q) {
                                    acc += x[((b * c + ci) * h + r) * wd + q]
                                        * w[((oc * c + ci) * kh + di) * kw + dj];
                                }
                            }
                        }
                    }
                    y[((b * o + oc) * oh + i) * ow + j] = acc;
                }
            }
        }
    }
    y
}

// XLA swaps a convolution's operands when the kernel is larger than the input, and XLA CPU
// runs that form ~40x slower than torch; Tessera lowers it as one GEMM over the kernel taps
// (conv_taps.rs). Forward and input gradient (via the transposed convolution), f64 reference.
#[test]
fn a_kernel_larger_than_its_input_is_a_gemm_over_taps() {
    for (h, wd, p, s) in [(2, 2, 1, 1), (2, 3, 1, 2), (1, 1, 1, 1), (2, 4, 2, 1)] {
        let (xs, ws) = ([2, 3, h, wd], [4, 3, 3, 3]);
        let xv = draws(xs.iter().product(), 7, -1.0, 1.0);
        let wv = draws(ws.iter().product(), 8, -1.0, 1.0);
        let (x, w) = (t(DType::F64, &xs, &xv), t(DType::F64, &ws, &wv));
        let args = conv_args_at(x, w, ArgValue::None, false, s as i64, p as i64);
        let cpu = Device::cpu().unwrap();
        let r = call("convolution", args, Default::default(), &cpu, CallOptions::default());
        let r = r.unwrap();
        let module = r.module.as_deref().unwrap();
        assert!(
            !module.contains("stablehlo.convolution") && module.contains("stablehlo.dot_general"),
            "{module}"
        );
        assert_close(&values(&r.outputs[0]), &conv2d_f64(&xv, xs, &wv, ws, p, s), 1e-12);
    }
    // The input gradient of a stride-1, padding-1 convolution over a 2x2 input is the same
    // convolution of the output gradient by the flipped, transposed kernel.
    let (xs, ws) = ([2, 3, 2, 2], [4, 3, 3, 3]);
    let xv = draws(24, 9, -1.0, 1.0);
    let wv = draws(108, 10, -1.0, 1.0);
    let gv = draws(32, 11, -1.0, 1.0);
    let g = t(DType::F64, &[2, 4, 2, 2], &gv);
    let (x, w) = (t(DType::F64, &xs, &xv), t(DType::F64, &ws, &wv));
    let args = conv_backward_args(g, x, w, ArgValue::None, 1, [true, false, false]);
    let out = run("convolution_backward", args, vec![]).unwrap();
    let mut flipped = vec![0.0; 108]; // [C=3, O=4, 3, 3]
    for oc in 0..4 {
        for ci in 0..3 {
            for k in 0..9 {
                flipped[(ci * 4 + oc) * 9 + 8 - k] = wv[(oc * 3 + ci) * 9 + k];
            }
        }
    }
    let want = conv2d_f64(&gv, [2, 4, 2, 2], &flipped, [3, 4, 3, 3], 1, 1);
    assert_close(&values(&out[0]), &want, 1e-12);
    // The weight gradient with padding 2: its convolution's kernel is the 4x4 output gradient
    // over the 2x2 input. gw[o, c, di, dj] = sum over b, i, j of gy[b, o, i, j] times the
    // padded input at (i + di, j + dj).
    let gv = draws(128, 12, -1.0, 1.0);
    let g = t(DType::F64, &[2, 4, 4, 4], &gv);
    let (x, w) = (t(DType::F64, &xs, &xv), t(DType::F64, &ws, &wv));
    let args = conv_backward_args(g, x, w, ArgValue::None, 2, [false, true, false]);
    let out = run("convolution_backward", args, vec![]).unwrap();
    let mut want = vec![0.0; 108];
    for oc in 0..4 {
        for ci in 0..3 {
            for k in 0..9usize {
                let (di, dj) = (k / 3, k % 3);
                for b in 0..2 {
                    for p in 0..16usize {
                        let (i, j) = (p / 4, p % 4);
                        let r = (i + di).checked_sub(2).filter(|&r| r < 2);
                        let q = (j + dj).checked_sub(2).filter(|&q| q < 2);
                        if let (Some(r), Some(q)) = (r, q) {
                            want[(oc * 3 + ci) * 9 + k] += gv[(b * 4 + oc) * 16 + p]
                                * xv[((b * 3 + ci) * 2 + r) * 2 + q];
                        }
                    }
                }
            }
        }
    }
    assert_close(&values(&out[1]), &want, 1e-12);
}
