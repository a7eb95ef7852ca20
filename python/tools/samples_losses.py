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
