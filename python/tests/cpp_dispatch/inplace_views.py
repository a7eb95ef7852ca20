"""In-place view ops (`squeeze_`, `unsqueeze_`, `t_`, `transpose_`, `swapdims_`,
`as_strided_`, `detach_`) under either dispatch (test_device.py for the Python one, checks.py
for the C++ one): they change the tensor's own sizes, strides and storage offset as on the
CPU, return the tensor itself, keep its storage (a view of the same storage sees the values
unchanged and writes through), in eager and inside torch.compile's programs (where torch's
functionalization replays them on its wrappers). Values are copies, so compared exactly."""

import torch

# name -> the op applied to a [2, 1, 3] tensor.
CASES = {
    "squeeze_": lambda t: t.squeeze_(),
    "squeeze_.dim": lambda t: t.squeeze_(1),
    "squeeze_.dims": lambda t: t.squeeze_((1,)),
    "unsqueeze_": lambda t: t.unsqueeze_(0),
    "transpose_": lambda t: t.transpose_(0, 2),
    "t_": lambda t: t.squeeze_(1).t_(),
    "swapdims_": lambda t: t.swapdims_(0, 2),
    "as_strided_": lambda t: t.as_strided_((3, 2), (1, 3), 0),
    "detach_": lambda t: t.detach_(),
}


def compiled_step(x):
    y = x * 2
    y.unsqueeze_(0)
    y.transpose_(0, 2)
    return y + 1


def check_inplace_views(device):
    """Raises on the first difference from torch CPU; returns how many cases were compared."""
    base = torch.arange(6.0).reshape(2, 1, 3)
    compared = 0
    for name, op in CASES.items():
        a, d = base.clone(), base.to(device)
        alias = d.view(-1)
        got, want = op(d), op(a)
        assert got is d, name
        assert (got.shape, got.stride(), got.storage_offset()) == (
            want.shape, want.stride(), want.storage_offset()), (name, got.stride(), want.stride())
        assert torch.equal(got.cpu(), want), name
        d.zero_()  # writes through to the other view of the storage
        assert torch.equal(alias.cpu(), torch.zeros(6)), name
        compared += 1
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(7))
    got = torch.compile(compiled_step, backend="tessera")(x.to(device))
    want = compiled_step(x)
    assert got.shape == want.shape and torch.equal(got.cpu(), want), (got.shape, want.shape)
    return compared + 1
