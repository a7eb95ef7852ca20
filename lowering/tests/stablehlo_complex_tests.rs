//! Complex element types in the StableHLO builder: constants, `complex`/`real`/`imag`,
//! elementwise ops, and `fft` of each type; verified and run with jaxlib when available
//! (see `tests/jaxlib_oracle`). The ops crate's `fft_tests` run the same on the PJRT plugin.

mod jaxlib_oracle;

use jaxlib_oracle::run_with_jaxlib;
use std::f64::consts::PI;
use tessera_lowering::stablehlo::*;
use tessera_lowering::{DType, HostTensor};

fn run(m: &Module, inputs: &[HostTensor], outs: &[&Value]) -> Option<Vec<HostTensor>> {
    let types: Vec<(DType, Vec<usize>)> = outs
        .iter()
        .map(|v| (v.dtype(), v.shape().to_vec()))
        .collect();
    run_with_jaxlib(m.text(), inputs, &types)
        .map(|r| r.unwrap_or_else(|e| panic!("{e}\n{}", m.text())))
}

fn close(got: &[(f64, f64)], want: &[(f64, f64)], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g.0 - w.0).abs() < tol && (g.1 - w.1).abs() < tol,
            "got {g:?}, want {w:?}"
        );
    }
}

#[test]
fn complex_constants_parts_and_arithmetic() {
    let mut f = FuncBuilder::new("main");
    let re = f.arg(TensorType::new([2], DType::F32));
    let im = f.arg(TensorType::new([2], DType::F32));
    let z = f.complex(&re, &im).unwrap();
    assert_eq!(z.dtype(), DType::C64);
    let k = f
        .constant(&HostTensor::from_complex(
            DType::C64,
            vec![2],
            &[(0.0, 1.0), (2.0, -1.0)],
        ))
        .unwrap();
    let one = f.full(TensorType::new([2], DType::C64), 1.0).unwrap();
    let w = f
        .full_complex(TensorType::new([2], DType::C64), 0.5, f64::NAN)
        .unwrap();
    let p = f.mul(&z, &k).unwrap();
    let p = f.sub(&p, &one).unwrap();
    let q = f.div(&p, &k).unwrap();
    let a = f.unary(UnaryOp::Abs, &p).unwrap();
    assert_eq!(a.dtype(), DType::F32);
    let e = f.exp(&z).unwrap();
    let n = f.neg(&z).unwrap();
    let r = f.real(&p).unwrap();
    let i = f.imag(&p).unwrap();
    let ne = f.compare(Comparison::Ne, &p, &q).unwrap();
    let sum = f.reduce_sum(&p, &[0], false).unwrap();
    let outs = [&p, &q, &a, &e, &n, &r, &i, &ne, &sum, &w];
    let m = f.finish(&outs).unwrap();
    assert!(m
        .text()
        .contains("dense<(0.5, 0x7FC00000)> : tensor<2xcomplex<f32>>"));
    let inputs = [
        HostTensor::from_f64(DType::F32, vec![2], &[1.0, 3.0]),
        HostTensor::from_f64(DType::F32, vec![2], &[2.0, 0.5]),
    ];
    let Some(o) = run(&m, &inputs, &outs) else {
        return;
    };
    // z = [1+2i, 3+0.5i]; z*k = [-2+i, 6.5-2i]; -1 -> [-3+i, 5.5-2i]
    let p_want = [(-3.0, 1.0), (5.5, -2.0)];
    close(&o[0].to_complex_vec(), &p_want, 1e-6);
    // q = p / k: (-3+i)/i = 1+3i; (5.5-2i)/(2-i) = (5.5-2i)(2+i)/5 = 2.6+0.3i
    close(&o[1].to_complex_vec(), &[(1.0, 3.0), (2.6, 0.3)], 1e-6);
    let mags = o[2].to_f64_vec();
    assert!((mags[0] - 10f64.sqrt()).abs() < 1e-6 && (mags[1] - 34.25f64.sqrt()).abs() < 1e-5);
    let e_want: Vec<(f64, f64)> = [(1.0f64, 2.0f64), (3.0, 0.5)]
        .iter()
        .map(|&(a, b)| (a.exp() * b.cos(), a.exp() * b.sin()))
        .collect();
    close(&o[3].to_complex_vec(), &e_want, 1e-4);
    close(
        &o[4].to_complex_vec(),
        &[(-1.0, -2.0), (-3.0, -0.5)],
        0.0 + 1e-9,
    );
    assert_eq!(o[5].to_f64_vec(), vec![-3.0, 5.5]);
    assert_eq!(o[6].to_f64_vec(), vec![1.0, -2.0]);
    assert_eq!(o[7].to_f64_vec(), vec![1.0, 1.0]);
    close(&o[8].to_complex_vec(), &[(2.5, -1.0)], 1e-6);
    let c = o[9].to_complex_vec();
    assert!(c[0].0 == 0.5 && c[0].1.is_nan());
}

