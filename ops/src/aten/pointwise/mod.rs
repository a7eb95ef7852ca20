//! Pointwise ops: promotion and broadcasting as PyTorch does them.
//!
//! - [`common`]: operands, constants (wrapping / overflow-checked as PyTorch converts numbers),
//!   promotion, compute dtypes (f16/bf16 compute in f32), NaN-propagating max/min, casts.
//! - [`arith`]: add, sub, mul, div, remainder, fmod, neg, reciprocal, square, addcmul,
//!   addcdiv, lerp.
//! - [`pow`]: the three `pow` overloads.
//! - [`math`]: float functions, abs, sign, rounding, atan2, isnan, isinf.
//! - [`compare`]: comparisons, maximum/minimum, clamp, where, logical and bitwise ops.
//! - [`activation`]: relu, gelu, elu, hardtanh, ... and pointwise backward ops.
//! - [`activation_grad`]: the other activation backward ops, shrink, log-sigmoid, logit, prelu.
//! - [`special`]: logaddexp, hypot, xlogy, copysign, nan_to_num, fmax/fmin, shifts, ...
//! - [`misc`]: fill, masked_fill, copy, clone, _to_copy, alias, scalar_tensor,
//!   _local_scalar_dense.

mod activation;
mod activation_grad;
mod arith;
pub(crate) mod common;
mod compare;
mod math;
mod misc;
mod pow;
mod special;

use crate::lower::Lowering;
use crate::lowerings;
use math::Rounding;
use tessera_lowering::stablehlo::{BinaryOp, Comparison, UnaryOp};

#[allow(unused_imports)]
pub(super) use common::operand;
#[allow(unused_imports)]
pub(super) use math::float_unary;

