//! Pointwise lowerings on the XLA CPU plugin, against values PyTorch gives (hand-checked).

mod common;

use common::*;

fn v(dtype: DType, v: &[f64]) -> A {
    t(dtype, &[v.len()], v)
}

/// The one tensor result of `op`: its dtype and values.
fn one(op: &str, args: Vec<A>, kwargs: Vec<(&str, A)>) -> (DType, Vec<f64>) {
    let out = run(op, args, kwargs).unwrap_or_else(|e| panic!("{op}: {e}"));
    match &out[0] {
        Output::Tensor(t) => (t.dtype(), t.to_f64_vec()),
        other => panic!("{op}: expected a tensor, got {other:?}"),
    }
}

fn err(op: &str, args: Vec<A>, kwargs: Vec<(&str, A)>) -> String {
    match run(op, args, kwargs) {
        Ok(o) => panic!("{op}: expected an error, got {o:?}"),
        Err(e) => e.to_string(),
    }
}

/// Equal, NaN equal to NaN, signed zeros distinguished.
fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (x.is_nan() && y.is_nan()) || (x == y && x.is_sign_negative() == y.is_sign_negative()) || (x - y).abs() <= 1e-6 * y.abs().max(1e-30)
        })
}

fn check(op: &str, args: Vec<A>, kwargs: Vec<(&str, A)>, dtype: DType, want: &[f64]) {
    let (d, got) = one(op, args, kwargs);
    assert_eq!(d, dtype, "{op}: dtype");
    assert!(same(&got, want), "{op}: got {got:?}, want {want:?}");
}

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;
use DType::*;

#[test]
fn arithmetic_promotes_and_wraps_scalars() {
    check("add.Scalar", vec![v(U8, &[3., 255.]), A::Int(300)], vec![], U8, &[47., 43.]);
    check("add.Tensor", vec![v(Bool, &[1., 0.]), v(Bool, &[0., 0.])], vec![], Bool, &[1., 0.]);
    check("add.Tensor", vec![v(U8, &[3., 255.]), v(U8, &[3., 255.])], vec![("alpha", A::Int(-1))], U8, &[0., 0.]);
    check("mul.Scalar", vec![v(Bool, &[1., 0.]), A::Int(2)], vec![], I64, &[2., 0.]);
    check("mul.Tensor", vec![v(Bool, &[1., 0.]), v(Bool, &[1., 1.])], vec![], Bool, &[1., 0.]);
    check("sub.Tensor", vec![v(F32, &[1., 2.]), t(I64, &[], &[3.])], vec![("alpha", A::Float(0.5))], F32, &[-0.5, 0.5]);
    let e = err("sub.Scalar", vec![v(F32, &[1.]), A::Bool(true)], vec![]);
    assert!(e.contains("with a bool tensor is not supported"), "{e}");
    let e = err("add.Tensor", vec![v(I64, &[1.]), v(I64, &[1.])], vec![("alpha", A::Float(0.5))]);
    assert!(e.contains("alpha must not be a floating point number"), "{e}");
    let e = err("add.Tensor", vec![v(I8, &[1.]), v(I8, &[1.])], vec![("alpha", A::Int(300))]);
    assert!(e.contains("value cannot be converted to type int8_t without overflow"), "{e}");
}

