"""Generated samples: pointwise ops (edge values per dtype: signed zeros, NaN, infinities,
integer extremes, wrapping scalars, broadcasting, 0-dim and empty tensors).

Each op gets at most a handful of samples per dtype (the sweep keeps 6 per op, dtype and
source). Integer divisors avoid zero (PyTorch raises ZeroDivisionError there)."""

import torch

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
ALL = FLOATS + INTS + [torch.bool]


def vals(dtype, nonzero=False):
    """A 1-d tensor of edge values of `dtype`."""
    if dtype.is_floating_point:
        v = [-3.5, -2.0, -1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.5, 3.0, 7.0, -7.25,
             float("nan"), float("inf"), float("-inf"), 1e-3, 100.0, -60.0]
        if nonzero:
            v = [x for x in v if x != 0]
        return torch.tensor(v, dtype=torch.float64).to(dtype)
    if dtype == torch.bool:
        return torch.tensor([True, False, True, True, False])
    info = torch.iinfo(dtype)
    v = [0, 1, 2, 3, 5, 7, info.max, info.max - 1, info.min, info.min + 1, 100 % (info.max + 1)]
    if info.min < 0:
        v += [-1, -2, -3, -7, -100 % (info.max + 1) - (info.max + 1) if dtype != torch.int8 else -100]
    if nonzero:
        v = [x for x in v if x != 0]
    return torch.tensor(v, dtype=dtype)


def pairs(a, b):
    """All pairs of a's and b's elements, as two 2-d tensors."""
    return a.reshape(-1, 1).expand(len(a), len(b)).contiguous(), b.reshape(1, -1).expand(len(a), len(b)).contiguous()


def _binary(nonzero_int_divisor=False, dtypes=ALL, cross=True):
    def gen():
        out = []
        for d in dtypes:
            nz = nonzero_int_divisor and not d.is_floating_point
            a = vals(d)
            if nz and d != torch.uint8:
                a = a[a != torch.iinfo(d).min]  # INT_MIN / -1 traps (SIGFPE) in torch itself
            a, b = pairs(a, vals(d, nonzero=nz))
            out.append(((a, b), {}))
            # broadcasting, 0-dim, empty
            out.append(((a, b[0].clone()), {}))
            out.append(((torch.empty(0, 3, dtype=d), vals(d, nonzero=nz)[:3]), {}))
        if cross:
            # mixed dtypes (promotion), 0-dim tensors of higher category
            out.append(((torch.arange(-4, 5, dtype=torch.int32) * 3, torch.tensor(2.5, dtype=torch.float64)), {}))
            out.append(((torch.tensor([1, 2, 250], dtype=torch.uint8), torch.tensor([3, -2, 7], dtype=torch.int8)), {}))
            out.append(((torch.tensor([1.5, -2.0, 3.25], dtype=torch.float16), torch.tensor([2.0, 3.0, -1.0], dtype=torch.bfloat16)), {}))
            out.append(((torch.tensor([True, False, True]), torch.tensor([3, 2, 5], dtype=torch.int64)), {}))
        return out
    return gen


SCALARS = [2, -3, 2.5, -0.5, True, 300, -1, 0.0, 0.1, 1e5]


def _scalar(nonzero=False, dtypes=ALL, scalars=SCALARS):
    def gen():
        out = []
        for d in dtypes:
            x = vals(d)
            for s in scalars:
                if nonzero and s == 0:
                    continue
                out.append(((x, s), {}))
        return out
    return gen


def _unary(dtypes=ALL):
    def gen():
        out = []
        for d in dtypes:
            out.append(((vals(d),), {}))
            out.append(((vals(d)[1:5].reshape(2, 2),), {}))
            out.append(((torch.empty(0, 2, dtype=d),), {}))
        return out
    return gen


def _with_mode(base, mode):
    def gen():
        return [(a, {**k, "rounding_mode": mode}) for a, k in base()]
    return gen


def _concat(*gens):
    def gen():
        return [s for g in gens for s in g()]
    return gen


def _pow_scalar():
    out = []
    for d in ALL:
        e = vals(d) if d != torch.bool else vals(d)
        if not d.is_floating_point and d != torch.bool:
            e = torch.tensor([0, 1, 2, 3, 7, 10], dtype=d)
        for s in [2, -2, 2.5, 1, 0.5, True]:
            out.append(((s, e), {}))
    return out


