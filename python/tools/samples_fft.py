"""Generated samples: the FFT primitives `_fft_r2c` / `_fft_c2r` / `_fft_c2c`, beyond what the
torch.fft OpInfos reach (any dim order, more than three dims, every normalization, full
spectra, odd and even lengths, a c2r input holding the full n entries, forward and inverse
c2c)."""

import torch


def _r2c():
    g = torch.Generator().manual_seed(0)
    out = []
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(3, 4, 5, generator=g, dtype=dtype)
        out += [
            ((x, [2], 0, True), {}),
            ((x, [0, 2], 1, True), {}),
            ((x, [2, 0], 2, False), {}),
            ((x, [-1, -2, -3], 0, False), {}),
            ((x, [1], 2, True), {}),
        ]
        y = torch.randn(2, 3, 2, 3, 4, generator=g, dtype=dtype)
        out += [((y, [0, 1, 2, 3, 4], 1, True), {}), ((y, [4, 0, 3, 1], 0, False), {})]
    return out


def _c2r():
    g = torch.Generator().manual_seed(1)
    out = []
    for dtype in (torch.complex64, torch.complex128):
        z = torch.randn(3, 4, 5, generator=g, dtype=dtype)
        out += [
            ((z, [2], 2, 8), {}),
            ((z, [2], 0, 9), {}),
            ((z, [0, 2], 1, 8), {}),
            ((z, [2, 1], 0, 6), {}),  # dim 1 has 4 = 6/2 + 1 entries
            ((z, [1, 2, 0], 2, 5), {}),  # dim 0 has 3 = 5/2 + 1 entries
            ((z, [2], 2, 5), {}),  # the full n = 5 entries
        ]
        w = torch.randn(2, 2, 3, 2, 3, generator=g, dtype=dtype)
        out += [((w, [0, 1, 2, 3, 4], 0, 4), {})]
    return out


def _c2c():
    g = torch.Generator().manual_seed(2)
    out = []
    for dtype in (torch.complex64, torch.complex128):
        z = torch.randn(3, 4, 5, generator=g, dtype=dtype)
        for forward in (True, False):
            out += [
                ((z, [2], 0, forward), {}),
                ((z, [0, 2], 1, forward), {}),
                ((z, [2, 1, 0], 2, forward), {}),
            ]
        w = torch.randn(2, 2, 3, 2, 3, generator=g, dtype=dtype)
        out += [((w, [0, 1, 2, 3, 4], 1, True), {}), ((w, [4, 0, 3, 1], 2, False), {})]
    return out


GENERATED = {
    "_fft_r2c": _r2c,
    "_fft_c2r": _c2r,
    "_fft_c2c": _c2c,
}