#[test]
fn division_modes() {
    let a = || v(F32, &[-3., 3., -0.0, 5.]);
    let b = || v(F32, &[2., -2., 3., 0.]);
    check("div.Tensor", vec![v(I64, &[3., -2.]), v(I64, &[2., 0.])], vec![], F32, &[1.5, -INF]);
    check("div.Tensor_mode", vec![a(), b()], vec![("rounding_mode", A::Str("floor".into()))], F32, &[-2., -2., -0.0, INF]);
    check("div.Tensor_mode", vec![a(), b()], vec![("rounding_mode", A::Str("trunc".into()))], F32, &[-1., -1., -0.0, INF]);
    check("div.Tensor_mode", vec![a(), b()], vec![("rounding_mode", A::None)], F32, &[-1.5, -1.5, -0.0, INF]);
    let ai = || v(I32, &[-7., 7., -6., 7.]);
    let bi = || v(I32, &[2., -2., 3., 7.]);
    check("div.Tensor_mode", vec![ai(), bi()], vec![("rounding_mode", A::Str("floor".into()))], I32, &[-4., -4., -2., 1.]);
    check("div.Tensor_mode", vec![ai(), bi()], vec![("rounding_mode", A::Str("trunc".into()))], I32, &[-3., -3., -2., 1.]);
    check("div.Scalar_mode", vec![v(I64, &[3., -2.]), A::Float(2.5)], vec![("rounding_mode", A::Str("floor".into()))], F32, &[1., -1.]);
    let e = err("div.Tensor_mode", vec![ai(), bi()], vec![("rounding_mode", A::Str("foo".into()))]);
    assert!(e.contains("rounding_mode to be one of None, 'trunc', or 'floor' but found 'foo'"), "{e}");
    let e = err("div.Tensor_mode", vec![v(Bool, &[1.]), v(Bool, &[1.])], vec![("rounding_mode", A::Str("trunc".into()))]);
    assert!(e.contains("\"div_trunc_cpu\" not implemented for 'Bool'"), "{e}");
}

/// f16 `div(.., rounding_mode="trunc")`: by a one-element divisor TensorIterator takes the f32
/// path (no rounding before the truncation); elementwise it rounds the quotient to f16 first.
/// The values are ones where the two differ (torch 2.15 CPU gave both lists).
#[test]
fn div_trunc_half_rounds_like_torch() {
    let a = || v(F16, &[23.796875, -39.09375, -17.]);
    let trunc = || vec![("rounding_mode", A::Str("trunc".into()))];
    let b1 = t(F16, &[1], &[1.7001953125]);
    check("div.Tensor_mode", vec![a(), b1], trunc(), F16, &[13., -22., -9.]);
    let b0 = t(F16, &[], &[1.7001953125]);
    check("div.Tensor_mode", vec![a(), b0], trunc(), F16, &[13., -22., -9.]);
    let b3 = v(F16, &[1.7001953125; 3]);
    check("div.Tensor_mode", vec![a(), b3], trunc(), F16, &[14., -23., -10.]);
}

#[test]
fn remainder_and_fmod_signs() {
    check(
        "remainder.Tensor",
        vec![v(F32, &[-3., 3., -0.0, 5., 1.]), v(F32, &[2., -2., 3., INF, -INF])],
        vec![],
        F32,
        &[1., -1., -0.0, 5., -INF],
    );
    check("remainder.Tensor", vec![v(I64, &[-7., 7., 6.]), v(I64, &[2., -2., 3.])], vec![], I64, &[1., -1., 0.]);
    check("remainder.Scalar", vec![v(I64, &[3., -2.]), A::Float(-2.5)], vec![], F32, &[-2., -2.]);
    check("fmod.Tensor", vec![v(I64, &[-7., 7.]), v(I64, &[2., -2.])], vec![], I64, &[-1., 1.]);
    check("fmod.Scalar", vec![v(F32, &[-7.5, 7.5]), A::Int(2)], vec![], F32, &[-1.5, 1.5]);
}

