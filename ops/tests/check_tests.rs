//! Device-side data checks (`tessera_ops::check`): indices out of range and integer division
//! by zero are errors with torch's messages (read from torch 2.x on the same inputs), in-range
//! calls give the same values as before, and `TESSERA_CHECK_INDICES=0` turns the checks off.

mod common;
use common::*;
use rand::{Rng, SeedableRng};

fn i64s(shape: &[usize], v: &[i64]) -> A {
    ArgValue::Tensor(HostTensor::from_f64(
        DType::I64,
        shape.to_vec(),
        &v.iter().map(|&i| i as f64).collect::<Vec<_>>(),
    ))
}

/// x = [[0, 1, 2], [3, 4, 5], ..., [12, 13, 14]] (f32 [5, 3]).
fn x53() -> A {
    let v: Vec<f64> = (0..15).map(f64::from).collect();
    t(DType::F32, &[5, 3], &v)
}

fn some(v: A) -> Option<HostTensor> {
    match v {
        ArgValue::Tensor(h) => Some(h),
        _ => None,
    }
}

/// The call fails with a `Checked` error naming `op` whose message is `message`.
fn fails(op: &str, args: Vec<A>, kwargs: Vec<(&str, A)>, message: &str) {
    let e = run(op, args, kwargs).expect_err(op);
    match &e {
        OpError::Checked {
            op: name,
            message: m,
        } => {
            assert!(op.contains(name.as_str()) || name.contains(op), "{e}");
            assert_eq!(m, message, "{e}");
        }
        other => panic!("{op}: expected a check failure, got {other}"),
    }
    assert!(e.to_string().contains(message), "{e}");
}

const OOB_0_5: &str = "index 10 is out of bounds for dimension 0 with size 5";

#[test]
fn row_gathers_refuse_out_of_range_indices() {
    for bad in [10, -1, 5] {
        fails(
            "index_select",
            vec![x53(), ArgValue::Int(0), i64s(&[2], &[0, bad])],
            vec![],
            "index out of range in self",
        );
        fails(
            "embedding",
            vec![x53(), i64s(&[2], &[0, bad])],
            vec![],
            "index out of range in self",
        );
    }
    // torch words index_select along dim 1 as its other kernel does.
    fails(
        "index_select",
        vec![x53(), ArgValue::Int(1), i64s(&[1], &[3])],
        vec![],
        "INDICES element is out of DATA bounds, id=3 axis_dim=3",
    );
    // 2**40 is not clamped either.
    fails(
        "embedding",
        vec![x53(), i64s(&[1], &[1 << 40])],
        vec![],
        "index out of range in self",
    );
    // A rank-0 index.
    fails(
        "index_select",
        vec![x53(), ArgValue::Int(0), i64s(&[], &[10])],
        vec![],
        "index out of range in self",
    );
}

#[test]
fn gather_and_scatters_name_the_index_dim_and_size() {
    let idx = i64s(&[2, 1], &[0, 10]);
    fails(
        "gather",
        vec![x53(), ArgValue::Int(0), idx.clone()],
        vec![],
        OOB_0_5,
    );
    fails(
        "scatter.value",
        vec![x53(), ArgValue::Int(0), idx.clone(), ArgValue::Float(1.0)],
        vec![],
        OOB_0_5,
    );
    fails(
        "scatter.src",
        vec![x53(), ArgValue::Int(0), idx.clone(), x53()],
        vec![],
        OOB_0_5,
    );
    fails(
        "scatter_add",
        vec![x53(), ArgValue::Int(0), idx.clone(), x53()],
        vec![],
        OOB_0_5,
    );
    fails(
        "scatter_reduce.two",
        vec![
            x53(),
            ArgValue::Int(0),
            idx,
            x53(),
            ArgValue::Str("sum".into()),
        ],
        vec![],
        OOB_0_5,
    );
    // Negative indices are out of bounds here (torch does not wrap them); along dim 1.
    fails(
        "gather",
        vec![x53(), ArgValue::Int(1), i64s(&[1, 1], &[-1])],
        vec![],
        "index -1 is out of bounds for dimension 1 with size 3",
    );
}