def _pow_tensor_scalar():
    out = []
    for d in ALL:
        x = vals(d)
        exps = [0, 1, 2, 3, 0.5, -0.5, -1, -2, 2.5, 10, True]
        for e in exps:
            if not d.is_floating_point and isinstance(e, int) and not isinstance(e, bool) and e < 0:
                continue
            out.append(((x, e), {}))
    return out


def _pow_tensor_tensor():
    out = []
    for d in ALL:
        if d.is_floating_point:
            a, b = pairs(vals(d), vals(d))
        elif d == torch.bool:
            a, b = pairs(vals(d), vals(d))
        else:
            base = vals(d)
            ex = torch.tensor([0, 1, 2, 3, 5, 8, 31, 63, 64, 65], dtype=torch.int64)
            ex = ex.clamp(max=torch.iinfo(d).max).to(d)
            if torch.iinfo(d).min < 0:
                ex = torch.cat([ex, torch.tensor([-1, -2, -3], dtype=d)])
            a, b = pairs(base, ex)
        out.append(((a, b), {}))
    out.append(((torch.tensor([2, 3], dtype=torch.int32), torch.tensor([0.5, -1.0])), {}))
    return out


def _clamp():
    out = []
    for d in ALL:
        x = vals(d)
        for lo, hi in [(0, 2), (-1, None), (None, 5), (2.5, None), (3, 1), (float("nan"), None), (-300, 300), (0.5, 1.5)]:
            out.append(((x, lo, hi), {}))
    return out


def _clamp_one(which):
    def gen():
        out = []
        for d in ALL:
            x = vals(d)
            for b in [0, -1, 5, 2.5, float("nan"), 300]:
                out.append(((x, b), {}))
        return out
    return gen


def _clamp_tensor():
    out = []
    for d in ALL:
        x = vals(d)
        lo = vals(d).flip(0)
        out.append(((x, lo, None), {}))
        out.append(((x, None, lo), {}))
        out.append(((x.reshape(-1, 1), x[:3], lo[:3]), {}))
        out.append(((x, torch.tensor(1.5), None), {}))
    return out


def _where():
    out = []
    for d in ALL:
        x = vals(d)
        c = torch.arange(len(x)) % 3 == 0
        out.append(((c, x, x.flip(0)), {}))
        out.append(((c.reshape(-1, 1), x, x[0].clone()), {}))
        out.append(((c, x, torch.tensor(2.5, dtype=torch.float64)), {}))
        out.append(((c.to(torch.uint8), x, x.flip(0)), {}))
    return out


def _fill():
    out = []
    for d in ALL:
        for v in [2, -1, 2.7, True, 0, float("inf")]:
            out.append(((vals(d), v), {}))
    return out


def _masked_fill_scalar():
    out = []
    for d in ALL:
        x = vals(d)
        m = torch.arange(len(x)) % 2 == 0
        for v in [2, -1, 2.5, True]:
            out.append(((x, m, v), {}))
        out.append(((x, m.reshape(1, -1).expand(2, -1).contiguous(), 1), {}))
        out.append(((x, torch.tensor(True), 3), {}))
    return out


def _masked_fill_tensor():
    out = []
    for d in ALL:
        x = vals(d)
        m = torch.arange(len(x)) % 2 == 0
        for v in [torch.tensor(2.5), torch.tensor(-1), torch.tensor(True), torch.tensor(3, dtype=d)]:
            out.append(((x, m, v), {}))
    return out


def _copy():
    out = []
    for d in ALL:
        for s in ALL:
            if s in (torch.float16, torch.bfloat16, torch.int16):
                continue
            src = vals(s)
            if d != torch.bool and not d.is_floating_point and s.is_floating_point:
                src = src[torch.isfinite(src)]  # float -> int is undefined for nan/inf
            out.append(((torch.zeros(len(src), dtype=d), src), {}))
        out.append(((torch.zeros(2, 3, dtype=d), vals(d)[:3]), {}))
    return out


def _to_copy():
    out = []
    for d in ALL:
        for t in [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.uint8, torch.bool]:
            x = vals(d)
            if x.is_floating_point() and t != torch.bool and not t.is_floating_point:
                x = x[torch.isfinite(x) & (x.abs() < 100)]
            out.append(((x,), {"dtype": t}))
    return out


