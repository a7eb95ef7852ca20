//! `_fft_r2c` / `_fft_c2r` on the XLA CPU plugin against a naive f64 DFT computed here, and
//! complex tensors through `stablehlo.fft`, `complex`, `real`, `imag` and constants.

use std::f64::consts::PI;
use tessera_lowering::stablehlo::{FftType, FuncBuilder, TensorType};
use tessera_lowering::{DType, HostTensor};
use tessera_ops::{call, ArgValue, CallOptions, OpError, Output};
use tessera_runtime::{CompileOptions, Device};

type C = (f64, f64);

fn run(op: &str, args: Vec<ArgValue<HostTensor>>) -> Result<HostTensor, OpError> {
    let out = call(
        op,
        args,
        Vec::new(),
        &Device::cpu().unwrap(),
        CallOptions::default(),
    )?
    .outputs;
    match out.into_iter().next() {
        Some(Output::Tensor(t)) => Ok(t),
        other => panic!("expected a tensor, got {other:?}"),
    }
}

fn ints(v: &[i64]) -> ArgValue<HostTensor> {
    ArgValue::IntList(v.to_vec())
}

/// Deterministic test data in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Naive 1-D DFT of `x` (complex, row-major `shape`) along `dim`: `sign` -1 forward, +1
/// inverse (unnormalized), producing `out_len` outputs from the first `in_len` inputs.
fn dft_axis(
    x: &[C],
    shape: &[usize],
    dim: usize,
    sign: f64,
    out_len: usize,
) -> (Vec<C>, Vec<usize>) {
    let n_in = shape[dim];
    let mut out_shape = shape.to_vec();
    out_shape[dim] = out_len;
    let (si, so) = (strides(shape), strides(&out_shape));
    let total: usize = out_shape.iter().product();
    let mut out = vec![(0.0, 0.0); total];
    for (flat, o) in out.iter_mut().enumerate() {
        // multi-index of the output
        let mut idx = vec![0; shape.len()];
        let mut r = flat;
        for d in 0..shape.len() {
            idx[d] = r / so[d];
            r %= so[d];
        }
        let k = idx[dim];
        let mut acc = (0.0, 0.0);
        for j in 0..n_in {
            idx[dim] = j;
            let off: usize = idx.iter().zip(&si).map(|(a, b)| a * b).sum();
            let (re, im) = x[off];
            let ang = sign * 2.0 * PI * (j * k) as f64 / out_len.max(n_in) as f64;
            let (c, s) = (ang.cos(), ang.sin());
            acc.0 += re * c - im * s;
            acc.1 += re * s + im * c;
        }
        *o = acc;
    }
    (out, out_shape)
}

fn close(got: &[C], want: &[C], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = ((g.0 - w.0).powi(2) + (g.1 - w.1).powi(2)).sqrt();
        let scale = (w.0.powi(2) + w.1.powi(2)).sqrt().max(1.0);
        assert!(err / scale < tol, "element {i}: got {g:?}, want {w:?}");
    }
}

#[test]
fn rfft_matches_a_naive_dft() {
    let x = data(3 * 8, 1);
    let t = HostTensor::from_f64(DType::F32, vec![3, 8], &x);
    let out = run(
        "_fft_r2c",
        vec![
            ArgValue::Tensor(t),
            ints(&[1]),
            ArgValue::Int(0),
            ArgValue::Bool(true),
        ],
    )
    .unwrap();
    assert_eq!((out.dtype(), out.shape()), (DType::C64, &[3usize, 5][..]));
    let xc: Vec<C> = x.iter().map(|&v| (v as f32 as f64, 0.0)).collect();
    let (full, _) = dft_axis(&xc, &[3, 8], 1, -1.0, 8);
    let want: Vec<C> = (0..3)
        .flat_map(|r| full[r * 8..r * 8 + 5].to_vec())
        .collect();
    close(&out.to_complex_vec(), &want, 1e-5);
}

