//! Complex tensors (c64, c128) through the lowerings that take them, on the XLA CPU plugin,
//! against complex arithmetic computed here in f64 on seeded random inputs: arithmetic and
//! promotion with real operands, `abs`/`exp`/`neg`/`conj_physical`, the complex functions
//! (`log`, `sqrt`, trig, `sigmoid`), `sum`/`mean`/`prod`, `view_as_real` and
//! `view_as_complex`, `complex`, `polar`, `_fft_c2c`, casts and views; and the refusals
//! (rounding `div`, ops whose lowering is real-only).

mod common;

use common::*;
use std::f64::consts::PI;
use tessera_ops::LowerError;

type C = (f64, f64);

/// `n` seeded complex numbers with parts in [-2, 2).
fn cdraws(n: usize, seed: u64) -> Vec<C> {
    let v = draws(2 * n, seed, -2.0, 2.0);
    v.chunks(2).map(|p| (p[0], p[1])).collect()
}

/// A c64 (or c128) tensor argument; the values are rounded to the dtype's parts here so the
/// reference sees what the device sees.
fn ct(dtype: DType, shape: &[usize], v: &[C]) -> (A, Vec<C>) {
    let h = HostTensor::from_complex(dtype, shape.to_vec(), v);
    let seen = h.to_complex_vec();
    (ArgValue::Tensor(h), seen)
}

fn cvalues(o: &Output) -> Vec<C> {
    let t = tensor(o);
    assert!(
        t.dtype().is_complex(),
        "expected a complex result, got {}",
        t.dtype()
    );
    t.to_complex_vec()
}

fn one(op: &str, args: Vec<A>) -> Output {
    run(op, args, vec![])
        .unwrap_or_else(|e| panic!("{op}: {e}"))
        .remove(0)
}

/// `got` matches `want` within `tol` relative to `max(1, |want|)`, per element.
fn cclose(got: &[C], want: &[C], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = ((g.0 - w.0).powi(2) + (g.1 - w.1).powi(2)).sqrt();
        let scale = (w.0.powi(2) + w.1.powi(2)).sqrt().max(1.0);
        assert!(err / scale < tol, "element {i}: got {g:?}, want {w:?}");
    }
}

