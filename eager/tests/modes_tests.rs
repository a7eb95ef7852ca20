//! The same programs in every mode give the same values, matching float64 references and
//! the host path (`tessera_ops::call`, itself verified against torch).

mod common;
use common::*;

fn run_program(x: &Tensor, w: &Tensor) -> Vec<f64> {
    let h = x.matmul(w).unwrap();
    let h = h.add_scalar(0.5).unwrap().mul_scalar(2.0).unwrap();
    let h = h.gelu("tanh").unwrap().softmax(-1).unwrap();
    let s = h.sum_dim(&[0], false).unwrap();
    s.to_f64_vec().unwrap()
}

#[test]
fn a_small_program_agrees_in_every_mode() {
    let xh = host(1, &[4, 8]);
    let wh = host(2, &[8, 6]);
    let expected = {
        // The host path, op by op.
        use tessera_ops::ArgValue as A;
        let h = host_call("matmul", vec![A::Tensor(xh.clone()), A::Tensor(wh.clone())]);
        let h = host_call("add.Tensor", vec![A::Tensor(h), A::Float(0.5)]);
        let h = host_call("mul.Tensor", vec![A::Tensor(h), A::Float(2.0)]);
        let dev = tessera_runtime::Device::cpu().unwrap();
        let r = tessera_ops::call(
            "gelu",
            vec![A::Tensor(h)],
            vec![("approximate".into(), A::Str("tanh".into()))],
            &dev,
            Default::default(),
        )
        .unwrap();
        let tessera_ops::Output::Tensor(h) = &r.outputs[0] else {
            panic!()
        };
        let h = host_call("softmax.int", vec![A::Tensor(h.clone()), A::Int(-1)]);
        let h = host_call("sum.dim_IntList", vec![A::Tensor(h), A::IntList(vec![0])]);
        h.to_f64_vec()
    };
    let (x, w) = (dev(&xh), dev(&wh));
    for m in MODES {
        let got = in_mode(m, || run_program(&x, &w));
        assert!(
            max_err(&got, &expected) < 1e-6,
            "{m}: {got:?} vs {expected:?}"
        );
    }
    // Softmax rows sum to 1: the column sums add up to the row count.
    assert!((expected.iter().sum::<f64>() - 4.0).abs() < 1e-5);
}