#[test]
fn pow_overloads() {
    check("pow.Tensor_Scalar", vec![v(I64, &[3., -2.]), A::Int(3)], vec![], I64, &[27., -8.]);
    check("pow.Tensor_Scalar", vec![v(I32, &[4., 2.]), A::Float(0.5)], vec![], F32, &[2., 2f64.sqrt()]);
    check("pow.Tensor_Scalar", vec![v(F32, &[NAN, 2.]), A::Int(0)], vec![], F32, &[1., 1.]);
    check(
        "pow.Tensor_Tensor",
        vec![v(I64, &[0., 2., 3., -1., 1., -2., 5., 2.]), v(I64, &[-1., -1., -2., -3., -4., -1., 0., 10.])],
        vec![],
        I64,
        &[0., 0., 0., -1., 1., 0., 1., 1024.],
    );
    check("pow.Tensor_Tensor", vec![v(I64, &[0., 2., -1.]), v(I64, &[64., 64., 65.])], vec![], I64, &[0., 0., -1.]);
    check("pow.Scalar", vec![A::Int(2), v(U8, &[1., 2.])], vec![], U8, &[2., 4.]);
    check("pow.Scalar", vec![A::Int(-2), v(U8, &[1., 2.])], vec![], U8, &[254., 4.]);
    check("pow.Scalar", vec![A::Float(2.5), v(I64, &[3., -2.])], vec![], F32, &[15.625, 0.16]);
    let e = err("pow.Tensor_Scalar", vec![v(I64, &[3.]), A::Int(-1)], vec![]);
    assert!(e.contains("Integers to negative integer powers are not allowed."), "{e}");
    let e = err("pow.Tensor_Tensor", vec![v(Bool, &[1.]), v(Bool, &[1.])], vec![]);
    assert!(e.contains("\"pow\" not implemented for 'Bool'"), "{e}");
    check("square", vec![v(Bool, &[1., 0.])], vec![], I64, &[1., 0.]);
}

#[test]
fn unary_math_and_rounding() {
    check("exp", vec![v(Bool, &[1., 0.])], vec![], F32, &[std::f64::consts::E, 1.]);
    check("exp2", vec![v(I64, &[3., -2.])], vec![], F32, &[8., 0.25]);
    check("log2", vec![v(F64, &[8., 0.5])], vec![], F64, &[3., -1.]);
    check("reciprocal", vec![v(I64, &[4., -2.])], vec![], F32, &[0.25, -0.5]);
    check("sqrt", vec![v(F16, &[4., 9.])], vec![], F16, &[2., 3.]);
    check("round", vec![v(F32, &[0.5, 1.5, 2.5, -0.5])], vec![], F32, &[0., 2., 2., -0.0]);
    check("trunc", vec![v(F32, &[-1.5, 1.5, -0.5])], vec![], F32, &[-1., 1., -0.0]);
    check("ceil", vec![v(I64, &[3., -2.])], vec![], I64, &[3., -2.]);
    check("sign", vec![v(F32, &[-2., -0.0, NAN, 3.])], vec![], F32, &[-1., 0., 0., 1.]);
    check("sign", vec![v(U8, &[0., 7.])], vec![], U8, &[0., 1.]);
    check("sign", vec![v(Bool, &[1., 0.])], vec![], Bool, &[1., 0.]);
    check("neg", vec![v(U8, &[3., 200.])], vec![], U8, &[253., 56.]);
    check("abs", vec![v(I8, &[-3., 4.])], vec![], I8, &[3., 4.]);
    check("isinf", vec![v(F16, &[1., INF, -INF, NAN])], vec![], Bool, &[0., 1., 1., 0.]);
    check("isnan", vec![v(F32, &[1., NAN])], vec![], Bool, &[0., 1.]);
    check("isnan", vec![v(I64, &[1., 2.])], vec![], Bool, &[0., 0.]);
    check("atan2", vec![v(I32, &[1.]), v(F64, &[1.])], vec![], F64, &[std::f64::consts::FRAC_PI_4]);
    let e = err("neg", vec![v(Bool, &[1.])], vec![]);
    assert!(e.contains("Negation, the `-` operator, on a bool tensor is not supported"), "{e}");
    let e = err("ceil", vec![v(Bool, &[1.])], vec![]);
    assert!(e.contains("not implemented for 'Bool'"), "{e}");
}

