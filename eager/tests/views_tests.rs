//! Views and in-place ops with PyTorch's semantics, in every mode, against values computed
//! by hand (the expected numbers follow torch: a view shares its base).

mod common;
use common::*;

fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
    Tensor::from_f64(DType::F32, shape, &v).unwrap()
}

#[test]
fn inplace_through_a_select_view_updates_the_base_and_other_views() {
    for m in MODES {
        let (base, col, row) = in_mode(m, || {
            let x = iota(&[2, 3]);
            let col = x.select(1, 0).unwrap(); // x[:, 0] = [0, 3]
            let row = x.select(0, 1).unwrap(); // x[1] = [3, 4, 5]
            assert!(col.is_view() && col.shares_storage(&x));
            col.add_scalar_(1.0).unwrap(); // x[:, 0] += 1
            (x, col, row)
        });
        assert_eq!(
            base.to_f64_vec().unwrap(),
            vec![1., 1., 2., 4., 4., 5.],
            "{m}"
        );
        assert_eq!(col.to_f64_vec().unwrap(), vec![1., 4.], "{m}");
        assert_eq!(row.to_f64_vec().unwrap(), vec![4., 4., 5.], "{m}");
    }
}

#[test]
fn inplace_through_a_transpose_and_a_slice() {
    for m in MODES {
        let x = in_mode(m, || {
            let x = iota(&[2, 3]);
            x.t().unwrap().mul_scalar_(2.0).unwrap(); // x *= 2
                                                      // x[:, 1:3] (a view of a view of nothing else) -= 1 via a slice of the transpose.
            let xt = x.t().unwrap(); // [3, 2]
            let s = xt.slice(0, 1, 3, 1).unwrap(); // rows 1..3 of x.t() = columns 1..3 of x
            let ones = Tensor::full(DType::F32, &[2, 2], 1.0).unwrap();
            s.sub_(&ones).unwrap();
            x
        });
        assert_eq!(x.to_f64_vec().unwrap(), vec![0., 1., 3., 6., 7., 9.], "{m}");
    }
}

#[test]
fn a_view_reads_the_current_value_of_its_base() {
    for m in MODES {
        let v = in_mode(m, || {
            let x = iota(&[4]);
            let v = x.view(&[2, 2]).unwrap();
            x.add_scalar_(10.0).unwrap();
            v
        });
        assert_eq!(v.shape(), vec![2, 2]);
        assert_eq!(v.to_f64_vec().unwrap(), vec![10., 11., 12., 13.], "{m}");
    }
}

#[test]
fn copy_into_a_view_and_out_writes() {
    for m in MODES {
        let (x, out) = in_mode(m, || {
            let x = iota(&[3, 2]);
            let src = Tensor::from_f64(DType::F32, &[2], &[-1., -2.]).unwrap();
            x.select(0, 2).unwrap().copy_(&src).unwrap(); // x[2] = [-1, -2]
            let out = Tensor::zeros(DType::F32, &[3, 2]).unwrap();
            let r = add_out(&x, &x, &out).unwrap();
            assert!(r.shares_storage(&out));
            (x, out)
        });
        assert_eq!(
            x.to_f64_vec().unwrap(),
            vec![0., 1., 2., 3., -1., -2.],
            "{m}"
        );
        assert_eq!(
            out.to_f64_vec().unwrap(),
            vec![0., 2., 4., 6., -2., -4.],
            "{m}"
        );
    }
}

#[test]
fn inplace_on_a_plain_tensor_is_seen_by_its_aliases() {
    for m in MODES {
        let (a, b) = in_mode(m, || {
            let a = iota(&[3]);
            let b = a.clone(); // a handle: aliases, like `b = a` in Python
            let c = a.deep_clone().unwrap(); // torch's clone: its own storage
            a.mul_scalar_(3.0).unwrap();
            assert!(!c.shares_storage(&a));
            (b, c)
        });
        assert_eq!(a.to_f64_vec().unwrap(), vec![0., 3., 6.], "{m}");
        assert_eq!(b.to_f64_vec().unwrap(), vec![0., 1., 2.], "{m}");
    }
}

/// The one tensor result of `op`.
fn view_op(op: &str, args: Vec<ArgValue<Tensor>>) -> Result<Tensor> {
    match call(op, args, vec![])?.into_iter().next() {
        Some(Output::Tensor(t)) => Ok(t),
        _ => panic!("{op}: not a tensor"),
    }
}

#[test]
fn diagonal_as_strided_and_expand_views_alias_their_base() {
    use ArgValue as A;
    for m in MODES {
        let (x, d, a, y, e) = in_mode(m, || {
            let x = iota(&[3, 3]);
            let d = view_op(
                "diagonal",
                vec![(&x).into(), A::Int(0), A::Int(0), A::Int(1)],
            )
            .unwrap();
            assert!(d.is_view() && d.shares_storage(&x));
            d.add_scalar_(100.0).unwrap(); // x's diagonal += 100
                                           // Elements 1 and 5 of x's storage.
            let s = vec![
                (&x).into(),
                A::IntList(vec![2]),
                A::IntList(vec![4]),
                A::Int(1),
            ];
            let a = view_op("as_strided", s).unwrap();
            a.mul_scalar_(-1.0).unwrap();
            let y = iota(&[1, 3]);
            let e = view_op("expand", vec![(&y).into(), A::IntList(vec![2, 3])]).unwrap();
            y.add_scalar_(1.0).unwrap(); // seen through the expanded view
            (x, d, a, y, e)
        });
        let want_x = vec![100., -1., 2., 3., 104., -5., 6., 7., 108.];
        assert_eq!(x.to_f64_vec().unwrap(), want_x, "{m}");
        assert_eq!(d.to_f64_vec().unwrap(), vec![100., 104., 108.], "{m}");
        assert_eq!(a.to_f64_vec().unwrap(), vec![-1., -5.], "{m}");
        assert_eq!(e.to_f64_vec().unwrap(), vec![1., 2., 3., 1., 2., 3.], "{m}");
        // Writing through a broadcast makes several elements one: refused, as torch does.
        let err = in_mode(m, || e.add_scalar_(1.0).map(|_| ()).unwrap_err());
        assert!(
            err.to_string().contains("more than one element"),
            "{m}: {err}"
        );
        assert_eq!(y.to_f64_vec().unwrap(), vec![1., 2., 3.], "{m}");
    }
}
