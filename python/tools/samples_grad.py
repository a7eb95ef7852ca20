"""Generated samples: backward ops, captured as PyTorch's autograd calls them. Each sample
runs a forward on random inputs with `requires_grad=True` and a backward with a random
`grad_output`; every call autograd makes to the op is recorded with its arguments (so the
saved tensors, flags and output masks are the ones torch itself passes)."""

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _name(func):
    name = func._schema.name.split("::", 1)[1]
    ov = func._overloadname
    return name if ov == "default" else f"{name}.{ov}"


class _Capture(TorchDispatchMode):
    def __init__(self, op):
        super().__init__()
        self.op, self.calls = op, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _name(func) == self.op:
            clone = lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t
            self.calls.append((tree_map(clone, tuple(args)), tree_map(clone, dict(kwargs))))
        return func(*args, **kwargs)


def captured(op, forward, cases, dtypes=FLOATS):
    """`forward(case, dtype)` returns (inputs that need grad, output); for each case and dtype
    the forward and the output's backward run (with a random gradient) and the calls of `op`
    in either are kept."""
    def gen():
        out = []
        for dt in dtypes:
            for case in cases:
                torch.manual_seed(len(out))
                try:
                    with _Capture(op) as cap:
                        ins, y = forward(case, dt)
                        g = torch.randn(y.shape, dtype=torch.float64).to(y.dtype)
                        torch.autograd.grad(y, ins, g, allow_unused=True)
                except (NotImplementedError, RuntimeError):
                    continue  # torch's CPU kernel lacks this dtype: nothing to capture
                out.extend(cap.calls)
        return out
    return gen


def _r(*shape, dtype=torch.float32, lo=-3.0, hi=3.0):
    return (torch.rand(*shape, dtype=torch.float64) * (hi - lo) + lo).to(dtype).requires_grad_()


def _act(fn, shapes=((3, 5), (2, 3, 4)), lo=-6.0, hi=6.0):
    """A pointwise activation of one input."""
    def forward(case, dt):
        x = _r(*case, dtype=dt, lo=lo, hi=hi)
        return [x], fn(x)
    return forward, shapes


def _cap(op, fn, **kw):
    forward, shapes = _act(fn, **kw)
    return captured(op, forward, shapes)


def _loss_cases(op, fn, target=None, kwargs_list=({},)):
    def forward(case, dt):
        shape, kw = case
        x = _r(*shape, dtype=dt, lo=0.05, hi=0.95) if target == "prob" else _r(*shape, dtype=dt)
        if target in ("prob", "unit"):
            t = torch.rand(*shape, dtype=torch.float64).to(dt)
        elif target == "sign":
            t = (torch.randint(0, 2, shape) * 2 - 1).to(dt)
        else:
            t = torch.randn(*shape, dtype=torch.float64).to(dt)
        return [x], fn(x, t, **kw)
    shapes = [(3, 4), (2, 3, 2)]
    return captured(op, forward, [(s, kw) for s in shapes for kw in kwargs_list])


_RED = ({"reduction": "mean"}, {"reduction": "sum"}, {"reduction": "none"})


def _nll(case, dt):
    shape, kw = case
    x = _r(*shape, dtype=dt)
    t = torch.randint(0, shape[-1], shape[:-1])
    if t.numel() > 1:
        t.view(-1)[0] = kw.get("ignore_index", -100)
    w = kw.pop("weight", None)
    w = torch.rand(shape[-1], dtype=torch.float64).to(dt) + 0.5 if w else None
    return [x], F.nll_loss(x, t, weight=w, **kw)


def _batch_norm(case, dt):
    shape, training, affine = case
    x = _r(*shape, dtype=dt)
    c = shape[1]
    w = _r(c, dtype=dt) if affine else None
    b = _r(c, dtype=dt) if affine else None
    rm = torch.randn(c, dtype=torch.float64).to(dt)
    rv = (torch.rand(c, dtype=torch.float64) + 0.5).to(dt)
    ins = [x] + ([w, b] if affine else [])
    return ins, F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.1, eps=1e-5)