#[test]
fn index_add_and_index_copy_refuse_out_of_range_rows() {
    let src = t(DType::F32, &[2, 3], &[1.; 6]);
    fails(
        "index_add",
        vec![x53(), ArgValue::Int(0), i64s(&[2], &[0, 10]), src.clone()],
        vec![],
        OOB_0_5,
    );
    fails(
        "index_add",
        vec![x53(), ArgValue::Int(0), i64s(&[2], &[0, -1]), src.clone()],
        vec![],
        "index -1 is out of bounds for dimension 0 with size 5",
    );
    fails(
        "index_copy",
        vec![x53(), ArgValue::Int(0), i64s(&[2], &[0, 10]), src],
        vec![],
        "index_copy_(): index 10 is out of bounds for dimension 0 with size 5",
    );
}

#[test]
fn advanced_indexing_wraps_negatives_and_refuses_the_rest() {
    let idx = |v: Vec<Option<HostTensor>>| ArgValue::OptTensorList(v);
    // x[[0, -1]] is rows 0 and 4.
    let r = run(
        "index.Tensor",
        vec![x53(), idx(vec![some(i64s(&[2], &[0, -1]))])],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&r[0]), vec![0., 1., 2., 12., 13., 14.]);
    fails(
        "index.Tensor",
        vec![x53(), idx(vec![some(i64s(&[2], &[0, 10]))])],
        vec![],
        OOB_0_5,
    );
    fails(
        "index.Tensor",
        vec![x53(), idx(vec![some(i64s(&[2], &[0, -6]))])],
        vec![],
        "index -6 is out of bounds for dimension 0 with size 5",
    );
    // torch numbers the dimension among the index tensors given: x[:, [0, 3]] is "dimension 0".
    fails(
        "index.Tensor",
        vec![x53(), idx(vec![None, some(i64s(&[2], &[0, 3]))])],
        vec![],
        "index 3 is out of bounds for dimension 0 with size 3",
    );
    fails(
        "index.Tensor",
        vec![
            x53(),
            idx(vec![some(i64s(&[1], &[0])), some(i64s(&[1], &[3]))]),
        ],
        vec![],
        "index 3 is out of bounds for dimension 1 with size 3",
    );
    let one = t(DType::F32, &[], &[1.]);
    fails(
        "index_put",
        vec![x53(), idx(vec![some(i64s(&[2], &[0, 10]))]), one.clone()],
        vec![],
        OOB_0_5,
    );
    let r = run(
        "index_put",
        vec![x53(), idx(vec![some(i64s(&[1], &[-1]))]), one],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&r[0])[12..], [1., 1., 1.]);
}

#[test]
fn take_and_index_fill_wrap_negatives() {
    let r = run("take", vec![x53(), i64s(&[2], &[0, -1])], vec![]).unwrap();
    assert_eq!(values(&r[0]), vec![0., 14.]);
    for bad in [15, -16] {
        fails(
            "take",
            vec![x53(), i64s(&[2], &[0, bad])],
            vec![],
            &format!("out of range: tried to access index {bad} on a tensor of 15 elements."),
        );
    }
    let r = run(
        "index_fill.int_Scalar",
        vec![
            x53(),
            ArgValue::Int(1),
            i64s(&[1], &[-1]),
            ArgValue::Float(9.),
        ],
        vec![],
    )
    .unwrap();
    assert_eq!(values(&r[0])[..3], [0., 1., 9.]);
    fails(
        "index_fill.int_Scalar",
        vec![
            x53(),
            ArgValue::Int(1),
            i64s(&[1], &[-4]),
            ArgValue::Float(9.),
        ],
        vec![],
        "index -4 is out of bounds for dimension 1 with size 3",
    );
}

