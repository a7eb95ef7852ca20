//! `Shortcut`, the memoized op a caller keeps (the C++ device's per-call-site cache): the
//! general path's results in every mode, stats counted the same, and no call on tensors it
//! was not made for (another type, a view, an evicted entry) — those give `None`, never a
//! wrong value. One test function: the cache capacity it changes is process-wide.

mod common;
use common::*;
use tessera_ops::OpSchema;

fn schema(op: &str) -> &'static OpSchema {
    tessera_ops::find(op).unwrap()
}

fn general(op: &str, xs: &[Tensor]) -> Tensor {
    let args = xs.iter().cloned().map(ArgValue::Tensor).collect();
    let outs = call_tensors(schema(op), args).unwrap();
    outs.into_iter().next().unwrap().tensor().unwrap()
}

/// The shortcut for `op` on `xs`, made after a memoized call as the C++ device makes it.
fn shortcut(op: &str, xs: &[Tensor]) -> Shortcut {
    general(op, xs);
    Shortcut::find(schema(op), xs).unwrap_or_else(|| panic!("{op}: no shortcut"))
}

#[test]
fn shortcuts_match_the_general_path_and_refuse_other_tensors() {
    let a = dev(&host(1, &[3, 4]));
    let b = dev(&host(2, &[3, 4]));
    let c = dev(&host(3, &[4, 5]));
    let (ha, hb) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
    for m in [EagerMode::Strict, EagerMode::Debug, EagerMode::DeferAndFuse] {
        in_mode(m, || {
            let add = shortcut("aten::add.Tensor", &[a.clone(), b.clone()]);
            assert_eq!(add.output_type(), Some((DType::F32, vec![3, 4])));
            // A chain through the shortcut (pending inputs in DeferAndFuse): a + 3b.
            let mut x = add.call(&[&a, &b]).unwrap().expect("applies");
            for _ in 0..2 {
                x = add.call(&[&x, &b]).unwrap().expect("applies");
            }
            let want: Vec<f64> = ha.iter().zip(&hb).map(|(p, q)| p + 3.0 * q).collect();
            assert!(max_err(&x.to_f64_vec().unwrap(), &want) < 1e-5, "{m:?}");
            for (op, xs) in [
                ("aten::mm", vec![a.clone(), c.clone()]),
                ("aten::sigmoid", vec![a.clone()]),
            ] {
                let sc = shortcut(op, &xs);
                let refs: Vec<&Tensor> = xs.iter().collect();
                let got = sc.call(&refs).unwrap().expect("applies");
                let want = general(op, &xs).to_f64_vec().unwrap();
                assert_eq!(got.to_f64_vec().unwrap(), want, "{op} {m:?}");
            }
            // Not the types it was made for: another shape, a view, too few tensors.
            assert!(add.call(&[&c, &c]).unwrap().is_none());
            let t = general("aten::t", &[c.clone()]);
            assert!(t.is_view());
            assert!(
                add.call(&[&t, &b]).unwrap().is_none(),
                "a view of another shape"
            );
            let square = dev(&host(4, &[4, 4]));
            let sq = shortcut("aten::add.Tensor", &[square.clone(), square.clone()]);
            let st = general("aten::t", &[square.clone()]);
            assert!(
                sq.call(&[&st, &square]).unwrap().is_none(),
                "a view of the same shape"
            );
            assert!(add.call(&[&a]).unwrap().is_none());
            assert!(!add.takes(0, DType::F32, &[4, 3]) && add.takes(1, DType::F32, &[3, 4]));
        });
    }

    // Counted as the memoized path counts a call: an op and a cache hit, nothing compiled.
    let sub = shortcut("aten::sub.Tensor", &[a.clone(), b.clone()]);
    reset_stats();
    sub.call(&[&a, &b]).unwrap().expect("applies");
    let st = stats().mode(EagerMode::Strict).clone();
    assert_eq!((st.ops, st.cache_hits, st.compiles), (1, 1, 0), "{st:?}");

    // Ops that write or give more than one tensor have none.
    general("aten::add_.Tensor", &[a.clone(), b.clone()]);
    assert!(Shortcut::find(schema("aten::add_.Tensor"), &[a.clone(), b.clone()]).is_none());

    // An entry the lowering cache evicted: the shortcut no longer applies.
    set_cache_capacity(1);
    let div = shortcut("aten::div.Tensor", &[a.clone(), b.clone()]);
    general("aten::maximum", &[a.clone(), b.clone()]);
    assert!(div.call(&[&a, &b]).unwrap().is_none(), "evicted");
    assert!(div.output_type().is_none());
    set_cache_capacity(DEFAULT_CACHE_CAPACITY);
}
