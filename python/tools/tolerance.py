"""PyTorch's own tolerance policy for comparing an op's result on another backend with torch CPU.

The sweep compares Tessera (another backend) with torch CPU the way PyTorch's test suite
compares a device with the CPU (`TestCommon.test_compare_cpu`, `test_noncontiguous_samples`,
`test_variant_consistency_eager`, `test_out`): `assertEqual`, whose tolerance is the larger of
the dtype's default (`torch.testing`'s table) and the OpInfo's override for that test
(`toleranceOverride` -> atol and rtol, `precisionOverride` -> atol), both per dtype.

On top of it, for contractions (matmul family, convolution) of k products in float32: their
rounding error grows with k, so torch's fixed float32 tolerance fails large-k results of any
correct implementation that sums in another order (a `bmm` sample was off by 1.56e-5 against
1e-5 with k = 25). Such a result is judged against torch's float64 result with the
probabilistic rounding-error bound of Higham and Mary (2019), lambda * sqrt(k) * u * (|A| @ |B|)
elementwise (u = eps / 2 the unit roundoff; lambda = 6: each element within it with probability
above 1 - 2 exp(-18)), never with a looser blanket tolerance. The worst-case bound k * u * (...)
would accept errors 64x larger at k = 4096.
"""

import torch
from torch.testing._comparison import _DTYPE_PRECISIONS
from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride

# The tests whose tolerance overrides apply to a backend-vs-CPU comparison of an op's result.
COMPARISON_TESTS = {
    None,
    "test_compare_cpu",
    "test_noncontiguous_samples",
    "test_variant_consistency_eager",
    "test_out",
}
COMPARISON_CLASSES = {None, "TestCommon"}


def default(dtype):
    """(atol, rtol): torch.testing's defaults for `dtype` (0, 0 for integers and bool)."""
    rtol, atol = _DTYPE_PRECISIONS.get(dtype, (0.0, 0.0))
    return atol, rtol


def _applies(decorate_info):
    """Whether a DecorateInfo's overrides apply to a CPU comparison of results."""
    cls = getattr(decorate_info, "cls_name", None)
    test = getattr(decorate_info, "test_name", None)
    device = getattr(decorate_info, "device_type", None)
    devices = device if isinstance(device, (tuple, list)) else (device,)
    return cls in COMPARISON_CLASSES and test in COMPARISON_TESTS and (device is None or "cpu" in devices)


def opinfo_overrides(opinfo):
    """{dtype: (atol, rtol)}: the OpInfo's tolerance overrides for a CPU comparison (the
    largest where several apply)."""
    out = {}
    for d in getattr(opinfo, "decorators", ()) or ():
        if not _applies(d):
            continue
        for dec in getattr(d, "decorators", [d]):
            if isinstance(dec, toleranceOverride):
                items = {dt: (t.atol, t.rtol) for dt, t in dec.d.items()}
            elif isinstance(dec, precisionOverride):
                items = {dt: (p, 0.0) for dt, p in dec.d.items()}
            else:
                continue
            for dt, (atol, rtol) in items.items():
                a, r = out.get(dt, (0.0, 0.0))
                out[dt] = (max(a, atol), max(r, rtol))
    return out


def tolerance(dtype, overrides=None):
    """(atol, rtol) for comparing a `dtype` result: max(default, override), as assertEqual."""
    atol, rtol = default(dtype)
    if overrides and dtype in overrides:
        oa, orr = overrides[dtype]
        atol, rtol = max(atol, oa), max(rtol, orr)
    return atol, rtol


def _tensors(args):
    return [a for a in args if isinstance(a, torch.Tensor)]


def _k_last(*positions):
    """k = the last dim of the positional tensor argument at `positions[0]`."""
    def k(args, kwargs):
        t = args[positions[0]] if len(args) > positions[0] else None
        return t.shape[-1] if isinstance(t, torch.Tensor) and t.dim() > 0 else None
    return k


def _k_numel(pos):
    def k(args, kwargs):
        t = args[pos] if len(args) > pos else None
        return t.numel() if isinstance(t, torch.Tensor) else None
    return k


def _conv_k(transposed_at, groups_at):
    """Convolution: k = in_channels / groups * prod(kernel). The weight is [out, in/groups, *kernel],
    or [in, out/groups, *kernel] when transposed."""
    def k(args, kwargs):
        w = args[1] if len(args) > 1 else kwargs.get("weight")
        if not isinstance(w, torch.Tensor) or w.dim() < 2:
            return None
        arg = lambda pos, name, default: args[pos] if pos is not None and len(args) > pos else kwargs.get(name, default)
        transposed = transposed_at is True or bool(arg(transposed_at if transposed_at is not True else None, "transposed", False))
        if not transposed:
            return w.numel() // max(w.shape[0], 1)
        groups = int(arg(groups_at, "groups", 1))
        return w.numel() // max(w.shape[1], 1) // max(groups, 1)
    return k