def _scalar_tensor():
    out = []
    for s in [3, 2.5, True, -1, float("nan")]:
        out.append(((s,), {}))
        for d in [torch.float64, torch.float16, torch.int32, torch.uint8, torch.bool]:
            if isinstance(s, float) and s != s and not d.is_floating_point:
                continue
            out.append(((s,), {"dtype": d}))
    return out


def _local_scalar_dense():
    return [((torch.tensor(x, dtype=d),), {}) for d in ALL for x in [1, 0]] + [((torch.tensor([2.5, 1.0]),), {})]


def _addc():
    out = []
    for d in ALL:
        if d == torch.bool:
            continue
        x = vals(d)
        y = x.flip(0)
        z = vals(d, nonzero=True)[: len(x)]
        z = torch.cat([z, z])[: len(x)]
        for v in [1, 2, 0.5, -1]:
            if not d.is_floating_point and isinstance(v, float):
                continue
            out.append(((x, y, z), {"value": v}))
    out.append(((torch.tensor([1, 2]), torch.tensor([1.5, 2.0]), torch.tensor([2.0, 4.0])), {"value": 2}))
    return out


def _lerp(tensor_weight):
    def gen():
        out = []
        for d in FLOATS:
            x = vals(d)
            e = x.flip(0)
            for w in [0.0, 0.25, 0.5, 1.0, -1.5]:
                out.append(((x, e, torch.tensor(w, dtype=d) if tensor_weight else w), {}))
            if tensor_weight:
                out.append(((x, e, torch.linspace(-1, 2, len(x), dtype=torch.float64).to(d)), {}))
        return out
    return gen


def _float_unary_act(extra=()):
    def gen():
        out = []
        for d in FLOATS:
            x = torch.cat([vals(d), torch.linspace(-8, 8, 33, dtype=torch.float64).to(d)])
            out.append(((x, *extra), {}))
        return out
    return gen


def _elu():
    out = []
    for d in FLOATS:
        x = torch.cat([vals(d), torch.linspace(-8, 8, 17, dtype=torch.float64).to(d)])
        out.append(((x,), {}))
        out.append(((x, 0.5, 2.0, 1.5), {}))
    return out


def _softplus():
    out = []
    for d in FLOATS:
        x = torch.cat([vals(d), torch.linspace(-30, 30, 31, dtype=torch.float64).to(d)])
        out.append(((x,), {}))
        out.append(((x, 2, 5), {}))
        out.append(((x, 0.5, 20), {}))
    return out


def _hardtanh():
    out = []
    for d in ALL:
        if d == torch.bool:
            continue
        x = vals(d)
        out.append(((x,), {}))
        out.append(((x, -1.5, 2.5), {}))
        out.append(((x, 0, 6), {}))
    return out


def _leaky():
    out = []
    for d in FLOATS:
        x = vals(d)
        out.append(((x,), {}))
        out.append(((x, 0.2), {}))
        out.append(((x, -2), {}))
    return out


def _gelu():
    out = []
    for d in FLOATS:
        x = torch.cat([vals(d), torch.linspace(-8, 8, 33, dtype=torch.float64).to(d)])
        out.append(((x,), {}))
        out.append(((x,), {"approximate": "tanh"}))
    return out


def _backward2(extra_kwargs=({},)):
    def gen():
        out = []
        for d in FLOATS:
            x = torch.cat([vals(d), torch.linspace(-4, 4, 17, dtype=torch.float64).to(d)])
            g = torch.linspace(-2, 3, len(x), dtype=torch.float64).to(d)
            for k in extra_kwargs:
                out.append(((g, x), dict(k)))
        out.append(((torch.linspace(-1, 1, 5), torch.linspace(-1, 1, 5, dtype=torch.float64)), dict(extra_kwargs[0])))
        return out
    return gen


def _threshold_backward():
    out = []
    for d in ALL:
        if d == torch.bool:
            continue
        x = vals(d)
        g = x.flip(0)
        for t in [0, 1, -1, 2.5]:
            out.append(((g, x, t), {}))
    out.append(((torch.linspace(-1, 1, 5), torch.tensor([1, -2, 3, 0, 5]), 0), {}))
    return out


def _relu():
    out = []
    for d in ALL:
        if d == torch.bool:
            continue
        out.append(((vals(d),), {}))
    return out


_DIV = _binary()
_DIV_NZ = _binary(nonzero_int_divisor=True, dtypes=[d for d in ALL if d != torch.bool])
_INTISH = [d for d in ALL if not d.is_floating_point]