def _sdpa(case, dt):
    """`((B, H, L, S, E), causal, masked)`, optionally with `{"kv_heads": Hk, "scale": s}`:
    grouped-query attention (`enable_gqa`), whose K/V of fewer heads reach the CPU
    flash-attention entry points as they are."""
    (b, h, l, s, e), causal, masked, *rest = case
    kw = rest[0] if rest else {}
    hk = kw.get("kv_heads", h)
    q, k, v = _r(b, h, l, e, dtype=dt), _r(b, hk, s, e, dtype=dt), _r(b, hk, s, e, dtype=dt)
    m = None
    if masked:
        m = torch.zeros(l, s, dtype=dt)
        m[:, 0] = float("-inf")
    return [q, k, v], F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal,
                                                     scale=kw.get("scale"), enable_gqa=hk != h)


# Six cases, the sweep's cap per (op, dtype): three with grouped-query heads (multi-query and
# causal; a mask and a scale; causal with a scale, L != S).
_SDPA = [((2, 3, 4, 6, 8), False, False), ((1, 2, 5, 5, 4), True, False), ((2, 2, 3, 4, 8), False, True),
         ((1, 6, 5, 5, 4), True, False, {"kv_heads": 1}), ((2, 4, 3, 4, 8), False, True, {"kv_heads": 2, "scale": 0.3}),
         ((1, 6, 4, 5, 4), True, False, {"kv_heads": 3, "scale": 0.7})]


def _glu(case, dt):
    x = _r(*case[0], dtype=dt)
    return [x], F.glu(x, case[1])


def _prelu(case, dt):
    x = _r(*case[0], dtype=dt)
    w = _r(case[1], dtype=dt, lo=-0.5, hi=0.5)
    return [x, w], F.prelu(x, w)


def _softmax(case, dt):
    x = _r(*case[0], dtype=dt)
    return [x], torch.softmax(x, case[1])


def _slice(case, dt):
    x = _r(*case[0], dtype=dt)
    d, s, e, st = case[1]
    return [x], torch.ops.aten.slice(x, d, s, e, st)


def _select(case, dt):
    x = _r(*case[0], dtype=dt)
    return [x], x.select(*case[1])


def _diagonal(case, dt):
    x = _r(*case[0], dtype=dt)
    return [x], torch.diagonal(x, *case[1])


