"""Generated samples: shape, indexing and creation ops (helper "shape")."""

import torch


def _x(*shape, dtype=torch.float32):
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    if dtype == torch.bool:
        return torch.rand(*shape) > 0.5
    return torch.randint(-5, 6, shape).to(dtype)


def _meta():
    return [((_x(2, 0, 3), 1), {}), ((_x(4, 5), -1), {}), ((_x(3), 0), {})]


def _meta1():
    return [((_x(2, 0, 3),), {}), ((_x(4, 5),), {}), ((torch.tensor(1.0),), {})]


def _embedding():
    w = torch.randn(10, 3)
    return [((w, torch.tensor([[0, 2], [9, 1]])), {}), ((w, torch.tensor([3], dtype=torch.int32)), {}),
            ((w.double(), torch.tensor(4)), {}), ((w, torch.tensor([1, 1]), 1), {}), ((w.half(), torch.zeros(0, dtype=torch.int64)), {})]


def _scatter_value():
    out = []
    for d in (torch.float32, torch.int64, torch.bool, torch.float16):
        x = _x(3, 4, dtype=d)
        out.append(((x, 1, torch.tensor([[0, 3], [1, 1], [2, 0]]), 1), {}))
        out.append(((x, 0, torch.tensor([[2, 0, 1, 1]]), 0.5 if d.is_floating_point else 0), {}))
    out.append(((torch.tensor(1.0), 0, torch.tensor(0), 3.0), {}))
    return out


def _index_dtypes():
    out = []
    for d in (torch.float64, torch.int32, torch.bool, torch.bfloat16, torch.uint8):
        x = _x(3, 4, dtype=d)
        out.append(((x, [torch.tensor([2, -3])]), {}))
        out.append(((x, [torch.tensor([[0], [2]]), torch.tensor([1, 3, -1])]), {}))
        out.append(((x, [x != x.flatten()[0]]), {}))
    return out


def _index():
    x = _x(3, 4, 5)
    i = torch.tensor([0, -1, 2])
    m = torch.tensor([True, False, True])
    m2 = torch.rand(3, 4) > 0.5
    return [
        ((x, [i]), {}),
        ((x, [None, torch.tensor([[1], [3]]), torch.tensor([0, 4])]), {}),
        ((x, [i, None, torch.tensor([1, 2, 3], dtype=torch.int32)]), {}),
        ((x, [m]), {}),
        ((x, [m2]), {}),
        ((x, [m, torch.tensor(1)]), {}),
        ((x, [torch.zeros(3, dtype=torch.bool)]), {}),
        ((_x(4, dtype=torch.int64), [torch.tensor([True, True, False, True])]), {}),
        ((_x(2, 3, dtype=torch.bool), [torch.tensor([1, 0])]), {}),
        ((x, [torch.tensor([], dtype=torch.int64)]), {}),
    ]


def _index_put():
    x = _x(3, 4)
    m = torch.tensor([True, False, True])
    m2 = torch.rand(3, 4) > 0.5
    return [
        ((x, [torch.tensor([0, 2])], torch.randn(2, 4)), {}),
        ((x, [torch.tensor([0, 0, 1]), torch.tensor([1, 1, 3])], torch.randn(3)), {"accumulate": True}),
        ((x, [None, torch.tensor([-1, 0])], torch.randn(1)), {}),
        ((x, [m], torch.randn(2, 4)), {}),
        ((x, [m], torch.randn(4)), {"accumulate": True}),
        ((x, [m2], torch.randn(int(m2.sum()))), {}),
        ((x, [m2], torch.tensor(2.0)), {}),
        ((_x(3, 4, dtype=torch.int64), [m], torch.tensor(7)), {"accumulate": True}),
    ]


def _nonzero():
    return [((_x(3, 4, dtype=d),), {}) for d in (torch.float32, torch.int64, torch.bool)] + [
        ((torch.tensor(0.0),), {}),
        ((torch.tensor(3),), {}),
        ((torch.zeros(2, 0),), {}),
        ((torch.tensor([0.0, float("nan"), 1.0]),), {}),
    ]


def _dropout():
    return [((torch.randn(20, 30), 0.3, True), {}), ((torch.randn(5), 0.5, False), {}),
            ((torch.randn(4, 4, dtype=torch.float64), 0.0, None), {}), ((torch.randn(0, 3), 0.5, True), {})]


def _ebw():
    g = torch.randn(2, 3, 4)
    i = torch.tensor([[0, 2, 2], [1, 0, 5]])
    return [((g, i, 6, -1, False), {}), ((g, i, 6, 2, False), {}), ((g, i, 6, 0, True), {}),
            ((g.double(), i.int(), 7, -1, True), {})]


def _arange():
    return [((10,), {}), ((2.5,), {}), ((5,), {"dtype": torch.float64}), ((7,), {"dtype": torch.int32})]


def _arange_start():
    return [((1, 10), {}), ((-3, 2.5), {}), ((0, 5), {"dtype": torch.bfloat16})]


def _arange_step():
    return [((0, 10, 3), {}), ((10, 0, -3), {}), ((0, 1, 0.1), {}), ((-1.5, 2.5, 0.5), {"dtype": torch.float64}),
            ((0.5, 5, 1.5), {"dtype": torch.int64}), ((0, 5, 1), {"dtype": torch.float16})]


GENERATED = {
    "sym_size.int": _meta,
    "sym_stride.int": _meta,
    "sym_numel": _meta1,
    "sym_storage_offset": _meta1,
    "sym_is_contiguous": _meta1,
    "index.Tensor": lambda: _index() + _index_dtypes(),
    "embedding": _embedding,
    "scatter.value": _scatter_value,
    "index_put": _index_put,
    "nonzero": _nonzero,
    "native_dropout": _dropout,
    "bernoulli.p": lambda: [((torch.rand(10, 10), 0.3), {}), ((torch.rand(5, dtype=torch.float64), 1.0), {})],
    "rand": lambda: [(([3, 4],), {}), (([2],), {"dtype": torch.float64}), (([0, 2],), {})],
    "randn": lambda: [(([3, 4],), {}), (([2],), {"dtype": torch.float16})],
    "randperm": lambda: [((10,), {}), ((5,), {"dtype": torch.int32}), ((0,), {})],
    "embedding_dense_backward": _ebw,
    "arange": _arange,
    "arange.start": _arange_start,
    "arange.start_step": _arange_step,
    "full": lambda: [(([2, 3], 1.5), {}), (([2], 3), {}), (([2], True), {}), (([3], 2), {"dtype": torch.float16})],
    "zeros": lambda: [(([2, 3],), {}), (([0],), {"dtype": torch.int64})],
    "ones": lambda: [(([2, 3],), {}), (([2],), {"dtype": torch.bool})],
    "empty.memory_format": lambda: [(([2, 3],), {}), (([4],), {"dtype": torch.int32})],
    "empty_strided": lambda: [(([2, 3], [3, 1]), {})],
    "resize_": lambda: [((torch.randn(6), [2, 3]), {}), ((torch.randn(6), [2]), {})],
    "masked_scatter": lambda: [((torch.randn(3, 4), torch.rand(3, 4) > 0.5, torch.randn(12)), {}),
                               ((torch.randn(3, 4), torch.tensor([True, False, False, True]), torch.randn(20)), {})],
}
