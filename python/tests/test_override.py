"""The softmax kernel registered as an override of aten::_softmax, seen from Python."""

import torch

from tessera import ops


def test_softmax_override_is_chosen_only_where_it_applies():
    x = torch.randn(16, 256)
    got, kernel = ops.last_kernel("aten::_softmax", x, -1, False)
    assert kernel == "softmax"
    torch.testing.assert_close(got, torch.softmax(x, -1))
    default, kernel = ops.last_kernel("aten::_softmax", x, -1, False, overrides=False)
    assert kernel is None
    torch.testing.assert_close(got, default, rtol=0, atol=1e-6)
    got, kernel = ops.last_kernel("aten::_softmax", x, 0, False)
    assert kernel is None
    torch.testing.assert_close(got, torch.softmax(x, 0))
    table = {t["name"]: t for t in ops.table()}
    assert table["_softmax"]["overrides"] == ["softmax"]
