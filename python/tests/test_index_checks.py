"""Data checks made on the device (issue 17, silent wrong answers): out-of-range indices and
targets, integer division by zero, and numbers where torch wants a Tensor. Each case runs the
same inputs through `torch.ops.aten` and `tessera.ops.call`: where torch raises, Tessera raises
a `tessera.ArgumentError` carrying torch's message; where torch returns (negative indices that
wrap, ignored targets, seeded in-range draws), the values are torch's."""

import pytest
import torch

import tessera
from tessera import ops as tops

aten = torch.ops.aten
X = torch.arange(15, dtype=torch.float32).reshape(5, 3)
i = lambda *v: torch.tensor(v)  # noqa: E731

CASES = [
    # (overload, args, kwargs)
    ("index_select", (X, 0, i(0, 10)), {}),
    ("index_select", (X, 0, i(0, -1)), {}),
    ("index_select", (X, 1, torch.tensor(3)), {}),
    ("embedding", (X, i(0, 10)), {}),
    ("embedding", (X, i(0, -1)), {}),
    ("embedding", (X, i(2**40)), {}),
    ("index.Tensor", (X, [i(0, 10)]), {}),
    ("index.Tensor", (X, [i(0, -1)]), {}),
    ("index.Tensor", (X, [i(0, -6)]), {}),
    ("index.Tensor", (X, [None, i(0, 3)]), {}),
    ("index.Tensor", (X, [i(0, 1), i(0, 5)]), {}),
    ("gather", (X, 0, i(0, 10).view(2, 1)), {}),
    ("gather", (X, 1, i(-1).view(1, 1)), {}),
    ("take", (X, i(0, 15)), {}),
    ("take", (X, i(0, -1)), {}),
    ("take", (X, i(0, -16)), {}),
    ("scatter.value", (X, 0, i(0, 10).view(2, 1), 1.0), {}),
    ("scatter.src", (X, 0, i(0, -1).view(2, 1), X), {}),
    ("scatter_add", (X, 0, i(0, 10).view(2, 1), X), {}),
    ("scatter_reduce.two", (X, 0, i(0, 10).view(2, 1), X, "amax"), {}),
    ("index_put", (X, [i(0, 10)], torch.tensor(1.0)), {}),
    ("index_put", (X, [i(0, -1)], torch.tensor(1.0)), {}),
    ("index_add", (X, 0, i(0, 10), torch.ones(2, 3)), {}),
    ("index_add", (X, 0, i(0, -1), torch.ones(2, 3)), {}),
    ("index_copy", (X, 0, i(0, 10), torch.ones(2, 3)), {}),
    ("index_fill.int_Scalar", (X, 1, i(0, 5), 1.0), {}),
    ("index_fill.int_Scalar", (X, 1, i(0, -1), 1.0), {}),
    ("nll_loss_forward", (X, i(0, 7, 1, 1, 1), None, 1, -100), {}),
    ("nll_loss_forward", (X, i(0, -1, 1, 1, 1), None, 1, -100), {}),
    ("nll_loss_forward", (X, i(0, -100, 1, 1, 1), None, 1, -100), {}),
    ("nll_loss_forward", (X, i(0, 3, 1, 1, 1), None, 1, 3), {}),
    ("nll_loss_backward", (torch.tensor(1.0), X, i(0, 7, 1, 1, 1), None, 1, -100, torch.tensor(5.0)), {}),
    ("nll_loss2d_forward", (torch.zeros(1, 3, 2, 2), torch.full((1, 2, 2), 7), None, 1, -100), {}),
    ("cross_entropy_loss", (X, i(0, 7, 1, 1, 1)), {}),
    ("_embedding_bag", (X, i(0, 10), i(0)), {}),
    ("one_hot", (i(0, 5), 3), {}),
    ("one_hot", (i(0, -1), 3), {}),
    ("div.Tensor_mode", (i(1, 2), i(0, 1)), {"rounding_mode": "floor"}),
    ("div.Tensor_mode", (i(1, 2), i(0, 1)), {"rounding_mode": "trunc"}),
    ("div.Tensor_mode", (i(1, 2).byte(), i(0, 1).byte()), {"rounding_mode": "floor"}),
    ("div.Tensor", (i(1, 2), i(0, 1)), {}),
    ("floor_divide", (i(1, 2), i(0, 1)), {}),
    ("remainder.Tensor", (i(1, 2).int(), i(0, 1).int()), {}),
    ("remainder.Scalar", (i(1, 2), 0), {}),
    ("fmod.Tensor", (i(1, 2), i(0, 1)), {}),
    ("fmod.Scalar", (i(1, 2), 0), {}),
    ("pow.Tensor_Scalar", (1.5, 2), {}),
    ("lerp.Tensor", (X, X, 0.5), {}),
    ("where.self", (X > 3, 1.0, X), {}),
    ("add.Tensor", (1.5, X), {}),
    # Argument checks torch makes (OpInfo error_inputs and issue 17's reproducers).
    ("max_pool2d_with_indices", (torch.zeros(1, 1, 4, 4), [2, 2], [2, 2], [2, 2]), {}),
    ("full", ([2], 1.5), {"dtype": torch.bool}),
    ("group_norm", (torch.zeros(2, 0, 3), 1), {}),
    ("group_norm", (torch.zeros(2, 4, 0), 2), {}),
    ("linalg_cross", (torch.zeros(5, 3), torch.zeros(5, 1)), {}),
    ("masked_scatter", (torch.zeros(1, 3), torch.ones(1, 3, dtype=torch.uint8), torch.zeros(3, 4)), {}),
    ("amax", (torch.zeros([1] * 65), [-1]), {}),
    ("amax.out", (X, [0]), {"out": torch.empty(3, dtype=torch.float64)}),
    ("gather.out", (X, 1, torch.zeros(5, 3, dtype=torch.long)), {"out": torch.empty(5, 3, dtype=torch.float64)}),
]