#[test]
fn losses_refuse_targets_out_of_range_but_not_the_ignored_index() {
    let target = |v: &[i64]| i64s(&[5], v);
    let none = ArgValue::None;
    // nll_loss(self, target, weight None, reduction mean, ignore_index).
    let nll = |v: &[i64], ignore: i64| {
        vec![
            x53(),
            target(v),
            ArgValue::None,
            ArgValue::Int(1),
            ArgValue::Int(ignore),
        ]
    };
    for op in ["nll_loss_forward", "nll_loss"] {
        fails(
            op,
            nll(&[0, 7, 1, 1, 1], -100),
            vec![],
            "Target 7 is out of bounds.",
        );
        fails(
            op,
            nll(&[0, -1, 1, 1, 1], -100),
            vec![],
            "Target -1 is out of bounds.",
        );
        run(op, nll(&[0, -100, 1, 1, 1], -100), vec![]).unwrap();
        // An ignored index out of range is fine too.
        run(op, nll(&[0, 9, 1, 1, 1], 9), vec![]).unwrap();
    }
    let g = t(DType::F32, &[], &[1.]);
    fails(
        "nll_loss_backward",
        vec![
            g.clone(),
            x53(),
            target(&[0, 7, 1, 1, 1]),
            none.clone(),
            ArgValue::Int(1),
            ArgValue::Int(-100),
            g,
        ],
        vec![],
        "Target 7 is out of bounds.",
    );
    fails(
        "cross_entropy_loss",
        vec![x53(), target(&[0, 7, 1, 1, 1])],
        vec![],
        "Target 7 is out of bounds.",
    );
    let x4 = t(DType::F32, &[1, 3, 2, 2], &[0.5; 12]);
    fails(
        "nll_loss2d_forward",
        vec![
            x4,
            i64s(&[1, 2, 2], &[0, 1, 2, 3]),
            none,
            ArgValue::Int(1),
            ArgValue::Int(-100),
        ],
        vec![],
        "Target 3 is out of bounds.",
    );
}

#[test]
fn embedding_bag_and_one_hot_refuse_out_of_range_values() {
    fails(
        "_embedding_bag",
        vec![x53(), i64s(&[2], &[0, 10]), i64s(&[1], &[0])],
        vec![],
        "Index 1 of input takes value 10 which is not in the valid range [0, 5)",
    );
    fails(
        "one_hot",
        vec![i64s(&[2], &[0, 5]), ArgValue::Int(3)],
        vec![],
        "Class values must be smaller than num_classes.",
    );
    fails(
        "one_hot",
        vec![i64s(&[2], &[0, -1]), ArgValue::Int(3)],
        vec![],
        "Class values must be non-negative.",
    );
}

#[test]
fn integer_division_by_zero_is_an_error() {
    let a = i64s(&[2], &[1, 2]);
    let b = i64s(&[2], &[1, 0]);
    for mode in ["floor", "trunc"] {
        fails(
            "div.Tensor_mode",
            vec![a.clone(), b.clone()],
            vec![("rounding_mode", ArgValue::Str(mode.into()))],
            "ZeroDivisionError",
        );
    }
    fails(
        "floor_divide",
        vec![a.clone(), b.clone()],
        vec![],
        "ZeroDivisionError",
    );
    fails(
        "remainder.Tensor",
        vec![a.clone(), b.clone()],
        vec![],
        "ZeroDivisionError",
    );
    fails(
        "fmod.Tensor",
        vec![a.clone(), b.clone()],
        vec![],
        "ZeroDivisionError",
    );
    fails(
        "remainder.Scalar",
        vec![a.clone(), ArgValue::Int(0)],
        vec![],
        "ZeroDivisionError",
    );
    let u8s = |v: &[f64]| t(DType::U8, &[2], v);
    fails(
        "div.Tensor_mode",
        vec![u8s(&[1., 2.]), u8s(&[0., 1.])],
        vec![("rounding_mode", ArgValue::Str("floor".into()))],
        "ZeroDivisionError",
    );
    // True division and floats divide by zero as IEEE says.
    let r = run("div.Tensor", vec![a.clone(), b.clone()], vec![]).unwrap();
    assert_eq!(values(&r[0]), vec![1., f64::INFINITY]);
    let f = t(DType::F32, &[2], &[1., 0.]);
    let r = run(
        "fmod.Tensor",
        vec![t(DType::F32, &[2], &[1., 2.]), f],
        vec![],
    )
    .unwrap();
    assert!(values(&r[0])[1].is_nan());
    // Nonzero divisors: the values are torch's.
    let r = run(
        "div.Tensor_mode",
        vec![i64s(&[2], &[-7, 7]), i64s(&[2], &[2, -2])],
        vec![("rounding_mode", ArgValue::Str("floor".into()))],
    )
    .unwrap();
    assert_eq!(values(&r[0]), vec![-4., -4.]);
}

