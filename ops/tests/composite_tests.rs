//! Composite ops (bound to the op they compute), resampling backward ops, searches and
//! order statistics, against values computed here.

mod common;

use common::*;

fn f32s(shape: &[usize], v: &[f64]) -> A {
    t(DType::F32, shape, v)
}

fn i64s(shape: &[usize], v: &[i64]) -> A {
    ArgValue::Tensor(HostTensor::from_vec::<i64>(shape.to_vec(), v.to_vec()))
}

#[test]
fn conv2d_is_convolution_and_takes_unbatched_input() {
    let x = draws(2 * 5 * 4, 1, -1.0, 1.0);
    let w = draws(3 * 2 * 2 * 2, 2, -1.0, 1.0);
    let args = |x: A| {
        vec![
            x,
            f32s(&[3, 2, 2, 2], &w),
            ArgValue::None,
            ints(&[1, 1]),
            ints(&[1, 0]),
        ]
    };
    let batched = run("conv2d", args(f32s(&[1, 2, 5, 4], &x)), vec![]).unwrap();
    let unbatched = run("conv2d", args(f32s(&[2, 5, 4], &x)), vec![]).unwrap();
    assert_eq!(tensor(&batched[0]).shape(), &[1, 3, 6, 3]);
    assert_eq!(tensor(&unbatched[0]).shape(), &[3, 6, 3]);
    assert_close(&values(&unbatched[0]), &values(&batched[0]), 0.0);
    // Against the definition at one output: y[0, c, i, j] = sum w[c, k, a, b] x[k, i - 1 + a, j + b].
    let (c, i, j) = (1usize, 2usize, 1usize);
    let mut want = 0.0;
    for k in 0..2 {
        for a in 0..2 {
            for b in 0..2 {
                let (xi, xj) = (i + a, j + b);
                if (1..=5).contains(&xi) {
                    want += w[((c * 2 + k) * 2 + a) * 2 + b] * x[(k * 5 + xi - 1) * 4 + xj];
                }
            }
        }
    }
    assert_close(&[values(&batched[0])[(c * 6 + i) * 3 + j]], &[want], 1e-5);
}

#[test]
fn reflection_and_replication_pad_backward_sum_the_gradients_of_each_source() {
    // 1-d: x of 4, padded (2, 1) by reflection: sources 2 1 | 0 1 2 3 | 2.
    let g = f32s(&[1, 7], &[1., 2., 3., 4., 5., 6., 7.]);
    let x = f32s(&[1, 4], &[0.0; 4]);
    let out = run(
        "reflection_pad1d_backward",
        vec![g.clone(), x.clone(), ints(&[2, 1])],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&out[0]), vec![3., 2. + 4., 1. + 5. + 7., 6.]);
    // Replication: sources 0 0 | 0 1 2 3 | 3.
    let out = run(
        "replication_pad1d_backward",
        vec![g, x, ints(&[2, 1])],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&out[0]), vec![1. + 2. + 3., 4., 5., 6. + 7.]);
    let e = run(
        "reflection_pad1d_backward",
        vec![
            f32s(&[1, 5], &[0.0; 5]),
            f32s(&[1, 4], &[0.0; 4]),
            ints(&[2, 1]),
        ],
        vec![],
    )
    .unwrap_err();
    assert!(e.to_string().contains("does not match"), "{e}");
}

#[test]
fn upsample_backward_is_the_transpose_of_the_forward() {
    // <upsample(x), g> == <x, upsample_backward(g)> for random x and g.
    let (n, c, h, w, oh, ow) = (1, 2, 3, 4, 5, 7);
    let x = draws(n * c * h * w, 3, -1.0, 1.0);
    let g = draws(n * c * oh * ow, 4, -1.0, 1.0);
    for (fwd, bwd, align) in [
        ("upsample_nearest2d", "upsample_nearest2d_backward", None),
        (
            "upsample_bilinear2d",
            "upsample_bilinear2d_backward",
            Some(true),
        ),
        (
            "upsample_bilinear2d",
            "upsample_bilinear2d_backward",
            Some(false),
        ),
    ] {
        let mut fa = vec![f32s(&[n, c, h, w], &x), ints(&[oh as i64, ow as i64])];
        let mut ba = vec![
            f32s(&[n, c, oh, ow], &g),
            ints(&[oh as i64, ow as i64]),
            ints(&[n as i64, c as i64, h as i64, w as i64]),
        ];
        if let Some(al) = align {
            fa.push(ArgValue::Bool(al));
            ba.push(ArgValue::Bool(al));
        }
        let y = values(&run(fwd, fa, vec![]).unwrap()[0]);
        let gx = values(&run(bwd, ba, vec![]).unwrap()[0]);
        let lhs: f64 = y.iter().zip(&g).map(|(a, b)| a * b).sum();
        let rhs: f64 = x.iter().zip(&gx).map(|(a, b)| a * b).sum();
        assert!((lhs - rhs).abs() < 1e-4, "{fwd}: {lhs} vs {rhs}");
    }
}