#[test]
fn comparisons_logic_bitwise() {
    check("eq.Scalar", vec![v(U8, &[3., 255.]), A::Int(-1)], vec![], Bool, &[0., 1.]);
    check("lt.Scalar", vec![v(Bool, &[1., 0.]), A::Float(0.5)], vec![], Bool, &[0., 1.]);
    check("ge.Tensor", vec![t(I64, &[2, 1], &[1., 3.]), v(F32, &[2., 1.])], vec![], Bool, &[0., 1., 1., 1.]);
    check("ne.Tensor", vec![v(F32, &[NAN, 1.]), v(F32, &[NAN, 1.])], vec![], Bool, &[1., 0.]);
    check("logical_xor", vec![v(Bool, &[1., 0.]), v(F32, &[NAN, 0.])], vec![], Bool, &[0., 0.]);
    check("logical_not", vec![v(F32, &[0., NAN])], vec![], Bool, &[1., 0.]);
    check("bitwise_and.Tensor", vec![v(Bool, &[1., 0.]), v(I64, &[3., -2.])], vec![], I64, &[1., 0.]);
    check("bitwise_xor.Scalar", vec![v(U8, &[3., 200.]), A::Int(-1)], vec![], U8, &[252., 55.]);
    check("bitwise_not", vec![v(Bool, &[1., 0.])], vec![], Bool, &[0., 1.]);
    let e = err("bitwise_or.Scalar", vec![v(I64, &[1.]), A::Float(2.5)], vec![]);
    assert!(e.contains("\"bitwise_or_cpu\" not implemented for 'Float'"), "{e}");
}

#[test]
fn max_min_clamp_where() {
    check("maximum", vec![v(F32, &[1.5, NAN]), v(F32, &[2., 0.])], vec![], F32, &[2., NAN]);
    check("minimum", vec![v(I64, &[3., -2.]), v(F32, &[1.5, NAN])], vec![], F32, &[1.5, NAN]);
    check("max.other", vec![v(Bool, &[1., 0.]), v(Bool, &[0., 0.])], vec![], Bool, &[1., 0.]);
    check("clamp", vec![v(I64, &[3., -2.]), A::Float(0.5)], vec![], F32, &[3., 0.5]);
    check("clamp", vec![v(I64, &[3., -2.]), A::Int(5), A::Int(2)], vec![], I64, &[2., 2.]);
    check("clamp", vec![v(F32, &[1.5, 0.]), A::Float(NAN)], vec![], F32, &[NAN, NAN]);
    check("clamp", vec![v(U8, &[3., 255.]), A::Int(-1)], vec![], U8, &[3., 255.]);
    check("clamp_min", vec![v(F32, &[NAN, -1.]), A::Int(0)], vec![], F32, &[NAN, 0.]);
    check("clamp_max", vec![v(I8, &[1., -128.]), A::Int(300)], vec![], I8, &[1., -128.]);
    let e = err("clamp_max", vec![v(U8, &[1.]), A::Int(-1)], vec![]);
    assert!(e.contains("Clamp max value -1 is outside the representable range of Byte"), "{e}");
    let e = err("clamp", vec![v(F32, &[1.])], vec![]);
    assert!(e.contains("At least one of 'min' or 'max' must not be None"), "{e}");
    check(
        "clamp.Tensor",
        vec![v(I64, &[3., -2.]), t(F32, &[], &[1.5])],
        vec![],
        F32,
        &[3., 1.5],
    );
    check(
        "clamp.Tensor",
        vec![v(F32, &[5., -5., 0.]), A::None, v(F32, &[1., 1., NAN])],
        vec![],
        F32,
        &[1., -5., NAN],
    );
    check("where.self", vec![v(Bool, &[1., 0.]), v(I64, &[3., -2.]), v(F32, &[1.5, NAN])], vec![], F32, &[3., NAN]);
    let e = err("where.self", vec![v(F32, &[1.]), v(I64, &[3.]), v(I64, &[3.])], vec![]);
    assert!(e.contains("where expected condition to be a boolean tensor, but got a tensor with dtype Float"), "{e}");
}

