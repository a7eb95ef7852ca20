"""Generated samples: the view-like ops no OpInfo names (`_unsafe_view`, the `_copy` forms
functionalization emits without OpInfos, swapaxes, zero, pixel_shuffle/unshuffle)."""

import torch

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.uint8, torch.bool]


def _r(*shape, dtype=torch.float32):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=torch.float64).to(dtype)
    return torch.randint(0, 100, shape).to(dtype)


def _each(*cases):
    """`cases`: functions of a dtype giving (args, kwargs)."""
    def gen():
        return [c(dt) for dt in DTYPES for c in cases]
    return gen


GENERATED = {
    "_unsafe_view": _each(lambda d: ((_r(2, 3, 4, dtype=d), [6, 4]), {}), lambda d: ((_r(2, 3, 4, dtype=d), [-1]), {}),
                          lambda d: ((_r(dtype=d), [1, 1]), {}), lambda d: ((_r(0, 3, dtype=d), [3, 0]), {})),
    "detach_copy": _each(lambda d: ((_r(2, 3, dtype=d),), {}), lambda d: ((_r(dtype=d),), {})),
    "lift_fresh_copy": _each(lambda d: ((_r(2, 3, dtype=d),), {})),
    "slice_copy.Tensor": _each(lambda d: ((_r(5, 4, dtype=d), 0, 1, 4, 2), {}), lambda d: ((_r(5, 4, dtype=d), -1, -3, None, 1), {}),
                               lambda d: ((_r(5, 4, dtype=d), 1, 10, 20), {})),
    "select_copy.int": _each(lambda d: ((_r(5, 4, dtype=d), 0, 3), {}), lambda d: ((_r(5, 4, 2, dtype=d), -2, -1), {})),
    "split_copy.Tensor": _each(lambda d: ((_r(5, 4, dtype=d), 2), {}), lambda d: ((_r(5, 4, dtype=d), 3, 1), {})),
    "swapaxes": _each(lambda d: ((_r(2, 3, 4, dtype=d), 0, 2), {}), lambda d: ((_r(2, 3, dtype=d), -1, 0), {}),
                      lambda d: ((_r(dtype=d), 0, -1), {})),
    "zero": _each(lambda d: ((_r(2, 3, dtype=d),), {}), lambda d: ((_r(0, dtype=d),), {})),
    "pixel_shuffle": _each(lambda d: ((_r(2, 8, 3, 2, dtype=d), 2), {}), lambda d: ((_r(9, 2, 3, dtype=d), 3), {}),
                           lambda d: ((_r(1, 2, 4, 1, 1, dtype=d), 1), {})),
    "pixel_unshuffle": _each(lambda d: ((_r(2, 2, 4, 6, dtype=d), 2), {}), lambda d: ((_r(1, 6, 3, dtype=d), 3), {})),
}
GENERATED.update({
    "movedim.int": _each(lambda d: ((_r(2, 3, 4, dtype=d), 0, 2), {}), lambda d: ((_r(2, 3, 4, dtype=d), -1, 0), {})),
    "squeeze_copy.dims": _each(lambda d: ((_r(2, 1, 4, 1, dtype=d), [1, 3]), {}), lambda d: ((_r(1, 3, dtype=d), [0, -1]), {})),
})
