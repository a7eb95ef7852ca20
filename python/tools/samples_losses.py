"""Generated samples: losses that decompose before PyTorch's dispatcher (so no OpInfo sample
reaches them as ATen ops), `_safe_softmax`, and the native multi-head attention."""

import torch

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
RED = [0, 1, 2]


def _r(*shape, dtype=torch.float32, lo=-3.0, hi=3.0):
    return (torch.rand(shape, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def _pairs(target=None, extra=({},)):
    """(self, target, reduction, ...) samples over float dtypes, shapes and reductions."""
    def gen():
        out = []
        for dt in FLOATS:
            for shape, tshape in [((3, 4), (3, 4)), ((2, 3, 2), (3, 1)), ((), ())]:
                x = _r(*shape, dtype=dt)
                if target == "sign":
                    t = (torch.randint(0, 2, tshape) * 2 - 1).to(dt)
                elif target == "prob":
                    t = torch.rand(tshape, dtype=torch.float64).to(dt)
                else:
                    t = _r(*tshape, dtype=dt)
                for r in RED:
                    for kw in extra:
                        out.append(((x, t, r), dict(kw)))
        return out
    return gen


def _kl_div():
    out = []
    for dt in FLOATS:
        x = torch.log_softmax(_r(3, 5), 1).to(dt)
        t = torch.softmax(_r(3, 5), 1).to(dt)
        t[0, 0] = 0
        for r in RED:
            out.append(((x, t, r), {}))
            out.append(((x, t.log(), r, True), {}))
    return out


def _safe_softmax():
    out = []
    for dt in FLOATS:
        x = _r(3, 5, dtype=dt)
        x[1] = float("-inf")
        out.append(((x, 1), {}))
        out.append(((x, 0), {}))
        out.append(((_r(2, 3, 4, dtype=dt), -1), {}))
    out.append(((_r(3, 4), 1, torch.float64), {}))
    return out


def _mha():
    out = []
    for dt in [torch.float32, torch.float64]:
        b, t, e, h = 2, 5, 8, 2
        x, kv = _r(b, t, e, dtype=dt), _r(b, t, e, dtype=dt)
        w, bias = _r(3 * e, e, dtype=dt, lo=-0.5, hi=0.5), _r(3 * e, dtype=dt)
        pw, pb = _r(e, e, dtype=dt, lo=-0.5, hi=0.5), _r(e, dtype=dt)
        base = (x, kv, kv, e, h, w, bias, pw, pb)
        out.append((base, {}))
        out.append((base + (None, True, False), {}))
        kpm = torch.rand(b, t) > 0.6
        kpm[:, 0] = False
        out.append((base + (kpm, True, True, 1), {}))
        src = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        out.append((base + (src, True, True, 0), {}))
        out.append((base + (torch.rand(b, h, t, t) > 0.5, True, False, 2), {}))
    return out


GENERATED = {
    "l1_loss": _pairs(),
    "smooth_l1_loss": _pairs(extra=({}, {"beta": 0.5}, {"beta": 0.0})),
    "huber_loss": _pairs(extra=({}, {"delta": 0.5}, {"delta": 2.0})),
    "soft_margin_loss": _pairs(target="sign"),
    "binary_cross_entropy_with_logits": lambda: [s for s in _pairs(target="prob")()] + [
        ((_r(3, 4, dtype=dt), torch.rand(3, 4, dtype=torch.float64).to(dt), _r(4, dtype=dt, lo=0.1, hi=2), _r(4, dtype=dt, lo=0.1, hi=3), r), {})
        for dt in FLOATS for r in RED],
    "kl_div": _kl_div,
    "_safe_softmax": _safe_softmax,
    "_native_multi_head_attention": _mha,
}


def _f(*shape, dtype=torch.float32):
    return _r(*shape, dtype=dtype)


def _nll():
    out = []
    for dt in FLOATS:
        x = torch.log_softmax(_r(4, 5), 1).to(dt)
        t = torch.tensor([1, 0, 4, 2])
        out.append(((x, t), {}))
        out.append(((x, t, _r(5, dtype=dt, lo=0.1, hi=2.0), 2, 0), {}))
        out.append(((x, t, None, 0), {}))
    return out


def _embedding_backward():
    out = []
    for dt in FLOATS:
        idx = torch.tensor([[1, 3, 3], [0, 5, 1]])
        g = _r(2, 3, 4, dtype=dt)
        out.append(((g, idx, 6, -1, False, False), {}))
        out.append(((g, idx, 7, 3, True, False), {}))
    return out


def _pad_composite():
    out = []
    for dt in FLOATS + [torch.int64]:
        x = _r(2, 3, 4, dtype=dt) if dt.is_floating_point else torch.randint(-5, 5, (2, 3, 4))
        out.append(((x, [1, 2]), {}))
        out.append(((x, [1, 2, 0, 1], "constant", 2.0), {}))
        if dt.is_floating_point:
            out.append(((x, [2, 1], "reflect"), {}))
            out.append(((x, [1, 1, 2, 0], "replicate"), {}))
            out.append(((x.unsqueeze(0), [1, 0, 1, 1, 0, 1], "reflect"), {}))
    return out


def _conv_flags():
    out = []
    for dt in [torch.float32, torch.float64]:
        x, w = _r(2, 4, 6, 5, dtype=dt), _r(6, 2, 3, 2, dtype=dt)
        out.append(((x, w, _r(6, dtype=dt), [1, 2], [1, 0], [1, 1], False, [0, 0], 2, False, False, False, False), {}))
        out.append(((x, _r(4, 3, 2, 2, dtype=dt), None, [2, 1], [0, 1], [1, 1], True, [1, 0], 1, False, False, False, False), {}))
    return out


def _unsafe_index():
    out = []
    for dt in FLOATS + [torch.int64, torch.bool]:
        x = _r(4, 5, dtype=dt) if dt.is_floating_point else (torch.randint(0, 9, (4, 5)).to(dt))
        out.append(((x, [torch.tensor([0, 3, 1])]), {}))
        out.append(((x, [None, torch.tensor([[4, 0], [1, 1]])]), {}))
    return out


def _unsafe_index_put():
    out = []
    for dt in FLOATS + [torch.int64]:
        x = _r(4, 5, dtype=dt) if dt.is_floating_point else torch.randint(0, 9, (4, 5))
        v = _r(3, 5, dtype=dt) if dt.is_floating_point else torch.randint(0, 9, (3, 5))
        out.append(((x, [torch.tensor([0, 3, 1])], v), {}))
        out.append(((x, [torch.tensor([0, 3, 0])], v, True), {}))
    return out


GENERATED.update({
    "nll_loss": _nll,
    "embedding_backward": _embedding_backward,
    "pad": _pad_composite,
    "_convolution": _conv_flags,
    "_unsafe_index.Tensor": _unsafe_index,
    "_unsafe_index_put": _unsafe_index_put,
    "pairwise_distance": lambda: [((_r(3, 4, dtype=dt), _r(3, 4, dtype=dt)), kw) for dt in FLOATS for kw in ({}, {"p": 1.0}, {"keepdim": True}, {"p": 3.0, "eps": 0.0})],
    "dropout": lambda: [((_r(3, 4, dtype=dt), p, t), {}) for dt in FLOATS for p, t in ((0.5, True), (0.2, False), (0.0, True))],
    "clip": lambda: [((_r(3, 4, dtype=dt), lo, hi), {}) for dt in FLOATS for lo, hi in ((-1, 1), (None, 0.5), (0.0, None))],
    "clip.Tensor": lambda: [((_r(3, 4, dtype=dt), _r(4, dtype=dt), None), {}) for dt in FLOATS],
    "one_hot": lambda: [((torch.tensor([0, 3, 1, 2]), 5), {}), ((torch.tensor([[1, 0], [2, 2]]), 3), {})],
    "_reshape_alias": lambda: [((_r(2, 3, 4, dtype=dt), [6, 4], [4, 1]), {}) for dt in FLOATS],
    "lift": lambda: [((_r(2, 3, dtype=dt),), {}) for dt in FLOATS],
    "lift_fresh": lambda: [((_r(2, 3, dtype=dt),), {}) for dt in FLOATS],
    "ger": lambda: [((_r(3, dtype=dt), _r(4, dtype=dt)), {}) for dt in FLOATS],
    "adaptive_avg_pool2d": lambda: [((_r(2, 3, 7, 5, dtype=dt), [3, 2]), {}) for dt in FLOATS],
    "adaptive_avg_pool3d": lambda: [((_r(1, 2, 5, 4, 3, dtype=dt), [2, 3, 1]), {}) for dt in FLOATS],
    "replication_pad1d": lambda: [((_r(2, 3, 5, dtype=dt), [2, 1]), {}) for dt in FLOATS] + [((_r(3, 4, dtype=dt), [0, 3]), {}) for dt in FLOATS],
})


def _upsample(n, linear, vec):
    def gen():
        out = []
        dts = FLOATS + ([torch.uint8] if not linear or n == 2 else [])
        for dt in dts:
            shape = (2, 3) + (5, 4, 3)[:n]
            x = _r(*shape, dtype=dt) if dt.is_floating_point else torch.randint(0, 255, shape, dtype=torch.uint8)
            sizes = [(7, 3, 4)[:n], (5, 8, 6)[:n]]
            scales = [(1.5, 0.7, 2.0)[:n]]
            extra = [False, True] if linear else [None]
            for ac in extra:
                mid = () if ac is None else (ac,)
                for s in sizes:
                    out.append(((x, list(s)) + mid + ((None,) if vec else ()), {}))
                if vec:
                    for sf in scales:
                        out.append(((x, None) + mid + (list(sf),), {}))
                else:
                    # The default overload with scale hints (what `.vec` passes on).
                    o = [int(x.shape[2 + i] * sf) for i, sf in enumerate(scales[0])]
                    out.append(((x, o) + mid + tuple(scales[0]), {}))
        return out
    return gen


def _loss3(names, target):
    def gen():
        out = []
        for dt in FLOATS:
            for shape in [(4,), (3, 5)]:
                a1, a2 = _r(*shape, dtype=dt), _r(*shape, dtype=dt)
                t = (torch.randint(0, 2, shape) * 2 - 1).to(dt)
                for r in RED:
                    out.append(((a1, a2, t, 0.3, r), {}))
                    out.append(((a1, a2, t), {}))
        return out
    return gen


def _hinge():
    out = []
    for dt in FLOATS:
        x = _r(3, 5, dtype=dt)
        t = (torch.randint(0, 2, (3, 5)) * 2 - 1).to(dt)
        for r in RED:
            out.append(((x, t, 1.0, r), {}))
            out.append(((x, t, 0.5, r), {}))
    return out


def _poisson():
    out = []
    for dt in FLOATS:
        x = _r(3, 5, dtype=dt, lo=0.1, hi=3.0)
        t = torch.randint(0, 5, (3, 5)).to(dt)
        for log_input, full in ((True, False), (False, False), (True, True), (False, True)):
            for r in RED:
                out.append(((x, t, log_input, full, 1e-8, r), {}))
    return out


def _cos_emb():
    out = []
    for dt in FLOATS:
        for shape, tshape in [((4, 6), (4,)), ((5,), ())]:
            a1, a2 = _r(*shape, dtype=dt), _r(*shape, dtype=dt)
            t = (torch.randint(0, 2, tshape) * 2 - 1).to(dt)
            for r in RED:
                out.append(((a1, a2, t, 0.2, r), {}))
    return out


GENERATED.update({
    "upsample_nearest1d": _upsample(1, False, False),
    "upsample_nearest1d.vec": _upsample(1, False, True),
    "upsample_nearest2d": _upsample(2, False, False),
    "upsample_nearest3d": _upsample(3, False, False),
    "upsample_nearest3d.vec": _upsample(3, False, True),
    "upsample_linear1d": _upsample(1, True, False),
    "upsample_linear1d.vec": _upsample(1, True, True),
    "upsample_bilinear2d": _upsample(2, True, False),
    "upsample_trilinear3d": _upsample(3, True, False),
    "upsample_trilinear3d.vec": _upsample(3, True, True),
    "margin_ranking_loss": _loss3(("input1", "input2", "target"), "sign"),
    "hinge_embedding_loss": _hinge,
    "poisson_nll_loss": _poisson,
    "cosine_embedding_loss": _cos_emb,
})


def _max_pool(n):
    def gen():
        out = []
        for dt in FLOATS + [torch.int64]:
            shape = (2, 3) + (7, 6, 5)[:n]
            x = _r(*shape, dtype=dt) if dt.is_floating_point else torch.randint(-9, 9, shape)
            out.append(((x, [2] * n), {}))
            out.append(((x, [3] * n, [2] * n, [1] * n, [1] * n, True), {}))
            out.append(((x[0], [2] * n, [1] * n), {}))
        return out
    return gen


GENERATED.update({
    "max_pool1d": _max_pool(1),
    "max_pool2d": _max_pool(2),
    "max_pool3d": _max_pool(3),
})