fn cmul(a: C, b: C) -> C {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

fn cdiv(a: C, b: C) -> C {
    let d = b.0 * b.0 + b.1 * b.1;
    ((a.0 * b.0 + a.1 * b.1) / d, (a.1 * b.0 - a.0 * b.1) / d)
}

const TOL32: f64 = 1e-5;

#[test]
fn arithmetic_of_complex_tensors_matches_complex_math() {
    let (x, xv) = ct(DType::C64, &[3, 4], &cdraws(12, 1));
    let (y, yv) = ct(DType::C64, &[3, 4], &cdraws(12, 2));
    let zip = |f: fn(C, C) -> C| {
        xv.iter()
            .zip(&yv)
            .map(|(&a, &b)| f(a, b))
            .collect::<Vec<_>>()
    };
    let got = one("mul.Tensor", vec![x.clone(), y.clone()]);
    cclose(&cvalues(&got), &zip(cmul), TOL32);
    let got = one("div.Tensor", vec![x.clone(), y.clone()]);
    cclose(&cvalues(&got), &zip(cdiv), TOL32);
    let got = one("add.Tensor", vec![x.clone(), y.clone()]);
    cclose(&cvalues(&got), &zip(|a, b| (a.0 + b.0, a.1 + b.1)), TOL32);
    // sub with alpha: x - 2.5 * y (a float alpha is fine for complex, as in PyTorch).
    let got = run(
        "sub.Tensor",
        vec![x.clone(), y.clone()],
        vec![("alpha", ArgValue::Float(2.5))],
    )
    .unwrap();
    cclose(
        &cvalues(&got[0]),
        &zip(|a, b| (a.0 - 2.5 * b.0, a.1 - 2.5 * b.1)),
        TOL32,
    );
    let got = one("neg", vec![x.clone()]);
    let want: Vec<C> = xv.iter().map(|a| (-a.0, -a.1)).collect();
    cclose(&cvalues(&got), &want, 0.0 + f64::EPSILON);
    let got = one("conj_physical", vec![x.clone()]);
    let want: Vec<C> = xv.iter().map(|a| (a.0, -a.1)).collect();
    cclose(&cvalues(&got), &want, f64::EPSILON);
}

#[test]
fn complex_times_real_promotes_to_complex() {
    let (x, xv) = ct(DType::C64, &[2, 3], &cdraws(6, 3));
    // A Python float (Llama 4 scales its rotary frequencies so).
    let got = one("mul.Tensor", vec![x.clone(), ArgValue::Float(0.75)]);
    let want: Vec<C> = xv.iter().map(|a| (a.0 * 0.75, a.1 * 0.75)).collect();
    cclose(&cvalues(&got), &want, TOL32);
    // A real f32 tensor, broadcast along the first dim.
    let r = draws(3, 4, -1.0, 1.0);
    let rt = HostTensor::from_f64(DType::F32, vec![3], &r);
    let rv = rt.to_f64_vec();
    let got = one("mul.Tensor", vec![x.clone(), ArgValue::Tensor(rt)]);
    assert_eq!(tensor(&got).dtype(), DType::C64);
    let want: Vec<C> = xv
        .iter()
        .enumerate()
        .map(|(i, a)| (a.0 * rv[i % 3], a.1 * rv[i % 3]))
        .collect();
    cclose(&cvalues(&got), &want, TOL32);
    // c64 with an f64 tensor: c128, as torch.promote_types says.
    let d = HostTensor::from_f64(DType::F64, vec![3], &[1.0, 2.0, 3.0]);
    let got = one("add.Tensor", vec![x, ArgValue::Tensor(d)]);
    assert_eq!(tensor(&got).dtype(), DType::C128);
}

#[test]
fn abs_and_exp_of_complex_tensors() {
    let (x, xv) = ct(DType::C64, &[5], &cdraws(5, 5));
    let got = one("abs", vec![x.clone()]);
    assert_eq!(
        tensor(&got).dtype(),
        DType::F32,
        "abs of c64 is the f32 modulus"
    );
    let want: Vec<f64> = xv.iter().map(|a| a.0.hypot(a.1)).collect();
    assert_close(&values(&got), &want, TOL32);
    let got = one("exp", vec![x]);
    let want: Vec<C> = xv
        .iter()
        .map(|a| (a.0.exp() * a.1.cos(), a.0.exp() * a.1.sin()))
        .collect();
    cclose(&cvalues(&got), &want, TOL32);
}

#[test]
fn view_as_real_and_view_as_complex_are_inverse() {
    let (x, xv) = ct(DType::C64, &[2, 3], &cdraws(6, 6));
    let r = one("view_as_real", vec![x]);
    let rt = tensor(&r).clone();
    assert_eq!((rt.dtype(), rt.shape()), (DType::F32, &[2usize, 3, 2][..]));
    let want: Vec<f64> = xv.iter().flat_map(|a| [a.0, a.1]).collect();
    assert_eq!(rt.to_f64_vec(), want);
    let c = one("view_as_complex", vec![ArgValue::Tensor(rt)]);
    assert_eq!(tensor(&c).shape(), &[2usize, 3][..]);
    assert_eq!(cvalues(&c), xv);
    // c128 <-> f64.
    let (x, xv) = ct(DType::C128, &[4], &cdraws(4, 7));
    let r = one("view_as_real", vec![x]);
    assert_eq!(tensor(&r).dtype(), DType::F64);
    let c = one(
        "view_as_complex",
        vec![ArgValue::Tensor(tensor(&r).clone())],
    );
    assert_eq!(cvalues(&c), xv);
}

#[test]
fn view_as_real_and_view_as_complex_refuse_what_pytorch_refuses() {
    let err = |op: &str, a: A| run(op, vec![a], vec![]).unwrap_err().to_string();
    let f = t(DType::F32, &[3], &[1.0, 2.0, 3.0]);
    assert!(err("view_as_real", f.clone()).contains("only supported for complex"));
    assert!(err("view_as_complex", f).contains("last dimension of size 2"));
    let i = t(DType::I64, &[3, 2], &[0.0; 6]);
    assert!(err("view_as_complex", i).contains("half, float and double"));
    let h = t(DType::F16, &[3, 2], &[0.0; 6]);
    assert!(err("view_as_complex", h).contains("not supported"));
}

#[test]
fn complex_and_polar_build_from_parts() {
    let re = draws(6, 8, -2.0, 2.0);
    let im = draws(3, 9, -2.0, 2.0);
    // imag broadcasts along the first dim: [2, 3] with [3].
    let got = one(
        "complex",
        vec![t(DType::F32, &[2, 3], &re), t(DType::F32, &[3], &im)],
    );
    let want: Vec<C> = (0..6)
        .map(|i| (re[i] as f32 as f64, im[i % 3] as f32 as f64))
        .collect();
    assert_eq!(cvalues(&got), want);
    let r = draws(6, 10, 0.0, 3.0);
    let th = draws(6, 11, -PI, PI);
    let got = one(
        "polar",
        vec![t(DType::F64, &[6], &r), t(DType::F64, &[6], &th)],
    );
    assert_eq!(tensor(&got).dtype(), DType::C128);
    let want: Vec<C> = r
        .iter()
        .zip(&th)
        .map(|(&r, &t)| (r * t.cos(), r * t.sin()))
        .collect();
    cclose(&cvalues(&got), &want, 1e-12);
    let e = run(
        "polar",
        vec![
            t(DType::F32, &[2], &[1.0, 1.0]),
            t(DType::F64, &[2], &[0.0, 1.0]),
        ],
        vec![],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("scalar type Float but got scalar type Double"),
        "{e}"
    );
}

/// Naive DFT over `dims` of a row-major complex tensor: `sign` -1 forward, +1 inverse.
fn dft(x: &[C], shape: &[usize], dims: &[usize], sign: f64) -> Vec<C> {
    let mut cur = x.to_vec();
    let strides: Vec<usize> = (0..shape.len())
        .map(|i| shape[i + 1..].iter().product())
        .collect();
    for &d in dims {
        let n = shape[d];
        let mut next = vec![(0.0, 0.0); cur.len()];
        for (flat, o) in next.iter_mut().enumerate() {
            let k = (flat / strides[d]) % n;
            let base = flat - k * strides[d];
            for j in 0..n {
                let ang = sign * 2.0 * PI * (j * k) as f64 / n as f64;
                let v = cur[base + j * strides[d]];
                let p = cmul(v, (ang.cos(), ang.sin()));
                o.0 += p.0;
                o.1 += p.1;
            }
        }
        cur = next;
    }
    cur
}

#[test]
fn fft_c2c_matches_a_naive_dft_with_each_normalization() {
    let shape = [2, 4, 6];
    let (x, xv) = ct(DType::C64, &shape, &cdraws(48, 12));
    for (dims, forward) in [
        (vec![1usize, 2], true),
        (vec![2], false),
        (vec![0, 1, 2], true),
    ] {
        let n: usize = dims.iter().map(|&d| shape[d]).product();
        let raw = dft(&xv, &shape, &dims, if forward { -1.0 } else { 1.0 });
        for norm in 0..3 {
            // PyTorch's modes: 0 none, 1 by 1/sqrt(n), 2 by 1/n.
            let k = [1.0, 1.0 / (n as f64).sqrt(), 1.0 / n as f64][norm as usize];
            let want: Vec<C> = raw.iter().map(|a| (a.0 * k, a.1 * k)).collect();
            let got = one(
                "_fft_c2c",
                vec![
                    x.clone(),
                    ints(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>()),
                    ArgValue::Int(norm),
                    ArgValue::Bool(forward),
                ],
            );
            assert_eq!(tensor(&got).shape(), &shape[..]);
            cclose(&cvalues(&got), &want, 1e-4);
        }
    }
    // Real input is refused (PyTorch converts it to complex before `_fft_c2c`).
    let e = run(
        "_fft_c2c",
        vec![
            t(DType::F32, &[4], &[1.0; 4]),
            ints(&[0]),
            ArgValue::Int(0),
            ArgValue::Bool(true),
        ],
        vec![],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("complex"), "{e}");
}

#[test]
fn casts_to_and_from_complex() {
    let v = draws(4, 13, -3.0, 3.0);
    let got = run(
        "_to_copy",
        vec![t(DType::F32, &[4], &v)],
        vec![("dtype", ArgValue::DType(DType::C64))],
    )
    .unwrap();
    let want: Vec<C> = v.iter().map(|&r| (r as f32 as f64, 0.0)).collect();
    assert_eq!(cvalues(&got[0]), want);
    // Complex to real keeps the real part (PyTorch warns that the imaginary part is lost).
    let (x, xv) = ct(DType::C64, &[3], &cdraws(3, 14));
    let got = run(
        "_to_copy",
        vec![x],
        vec![("dtype", ArgValue::DType(DType::F32))],
    )
    .unwrap();
    assert_eq!(values(&got[0]), xv.iter().map(|a| a.0).collect::<Vec<_>>());
}

#[test]
fn views_and_joins_move_complex_elements() {
    let (x, xv) = ct(DType::C64, &[2, 3], &cdraws(6, 15));
    let got = one("permute", vec![x.clone(), ints(&[1, 0])]);
    let want: Vec<C> = (0..6).map(|i| xv[(i % 2) * 3 + i / 2]).collect();
    assert_eq!(cvalues(&got), want);
    let got = one("unsqueeze", vec![x.clone(), ArgValue::Int(1)]);
    assert_eq!(tensor(&got).shape(), &[2usize, 1, 3][..]);
    let (y, yv) = ct(DType::C64, &[1, 3], &cdraws(3, 16));
    let got = one(
        "cat",
        vec![
            ArgValue::TensorList(vec![
                match x {
                    ArgValue::Tensor(t) => t,
                    _ => unreachable!(),
                },
                match y {
                    ArgValue::Tensor(t) => t,
                    _ => unreachable!(),
                },
            ]),
            ArgValue::Int(0),
        ],
    );
    let want: Vec<C> = xv.iter().chain(&yv).copied().collect();
    assert_eq!(cvalues(&got), want);
}

#[test]
fn refusals_of_complex_are_clear() {
    let (x, _) = ct(DType::C64, &[2], &cdraws(2, 17));
    // PyTorch's kernels have no rounding division of complex numbers.
    let e = run(
        "div.Tensor_mode",
        vec![x.clone(), x.clone()],
        vec![("rounding_mode", ArgValue::Str("floor".into()))],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("\"div_floor_cpu\" not implemented for 'ComplexFloat'"),
        "{e}"
    );
    // An op whose lowering is real-only refuses complex up front, naming the dtype.
    let e = run("asinh", vec![x], vec![]).unwrap_err();
    assert!(
        matches!(&e, OpError::Lower { source: LowerError::Unsupported(m), .. } if m.contains("complex tensors (c64)")),
        "{e}"
    );
}

#[test]
fn sum_of_complex_tensors_adds_both_parts() {
    let (x, xv) = ct(DType::C64, &[3, 4], &cdraws(12, 18));
    let got = run(
        "sum.dim_IntList",
        vec![x.clone(), ints(&[0]), ArgValue::Bool(false)],
        vec![],
    )
    .unwrap();
    let want: Vec<C> = (0..4)
        .map(|j| {
            (0..3).fold((0.0, 0.0), |acc, i| {
                (acc.0 + xv[i * 4 + j].0, acc.1 + xv[i * 4 + j].1)
            })
        })
        .collect();
    cclose(&cvalues(&got[0]), &want, TOL32);
    let got = one("sum", vec![x]);
    let total = xv
        .iter()
        .fold((0.0, 0.0), |acc, a| (acc.0 + a.0, acc.1 + a.1));
    cclose(&cvalues(&got), &[total], TOL32);
}

#[test]
fn sgn_of_complex_is_the_unit_direction_and_zero_at_zero() {
    let mut v = cdraws(5, 19);
    v.push((0.0, 0.0));
    let (x, xv) = ct(DType::C64, &[6], &v);
    let got = one("sgn", vec![x]);
    let want: Vec<C> = xv
        .iter()
        .map(|a| {
            let m = a.0.hypot(a.1);
            if m == 0.0 {
                (0.0, 0.0)
            } else {
                (a.0 / m, a.1 / m)
            }
        })
        .collect();
    cclose(&cvalues(&got), &want, TOL32);
}

#[test]
fn where_and_scalar_tensor_of_complex() {
    let (x, xv) = ct(DType::C64, &[4], &cdraws(4, 20));
    let z = run(
        "scalar_tensor",
        vec![ArgValue::Float(2.5)],
        vec![("dtype", ArgValue::DType(DType::C64))],
    )
    .unwrap();
    assert_eq!(cvalues(&z[0]), vec![(2.5, 0.0)]);
    let cond = HostTensor::from_f64(DType::Bool, vec![4], &[1.0, 0.0, 0.0, 1.0]);
    let zero = HostTensor::from_complex(DType::C64, vec![], &[(0.0, 0.0)]);
    let got = one(
        "where.self",
        vec![ArgValue::Tensor(cond), ArgValue::Tensor(zero), x],
    );
    let want: Vec<C> = (0..4)
        .map(|i| if i == 0 || i == 3 { (0.0, 0.0) } else { xv[i] })
        .collect();
    assert_eq!(cvalues(&got), want);
}

fn cexp(a: C) -> C {
    (a.0.exp() * a.1.cos(), a.0.exp() * a.1.sin())
}

fn clog(a: C) -> C {
    (a.0.hypot(a.1).ln(), a.1.atan2(a.0))
}

/// The principal square root (branch cut along the negative reals, as PyTorch's).
fn csqrt(a: C) -> C {
    let r = a.0.hypot(a.1);
    (
        ((r + a.0) / 2.0).sqrt(),
        (((r - a.0) / 2.0).sqrt()).copysign(a.1),
    )
}

fn csin(a: C) -> C {
    (a.0.sin() * a.1.cosh(), a.0.cos() * a.1.sinh())
}

fn ccos(a: C) -> C {
    (a.0.cos() * a.1.cosh(), -a.0.sin() * a.1.sinh())
}

fn ctanh(a: C) -> C {
    let sinh = (a.0.sinh() * a.1.cos(), a.0.cosh() * a.1.sin());
    let cosh = (a.0.cosh() * a.1.cos(), a.0.sinh() * a.1.sin());
    cdiv(sinh, cosh)
}

/// The complex functions on seeded draws with parts in [-2, 2) (no poles there: `tan`'s are on
/// the real axis, `sigmoid`'s at `i pi`; `log1p`'s branch point -1 is not drawn), c64 and c128, against the formulas in f64.
#[test]
fn complex_functions_match_their_formulas() {
    let cases: [(&str, fn(C) -> C); 12] = [
        ("expm1", |a| {
            let e = cexp(a);
            (e.0 - 1.0, e.1)
        }),
        ("log1p", |a| clog((1.0 + a.0, a.1))),
        ("log", clog),
        ("log2", |a| {
            let l = clog(a);
            (l.0 / 2f64.ln(), l.1 / 2f64.ln())
        }),
        ("log10", |a| {
            let l = clog(a);
            (l.0 / 10f64.ln(), l.1 / 10f64.ln())
        }),
        ("sqrt", csqrt),
        ("rsqrt", |a| cdiv((1.0, 0.0), csqrt(a))),
        ("sin", csin),
        ("cos", ccos),
        ("tan", |a| cdiv(csin(a), ccos(a))),
        ("tanh", ctanh),
        ("sigmoid", |a| {
            cdiv(
                (1.0, 0.0),
                (1.0 + cexp((-a.0, -a.1)).0, cexp((-a.0, -a.1)).1),
            )
        }),
    ];
    for (dtype, tol) in [(DType::C64, 1e-5), (DType::C128, 1e-12)] {
        for (k, (op, f)) in cases.iter().enumerate() {
            let (x, xv) = ct(dtype, &[4, 5], &cdraws(20, 40 + k as u64));
            let got = one(op, vec![x]);
            assert_eq!(tensor(&got).dtype(), dtype, "{op}");
            let want: Vec<C> = xv.iter().map(|&a| f(a)).collect();
            cclose(&cvalues(&got), &want, tol);
        }
    }
}

#[test]
fn mean_and_prod_of_complex_tensors() {
    let (x, xv) = ct(DType::C64, &[3, 4], &cdraws(12, 51));
    let cols = |f: &dyn Fn(C, C) -> C, init: C| -> Vec<C> {
        (0..4)
            .map(|j| (0..3).fold(init, |acc, i| f(acc, xv[i * 4 + j])))
            .collect()
    };
    let add = |a: C, b: C| (a.0 + b.0, a.1 + b.1);
    let got = run(
        "mean.dim",
        vec![x.clone(), ints(&[0]), ArgValue::Bool(true)],
        vec![],
    )
    .unwrap();
    assert_eq!(tensor(&got[0]).shape(), &[1, 4]);
    let want: Vec<C> = cols(&add, (0.0, 0.0))
        .iter()
        .map(|s| (s.0 / 3.0, s.1 / 3.0))
        .collect();
    cclose(&cvalues(&got[0]), &want, TOL32);
    let total = xv.iter().fold((0.0, 0.0), |acc, &a| add(acc, a));
    cclose(
        &cvalues(&one("mean", vec![x.clone()])),
        &[(total.0 / 12.0, total.1 / 12.0)],
        TOL32,
    );
    let got = run(
        "prod.dim_int",
        vec![x.clone(), ArgValue::Int(0), ArgValue::Bool(false)],
        vec![],
    )
    .unwrap();
    cclose(&cvalues(&got[0]), &cols(&cmul, (1.0, 0.0)), TOL32);
    let product = xv.iter().fold((1.0, 0.0), |acc, &a| cmul(acc, a));
    cclose(&cvalues(&one("prod", vec![x])), &[product], TOL32);
}