pub(super) const LOWERINGS: &[Lowering] = lowerings![
    // arith
    ("remainder.Tensor", arith::remainder),
    ("remainder.Scalar", arith::remainder),
    ("fmod.Tensor", arith::fmod),
    ("fmod.Scalar", arith::fmod),
    ("pow.Tensor_Tensor", pow::pow),
    ("pow.Tensor_Scalar", pow::pow),
    ("pow.Scalar", pow::pow),
    ("reciprocal", arith::reciprocal),
    ("square", arith::square),
    ("addcmul", |cx, a| arith::addc(cx, a, false)),
    ("addcdiv", |cx, a| arith::addc(cx, a, true)),
    ("lerp.Scalar", arith::lerp),
    ("lerp.Tensor", arith::lerp),
    // math
    ("acos", |cx, a| math::float_unary(cx, a, UnaryOp::Acos)),
    ("acosh", |cx, a| math::float_unary(cx, a, UnaryOp::Acosh)),
    ("asin", |cx, a| math::float_unary(cx, a, UnaryOp::Asin)),
    ("asinh", |cx, a| math::float_unary(cx, a, UnaryOp::Asinh)),
    ("atan", |cx, a| math::float_unary(cx, a, UnaryOp::Atan)),
    ("atanh", |cx, a| math::float_unary(cx, a, UnaryOp::Atanh)),
    ("cosh", math::cosh),
    ("sinh", math::sinh),
    ("erf", |cx, a| math::float_unary(cx, a, UnaryOp::Erf)),
    ("erfinv", |cx, a| math::float_unary(cx, a, UnaryOp::ErfInv)),
    ("exp2", math::exp2),
    ("sign", math::sign),
    ("ceil", |cx, a| math::rounding(cx, a, Rounding::Ceil)),
    ("floor", |cx, a| math::rounding(cx, a, Rounding::Floor)),
    ("trunc", |cx, a| math::rounding(cx, a, Rounding::Trunc)),
    ("round", |cx, a| math::rounding(cx, a, Rounding::Round)),
    ("atan2", math::atan2),
    ("isnan", math::isnan_op),
    ("isinf", math::isinf),
    // compare
    ("eq.Tensor", |cx, a| compare::compare(cx, a, Comparison::Eq)),
    ("eq.Scalar", |cx, a| compare::compare(cx, a, Comparison::Eq)),
    ("ne.Tensor", |cx, a| compare::compare(cx, a, Comparison::Ne)),
    ("ne.Scalar", |cx, a| compare::compare(cx, a, Comparison::Ne)),
    ("lt.Tensor", |cx, a| compare::compare(cx, a, Comparison::Lt)),
    ("lt.Scalar", |cx, a| compare::compare(cx, a, Comparison::Lt)),
    ("le.Tensor", |cx, a| compare::compare(cx, a, Comparison::Le)),
    ("le.Scalar", |cx, a| compare::compare(cx, a, Comparison::Le)),
    ("gt.Tensor", |cx, a| compare::compare(cx, a, Comparison::Gt)),
    ("gt.Scalar", |cx, a| compare::compare(cx, a, Comparison::Gt)),
    ("ge.Tensor", |cx, a| compare::compare(cx, a, Comparison::Ge)),
    ("ge.Scalar", |cx, a| compare::compare(cx, a, Comparison::Ge)),
    ("maximum", |cx, a| compare::max_min(cx, a, true)),
    ("minimum", |cx, a| compare::max_min(cx, a, false)),
    ("max.other", |cx, a| compare::max_min(cx, a, true)),
    ("min.other", |cx, a| compare::max_min(cx, a, false)),
    ("clamp", compare::clamp),
    ("clamp.Tensor", compare::clamp_tensor),
    ("clamp_min", compare::clamp_min),
    ("clamp_max", compare::clamp_max),
    ("logical_and", |cx, a| compare::logical(cx, a, BinaryOp::And)),
    ("logical_or", |cx, a| compare::logical(cx, a, BinaryOp::Or)),
    ("logical_xor", |cx, a| compare::logical(cx, a, BinaryOp::Xor)),
    ("logical_not", compare::logical_not),
    ("bitwise_and.Tensor", |cx, a| compare::bitwise(cx, a, BinaryOp::And)),
    ("bitwise_and.Scalar", |cx, a| compare::bitwise(cx, a, BinaryOp::And)),
    ("bitwise_or.Tensor", |cx, a| compare::bitwise(cx, a, BinaryOp::Or)),
    ("bitwise_or.Scalar", |cx, a| compare::bitwise(cx, a, BinaryOp::Or)),
    ("bitwise_xor.Tensor", |cx, a| compare::bitwise(cx, a, BinaryOp::Xor)),
    ("bitwise_xor.Scalar", |cx, a| compare::bitwise(cx, a, BinaryOp::Xor)),
    ("bitwise_not", compare::bitwise_not),
    // activation
    ("relu", activation::relu),
    ("gelu", activation::gelu),
    ("gelu_backward", activation::gelu_backward),
    ("elu", activation::elu),
    ("hardtanh", activation::hardtanh),
    ("leaky_relu", activation::leaky_relu),
    ("silu", activation::silu),
    ("hardswish", activation::hardswish),
    ("hardsigmoid", activation::hardsigmoid),
    ("mish", activation::mish),
    ("softplus", activation::softplus),
    ("threshold_backward", activation::threshold_backward),
    ("sigmoid_backward", activation::sigmoid_backward),
    ("tanh_backward", activation::tanh_backward),
    ("relu6", activation::relu6),
    ("celu", activation::celu),
    ("selu", activation::selu),
    ("glu", activation::glu),
    ("glu_backward", activation::glu_backward),
    // activation_grad
    ("hardswish_backward", activation_grad::hardswish_backward),
    ("hardsigmoid_backward", activation_grad::hardsigmoid_backward),
    ("silu_backward", activation_grad::silu_backward),
    ("mish_backward", activation_grad::mish_backward),
    ("leaky_relu_backward", activation_grad::leaky_relu_backward),
    ("elu_backward", activation_grad::elu_backward),
    ("softplus_backward", activation_grad::softplus_backward),
    ("hardtanh_backward", activation_grad::hardtanh_backward),
    ("log_sigmoid_forward", activation_grad::log_sigmoid_forward),
    ("log_sigmoid_backward", activation_grad::log_sigmoid_backward),
    ("softshrink", activation_grad::softshrink),
    ("softshrink_backward", activation_grad::shrink_backward),
    ("hardshrink", activation_grad::hardshrink),
    ("hardshrink_backward", activation_grad::shrink_backward),
    ("logit", activation_grad::logit),
    ("logit_backward", activation_grad::logit_backward),
    ("_prelu_kernel", activation_grad::prelu_kernel),
    ("_prelu_kernel_backward", activation_grad::prelu_kernel_backward),
    ("native_dropout_backward", activation_grad::native_dropout_backward),
    // special
    ("logaddexp", |cx, a| special::logaddexp(cx, a, false)),
    ("logaddexp2", |cx, a| special::logaddexp(cx, a, true)),
    ("hypot", special::hypot),
    ("xlogy.Tensor", special::xlogy),
    ("xlogy.Scalar_Self", special::xlogy),
    ("xlogy.Scalar_Other", special::xlogy),
    ("frac", special::frac),
    ("deg2rad", |cx, a| special::scale_float(cx, a, std::f64::consts::PI / 180.0)),
    ("rad2deg", |cx, a| special::scale_float(cx, a, 180.0 / std::f64::consts::PI)),
    ("sinc", special::sinc),
    ("nan_to_num", special::nan_to_num),
    ("signbit", special::signbit),
    ("copysign.Tensor", special::copysign),
    ("copysign.Scalar", special::copysign),
    ("fmax", |cx, a| special::fmax_fmin(cx, a, true)),
    ("fmin", |cx, a| special::fmax_fmin(cx, a, false)),
    ("heaviside", special::heaviside),
    ("positive", special::positive),
    ("isfinite", special::isfinite),
    ("isposinf", |cx, a| special::is_inf_signed(cx, a, true)),
    ("isneginf", |cx, a| special::is_inf_signed(cx, a, false)),
    ("float_power.Tensor_Tensor", special::float_power),
    ("float_power.Tensor_Scalar", special::float_power),
    ("float_power.Scalar", special::float_power),
    ("bitwise_left_shift.Tensor", |cx, a| special::shift(cx, a, true)),
    ("bitwise_left_shift.Tensor_Scalar", |cx, a| special::shift(cx, a, true)),
    ("bitwise_left_shift.Scalar_Tensor", |cx, a| special::shift(cx, a, true)),
    ("bitwise_right_shift.Tensor", |cx, a| special::shift(cx, a, false)),
    ("bitwise_right_shift.Tensor_Scalar", |cx, a| special::shift(cx, a, false)),
    ("bitwise_right_shift.Scalar_Tensor", |cx, a| special::shift(cx, a, false)),
    ("erfc", |cx, a| math::float_unary(cx, a, UnaryOp::Erfc)),
    ("special_ndtr", special::ndtr),
    ("special_ndtri", special::ndtri),
    ("special_entr", special::entr),
    ("special_xlog1py", special::xlog1py),
    ("special_xlog1py.other_scalar", special::xlog1py),
    ("special_xlog1py.self_scalar", special::xlog1py),
    ("isclose", special::isclose),
    ("clip", compare::clamp),
    ("clip.Tensor", compare::clamp_tensor),
    ("floor_divide", arith::floor_divide),
    ("floor_divide.Scalar", arith::floor_divide),
    // misc
    ("masked_fill.Scalar", misc::masked_fill),
    ("masked_fill.Tensor", misc::masked_fill),
    ("_local_scalar_dense", misc::local_scalar_dense),
];

