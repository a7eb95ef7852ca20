"""Generated samples: the pointwise ops of `pointwise/special.rs` and the activations OpInfo
does not reach (celu, selu, relu6, shrinks, log_sigmoid), and the Scalar overloads OpInfo
only reaches through their Tensor forms (rsub, floor_divide, true_divide, xlogy,
float_power, bit shifts)."""

import torch

from samples_pointwise import _DIV, ALL, FLOATS, INTS, _binary, _float_unary_act, _scalar, _unary, pairs, vals

_NONBOOL = [d for d in ALL if d != torch.bool]


def _scalar_self(scalars, dtypes=ALL, nonzero=False):
    """(number, tensor) samples: the Scalar_Tensor / Scalar_Self overloads."""
    def gen():
        return [((s, vals(d, nonzero=nonzero)), {}) for d in dtypes for s in scalars]
    return gen


def _shift_tensor():
    out = []
    for d in INTS:
        bits = torch.iinfo(d).bits
        a, b = pairs(vals(d), torch.tensor([0, 1, 3, bits - 1, bits, bits + 3], dtype=torch.int64).clamp(max=torch.iinfo(d).max).to(d))
        out.append(((a, b), {}))
        if torch.iinfo(d).min < 0:
            out.append(((vals(d), torch.full_like(vals(d), -1)), {}))
    return out


def _celu():
    out = []
    for d in FLOATS:
        x = torch.cat([vals(d), torch.linspace(-8, 8, 17, dtype=torch.float64).to(d)])
        out.append(((x,), {}))
        out.append(((x, 0.5), {}))
        out.append(((x, 2.0), {}))
    return out


def _lambd(values=(0.5, 0.0, 2.0)):
    def gen():
        out = []
        for d in FLOATS:
            x = torch.cat([vals(d), torch.linspace(-3, 3, 25, dtype=torch.float64).to(d)])
            out.extend(((x, l), {}) for l in values)
        return out
    return gen


def _prob_cases():
    out = []
    for d in FLOATS:
        x = torch.cat([vals(d), torch.linspace(-0.5, 1.5, 21, dtype=torch.float64).to(d)])
        for eps in (None, 0.1, 0.6, -1.0):
            out.append(((x,), {} if eps is None else {"eps": eps}))
    for d in INTS:
        out.append(((vals(d),), {}))
    return out


def _nan_to_num():
    out = []
    for d in ALL:
        x = vals(d)
        out.append(((x,), {}))
        out.append(((x, 1.5, 100.0, -100.0), {}))
        out.append(((x,), {"posinf": 1e20, "neginf": -1e20}))
    return out


GENERATED = {
    "rsub.Tensor": _binary(dtypes=_NONBOOL),
    "rsub.Scalar": _scalar(dtypes=_NONBOOL, scalars=[2, -3, 2.5, -0.5, 300, -1]),
    "floor_divide": _binary(nonzero_int_divisor=True, dtypes=_NONBOOL),
    "floor_divide.Scalar": _scalar(nonzero=True, dtypes=_NONBOOL, scalars=[2, -3, 2.5, -0.5, 7]),
    "true_divide.Tensor": _DIV,
    "true_divide.Scalar": _scalar(nonzero=True),
    "xlogy.Tensor": _binary(),
    "xlogy.Scalar_Other": _scalar(scalars=[2, 0.5, 0, -1.0, float("nan"), True]),
    "xlogy.Scalar_Self": _scalar_self([2, 0, -1.5, True]),
    "float_power.Tensor_Tensor": _binary(dtypes=_NONBOOL),
    "float_power.Tensor_Scalar": _scalar(dtypes=_NONBOOL, scalars=[2, -2, 0.5, 0, 1, 3]),
    "float_power.Scalar": _scalar_self([2, -2.5, 0.5, 1], dtypes=_NONBOOL),
    "bitwise_left_shift.Tensor": _shift_tensor,
    "bitwise_right_shift.Tensor": _shift_tensor,
    "bitwise_left_shift.Tensor_Scalar": _scalar(dtypes=INTS, scalars=[0, 1, 3, 7, 70, -1]),
    "bitwise_right_shift.Tensor_Scalar": _scalar(dtypes=INTS, scalars=[0, 1, 3, 7, 70, -1]),
    "bitwise_left_shift.Scalar_Tensor": _scalar_self([1, -3, 100], dtypes=INTS),
    "bitwise_right_shift.Scalar_Tensor": _scalar_self([1, -3, 100], dtypes=INTS),
    "logaddexp": _binary(dtypes=FLOATS),
    "logaddexp2": _binary(dtypes=FLOATS),
    "hypot": _binary(dtypes=FLOATS, cross=False),
    "copysign.Tensor": _binary(),
    "copysign.Scalar": _scalar(scalars=[2, -3, 2.5, -0.0, 0.0, float("nan")]),
    "fmax": _binary(),
    "fmin": _binary(),
    "heaviside": _binary(dtypes=_NONBOOL, cross=False),
    "nan_to_num": _nan_to_num,
    "celu": _celu,
    "selu": _float_unary_act(),
    "relu6": _unary(dtypes=_NONBOOL),
    "softshrink": _lambd(),
    "hardshrink": _lambd(),
    "logit": _prob_cases,
}
for _op in ["frac", "deg2rad", "rad2deg", "sinc", "signbit", "positive", "isfinite", "isposinf", "isneginf", "erfc", "sgn"]:
    GENERATED[_op] = _unary(dtypes=FLOATS if _op == "frac" else _NONBOOL if _op == "positive" else ALL)
GENERATED.update({
    "special_xlog1py.other_scalar": _scalar(scalars=[2, 0.5, 0, -0.5, float("nan"), True]),
    "special_xlog1py.self_scalar": _scalar_self([2, 0, -1.5, True]),
})