#[test]
fn r2c_over_several_dims_in_any_order_with_normalization() {
    // dims [2, 0]: dim 0 is the halved one (the last of the list).
    let shape = [4usize, 3, 5];
    let x = data(60, 2);
    let t = HostTensor::from_f64(DType::F64, shape.to_vec(), &x);
    for (norm, factor) in [(0, 1.0), (1, 1.0 / 20f64.sqrt()), (2, 1.0 / 20.0)] {
        for onesided in [true, false] {
            let out = run(
                "_fft_r2c",
                vec![
                    ArgValue::Tensor(t.clone()),
                    ints(&[2, -3]),
                    ArgValue::Int(norm),
                    ArgValue::Bool(onesided),
                ],
            )
            .unwrap();
            let xc: Vec<C> = x.iter().map(|&v| (v, 0.0)).collect();
            let (a, s) = dft_axis(&xc, &shape, 2, -1.0, 5);
            let (b, _) = dft_axis(&a, &s, 0, -1.0, 4);
            let keep = if onesided { 3 } else { 4 };
            let want: Vec<C> = b[..keep * 15]
                .iter()
                .map(|&(re, im)| (re * factor, im * factor))
                .collect();
            assert_eq!(out.dtype(), DType::C128);
            assert_eq!(out.shape(), &[keep, 3, 5]);
            close(&out.to_complex_vec(), &want, 1e-12);
        }
    }
}

#[test]
fn c2r_inverts_r2c_and_follows_torch_normalization() {
    // irfftn over dims [0, 1] of a 4 x 6 real signal: the half spectrum has 4 x 4 entries.
    let shape = [4usize, 6];
    let x = data(24, 3);
    let t = HostTensor::from_f64(DType::F64, shape.to_vec(), &x);
    let spec = run(
        "_fft_r2c",
        vec![
            ArgValue::Tensor(t),
            ints(&[0, 1]),
            ArgValue::Int(0),
            ArgValue::Bool(true),
        ],
    )
    .unwrap();
    assert_eq!(spec.shape(), &[4, 4]);
    // normalization 2 (by n): the exact inverse.
    let back = run(
        "_fft_c2r",
        vec![
            ArgValue::Tensor(spec.clone()),
            ints(&[0, 1]),
            ArgValue::Int(2),
            ArgValue::Int(6),
        ],
    )
    .unwrap();
    assert_eq!((back.dtype(), back.shape()), (DType::F64, &[4usize, 6][..]));
    for (g, w) in back.to_f64_vec().iter().zip(&x) {
        assert!((g - w).abs() < 1e-12, "{g} vs {w}");
    }
    // normalization 0: n times that; 1: sqrt(n) times.
    for (norm, factor) in [(0, 24.0), (1, 24f64.sqrt())] {
        let y = run(
            "_fft_c2r",
            vec![
                ArgValue::Tensor(spec.clone()),
                ints(&[0, 1]),
                ArgValue::Int(norm),
                ArgValue::Int(6),
            ],
        )
        .unwrap();
        for (g, w) in y.to_f64_vec().iter().zip(&x) {
            assert!((g - w * factor).abs() < 1e-10, "{g} vs {}", w * factor);
        }
    }
}

#[test]
fn c2r_of_a_non_hermitian_input_is_torch_style() {
    // A 1-D c2r reads n/2 + 1 entries and ignores the imaginary parts of the DC and Nyquist
    // terms: the result is sum_k Re(c_k X_k e^{2πi jk/n}) with c = 1, 2, ..., 2, 1.
    let n = 6usize;
    let v = data(2 * 5, 4);
    // 5 entries given, 4 read (n/2 + 1): the input is cropped.
    let xs: Vec<C> = (0..5).map(|i| (v[2 * i], v[2 * i + 1])).collect();
    let t = HostTensor::from_complex(DType::C128, vec![5], &xs);
    let y = run(
        "_fft_c2r",
        vec![
            ArgValue::Tensor(t),
            ints(&[0]),
            ArgValue::Int(0),
            ArgValue::Int(n as i64),
        ],
    )
    .unwrap();
    let want: Vec<f64> = (0..n)
        .map(|j| {
            (0..=n / 2)
                .map(|k| {
                    let (re, im) = xs[k];
                    let w = if k == 0 || k == n / 2 { 1.0 } else { 2.0 };
                    let ang = 2.0 * PI * (j * k) as f64 / n as f64;
                    let (re, im) = if k == 0 || k == n / 2 {
                        (re, 0.0)
                    } else {
                        (re, im)
                    };
                    w * (re * ang.cos() - im * ang.sin())
                })
                .sum()
        })
        .collect();
    for (g, w) in y.to_f64_vec().iter().zip(&want) {
        assert!((g - w).abs() < 1e-10, "{g} vs {w}");
    }
    // An odd length: 7 points read 4 entries; fewer is an error (as in PyTorch).
    let t = HostTensor::from_complex(DType::C64, vec![4], &xs[..4]);
    let y = run(
        "_fft_c2r",
        vec![
            ArgValue::Tensor(t),
            ints(&[-1]),
            ArgValue::Int(2),
            ArgValue::Int(7),
        ],
    )
    .unwrap();
    assert_eq!((y.dtype(), y.shape()), (DType::F32, &[7usize][..]));
    for (j, g) in y.to_f64_vec().iter().enumerate() {
        let w: f64 = xs[0].0
            + (1..4)
                .map(|k| {
                    let ang = 2.0 * PI * (j * k) as f64 / 7.0;
                    2.0 * (xs[k].0 * ang.cos() - xs[k].1 * ang.sin())
                })
                .sum::<f64>();
        assert!((g - w / 7.0).abs() < 1e-6, "{g} vs {}", w / 7.0);
    }
    let short = HostTensor::from_complex(DType::C64, vec![2], &xs[..2]);
    assert!(run(
        "_fft_c2r",
        vec![
            ArgValue::Tensor(short),
            ints(&[0]),
            ArgValue::Int(2),
            ArgValue::Int(7)
        ],
    )
    .is_err());
}