#[test]
fn searches_and_order_statistics() {
    let seq = f32s(&[5], &[1., 3., 3., 5., 9.]);
    let v = f32s(&[2, 3], &[0., 3., 4., 9., 10., f64::NAN]);
    let out = run("searchsorted.Tensor", vec![seq.clone(), v.clone()], vec![]).unwrap();
    assert_eq!(values(&out[0]), vec![0., 1., 3., 4., 5., 5.]);
    let out = run(
        "searchsorted.Tensor",
        vec![seq.clone(), v.clone()],
        vec![("right", ArgValue::Bool(true))],
    )
    .unwrap();
    assert_eq!(values(&out[0]), vec![0., 3., 3., 5., 5., 5.]);
    let out = run(
        "bucketize.Tensor",
        vec![v, seq],
        vec![("out_int32", ArgValue::Bool(true))],
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).dtype(), DType::I32);
    let x = f32s(&[2, 4], &[4., 1., 3., 2., 7., f64::NAN, 5., 6.]);
    let out = run(
        "kthvalue",
        vec![x.clone(), ArgValue::Int(2), ArgValue::Int(1)],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&out[0]), vec![2., 6.]);
    assert_eq!(values(&out[1]), vec![3., 3.]);
    let out = run("median.dim", vec![x.clone(), ArgValue::Int(1)], vec![]).unwrap();
    assert_eq!(values(&out[0])[0], 2.);
    assert!(values(&out[0])[1].is_nan(), "median propagates NaN");
    let out = run("nanmedian.dim", vec![x, ArgValue::Int(1)], vec![]).unwrap();
    assert_eq!(values(&out[0]), vec![2., 6.]);
    assert_eq!(values(&out[1]), vec![3., 3.]);
}

#[test]
fn indexing_composites() {
    let x = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let out = run("take", vec![x.clone(), i64s(&[3], &[5, -6, 2])], vec![]).unwrap();
    assert_eq!(values(&out[0]), vec![6., 1., 3.]);
    let out = run(
        "index_fill.int_Scalar",
        vec![
            x.clone(),
            ArgValue::Int(1),
            i64s(&[2], &[0, -1]),
            ArgValue::Float(-1.0),
        ],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&out[0]), vec![-1., 2., -1., -1., 5., -1.]);
    let out = run(
        "take_along_dim",
        vec![x.clone(), i64s(&[2, 1], &[2, 0]), ArgValue::Int(1)],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&out[0]), vec![3., 4.]);
    let out = run(
        "one_hot",
        vec![i64s(&[3], &[2, 0, 1]), ArgValue::Int(3)],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&out[0]), vec![0., 0., 1., 1., 0., 0., 0., 1., 0.]);
    let e = run("one_hot", vec![i64s(&[1], &[0])], vec![]).unwrap_err();
    assert!(e.to_string().contains("depend on the data"), "{e}");
    let out = run(
        "block_diag",
        vec![ArgValue::TensorList(vec![
            HostTensor::from_f64(DType::F32, vec![1, 2], &[1., 2.]),
            HostTensor::from_f64(DType::F32, vec![], &[3.]),
        ])],
        vec![],
    )
    .unwrap();
    assert_eq!(tensor(&out[0]).shape(), &[2, 3]);
    assert_eq!(values(&out[0]), vec![1., 2., 0., 0., 0., 3.]);
    let out = run(
        "repeat_interleave.self_int",
        vec![x, ArgValue::Int(2), ArgValue::Int(0)],
        vec![],
    )
    .unwrap();
    assert_eq!(
        values(&out[0]),
        vec![1., 2., 3., 1., 2., 3., 4., 5., 6., 4., 5., 6.]
    );
}

#[test]
fn creation_ops() {
    let out = run(
        "tril_indices",
        vec![ArgValue::Int(3), ArgValue::Int(3)],
        vec![],
    )
    .unwrap();
    assert_eq!(
        values(&out[0]),
        vec![0., 1., 1., 2., 2., 2., 0., 0., 1., 0., 1., 2.]
    );
    let out = run(
        "linspace",
        vec![ArgValue::Float(0.0), ArgValue::Float(1.0), ArgValue::Int(5)],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&out[0]), vec![0., 0.25, 0.5, 0.75, 1.]);
    let out = run(
        "logspace",
        vec![ArgValue::Int(0), ArgValue::Int(2), ArgValue::Int(3)],
        vec![("base", ArgValue::Float(2.0))],
    )
    .unwrap();
    assert_close(&values(&out[0]), &[1., 2., 4.], 1e-6);
    let out = run("eye.m", vec![ArgValue::Int(2), ArgValue::Int(3)], vec![]).unwrap();
    assert_eq!(values(&out[0]), vec![1., 0., 0., 0., 1., 0.]);
}

#[test]
fn losses_of_the_composites() {
    let (x1, x2, tt) = ([0.5, -1.0, 2.0], [1.0, 0.0, 1.5], [1.0, -1.0, -1.0]);
    let out = run(
        "margin_ranking_loss",
        vec![
            f32s(&[3], &x1),
            f32s(&[3], &x2),
            f32s(&[3], &tt),
            ArgValue::Float(0.1),
            ArgValue::Int(0),
        ],
        vec![],
    )
    .unwrap();
    let want: Vec<f64> = (0..3)
        .map(|i| (-tt[i] * (x1[i] - x2[i]) + 0.1f64).max(0.0))
        .collect();
    assert_close(&values(&out[0]), &want, 1e-6);
    let out = run(
        "hinge_embedding_loss",
        vec![
            f32s(&[3], &x1),
            f32s(&[3], &tt),
            ArgValue::Float(1.0),
            ArgValue::Int(2),
        ],
        vec![],
    )
    .unwrap();
    assert_close(&values(&out[0]), &[0.5 + 2.0 + 0.0], 1e-6);
}