GENERATED = {
    "hardswish_backward": _cap("hardswish_backward", F.hardswish),
    "hardsigmoid_backward": _cap("hardsigmoid_backward", F.hardsigmoid),
    "silu_backward": _cap("silu_backward", F.silu),
    "mish_backward": _cap("mish_backward", F.mish),
    "softplus_backward": captured("softplus_backward", lambda c, dt: (lambda x: ([x], F.softplus(x, *c[1])))(_r(3, 5, dtype=dt)), [(None, (1.0, 20.0)), (None, (2.0, 1.0)), (None, (0.5, 3.0))]),
    "leaky_relu_backward": captured("leaky_relu_backward", lambda c, dt: (lambda x: ([x], F.leaky_relu(x, c)))(_r(3, 5, dtype=dt)), [0.01, 0.2, -0.5]),
    "elu_backward": captured("elu_backward", lambda c, dt: (lambda x: ([x], c(x)))(_r(3, 5, dtype=dt)), [F.elu, lambda x: F.elu(x, 0.5), F.selu, lambda x: F.celu(x, 2.0), lambda x: F.elu(x.clone(), 1.5, inplace=True)]),
    "hardtanh_backward": captured("hardtanh_backward", lambda c, dt: (lambda x: ([x], F.hardtanh(x, *c)))(_r(3, 5, dtype=dt)), [(-1.0, 1.0), (-0.5, 2.0)]),
    "log_sigmoid_forward": lambda: [((torch.randn(3, 5, dtype=torch.float64).to(dt) * 8,), {}) for dt in FLOATS],
    "log_sigmoid_backward": _cap("log_sigmoid_backward", F.logsigmoid, lo=-20, hi=20),
    "softshrink_backward": captured("softshrink_backward", lambda c, dt: (lambda x: ([x], F.softshrink(x, c)))(_r(3, 5, dtype=dt)), [0.5, 1.5]),
    "hardshrink_backward": captured("hardshrink_backward", lambda c, dt: (lambda x: ([x], F.hardshrink(x, c)))(_r(3, 5, dtype=dt)), [0.5, 1.5]),
    "logit_backward": captured("logit_backward", lambda c, dt: (lambda x: ([x], torch.logit(x, c)))(_r(3, 5, dtype=dt, lo=-0.2, hi=1.2)), [None, 0.1]),
    "glu_backward": captured("glu_backward", _glu, [((4, 6), -1), ((4, 6, 3), 1)]),
    "_prelu_kernel": captured("_prelu_kernel", _prelu, [((2, 3, 4), 3), ((2, 3), 1)]),
    "_prelu_kernel_backward": captured("_prelu_kernel_backward", _prelu, [((2, 3, 4), 3), ((2, 3), 1)]),
    "_softmax_backward_data": captured("_softmax_backward_data", _softmax, [((3, 5), 1), ((2, 3, 4), 0)]),
    "slice_backward": captured("slice_backward", _slice, [((4, 6), (1, 1, 5, 2)), ((3, 4, 5), (0, 1, 3, 1)), ((5, 3), (0, -3, None, 1))]),
    "select_backward": captured("select_backward", _select, [((4, 6), (1, 2)), ((3, 4, 5), (0, -1))]),
    "diagonal_backward": captured("diagonal_backward", _diagonal, [((4, 6), (1, 0, 1)), ((3, 4, 5), (-1, 2, 0))]),
    "nll_loss_backward": captured("nll_loss_backward", _nll, [((4, 5), {}), ((4, 5), {"reduction": "sum", "weight": True}), ((4, 5), {"reduction": "none", "ignore_index": 2}), ((5,), {}), ((4, 5), {"weight": True, "ignore_index": 1})]),
    "mse_loss_backward": _loss_cases("mse_loss_backward", F.mse_loss, kwargs_list=_RED),
    "binary_cross_entropy_backward": _loss_cases("binary_cross_entropy_backward", F.binary_cross_entropy, "prob", _RED),
    "smooth_l1_loss_backward": _loss_cases("smooth_l1_loss_backward", F.smooth_l1_loss, kwargs_list=({"beta": 1.0}, {"beta": 0.5, "reduction": "sum"}, {"beta": 2.0, "reduction": "none"})),
    "huber_loss_backward": _loss_cases("huber_loss_backward", F.huber_loss, kwargs_list=({"delta": 1.0}, {"delta": 0.5, "reduction": "sum"}, {"delta": 2.0, "reduction": "none"})),
    "soft_margin_loss_backward": _loss_cases("soft_margin_loss_backward", F.soft_margin_loss, "sign", _RED),
    "native_batch_norm": captured("native_batch_norm", _batch_norm, [((4, 3, 5), True, True), ((4, 3), False, True), ((2, 3, 2, 2), True, False)]),
    # Affine cases only: without weight autograd masks out grad_weight/grad_bias, which
    # PyTorch returns as None and the op library (for now) as zero-size tensors.
    "native_batch_norm_backward": captured("native_batch_norm_backward", _batch_norm, [((4, 3, 5), True, True), ((4, 3), False, True), ((2, 3, 2, 2), True, True)]),
    "_scaled_dot_product_flash_attention_for_cpu": captured("_scaled_dot_product_flash_attention_for_cpu", _sdpa, _SDPA),
    "_scaled_dot_product_flash_attention_for_cpu_backward": captured("_scaled_dot_product_flash_attention_for_cpu_backward", _sdpa, _SDPA),
}


def _pad(case, dt):
    shape, pad, mode = case
    x = _r(*shape, dtype=dt)
    return [x], F.pad(x, pad, mode=mode)


def _interp(case, dt):
    shape, kw = case
    x = _r(*shape, dtype=dt)
    return [x], F.interpolate(x, **kw)


def _nll2d(case, dt):
    (n, c, h, w), kw = case
    x = _r(n, c, h, w, dtype=dt)
    t = torch.randint(0, c, (n, h, w))
    t[0, 0, 0] = kw.get("ignore_index", -100)
    wt = kw.pop("weight", None)
    wt = torch.rand(c, dtype=torch.float64).to(dt) + 0.5 if wt else None
    return [x], F.nll_loss(x, t, weight=wt, **kw)