#[test]
fn fft_of_every_type_runs() {
    let mut f = FuncBuilder::new("main");
    let x = f.arg(TensorType::new([2, 6], DType::F64));
    let spec = f.fft(&x, FftType::Rfft, &[6]).unwrap();
    assert_eq!(spec.ty(), &TensorType::new([2, 4], DType::C128));
    let full = f.fft(&spec, FftType::Fft, &[2, 4]).unwrap();
    let back = f.fft(&full, FftType::Ifft, &[2, 4]).unwrap();
    let real = f.fft(&back, FftType::Irfft, &[6]).unwrap();
    assert_eq!(real.ty(), &TensorType::new([2, 6], DType::F64));
    let outs = [&spec, &real];
    let m = f.finish(&outs).unwrap();
    let xs: Vec<f64> = (0..12).map(|i| ((i * 7) % 5) as f64 - 1.5).collect();
    let Some(o) = run(
        &m,
        &[HostTensor::from_f64(DType::F64, vec![2, 6], &xs)],
        &outs,
    ) else {
        return;
    };
    let want: Vec<(f64, f64)> = (0..2)
        .flat_map(|r| {
            let xs = &xs;
            (0..4).map(move |k| {
                (0..6).fold((0.0, 0.0), |acc, j| {
                    let ang = -2.0 * PI * (j * k) as f64 / 6.0;
                    let v = xs[r * 6 + j];
                    (acc.0 + v * ang.cos(), acc.1 + v * ang.sin())
                })
            })
        })
        .collect();
    close(&o[0].to_complex_vec(), &want, 1e-12);
    for (g, w) in o[1].to_f64_vec().iter().zip(&xs) {
        assert!((g - w).abs() < 1e-12);
    }
}

#[test]
fn complex_misuse_is_an_error_not_text() {
    let mut f = FuncBuilder::new("main");
    let z = f.arg(TensorType::new([2], DType::C64));
    let x = f.arg(TensorType::new([2], DType::F32));
    assert!(f.max(&z, &z).is_err());
    assert!(f.compare(Comparison::Lt, &z, &z).is_err());
    assert!(f.convert(&z, DType::F32).is_err());
    assert!(f.clamp(&z, &z, &z).is_err());
    assert!(f.unary(UnaryOp::Floor, &z).is_err());
    assert!(f.binary(BinaryOp::Remainder, &z, &z).is_err());
    assert!(f.binary(BinaryOp::And, &z, &z).is_err());
    assert!(f.bitcast_convert(&z, DType::F64).is_err());
    assert!(f.max_value(TensorType::scalar(DType::C64)).is_err());
    assert!(f.reduce_max(&z, &[0], false).is_err());
    assert!(f.complex(&z, &z).is_err());
    assert!(f
        .full_complex(TensorType::scalar(DType::F32), 1.0, 0.0)
        .is_err());
    assert!(f.fft(&x, FftType::Fft, &[2]).is_err());
    assert!(f.fft(&z, FftType::Rfft, &[2]).is_err());
    assert!(f.fft(&x, FftType::Irfft, &[2]).is_err());
    let ok = f.convert(&x, DType::C128).unwrap();
    assert_eq!(ok.dtype(), DType::C128);
}