def _conv_backward_k(args, kwargs):
    """convolution_backward: the largest k of its three contractions. grad_input sums over
    out_channels / groups * prod(kernel) (at most the weight's numel over one of its first two
    dims, transposed or not); grad_weight and grad_bias over the batch and output positions
    (grad_output's numel over its channels)."""
    g, w = args[0], args[2]
    k_input = max(w.numel() // max(w.shape[0], 1), w.numel() // max(w.shape[1], 1))
    return max(k_input, g.numel() // max(g.shape[1], 1))


def _k_einsum(args, kwargs):
    ts = args[1] if len(args) > 1 else []
    return max((t.numel() for t in ts if isinstance(t, torch.Tensor)), default=None)


# Contractions: overload base name -> how to read k (the number of products summed per
# output element) from the call's arguments.
CONTRACTIONS = {
    "mm": _k_last(0), "bmm": _k_last(0), "matmul": _k_last(0),
    "addmm": _k_last(1), "baddbmm": _k_last(1), "addbmm": _k_last(1), "addmv": _k_last(1),
    "_grouped_mm": _k_last(0), "mv": _k_last(0), "dot": _k_numel(0), "vdot": _k_numel(0), "linear": _k_last(0),
    "tensordot": _k_einsum, "einsum": _k_einsum,
    "convolution": _conv_k(6, 8), "_convolution": _conv_k(6, 8), "conv1d": _conv_k(None, 6),
    "conv2d": _conv_k(None, 6), "conv3d": _conv_k(None, 6), "conv_transpose1d": _conv_k(True, 6),
    "conv_transpose2d": _conv_k(True, 6), "conv_transpose3d": _conv_k(True, 6),
    "convolution_backward": _conv_backward_k,
}


def contraction_k(name, args, kwargs):
    """k for a contraction overload (`bmm`, `addmm.out`, ...), else None."""
    base = name.split(".")[0].rstrip("_")
    f = CONTRACTIONS.get(base)
    if f is None:
        return None
    try:
        k = f(args, kwargs)
    except Exception:
        return None
    return k if isinstance(k, int) and k > 0 else None


# lambda of the probabilistic bound (see the module's docstring).
CONTRACTION_LAMBDA = 6.0


def contraction_bound(func, args, kwargs, k, dtype):
    """Elementwise error bound of a k-term contraction in `dtype`: lambda * sqrt(k) * u * f(|args|)
    in float64 (f is the op itself, so addmm's bound covers beta*|input| + alpha*|m1|@|m2|)."""
    def absf64(t):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            return t.detach().abs().double()
        if isinstance(t, float):
            return abs(t)
        if isinstance(t, (list, tuple)):
            return type(t)(absf64(x) for x in t)
        return t

    scale = func(*[absf64(a) for a in args], **{n: absf64(v) for n, v in kwargs.items()})
    factor = CONTRACTION_LAMBDA * k**0.5 * torch.finfo(dtype).eps / 2
    if isinstance(scale, (list, tuple)):  # one bound per result (convolution_backward's grads)
        return tuple(s * factor if isinstance(s, torch.Tensor) else None for s in scale)
    return scale * factor if isinstance(scale, torch.Tensor) else None


def within(actual, reference, atol, rtol, extra=None):
    """None when |actual - reference| <= atol + rtol*|reference| (+ extra) elementwise, NaN
    matching NaN and infinities equal; else a message naming the worst element."""
    a, r = actual.detach().double(), reference.detach().double()
    both_nan = a.isnan() & r.isnan()
    same = (a == r) | both_nan
    allowed = atol + rtol * r.abs()
    if extra is not None:
        allowed = allowed + extra
    diff = (a - r).abs()
    ok = same | (diff <= allowed)
    if bool(ok.all()):
        return None
    bad = (~ok).nonzero()
    i = tuple(bad[0].tolist())
    return (f"{bad.shape[0]} of {a.numel()} elements beyond the bound; at {list(i)}: "
            f"got {a[i].item()!r}, reference {r[i].item()!r}, allowed {allowed[i].item():.3g}")


def is_subnormal(t):
    """Whether a float tensor holds subnormal values."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0:
        return False
    tiny = torch.finfo(t.dtype).tiny
    a = t.detach().abs()
    return bool(((a > 0) & (a < tiny)).any())


def flush_subnormals(t):
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        return t
    tiny = torch.finfo(t.dtype).tiny
    return torch.where(t.abs() < tiny, torch.zeros_like(t), t)