/// In-range calls are unchanged by the checks: seeded random indices against host gathers.
#[test]
fn in_range_random_indices_give_the_host_reference() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    for _ in 0..8 {
        let (n, d, k) = (
            rng.gen_range(1..9usize),
            rng.gen_range(1..5usize),
            rng.gen_range(0..12usize),
        );
        let xv: Vec<f64> = (0..n * d)
            .map(|_| rng.gen_range(-4.0..4.0f64).round())
            .collect();
        let x = t(DType::F32, &[n, d], &xv);
        let iv: Vec<i64> = (0..k).map(|_| rng.gen_range(0..n as i64)).collect();
        let want: Vec<f64> = iv
            .iter()
            .flat_map(|&i| xv[i as usize * d..(i as usize + 1) * d].to_vec())
            .collect();
        let r = run(
            "index_select",
            vec![x.clone(), ArgValue::Int(0), i64s(&[k], &iv)],
            vec![],
        )
        .unwrap();
        assert_eq!(values(&r[0]), want);
        let r = run("embedding", vec![x.clone(), i64s(&[k], &iv)], vec![]).unwrap();
        assert_eq!(values(&r[0]), want);
        // Negative indices wrap in index.Tensor: i - n is the same row.
        let neg: Vec<i64> = iv.iter().map(|&i| i - n as i64).collect();
        let r = run(
            "index.Tensor",
            vec![x, ArgValue::OptTensorList(vec![some(i64s(&[k], &neg))])],
            vec![],
        )
        .unwrap();
        assert_eq!(values(&r[0]), want);
    }
}

/// With `TESSERA_CHECK_INDICES=0` (read once per process: so in a child process) an
/// out-of-range index is not checked: the module has no check outputs.
#[test]
fn checks_off_by_env_in_a_child_process() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_without_checks",
            "--nocapture",
        ])
        .env("TESSERA_CHECK_INDICES", "0")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

#[test]
#[ignore = "run by checks_off_by_env_in_a_child_process with TESSERA_CHECK_INDICES=0"]
fn child_without_checks() {
    assert_eq!(std::env::var("TESSERA_CHECK_INDICES").as_deref(), Ok("0"));
    let r = call(
        "index_select",
        vec![x53(), ArgValue::Int(0), i64s(&[2], &[0, 10])],
        vec![],
        &Device::cpu().unwrap(),
        CallOptions::default(),
    )
    .unwrap();
    assert!(
        !r.module.unwrap().contains("reduce"),
        "no check was emitted"
    );
    let with = t(DType::F32, &[5, 3], &[0.; 15]);
    assert!(run(
        "index_select",
        vec![with, ArgValue::Int(0), i64s(&[1], &[1])],
        vec![]
    )
    .is_ok());
}