#[test]
fn fills_copies_and_items() {
    check("fill.Scalar", vec![v(I64, &[0., 0.]), A::Float(2.7)], vec![], I64, &[2., 2.]);
    check("fill.Scalar", vec![v(U8, &[0., 0.]), A::Int(-1)], vec![], U8, &[255., 255.]);
    let e = err("fill.Scalar", vec![v(F16, &[0.]), A::Float(1e6)], vec![]);
    assert!(e.contains("value cannot be converted to type c10::Half without overflow"), "{e}");
    check("masked_fill.Scalar", vec![v(F32, &[0., 0., 0.]), t(Bool, &[2, 1], &[1., 0.]), A::Float(1.5)], vec![], F32, &[1.5, 1.5, 1.5, 0., 0., 0.]);
    check("masked_fill.Tensor", vec![v(I64, &[3., -2.]), v(Bool, &[1., 0.]), t(F32, &[], &[2.5])], vec![], I64, &[2., -2.]);
    let e = err("masked_fill.Scalar", vec![v(I64, &[3.]), v(U8, &[1.]), A::Int(1)], vec![]);
    assert!(e.contains("only supports boolean masks, but got mask with dtype unsigned char"), "{e}");
    check("copy", vec![t(F32, &[2, 3], &[0.; 6]), v(I64, &[1., 2., 3.])], vec![], F32, &[1., 2., 3., 1., 2., 3.]);
    check("copy", vec![v(Bool, &[0., 0.]), v(F32, &[0.5, NAN])], vec![], Bool, &[1., 1.]);
    check("_to_copy", vec![v(F32, &[1.5, -1.5, 300.])], vec![("dtype", A::DType(U8))], U8, &[1., 255., 44.]);
    check("_to_copy", vec![v(F32, &[1.5])], vec![], F32, &[1.5]);
    check("clone", vec![v(I64, &[3., -2.])], vec![], I64, &[3., -2.]);
    check("scalar_tensor", vec![A::Int(3)], vec![], F32, &[3.]);
    check("scalar_tensor", vec![A::Float(3.5)], vec![("dtype", A::DType(I32))], I32, &[3.]);
    let out = run("_local_scalar_dense", vec![v(F32, &[2.5, 1.])], vec![]).unwrap();
    assert_eq!(out, vec![Output::Float(2.5)]);
    let out = run("_local_scalar_dense", vec![t(Bool, &[], &[1.])], vec![]).unwrap();
    assert_eq!(out, vec![Output::Bool(true)]);
    let e = err("_local_scalar_dense", vec![v(F32, &[])], vec![]);
    assert!(e.contains("Empty tensor not supported"), "{e}");
}

#[test]
fn activations() {
    check("relu", vec![v(I64, &[3., -2.])], vec![], I64, &[3., 0.]);
    check("relu", vec![v(F32, &[NAN, -1., 2.])], vec![], F32, &[NAN, 0., 2.]);
    check("hardtanh", vec![v(I64, &[3., -2.]), A::Float(-1.5), A::Float(2.5)], vec![], I64, &[2., -1.]);
    check("hardtanh", vec![v(U8, &[3., 255.])], vec![], U8, &[1., 1.]);
    check("leaky_relu", vec![v(F32, &[-2., 3.])], vec![], F32, &[-0.02, 3.]);
    check("elu", vec![v(F64, &[1.5, NAN]), A::Int(1), A::Int(2), A::Int(3)], vec![], F64, &[3., NAN]);
    check("softplus", vec![v(F32, &[10., 30.]), A::Int(2), A::Int(20)], vec![], F32, &[10., 30.]);
    check("threshold_backward", vec![v(I64, &[3., -2.]), v(F32, &[1.5, NAN]), A::Int(0)], vec![], F32, &[3., -2.]);
    check("threshold_backward", vec![v(U8, &[3., 255.]), v(U8, &[3., 255.]), A::Int(-1)], vec![], U8, &[0., 0.]);
    check("sigmoid_backward", vec![v(F32, &[1.5, NAN]), v(I64, &[3., -2.])], vec![], F32, &[-9., NAN]);
    check("gelu", vec![v(F64, &[0., 1.])], vec![], F64, &[0., 0.8413447460685429]);
    check("gelu", vec![v(F64, &[1.])], vec![("approximate", A::Str("tanh".into()))], F64, &[0.8411919906082768]);
    check("gelu_backward", vec![v(F32, &[1.5]), v(F64, &[1.5])], vec![], F64, &[1.6912037883449693]);
    let e = err("gelu", vec![v(I64, &[1.])], vec![]);
    assert!(e.contains("\"GeluKernelImpl\" not implemented for 'Long'"), "{e}");
    let e = err("relu", vec![v(Bool, &[1.])], vec![]);
    assert!(e.contains("Boolean inputs not supported for relu"), "{e}");
}

