//! Random indices for the indexing family (issue #17: 0 panics, aborts or hangs in 10,000
//! cases): every call either gives exactly the values of a reference computed here, or, when an
//! index is out of range (torch's rule per op: negatives wrap or not), a `Checked` error. Any
//! other outcome, a panic included, fails the case. The seed is fixed; shapes come from a small
//! set so the cases reuse compiled executables (`PROPTEST_CASES` overrides the count).

mod common;
use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};

const ROWS: usize = 5;
const COLS: usize = 3;

/// x[r][c] = 3r + c + 1 (small integers: every gathered or summed value is exact in f32).
fn x() -> Vec<f64> {
    (0..ROWS * COLS).map(|i| i as f64 + 1.0).collect()
}

fn i64s(shape: &[usize], v: &[i64]) -> A {
    ArgValue::Tensor(HostTensor::from_f64(
        DType::I64,
        shape.to_vec(),
        &v.iter().map(|&i| i as f64).collect::<Vec<_>>(),
    ))
}

/// `[idx]`: one index tensor, for `index.Tensor` and `index_put`.
fn indices(idx: &[i64]) -> A {
    let values: Vec<f64> = idx.iter().map(|&i| i as f64).collect();
    ArgValue::OptTensorList(vec![Some(HostTensor::from_f64(
        DType::I64,
        vec![idx.len()],
        &values,
    ))])
}

/// `i` as an index into `n` elements: negatives wrap when `wrap`.
fn resolve(i: i64, n: usize, wrap: bool) -> Option<usize> {
    let n = n as i64;
    let j = if wrap && i < 0 { i + n } else { i };
    (0..n).contains(&j).then_some(j as usize)
}

#[derive(Debug, Clone)]
enum Case {
    IndexSelect(Vec<i64>),
    Embedding(Vec<i64>),
    Take(Vec<i64>),
    Index(Vec<i64>),
    Gather(Vec<i64>),
    ScatterAdd(Vec<i64>),
    IndexPutAccumulate(Vec<i64>),
}

/// Mostly near the valid range (both edges, negatives), sometimes far outside it.
fn index() -> impl Strategy<Value = i64> {
    prop_oneof![
        8 => -7i64..9,
        1 => prop::sample::select(vec![i64::MIN, -(1 << 40), 1 << 40, i64::MAX, 15, 16, -15, -16]),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    let rows = (1usize..4).prop_flat_map(|k| prop::collection::vec(index(), k));
    let grid = (1usize..3).prop_flat_map(|k| prop::collection::vec(index(), k * COLS));
    prop_oneof![
        rows.clone().prop_map(Case::IndexSelect),
        rows.clone().prop_map(Case::Embedding),
        rows.clone().prop_map(Case::Take),
        rows.clone().prop_map(Case::Index),
        grid.clone().prop_map(Case::Gather),
        grid.prop_map(Case::ScatterAdd),
        rows.prop_map(Case::IndexPutAccumulate),
    ]
}

/// (op, args, the reference result or None where torch refuses an index).
fn call_of(c: &Case) -> (&'static str, Vec<A>, Option<Vec<f64>>) {
    let xv = x();
    let xt = || t(DType::F32, &[ROWS, COLS], &xv);
    let row = |r: usize| xv[r * COLS..(r + 1) * COLS].to_vec();
    let rows_of = |idx: &[i64], wrap: bool| -> Option<Vec<f64>> {
        idx.iter()
            .map(|&i| resolve(i, ROWS, wrap).map(row))
            .collect::<Option<Vec<_>>>()
            .map(|v| v.concat())
    };
    match c {
        Case::IndexSelect(idx) => (
            "index_select",
            vec![xt(), ArgValue::Int(0), i64s(&[idx.len()], idx)],
            rows_of(idx, false),
        ),
        Case::Embedding(idx) => (
            "embedding",
            vec![xt(), i64s(&[idx.len()], idx)],
            rows_of(idx, false),
        ),
        Case::Index(idx) => ("index.Tensor", vec![xt(), indices(idx)], rows_of(idx, true)),
        Case::Take(idx) => (
            "take",
            vec![xt(), i64s(&[idx.len()], idx)],
            idx.iter()
                .map(|&i| resolve(i, ROWS * COLS, true).map(|j| xv[j]))
                .collect(),
        ),
        Case::Gather(idx) => {
            let k = idx.len() / COLS;
            let want = idx
                .iter()
                .enumerate()
                .map(|(p, &i)| resolve(i, ROWS, false).map(|r| xv[r * COLS + p % COLS]))
                .collect();
            (
                "gather",
                vec![xt(), ArgValue::Int(0), i64s(&[k, COLS], idx)],
                want,
            )
        }
        Case::ScatterAdd(idx) => {
            let k = idx.len() / COLS;
            let src: Vec<f64> = (0..idx.len()).map(|i| (i * 7 % 5) as f64).collect();
            let want = idx
                .iter()
                .enumerate()
                .try_fold(xv.clone(), |mut acc, (p, &i)| {
                    let r = resolve(i, ROWS, false)?;
                    acc[r * COLS + p % COLS] += src[p];
                    Some(acc)
                });
            (
                "scatter_add",
                vec![
                    xt(),
                    ArgValue::Int(0),
                    i64s(&[k, COLS], idx),
                    t(DType::F32, &[k, COLS], &src),
                ],
                want,
            )
        }
        Case::IndexPutAccumulate(idx) => {
            let values: Vec<f64> = (0..idx.len() * COLS).map(|i| (i % 4) as f64).collect();
            let want = idx
                .iter()
                .enumerate()
                .try_fold(xv.clone(), |mut acc, (p, &i)| {
                    let r = resolve(i, ROWS, true)?;
                    for c in 0..COLS {
                        acc[r * COLS + c] += values[p * COLS + c];
                    }
                    Some(acc)
                });
            (
                "index_put",
                vec![
                    xt(),
                    indices(idx),
                    t(DType::F32, &[idx.len(), COLS], &values),
                    ArgValue::Bool(true),
                ],
                want,
            )
        }
    }
}

#[test]
fn random_indices_give_the_reference_or_a_checked_error() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(17),
        failure_persistence: None,
        ..Config::default()
    };
    let (ok, refused) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let result = TestRunner::new(config).run(&case(), |c| {
        let (op, args, want) = call_of(&c);
        match (run(op, args, vec![]), want) {
            (Ok(out), Some(want)) => {
                prop_assert_eq!(values(&out[0]), want, "{} {:?}", op, c);
                ok.set(ok.get() + 1);
            }
            (Err(OpError::Checked { .. }), None) => refused.set(refused.get() + 1),
            (Ok(out), None) => {
                prop_assert!(
                    false,
                    "{op} {c:?}: an index is out of range, got {:?}",
                    values(&out[0])
                )
            }
            (Err(e), _) => prop_assert!(false, "{op} {c:?}: {e}"),
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Both outcomes are drawn often (measured at 10,000 cases: 2,501 in range, 7,499 refused).
    let (ok, refused) = (ok.get(), refused.get());
    eprintln!("{cases} cases: {ok} equal to the reference, {refused} refused with a checked error");
    assert!(
        ok > cases / 10 && refused > cases / 10,
        "{ok} in range, {refused} refused"
    );
}
