"""Generated samples: reductions, scans, softmax, sort/topk, linear algebra (einsum, pdist, ...).

The sweep keeps 6 samples per (op, dtype), so each op's list spreads its cases over dtypes."""

import itertools

import torch

F = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
NAN, INF = float("nan"), float("inf")


def _r(shape, dtype=torch.float32):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, dtype=torch.float64) * 6 - 3).to(dtype)
    return torch.randint(-5, 6, shape).to(dtype)


_EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ii", [(3, 3)]), ("ii->i", [(3, 3)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(2, 3, 4), (4, 3)]), ("i,j->ij", [(3,), (4,)]), ("i,i", [(4,), (4,)]), ("i,i->i", [(1,), (3,)]),
    ("ij->", [(2, 3)]), ("ij->ji", [(2, 3)]), ("...i,...i", [(2, 3), (5, 1, 3)]), ("i...->", [(2, 3)]),
    ("bA,aB", [(2, 3), (4, 3)]), ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]), ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]),
    ("a,b,c->abc", [(2,), (3,), (2,)]), ("iji->j", [(2, 3, 2)]), ("", [()]), ("i,->i", [(3,), ()]),
    ("iij->j", [(2, 2, 4)]), ("ij,ij,ij->i", [(2, 3), (2, 3), (1, 3)]), ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)]),
    ("ab...,b->...a", [(2, 3, 4, 5), (3,)]), ("ijj,jk", [(2, 3, 3), (3, 4)]),
]


def _einsum():
    out = []
    dts = itertools.cycle(F + [torch.int64, torch.int32])
    for (eq, shapes), dt in zip(_EINSUM * 2, dts):
        out.append(((eq, [_r(s, dt) for s in shapes]), {}))
    out.append((("ii->i", [_r((3, 3), torch.bool)]), {}))
    out.append((("i,j->ij", [_r((3,), torch.bool), _r((2,), torch.bool)]), {}))
    return out


def _pdist():
    out = []
    for dt in F:
        for shape, p in [((4, 3), 2.0), ((5, 2), 1.0), ((4, 3), 0.0), ((4, 3), INF), ((3, 4), 1.5), ((1, 3), 2.0), ((3, 0), 2.0)]:
            out.append(((_r(shape, dt), p), {}))
    return out


def _cdist():
    out = []
    for dt in [torch.float32, torch.float64]:
        for s1, s2, p, mode in [((3, 4), (5, 4), 2.0, None), ((2, 3, 4), (5, 4), 1.0, None), ((2, 1, 3, 2), (4, 5, 2), 0.0, None),
                                ((30, 3), (4, 3), 2.0, None), ((3, 4), (5, 4), INF, None), ((3, 4), (5, 4), 2.0, 1),
                                ((30, 4), (5, 4), 2.0, 2), ((3, 0), (2, 0), 2.0, None), ((3, 4), (5, 4), 3.0, None)]:
            out.append(((_r(s1, dt), _r(s2, dt), p, mode), {}))
    return out


def _grouped_mm():
    """MoE grouped GEMMs (no OpInfo): rows, columns or K split by int32 offsets, and the 3-d
    batched form; sizes multiples of 8 (torch's CPU kernel wants 16-byte strides), the last
    offset at the end (torch leaves positions past it uninitialised), an empty group."""
    out = []
    i32 = lambda v: torch.tensor(v, dtype=torch.int32)
    for dt in [torch.float32, torch.bfloat16, torch.float16]:
        out += [
            ((_r((16, 8), dt), _r((3, 8, 16), dt), i32([5, 5, 16])), {}),
            ((_r((24, 16), dt), _r((4, 16, 8), dt), i32([3, 9, 20, 24])), {}),
            ((_r((3, 8, 16), dt), _r((16, 24), dt), i32([8, 16, 24])), {}),
            ((_r((8, 24), dt), _r((24, 16), dt), i32([8, 8, 24])), {}),
            ((_r((2, 8, 16), dt), _r((2, 16, 8), dt)), {}),
        ]
    return out


def _softmax_backward(log):
    def gen():
        out = []
        for dt in F:
            for shape, dim in [((3, 4), 1), ((3, 4), 0), ((2, 3, 4), 1), ((5,), 0), ((), 0), ((0, 3), 1)]:
                x = _r(shape, dt)
                y = torch.ops.aten._log_softmax(x, dim, False) if log else torch.ops.aten._softmax(x, dim, False)
                out.append(((_r(shape, dt), y, dim, dt), {}))
        return out
    return gen


def _edge_unary(extra_args):
    """NaN / inf / empty / ties inputs for reductions."""
    def gen():
        nanv = torch.tensor([[1.0, NAN, 3.0], [-INF, 2.0, NAN], [0.0, 1.0, INF]])
        tied = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [5.0, -1.0, 5.0, -1.0]])
        out = []
        for x in (nanv, tied, tied.to(torch.int64), torch.zeros(0, 3), torch.zeros(3, 0)):
            for a in extra_args:
                out.append(((x, *a), {}))
        return out
    return gen


GENERATED = {
    "einsum": _einsum,
    "_grouped_mm": _grouped_mm,
    "_pdist_forward": _pdist,
    "_cdist_forward": _cdist,
    "_softmax_backward_data": _softmax_backward(False),
    "_log_softmax_backward_data": _softmax_backward(True),
    "max.dim": _edge_unary([(1,), (0, True)]),
    "min.dim": _edge_unary([(1,), (0, True)]),
    "argmax": _edge_unary([(1,), ()]),
    "argmin": _edge_unary([(1,), ()]),
    "amax": _edge_unary([([1],), ([0], True)]),
    "logsumexp": _edge_unary([([1],), ([0, 1], True)]),
    "var_mean.correction": _edge_unary([([1],), ()]),
    "linalg_vector_norm": _edge_unary([(2, [1]), (float("inf"), [1]), (0, None)]),
    "cumsum": _edge_unary([(1,), (0,)]),
    "sort": _edge_unary([(1,), (0, True)]),
    "any.dims": _edge_unary([([1],), ([], True), (None,)]),
}