/// The lowerings that also take complex tensors (c64, c128): arithmetic, `abs` (the modulus,
/// real), `sgn` (`x / |x|`), `exp`, `expm1`, `log` (`log1p`, `log2`, `log10`), `sqrt`,
/// `rsqrt`, `sin`, `cos`, `tan`, `tanh`, `sigmoid` (StableHLO's complex functions, principal
/// branches as in PyTorch), `where`, and the copies and casts (complex to real keeps the real
/// part, as PyTorch's casts do). The rounding modes of `div` refuse complex as PyTorch's
/// kernels do.
pub(super) const COMPLEX_LOWERINGS: &[Lowering] = lowerings![complex:
    ("add.Tensor", |cx, a| arith::add_sub(cx, a, false)),
    ("add.Scalar", |cx, a| arith::add_sub(cx, a, false)),
    ("sub.Tensor", |cx, a| arith::add_sub(cx, a, true)),
    ("sub.Scalar", |cx, a| arith::add_sub(cx, a, true)),
    ("mul.Tensor", arith::mul),
    ("mul.Scalar", arith::mul),
    ("div.Tensor", arith::div),
    ("div.Scalar", arith::div),
    ("div.Tensor_mode", arith::div),
    ("div.Scalar_mode", arith::div),
    ("true_divide.Tensor", arith::div),
    ("true_divide.Scalar", arith::div),
    ("rsub.Tensor", arith::rsub),
    ("rsub.Scalar", arith::rsub),
    ("neg", arith::neg),
    ("abs", math::abs),
    ("sgn", math::sgn),
    ("exp", |cx, a| math::float_unary(cx, a, UnaryOp::Exponential)),
    ("cos", |cx, a| math::float_unary(cx, a, UnaryOp::Cosine)),
    ("sin", |cx, a| math::float_unary(cx, a, UnaryOp::Sine)),
    ("tan", |cx, a| math::float_unary(cx, a, UnaryOp::Tan)),
    ("tanh", |cx, a| math::float_unary(cx, a, UnaryOp::Tanh)),
    ("log", |cx, a| math::float_unary(cx, a, UnaryOp::Log)),
    ("sqrt", |cx, a| math::float_unary(cx, a, UnaryOp::Sqrt)),
    ("rsqrt", |cx, a| math::float_unary(cx, a, UnaryOp::Rsqrt)),
    ("sigmoid", |cx, a| math::float_unary(cx, a, UnaryOp::Logistic)),
    ("log2", |cx, a| math::log_base(cx, a, 2.0)),
    ("log10", |cx, a| math::log_base(cx, a, 10.0)),
    ("expm1", |cx, a| math::float_unary(cx, a, UnaryOp::ExponentialMinusOne)),
    ("log1p", |cx, a| math::float_unary(cx, a, UnaryOp::LogPlusOne)),
    ("fill.Scalar", misc::fill),
    ("copy", misc::copy),
    ("clone", misc::identity),
    ("_to_copy", misc::to_copy),
    ("scalar_tensor", misc::scalar_tensor),
    ("where.self", compare::where_self),
];
