"""`torch.autocast("tpu", dtype=...)` under either dispatch (test_device.py for the Python one,
checks.py for the C++ one): the device takes CUDA's cast policy (torch's op lists,
csrc/autocast.cpp), so the dtypes are CUDA's, and the values are torch CPU's on the same casts
made by hand: matmuls in the lower precision (rtol/atol 2e-2 for bfloat16, 2e-3 for float16),
softmax, sums, norms and losses in float32; gradients of float32 weights are float32."""

import torch

LOWER_TOL = {torch.bfloat16: 2e-2, torch.float16: 2e-3}


def check_autocast(device):
    """Raises on the first dtype or value that differs; returns how many were compared."""
    g = torch.Generator().manual_seed(5)
    x, w = torch.randn(4, 8, generator=g), torch.randn(8, 3, generator=g)
    lin = torch.nn.Linear(8, 3)
    dev_lin = torch.nn.Linear(8, 3)
    dev_lin.load_state_dict(lin.state_dict())
    dev_lin.to(device)
    dx, dw = x.to(device).requires_grad_(), w.to(device)
    compared = 0
    for low, tol in LOWER_TOL.items():
        with torch.autocast(device, dtype=low):
            mm = dx @ dw
            soft = torch.softmax(mm, -1)
            total = mm.sum()
            norm = torch.nn.functional.layer_norm(mm, (3,))
            out = dev_lin(dx)
            loss = torch.nn.functional.mse_loss(out, torch.zeros(4, 3, device=device))
        assert not torch.is_autocast_enabled(device)
        cx = x.clone().requires_grad_()
        want_mm = cx.to(low) @ w.to(low)
        want_out = torch.nn.functional.linear(cx.to(low), lin.weight.to(low), lin.bias.to(low))
        want = {
            "mm": (mm, want_mm),
            "softmax": (soft, torch.softmax(want_mm.float(), -1)),
            "sum": (total, want_mm.float().sum()),
            "layer_norm": (norm, torch.nn.functional.layer_norm(want_mm.float(), (3,))),
            "linear": (out, want_out),
            "mse_loss": (loss, torch.nn.functional.mse_loss(want_out.float(), torch.zeros(4, 3))),
        }
        for name, (got, ref) in want.items():
            assert got.device.type == device, (name, got.device)
            assert got.dtype == ref.dtype, (low, name, got.dtype, ref.dtype)
            torch.testing.assert_close(got.detach().cpu(), ref.detach(), rtol=tol, atol=tol)
            compared += 1
        # Backward outside autocast, as torch recommends: float32 leaves get float32 grads.
        dev_lin.zero_grad()
        lin.zero_grad()
        loss.backward()
        torch.nn.functional.mse_loss(want_out.float(), torch.zeros(4, 3)).backward()
        for got, ref in ((dev_lin.weight.grad, lin.weight.grad), (dx.grad, cx.grad)):
            assert got.dtype == torch.float32, got.dtype
            torch.testing.assert_close(got.cpu(), ref, rtol=tol, atol=tol)
            compared += 1
        dx.grad = None
    return compared
