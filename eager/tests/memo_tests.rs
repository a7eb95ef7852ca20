//! `call_tensors`, the memoized path of calls on tensors alone (the C++ device's `a + b`):
//! the same results as the general path in every mode, in-place writes through views, view
//! ops still views, and an entry the lowering cache evicted is rebuilt, not kept alive. One
//! test function: the cache capacity it changes is process-wide.

mod common;
use common::*;
use tessera_ops::OpSchema;

fn schema(op: &str) -> &'static OpSchema {
    tessera_ops::find(op).unwrap()
}

fn args(tensors: Vec<Tensor>) -> Vec<ArgValue<Tensor>> {
    tensors.into_iter().map(ArgValue::Tensor).collect()
}

fn one(outs: Vec<Output>) -> Tensor {
    outs.into_iter().next().unwrap().tensor().unwrap()
}

/// `op` on `xs` through the memo (twice: the second call finds the entry) and through the
/// general path: all three equal.
fn same_as_general(op: &str, xs: &[Tensor]) -> Vec<f64> {
    let general = one(call_schema(schema(op), args(xs.to_vec()), vec![]).unwrap());
    let want = general.to_f64_vec().unwrap();
    for _ in 0..2 {
        let got = one(call_tensors(schema(op), args(xs.to_vec())).unwrap());
        assert_eq!(got.shape(), general.shape(), "{op}");
        assert_eq!(got.to_f64_vec().unwrap(), want, "{op}");
    }
    want
}

#[test]
fn memoized_calls_match_the_general_path_and_keep_no_evicted_entry() {
    let a = dev(&host(1, &[3, 4]));
    let b = dev(&host(2, &[3, 4]));
    let c = dev(&host(3, &[4, 5]));
    let cond =
        one(call_tensors(schema("aten::gt.Tensor"), args(vec![a.clone(), b.clone()])).unwrap());
    let (ha, hb) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
    for m in [EagerMode::Strict, EagerMode::Debug, EagerMode::DeferAndFuse] {
        in_mode(m, || {
            // float64 reference of a + b (f32 sums: within 1e-6 of it).
            let sum = same_as_general("aten::add.Tensor", &[a.clone(), b.clone()]);
            let want: Vec<f64> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
            assert!(max_err(&sum, &want) < 1e-6, "{m:?}");
            same_as_general("aten::mul.Tensor", &[a.clone(), b.clone()]);
            same_as_general("aten::sigmoid", &[a.clone()]);
            same_as_general("aten::mm", &[a.clone(), c.clone()]);
            same_as_general("aten::where.self", &[cond.clone(), a.clone(), b.clone()]);
            // Another shape: another entry.
            same_as_general("aten::add.Tensor", &[c.clone(), c.clone()]);
        });
    }

    // The second call on the same types is a cache hit that compiles nothing.
    reset_stats();
    let s = schema("aten::sub.Tensor");
    one(call_tensors(s, args(vec![a.clone(), b.clone()])).unwrap());
    let first = stats().mode(EagerMode::Strict).clone();
    one(call_tensors(s, args(vec![a.clone(), b.clone()])).unwrap());
    let second = stats().mode(EagerMode::Strict).clone();
    assert_eq!(second.ops, first.ops + 1);
    assert_eq!(second.cache_hits, first.cache_hits + 1);
    assert_eq!(second.compiles, first.compiles);

    // In place, into a base tensor and through a view (its base changes).
    let x = dev(&host(4, &[3, 4]));
    let x0 = x.to_f64_vec().unwrap();
    for _ in 0..2 {
        call_tensors(
            schema("aten::add_.Tensor"),
            args(vec![x.clone(), b.clone()]),
        )
        .unwrap();
    }
    let want: Vec<f64> = x0.iter().zip(&hb).map(|(x, y)| x + 2.0 * y).collect();
    assert!(max_err(&x.to_f64_vec().unwrap(), &want) < 1e-6);
    let base = dev(&host(5, &[4, 3]));
    let base0 = base.to_f64_vec().unwrap();
    let view = one(call_tensors(schema("aten::t"), args(vec![base.clone()])).unwrap());
    assert!(
        view.is_view() && view.shares_storage(&base),
        "t stays a view"
    );
    for _ in 0..2 {
        call_tensors(
            schema("aten::mul_.Tensor"),
            args(vec![view.clone(), view.clone()]),
        )
        .unwrap();
    }
    let want: Vec<f64> = base0.iter().map(|v| v.powi(4)).collect();
    assert!(max_err(&base.to_f64_vec().unwrap(), &want) < 1e-6);

    // Evicted from the lowering cache, an entry is rebuilt (and compiled) again.
    set_cache_capacity(1);
    let s = schema("aten::div.Tensor");
    let want = one(call_tensors(s, args(vec![a.clone(), b.clone()])).unwrap())
        .to_f64_vec()
        .unwrap();
    one(call_tensors(schema("aten::maximum"), args(vec![a.clone(), b.clone()])).unwrap());
    reset_stats();
    let again = one(call_tensors(s, args(vec![a.clone(), b.clone()])).unwrap());
    assert_eq!(again.to_f64_vec().unwrap(), want);
    let st = stats().mode(EagerMode::Strict).clone();
    assert_eq!((st.cache_hits, st.compiles), (0, 1), "rebuilt: {st:?}");
    set_cache_capacity(DEFAULT_CACHE_CAPACITY);

    // Arguments that are not tensors alone take the general path: a number.
    let with_number = vec![ArgValue::Tensor(a.clone()), ArgValue::Float(3.0)];
    let got = one(call_tensors(schema("aten::mul.Scalar"), with_number).unwrap());
    let want: Vec<f64> = ha.iter().map(|x| 3.0 * x).collect();
    assert!(max_err(&got.to_f64_vec().unwrap(), &want) < 1e-6);

    // Bad input is the general path's error, not a panic.
    let err = call_tensors(schema("aten::mm"), args(vec![a.clone(), b.clone()])).unwrap_err();
    assert!(err.to_string().contains("mm"), "{err}");
}