_PADS = [((2, 3, 5), (2, 1), "reflect"), ((3, 6), (0, 3), "replicate"), ((2, 2, 4, 5), (1, 2, 3, 0), "reflect"),
         ((1, 2, 3, 3), (2, 2, 1, 1), "replicate"), ((1, 2, 3, 4, 3), (1, 1, 2, 0, 1, 2), "reflect"),
         ((2, 1, 2, 3, 2), (0, 2, 1, 1, 2, 0), "replicate")]
_NLL2D = [((2, 3, 4, 5), {}), ((2, 3, 2, 2), {"reduction": "sum", "weight": True}), ((1, 4, 3, 3), {"reduction": "none", "ignore_index": 1})]
GENERATED.update({
    "reflection_pad1d_backward": captured("reflection_pad1d_backward", _pad, _PADS),
    "reflection_pad2d_backward": captured("reflection_pad2d_backward", _pad, _PADS),
    "reflection_pad3d_backward": captured("reflection_pad3d_backward", _pad, _PADS),
    "replication_pad1d_backward": captured("replication_pad1d_backward", _pad, _PADS),
    "replication_pad2d_backward": captured("replication_pad2d_backward", _pad, _PADS),
    "replication_pad3d_backward": captured("replication_pad3d_backward", _pad, _PADS),
    "upsample_nearest2d_backward": captured("upsample_nearest2d_backward", _interp, [((2, 3, 4, 5), {"size": (7, 3)}), ((1, 2, 3, 3), {"scale_factor": 2.0}), ((1, 1, 5, 4), {"scale_factor": (0.6, 1.5)})]),
    "upsample_bilinear2d_backward": captured("upsample_bilinear2d_backward", _interp, [((2, 3, 4, 5), {"size": (7, 3), "mode": "bilinear"}), ((1, 2, 3, 3), {"scale_factor": 2.0, "mode": "bilinear", "align_corners": True}), ((1, 1, 5, 4), {"scale_factor": (0.6, 1.5), "mode": "bilinear"})]),
    "nll_loss2d_forward": captured("nll_loss2d_forward", _nll2d, _NLL2D),
    "nll_loss2d_backward": captured("nll_loss2d_backward", _nll2d, _NLL2D),
})


def _pool3d(case, dt):
    shape, kind, kw = case
    x = _r(*shape, dtype=dt)
    f = F.avg_pool3d if kind == "avg" else F.max_pool3d
    return [x], f(x, **kw)


_POOL3D = [((1, 2, 5, 4, 6), "avg", {"kernel_size": 2}), ((2, 1, 4, 5, 5), "avg", {"kernel_size": (3, 2, 2), "stride": (2, 1, 2), "padding": (1, 0, 1), "ceil_mode": True}),
           ((1, 2, 5, 4, 6), "max", {"kernel_size": 2}), ((2, 1, 4, 5, 5), "max", {"kernel_size": (3, 2, 2), "stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (1, 2, 1)})]
GENERATED.update({
    "avg_pool3d_backward": captured("avg_pool3d_backward", _pool3d, _POOL3D),
    "max_pool3d_with_indices_backward": captured("max_pool3d_with_indices_backward", _pool3d, _POOL3D),
})


def _weight_norm(case, dt):
    shape, dim = case
    v = _r(*shape, dtype=dt)
    gshape = [s if i == dim else 1 for i, s in enumerate(shape)]
    g = _r(*gshape, dtype=dt)
    return [v, g], torch._weight_norm(v, g, dim)


_WN = [((4, 3, 2), 0), ((3, 5), 1), ((2, 3, 4), 2)]
GENERATED.update({
    "_weight_norm_interface": captured("_weight_norm_interface", _weight_norm, _WN),
    "_weight_norm_interface_backward": captured("_weight_norm_interface_backward", _weight_norm, _WN),
    "_weight_norm": lambda: [((torch.randn(4, 3, dtype=dt), torch.rand(4, 1, dtype=dt) + 0.5, 0), {}) for dt in FLOATS],
})