def _clone(v):
    if isinstance(v, torch.Tensor):
        return v.clone()
    if isinstance(v, list):
        return [_clone(x) for x in v]
    return v


def _torch(op, args, kwargs):
    name, _, overload = op.partition(".")
    fn = getattr(getattr(aten, name), overload or "default")
    return fn(*_clone(list(args)), **kwargs)


@pytest.mark.parametrize("op,args,kwargs", CASES, ids=[f"{c[0]}-{n}" for n, c in enumerate(CASES)])
def test_same_verdict_and_message_as_torch(op, args, kwargs):
    try:
        want = _torch(op, args, kwargs)
    except (RuntimeError, IndexError) as e:
        message = str(e).splitlines()[0]
        # torch.ops prefixes schema errors with the op's name (`aten::pow() Expected ...`).
        message = message.split("() ", 1)[1] if message.startswith("aten::") else message
        with pytest.raises(tessera.ArgumentError) as got:
            tops.call(op, *_clone(list(args)), **kwargs)
        assert message in str(got.value), f"torch: {type(e).__name__}: {message}"
        assert op.split(".")[0] in str(got.value)
        return
    got = tops.call(op, *_clone(list(args)), **kwargs)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True)


@pytest.mark.parametrize("seed", range(4))
def test_in_range_indices_give_torchs_values(seed):
    g = torch.Generator().manual_seed(seed)
    n, d, k = 2 + seed * 3, 1 + seed, 4 + 5 * seed
    x = torch.randn(n, d, generator=g)
    idx = torch.randint(-n, n, (k,), generator=g)
    pos = idx.remainder(n)
    cases = [
        ("index_select", (x, 0, pos)),
        ("embedding", (x, pos)),
        ("index.Tensor", (x, [idx])),
        ("take", (x, idx)),
        ("gather", (x, 0, pos.view(k, 1).expand(k, d).contiguous()[: min(k, n)])),
        ("index_add", (x, 0, pos, torch.ones(k, d))),
        ("scatter_add", (x, 0, pos.view(k, 1).expand(k, d).contiguous(), torch.ones(k, d))),
        ("nll_loss_forward", (x.log_softmax(1), torch.randint(0, d, (n,), generator=g), None, 1, -100)),
    ]
    for op, args in cases:
        want = _torch(op, args, {})
        got = tops.call(op, *_clone(list(args)))
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=op)
