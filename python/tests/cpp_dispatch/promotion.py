"""Python numbers next to device tensors promote as torch promotes them (`int_tensor * 2.5` is
float32, `float32_tensor * 1j` complex64, `float64_tensor * (0.1+0.3j)` complex128 with the
number's full precision), checked against torch CPU under either dispatch: test_device.py
(Python) and checks.py (C++) call `check_python_numbers`."""

import torch

DTYPES = (torch.int64, torch.int32, torch.bool, torch.float16, torch.bfloat16, torch.float32,
          torch.float64, torch.complex64, torch.complex128)
NUMBERS = (2, 2.5, 0.1 + 0.3j, True)
OPS = (
    lambda a, n: a * n,
    lambda a, n: a + n,
    lambda a, n: n - a,  # rsub.Scalar
    lambda a, n: torch.where(a.real > 0 if a.is_complex() else a > 0, a, n),
)


def check_python_numbers(device):
    """Every (dtype, number, op) torch CPU accepts gives torch's dtype and values (rtol 1e-6;
    1e-2 for float16/bfloat16); returns how many were compared."""
    g = torch.Generator().manual_seed(21)
    compared = 0
    for dtype in DTYPES:
        x = (torch.randn(3, 4, generator=g) * 3).to(dtype)
        d = x.to(device)
        for n in NUMBERS:
            if dtype in (torch.float16, torch.bfloat16) and isinstance(n, complex):
                continue  # complex32: not a Tessera dtype
            for op in OPS:
                try:
                    want = op(x, n)
                except RuntimeError:
                    continue  # torch refuses it too (bool - bool)
                got = op(d, n)
                assert got.dtype == want.dtype, (dtype, n, got.dtype, want.dtype)
                tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
                torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol)
                compared += 1
    x = torch.randn(3, dtype=torch.float64, generator=g)
    torch.testing.assert_close((x.to(device) * (0.1 + 0.3j)).cpu(), x * (0.1 + 0.3j),
                               rtol=1e-15, atol=0)
    return compared
