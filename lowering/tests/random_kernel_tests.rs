//! Property test: random elementwise/reduction kernels built through the tracer, run on
//! the interpreter, against a direct float64 evaluation of the same expression.

mod common;

use common::FnKernel;
use proptest::prelude::*;
use tessera_lowering::interp;
use tessera_lowering::prelude::*;
use tessera_lowering::trace::Launch;
use tessera_lowering::HostTensor;

const ROWS: usize = 8;
const COLS: usize = 128;

#[derive(Clone, Debug)]
enum Expr {
    X,
    Y,
    Const(f64),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    /// Row reduction with keepdims: [8, w] -> [8, 1]; broadcasts back in binary ops.
    Reduce(&'static str, Box<Expr>),
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        Just(Expr::X),
        Just(Expr::Y),
        (-2.0..2.0f64).prop_map(|c| Expr::Const((c * 8.0).round() / 8.0))
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (
                prop::sample::select(vec!["neg", "abs", "tanh", "sigmoid", "sin", "exp_tanh"]),
                inner.clone()
            )
                .prop_map(|(op, e)| Expr::Unary(op, Box::new(e))),
            (
                prop::sample::select(vec!["add", "sub", "mul", "maximum", "minimum"]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, a, b)| Expr::Binary(op, Box::new(a), Box::new(b))),
            (prop::sample::select(vec!["sum", "max", "min"]), inner)
                .prop_map(|(op, e)| Expr::Reduce(op, Box::new(e))),
        ]
    })
}

/// Traces `e`; `Const` becomes a rank-0 tile that broadcasts.
fn build(e: &Expr, x: Tile<f32>, y: Tile<f32>) -> Tile<f32> {
    match e {
        Expr::X => x,
        Expr::Y => y,
        Expr::Const(c) => full([1, 1], *c),
        Expr::Unary(op, a) => {
            let a = build(a, x, y);
            match *op {
                "neg" => -a,
                "abs" => a.abs(),
                "tanh" => a.tanh(),
                "sigmoid" => sigmoid(a),
                "sin" => a.sin(),
                _ => exp(a.tanh()),
            }
        }
        Expr::Binary(op, a, b) => {
            let (a, b) = (build(a, x, y), build(b, x, y));
            match *op {
                "add" => a + b,
                "sub" => a - b,
                "mul" => a * b,
                "maximum" => a.maximum(b),
                _ => a.minimum(b),
            }
        }
        Expr::Reduce(op, a) => {
            let a = build(a, x, y);
            match *op {
                "sum" => a.sum(1, true),
                "max" => a.max(1, true),
                _ => a.min(1, true),
            }
        }
    }
}

/// Row-major values with their width (1 or COLS), and the largest magnitude seen on the
/// way (to scale the tolerance for f32 rounding in intermediates).
fn eval(e: &Expr, x: &[f64], y: &[f64]) -> (Vec<f64>, usize, f64) {
    let mag = |v: &[f64]| v.iter().fold(0.0f64, |m, a| m.max(a.abs()));
    match e {
        Expr::X => (x.to_vec(), COLS, mag(x)),
        Expr::Y => (y.to_vec(), COLS, mag(y)),
        Expr::Const(c) => (vec![*c; ROWS], 1, c.abs()),
        Expr::Unary(op, a) => {
            let (v, w, m) = eval(a, x, y);
            let f = |t: f64| match *op {
                "neg" => -t,
                "abs" => t.abs(),
                "tanh" => t.tanh(),
                "sigmoid" => 1.0 / (1.0 + (-t).exp()),
                "sin" => t.sin(),
                _ => t.tanh().exp(),
            };
            let v: Vec<f64> = v.into_iter().map(f).collect();
            let m = m.max(mag(&v));
            (v, w, m)
        }
        Expr::Binary(op, a, b) => {
            let ((va, wa, ma), (vb, wb, mb)) = (eval(a, x, y), eval(b, x, y));
            let w = wa.max(wb);
            let v: Vec<f64> = (0..ROWS * w)
                .map(|f| {
                    let (r, c) = (f / w, f % w);
                    let (p, q) = (va[r * wa + c.min(wa - 1)], vb[r * wb + c.min(wb - 1)]);
                    match *op {
                        "add" => p + q,
                        "sub" => p - q,
                        "mul" => p * q,
                        "maximum" => p.max(q),
                        _ => p.min(q),
                    }
                })
                .collect();
            let m = ma.max(mb).max(mag(&v)).max(ma * mb);
            (v, w, m)
        }
        Expr::Reduce(op, a) => {
            let (v, w, m) = eval(a, x, y);
            let v: Vec<f64> = v
                .chunks(w)
                .map(|row| match *op {
                    "sum" => row.iter().sum(),
                    "max" => row.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                    _ => row.iter().cloned().fold(f64::INFINITY, f64::min),
                })
                .collect();
            let m = m.max(mag(&v)) * w as f64;
            (v, 1, m)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn interpreter_matches_f64_evaluation(e in expr(), seed in 0u64..1000) {
        let mut r = common::rng(seed);
        let x = common::random(&mut r, DType::F32, &[ROWS, COLS]);
        let y = common::random(&mut r, DType::F32, &[ROWS, COLS]);
        let traced = e.clone();
        let k = FnKernel::leak("random", 2, move |ins, o| o.store(build(&traced, ins[0].load(), ins[1].load())));
        let spec = || BlockSpec::new([ROWS, COLS], |_| [0, 0]);
        let p = Launch::new(k)
            .grid([1])
            .input(spec())
            .input(spec())
            .output(spec(), [ROWS, COLS])
            .trace_program(&[(DType::F32, vec![ROWS, COLS]), (DType::F32, vec![ROWS, COLS])])
            .unwrap();
        let out = interp::run(&p, &[x.clone(), y.clone()]).unwrap()[0].to_f64_vec();
        let (want, w, mag) = eval(&e, &x.to_f64_vec(), &y.to_f64_vec());
        let tol = 1e-5 * (1.0 + mag);
        for (f, got) in out.iter().enumerate() {
            let (r, c) = (f / COLS, f % COLS);
            let want = want[r * w + c.min(w - 1)];
            prop_assert!((got - want).abs() <= tol, "{e:?}: element {f}: got {got}, want {want}, tol {tol}\n{}", p.body);
        }
    }
}

#[test]
fn host_tensor_round_trip_through_the_interpreter_keeps_shape() {
    let x = HostTensor::from_f64(DType::F32, vec![ROWS, COLS], &vec![0.5; ROWS * COLS]);
    let k = FnKernel::leak("copy", 1, |ins, o| o.store(ins[0].load()));
    let spec = || BlockSpec::new([ROWS, COLS], |_| [0, 0]);
    let p = Launch::new(k)
        .grid([1])
        .input(spec())
        .output(spec(), [ROWS, COLS])
        .trace_program(&[(DType::F32, vec![ROWS, COLS])])
        .unwrap();
    assert_eq!(interp::run(&p, std::slice::from_ref(&x)).unwrap()[0], x);
}