#[test]
fn numbers_for_tensor_arguments_only_where_torch_takes_them() {
    let e = run(
        "pow.Tensor_Scalar",
        vec![ArgValue::Float(1.5), ArgValue::Int(2)],
        vec![],
    )
    .unwrap_err();
    assert!(matches!(e, OpError::BadArgs { .. }), "{e}");
    assert!(
        e.to_string().contains(
            "Expected a value of type 'Tensor' for argument 'self' but instead found type 'float'."
        ),
        "{e}"
    );
    let e = run("clamp.Tensor", vec![x53(), ArgValue::Float(0.0)], vec![]).unwrap_err();
    assert!(
        e.to_string()
            .contains("type 'Optional[Tensor]' for argument 'min'"),
        "{e}"
    );
    // add/sub/mul/div (and their in-place forms) take numbers, as in torch.
    let r = run("add.Tensor", vec![ArgValue::Float(1.5), x53()], vec![]).unwrap();
    assert_eq!(values(&r[0])[..2], [1.5, 2.5]);
    assert!(run("mul.Tensor", vec![x53(), ArgValue::Int(2)], vec![]).is_ok());
}

/// Argument checks torch makes (OpInfo `error_inputs` that Tessera accepted).
#[test]
fn argument_checks_follow_torch() {
    let z = |shape: &[usize]| t(DType::F32, shape, &vec![0.; shape.iter().product()]);
    let err = |op: &str, args: Vec<A>, kwargs: Vec<(&str, A)>, want: &str| {
        let e = run(op, args, kwargs).expect_err(op).to_string();
        assert!(e.contains(want) && e.contains(op), "{e}");
    };
    err(
        "group_norm",
        vec![z(&[2, 0, 3]), ArgValue::Int(1)],
        vec![],
        "Expected number of channels to be greater than 0, got 0",
    );
    err(
        "group_norm",
        vec![z(&[2, 4, 0]), ArgValue::Int(2)],
        vec![],
        "Expected HxW to be greater than 0, got 0",
    );
    err(
        "linalg_cross",
        vec![z(&[5, 3]), z(&[5, 1])],
        vec![],
        "linalg.cross: inputs dimension -1 must have length 3. Got 3 and 1",
    );
    let u8mask = t(DType::U8, &[1, 3], &[1.; 3]);
    err(
        "masked_scatter",
        vec![z(&[1, 3]), u8mask, z(&[3, 4])],
        vec![],
        "masked_scatter_ only supports boolean masks, but got mask with dtype Byte",
    );
    err(
        "amax",
        vec![z(&[1; 65]), ints(&[-1])],
        vec![],
        "only tensors with up to 64 dims are supported",
    );
    // Without named dims a 65-dim reduction is fine, as in torch.
    assert!(run("amax", vec![z(&[1; 65]), ints(&[])], vec![]).is_ok());
    let f64out = || ArgValue::Tensor(HostTensor::zeros(DType::F64, vec![3]));
    err("amax.out", vec![x53(), ints(&[0])], vec![("out", f64out())], "Expected the dtype for input and out to match, but got Float for input's dtype and Double for out's dtype.");
    err(
        "gather.out",
        vec![x53(), ArgValue::Int(1), i64s(&[5, 3], &[0; 15])],
        vec![(
            "out",
            ArgValue::Tensor(HostTensor::zeros(DType::F64, vec![5, 3])),
        )],
        "Expected out tensor to have dtype float, but got double instead",
    );
    // Casting out= overloads still cast (add.out into f64).
    let r = call(
        "add.out",
        vec![x53(), x53()],
        vec![(
            "out".into(),
            ArgValue::Tensor(HostTensor::zeros(DType::F64, vec![5, 3])),
        )],
        &Device::cpu().unwrap(),
        CallOptions::default(),
    );
    assert!(r.is_ok(), "{r:?}");
    err(
        "max_pool2d_with_indices",
        vec![
            z(&[1, 1, 4, 4]),
            ints(&[2, 2]),
            ints(&[2, 2]),
            ints(&[2, 2]),
        ],
        vec![],
        "pad should be at most half of effective kernel size",
    );
}