#[test]
fn more_than_three_dims_and_empty_batches() {
    let shape = [2usize, 2, 3, 2, 2];
    let x = data(48, 5);
    let t = HostTensor::from_f64(DType::F64, shape.to_vec(), &x);
    let out = run(
        "_fft_r2c",
        vec![
            ArgValue::Tensor(t),
            ints(&[0, 1, 2, 3, 4]),
            ArgValue::Int(0),
            ArgValue::Bool(false),
        ],
    )
    .unwrap();
    let mut cur: Vec<C> = x.iter().map(|&v| (v, 0.0)).collect();
    for d in 0..5 {
        cur = dft_axis(&cur, &shape, d, -1.0, shape[d]).0;
    }
    close(&out.to_complex_vec(), &cur, 1e-12);

    let empty = HostTensor::zeros(DType::F32, vec![0, 8]);
    let out = run(
        "_fft_r2c",
        vec![
            ArgValue::Tensor(empty),
            ints(&[1]),
            ArgValue::Int(0),
            ArgValue::Bool(true),
        ],
    )
    .unwrap();
    assert_eq!((out.dtype(), out.shape()), (DType::C64, &[0usize, 5][..]));
}

#[test]
fn bad_arguments_are_errors() {
    let f = HostTensor::zeros(DType::F32, vec![4]);
    let i = HostTensor::zeros(DType::I32, vec![4]);
    let c = HostTensor::zeros(DType::C64, vec![3]);
    let r2c = |t: &HostTensor, dims: &[i64], norm: i64| {
        run(
            "_fft_r2c",
            vec![
                ArgValue::Tensor(t.clone()),
                ints(dims),
                ArgValue::Int(norm),
                ArgValue::Bool(true),
            ],
        )
    };
    assert!(r2c(&i, &[0], 0)
        .unwrap_err()
        .to_string()
        .contains("floating-point"));
    assert!(r2c(&c, &[0], 0).is_err());
    assert!(r2c(&f, &[1], 0)
        .unwrap_err()
        .to_string()
        .contains("out of range"));
    assert!(r2c(&f, &[0, 0], 0).is_err());
    assert!(r2c(&f, &[0], 3).is_err());
    let c2r = |t: &HostTensor, n: i64| {
        run(
            "_fft_c2r",
            vec![
                ArgValue::Tensor(t.clone()),
                ints(&[0]),
                ArgValue::Int(0),
                ArgValue::Int(n),
            ],
        )
    };
    assert!(c2r(&f, 4).unwrap_err().to_string().contains("complex"));
    assert!(c2r(&c, -1).is_err());
    assert_eq!(c2r(&c, 0).unwrap().shape(), &[0]);
    let z = HostTensor::zeros(DType::F32, vec![3, 0]);
    assert!(r2c(&z, &[1], 0)
        .unwrap_err()
        .to_string()
        .contains("data points"));
}

#[test]
fn real_only_ops_refuse_complex_tensors() {
    let c = HostTensor::from_complex(DType::C64, vec![2], &[(1.0, 2.0), (3.0, 4.0)]);
    // `maximum`: complex numbers have no order (PyTorch refuses them too).
    let err = run(
        "maximum",
        vec![ArgValue::Tensor(c.clone()), ArgValue::Tensor(c)],
    )
    .unwrap_err();
    assert!(
        matches!(&err, OpError::Lower { source: tessera_ops::LowerError::Unsupported(m), .. } if m.contains("complex")),
        "{err}"
    );
}

