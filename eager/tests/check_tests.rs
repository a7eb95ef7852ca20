//! Device-side data checks in the eager modes: an out-of-range index (or an integer division
//! by zero) is an error naming the op, at once in Debug mode and at the next sync point
//! (a host read, `sync()`) in Strict and DeferAndFuse; in-range calls are unchanged.

mod common;
use common::*;
use tessera_ops::ArgValue;

fn i64s(v: &[i64]) -> Tensor {
    let f: Vec<f64> = v.iter().map(|&i| i as f64).collect();
    dev(&HostTensor::from_f64(DType::I64, vec![v.len()], &f))
}

fn index_select(x: &Tensor, idx: &Tensor) -> Result<Tensor> {
    first_tensor(call(
        "index_select",
        vec![x.into(), ArgValue::Int(0), idx.into()],
        vec![],
    )?)
}

const MSG: &str = "index out of range in self";

#[test]
fn debug_raises_at_the_op() {
    let _g = ModeGuard::new(EagerMode::Debug).unwrap();
    let x = dev(&host(1, &[5, 3]));
    let e = index_select(&x, &i64s(&[0, 10])).unwrap_err().to_string();
    assert!(e.contains("index_select") && e.contains(MSG), "{e}");
    // The runtime is usable after the error.
    let y = index_select(&x, &i64s(&[4])).unwrap();
    assert_eq!(
        y.to_f64_vec().unwrap(),
        host(1, &[5, 3]).to_f64_vec()[12..].to_vec()
    );
}

#[test]
fn strict_and_defer_raise_at_the_next_sync_point() {
    for m in [EagerMode::Strict, EagerMode::DeferAndFuse] {
        let _g = ModeGuard::new(m).unwrap();
        let x = dev(&host(2, &[5, 3]));
        // The call itself returns (nothing waited on the device)...
        let bad = index_select(&x, &i64s(&[0, 10])).unwrap();
        let later = bad.mul_scalar(2.0).unwrap();
        // ...the host read is where the error surfaces, naming the op.
        let e = later.to_f64_vec().unwrap_err().to_string();
        assert!(e.contains("index_select") && e.contains(MSG), "{m:?}: {e}");
        // Read once: the next read of an in-range result is fine.
        let ok = index_select(&x, &i64s(&[1, -0])).unwrap();
        assert_eq!(ok.to_f64_vec().unwrap().len(), 6, "{m:?}");
        // sync() is a sync point too.
        let _bad = first_tensor(
            call(
                "gather",
                vec![
                    (&x).into(),
                    ArgValue::Int(1),
                    (&i64s(&[3]).reshape(&[1, 1]).unwrap()).into(),
                ],
                vec![],
            )
            .unwrap(),
        )
        .unwrap();
        let e = sync().unwrap_err().to_string();
        assert!(
            e.contains("gather")
                && e.contains("index 3 is out of bounds for dimension 1 with size 3"),
            "{m:?}: {e}"
        );
    }
}

#[test]
fn integer_division_by_zero_is_raised_in_every_mode() {
    for m in [EagerMode::Debug, EagerMode::Strict, EagerMode::DeferAndFuse] {
        let _g = ModeGuard::new(m).unwrap();
        let a = i64s(&[1, 2]);
        let b = i64s(&[1, 0]);
        let e = call("remainder.Tensor", vec![(&a).into(), (&b).into()], vec![])
            .and_then(first_tensor)
            .and_then(|t| t.to_f64_vec())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("remainder") && e.contains("ZeroDivisionError"),
            "{m:?}: {e}"
        );
    }
}

#[test]
fn a_compiled_replay_checks_its_indices_too() {
    let x = dev(&host(3, &[5, 3]));
    let mut f = compile(|a: &[Tensor]| Ok(vec![index_select(&x, &a[0])?.add_scalar(1.0)?]));
    let y = f.call(&[i64s(&[0, 4])]).unwrap().remove(0);
    assert_eq!(y.to_f64_vec().unwrap().len(), 6);
    assert!(f.is_traced());
    let y = f.call(&[i64s(&[0, 7])]).unwrap().remove(0);
    let e = y.to_f64_vec().unwrap_err().to_string();
    assert!(e.contains("index_select") && e.contains(MSG), "{e}");
}

#[test]
fn in_range_results_agree_with_the_host_path_in_every_mode() {
    let mut rng = StdRng::seed_from_u64(5);
    let xh = host(4, &[7, 2]);
    let idx: Vec<i64> = (0..9).map(|_| rng.gen_range(0..7)).collect();
    let want = host_call(
        "index_select",
        vec![
            ArgValue::Tensor(xh.clone()),
            ArgValue::Int(0),
            ArgValue::Tensor(HostTensor::from_f64(
                DType::I64,
                vec![9],
                &idx.iter().map(|&i| i as f64).collect::<Vec<_>>(),
            )),
        ],
    );
    for m in MODES {
        let got = in_mode(m, || {
            index_select(&dev(&xh), &i64s(&idx))
                .unwrap()
                .to_f64_vec()
                .unwrap()
        });
        assert_eq!(got, want.to_f64_vec(), "{m:?}");
    }
}