GENERATED = {
    "add.Tensor": _binary(),
    "sub.Tensor": _binary(dtypes=[d for d in ALL if d != torch.bool]),
    "mul.Tensor": _binary(),
    "add.Scalar": _scalar(),
    "sub.Scalar": _scalar(dtypes=[d for d in ALL if d != torch.bool], scalars=[2, -3, 2.5, -0.5, 300, -1]),
    "mul.Scalar": _scalar(),
    "div.Tensor": _DIV,
    "div.Scalar": _scalar(),
    "div.Tensor_mode": _concat(_with_mode(_DIV_NZ, "trunc"), _with_mode(_DIV_NZ, "floor")),
    "div.Scalar_mode": _concat(
        _with_mode(_scalar(nonzero=True, dtypes=[d for d in ALL if d != torch.bool], scalars=[2, -3, 2.5, -0.5]), "trunc"),
        _with_mode(_scalar(nonzero=True, dtypes=[d for d in ALL if d != torch.bool], scalars=[2, -3, 2.5, -0.5]), "floor"),
    ),
    "remainder.Tensor": _DIV_NZ,
    "remainder.Scalar": _scalar(nonzero=True, dtypes=[d for d in ALL if d != torch.bool], scalars=[2, -3, 2.5, -0.5, 7]),
    "fmod.Tensor": _DIV_NZ,
    "fmod.Scalar": _scalar(nonzero=True, dtypes=[d for d in ALL if d != torch.bool], scalars=[2, -3, 2.5, -0.5, 7]),
    "pow.Tensor_Tensor": _pow_tensor_tensor,
    "pow.Tensor_Scalar": _pow_tensor_scalar,
    "pow.Scalar": _pow_scalar,
    "atan2": _binary(),
    "maximum": _binary(),
    "minimum": _binary(),
    "max.other": _binary(),
    "min.other": _binary(),
    "logical_and": _binary(),
    "logical_or": _binary(),
    "logical_xor": _binary(),
    "bitwise_and.Tensor": _binary(dtypes=_INTISH, cross=False),
    "bitwise_or.Tensor": _binary(dtypes=_INTISH, cross=False),
    "bitwise_xor.Tensor": _binary(dtypes=_INTISH, cross=False),
    "bitwise_and.Scalar": _scalar(dtypes=_INTISH, scalars=[3, -1, True, 300]),
    "bitwise_or.Scalar": _scalar(dtypes=_INTISH, scalars=[3, -1, True, 300]),
    "bitwise_xor.Scalar": _scalar(dtypes=_INTISH, scalars=[3, -1, True, 300]),
    "clamp": _clamp,
    "clamp_min": _clamp_one("min"),
    "clamp_max": _clamp_one("max"),
    "clamp.Tensor": _clamp_tensor,
    "where.self": _where,
    "fill.Scalar": _fill,
    "masked_fill.Scalar": _masked_fill_scalar,
    "masked_fill.Tensor": _masked_fill_tensor,
    "copy": _copy,
    "_to_copy": _to_copy,
    "scalar_tensor": _scalar_tensor,
    "_local_scalar_dense": _local_scalar_dense,
    "addcmul": _addc,
    "addcdiv": _addc,
    "lerp.Scalar": _lerp(False),
    "lerp.Tensor": _lerp(True),
    "relu": _relu,
    "gelu": _gelu,
    "gelu_backward": _backward2(({}, {"approximate": "tanh"})),
    "sigmoid_backward": _backward2(),
    "tanh_backward": _backward2(),
    "threshold_backward": _threshold_backward,
    "elu": _elu,
    "hardtanh": _hardtanh,
    "leaky_relu": _leaky,
    "silu": _float_unary_act(),
    "hardswish": _float_unary_act(),
    "hardsigmoid": _float_unary_act(),
    "mish": _float_unary_act(),
    "softplus": _softplus,
}
for _op in ["eq", "ne", "lt", "le", "gt", "ge"]:
    GENERATED[f"{_op}.Tensor"] = _binary()
    GENERATED[f"{_op}.Scalar"] = _scalar(scalars=[2, -1, 2.5, True, 300, float("nan")])
for _op in ["abs", "neg", "sign", "ceil", "floor", "trunc", "round", "isnan", "isinf", "logical_not",
            "bitwise_not", "square", "reciprocal", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2",
            "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
            "acosh", "atanh", "erf", "erfinv", "sigmoid", "clone", "alias"]:
    GENERATED[_op] = _unary()