#[test]
fn addc_and_lerp() {
    check("addcmul", vec![v(I64, &[3., -2.]), v(I64, &[3., -2.]), v(I64, &[3., -2.])], vec![("value", A::Float(2.0))], I64, &[21., 6.]);
    check("addcdiv", vec![v(I64, &[3., -2.]), v(F32, &[1.5, 3.]), v(F32, &[1.5, 2.])], vec![], F32, &[4., -0.5]);
    let e = err("addcdiv", vec![v(F32, &[1.]), v(I64, &[1.]), v(I64, &[1.])], vec![]);
    assert!(e.contains("Integer division with addcdiv is no longer supported"), "{e}");
    check("lerp.Scalar", vec![v(F32, &[0., 10.]), v(F32, &[10., 20.]), A::Float(0.25)], vec![], F32, &[2.5, 12.5]);
    check("lerp.Tensor", vec![v(F32, &[0., 10.]), v(F32, &[10., 20.]), v(F32, &[0.75, 1.])], vec![], F32, &[7.5, 20.]);
    let e = err("lerp.Scalar", vec![v(F32, &[0.]), v(F64, &[1.]), A::Float(0.5)], vec![]);
    assert!(e.contains("expected dtype float for `end` but got dtype double"), "{e}");
}

#[test]
fn xla_quirks_and_half_precision_scalars() {
    // XLA rewrites convert(pred) * c as select(pred, c, 0): wrong for inf/NaN (and x / 0).
    check("mul.Scalar", vec![v(Bool, &[1., 0.]), A::Float(INF)], vec![], F32, &[INF, NAN]);
    check("div.Scalar", vec![v(Bool, &[1., 0.]), A::Float(0.0)], vec![], F32, &[INF, NAN]);
    // f16 with a number: the number stays f32 (PyTorch's opmath), 1e6 * 1e-3 is not inf.
    let (_, got) = one("mul.Scalar", vec![v(F16, &[0.001]), A::Float(1e6)], vec![]);
    assert!((got[0] - 1000.5).abs() < 1.0, "{got:?}");
    check("sinh", vec![v(F32, &[-0.0, 1e-4, -60., 89.])], vec![], F32, &[-0.0, 1.0000000016666667e-4, -5.710036949078421e25, 2.2448064095871728e38]);
    check("cosh", vec![v(F32, &[0., -60., INF])], vec![], F32, &[1., 5.710036949078421e25, INF]);
    // torch 2.15 on CPU: its vectorised f32 path gives NaN at +inf, its f64 path and a lone
    // f32 element give +inf.
    // +inf: torch's float64 answer (its vectorised f32 result depends on the CPU).
    check("gelu", vec![v(F32, &[f64::NEG_INFINITY, INF])], vec![], F32, &[NAN, INF]);
    check("gelu", vec![v(F32, &[INF])], vec![], F32, &[INF]);
    check("gelu", vec![v(F64, &[f64::NEG_INFINITY, INF])], vec![], F64, &[NAN, INF]);
    check("gelu", vec![v(F32, &[-1e30, -20.0])], vec![], F32, &[-0.0, -0.0]);
    check("pow.Tensor_Scalar", vec![v(Bool, &[1., 0.]), A::Bool(true)], vec![], Bool, &[1., 0.]);
    check("pow.Tensor_Scalar", vec![v(F16, &[f64::NEG_INFINITY]), A::Float(0.5)], vec![], F16, &[INF]);
    check("pow.Tensor_Scalar", vec![v(F32, &[f64::NEG_INFINITY]), A::Float(0.5)], vec![], F32, &[NAN]);
    check("where.self", vec![v(U8, &[1., 0.]), v(I64, &[3., -2.]), v(I64, &[5., 6.])], vec![], I64, &[3., 6.]);
    check("clamp.Tensor", vec![v(Bool, &[1., 0.]), v(Bool, &[0., 1.])], vec![], Bool, &[1., 1.]);
}