/// Builds, compiles and runs a module on the CPU plugin.
fn exec(
    f: FuncBuilder,
    outs: &[&tessera_lowering::stablehlo::Value],
    inputs: &[HostTensor],
) -> Vec<HostTensor> {
    let text = f.finish(outs).unwrap().into_text();
    let device = Device::cpu().unwrap();
    let client = device.client().unwrap();
    let exe = client
        .compile_cached(&text, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let bufs: Vec<_> = inputs.iter().map(|t| client.upload(t).unwrap()).collect();
    let refs: Vec<_> = bufs.iter().collect();
    exe.execute(&refs)
        .unwrap()
        .iter()
        .map(|b| b.to_host().unwrap())
        .collect()
}

#[test]
fn complex_values_through_the_builder_on_the_plugin() {
    let mut f = FuncBuilder::new("main");
    let re = f.arg(TensorType::new([3], DType::F64));
    let im = f.arg(TensorType::new([3], DType::F64));
    let z = f.complex(&re, &im).unwrap(); // c128
    let k = f
        .constant(&HostTensor::from_complex(
            DType::C128,
            vec![3],
            &[(1.0, 1.0), (0.0, -2.0), (0.5, 0.0)],
        ))
        .unwrap();
    let s = f
        .full_complex(TensorType::new([3], DType::C128), 2.0, -1.0)
        .unwrap();
    let p = f.mul(&z, &k).unwrap();
    let p = f.add(&p, &s).unwrap();
    let a = f
        .unary(tessera_lowering::stablehlo::UnaryOp::Abs, &p)
        .unwrap();
    let r = f.real(&p).unwrap();
    let i = f.imag(&p).unwrap();
    let e = f
        .compare(tessera_lowering::stablehlo::Comparison::Eq, &p, &p)
        .unwrap();
    let spec = f.fft(&p, FftType::Fft, &[3]).unwrap();
    let back = f.fft(&spec, FftType::Ifft, &[3]).unwrap();
    let c64 = f.convert(&back, DType::C64).unwrap();
    let x = f.arg(TensorType::new([3], DType::F32));
    let xc = f.convert(&x, DType::C64).unwrap();
    let sum = f.add(&c64, &xc).unwrap();
    let outs = exec(
        f,
        &[&p, &a, &r, &i, &e, &sum],
        &[
            HostTensor::from_f64(DType::F64, vec![3], &[1.0, 2.0, 3.0]),
            HostTensor::from_f64(DType::F64, vec![3], &[0.5, -1.0, 0.0]),
            HostTensor::from_f64(DType::F32, vec![3], &[10.0, 20.0, 30.0]),
        ],
    );
    // z = [1+0.5i, 2-i, 3]; z*k = [0.5+1.5i, -2-4i, 1.5]; + (2-i)
    let want = [(2.5, 0.5), (0.0, -5.0), (3.5, -1.0)];
    assert_eq!(outs[0].dtype(), DType::C128);
    close(&outs[0].to_complex_vec(), &want, 1e-15);
    assert_eq!(outs[1].dtype(), DType::F64);
    let mags: Vec<f64> = want.iter().map(|(a, b)| (a * a + b * b).sqrt()).collect();
    for (g, w) in outs[1].to_f64_vec().iter().zip(&mags) {
        assert!((g - w).abs() < 1e-12);
    }
    assert_eq!(outs[2].to_f64_vec(), vec![2.5, 0.0, 3.5]);
    assert_eq!(outs[3].to_f64_vec(), vec![0.5, -5.0, -1.0]);
    assert_eq!(outs[4].to_f64_vec(), vec![1.0, 1.0, 1.0]);
    assert_eq!(outs[5].dtype(), DType::C64);
    let sums: Vec<C> = want
        .iter()
        .zip([10.0, 20.0, 30.0])
        .map(|(&(a, b), x)| (a + x, b))
        .collect();
    close(&outs[5].to_complex_vec(), &sums, 1e-6);
}

#[test]
fn complex_tensors_round_trip_through_the_device() {
    let device = Device::cpu().unwrap();
    let client = device.client().unwrap();
    for d in [DType::C64, DType::C128] {
        let t = HostTensor::from_complex(d, vec![2], &[(1.5, -2.0), (f64::INFINITY, 0.25)]);
        let b = client.upload(&t).unwrap();
        assert_eq!(b.dtype(), d);
        assert_eq!(b.to_host().unwrap(), t);
    }
}
