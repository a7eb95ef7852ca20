"""tessera.ops.call on torch tensors: results vs torch CPU, in-place and out= forms, and the
error paths (clean Python exceptions, the interpreter keeps running)."""

import pytest
import torch

import tessera
from tessera import ops


def test_add_broadcasts_promotes_and_scales():
    x = torch.randn(4, 3)
    y = torch.randint(-3, 3, (3,), dtype=torch.int32)
    got = ops.call("aten::add.Tensor", x, y, alpha=2)
    torch.testing.assert_close(got, torch.ops.aten.add.Tensor(x, y, alpha=2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.uint8])
def test_dtypes_round_trip(dtype):
    x = (torch.randn(5, 2) * 10).to(dtype)
    got = ops.call("abs", x)
    assert got.dtype == dtype
    torch.testing.assert_close(got, torch.abs(x))


def test_empty_and_zero_dim_tensors():
    e = torch.empty(0, 3)
    assert ops.call("add.Tensor", e, e).shape == (0, 3)
    s = torch.tensor(2.5)
    torch.testing.assert_close(ops.call("add.Tensor", s, s), torch.tensor(5.0))


def test_non_contiguous_input_is_read_logically():
    x = torch.randn(3, 4).t()
    torch.testing.assert_close(ops.call("abs", x), x.abs())


def test_in_place_writes_self_and_returns_it():
    x = torch.randn(2, 3)
    y = torch.randn(3)
    want = x + y
    got = ops.call("add_.Tensor", x, y)
    assert got is x
    torch.testing.assert_close(x, want)


def test_out_form_resizes_and_writes_out():
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    out = torch.empty(0)
    got = ops.call("add.out", x, y, out=out)
    assert got is out and out.shape == (2, 3)
    torch.testing.assert_close(out, x + y)


def test_unknown_op():
    with pytest.raises(tessera.UnknownOpError, match="unknown op `aten::not_an_op`"):
        ops.call("aten::not_an_op", torch.ones(1))


def test_wrong_argument_count_and_type():
    with pytest.raises(tessera.ArgumentError, match="missing required argument `other`"):
        ops.call("add.Tensor", torch.ones(2))
    with pytest.raises(tessera.ArgumentError, match="takes 2 positional argument"):
        ops.call("add.Tensor", torch.ones(2), torch.ones(2), 3)
    with pytest.raises(tessera.ArgumentError, match="argument `other` must be a Tensor, not str"):
        ops.call("add.Tensor", torch.ones(2), "x")
    with pytest.raises(TypeError, match="cannot pass a object"):
        ops.call("add.Tensor", torch.ones(2), object())


def test_shapes_that_do_not_broadcast():
    with pytest.raises(tessera.ArgumentError, match="must match the size"):
        ops.call("add.Tensor", torch.ones(2), torch.ones(3))


def test_unsupported_dtypes():
    # `asinh`'s lowering is real-only (complex64 is refused up front); `add`'s takes complex.
    with pytest.raises(tessera.UnsupportedError, match=r"complex tensors \(c64\)"):
        ops.call("asinh", torch.ones(2, dtype=torch.complex64))
    z = torch.complex(torch.ones(2), torch.tensor([2.0, -1.0]))
    torch.testing.assert_close(ops.call("add.Tensor", z, torch.ones(2)), z + 1, rtol=0, atol=0)
    with pytest.raises(tessera.TesseraError, match="bool"):
        ops.call("abs", torch.tensor([True, False]))


def test_interpreter_survives_errors():
    for _ in range(3):
        with pytest.raises(tessera.TesseraError):
            ops.call("aten::not_an_op")
    torch.testing.assert_close(ops.call("abs", torch.tensor([-1.0])), torch.tensor([1.0]))


def test_table_has_the_core_set():
    table = ops.table()
    assert sum(t["core"] for t in table) == 193
    assert len(table) >= 450


def test_python_number_for_a_tensor_is_a_wrapped_number():
    # torch wraps 2.5 as a number: an int32 tensor plus 2.5 is float32, not float64.
    x = torch.arange(4, dtype=torch.int32)
    got = ops.call("add.Tensor", x, 2.5)
    torch.testing.assert_close(got, torch.ops.aten.add.Tensor(x, 2.5))
    assert got.dtype == torch.float32
    y = torch.randn(3)
    want = y + 2.5
    ops.call("add_.Tensor", y, 2.5)
    torch.testing.assert_close(y, want)


def test_one_element_tensor_for_an_int():
    x = torch.randn(6, 4)
    got = ops.call("narrow", x, 0, torch.tensor(2), 3)
    torch.testing.assert_close(got, x.narrow(0, 2, 3))
    got = ops.call("max.dim", x, torch.tensor(1.0))
    torch.testing.assert_close(got, tuple(torch.ops.aten.max.dim(x, 1)))
    with pytest.raises(tessera.ArgumentError, match="`start` must be an int, not Tensor"):
        ops.call("narrow", x, 0, torch.tensor([1, 2]), 3)


def test_in_place_views_change_the_shape_of_self():
    x = torch.randn(2, 3)
    want = x.t().clone()
    assert ops.call("t_", x) is x
    assert x.shape == (3, 2)
    torch.testing.assert_close(x, want)
    y = torch.randn(4)
    ops.call("unsqueeze_", y, 0)
    assert y.shape == (1, 4)


def test_out_form_of_a_data_dependent_shape():
    x = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    out = torch.empty(0, dtype=torch.int64)
    ops.call("nonzero.out", x, out=out)
    torch.testing.assert_close(out, torch.nonzero(x))


def test_batch_norm_training_updates_the_running_statistics():
    x = torch.randn(4, 3, 5)
    mean, var = torch.randn(3), torch.rand(3)
    want_mean, want_var = mean.clone(), var.clone()
    want = torch.ops.aten._native_batch_norm_legit(x, None, None, want_mean, want_var, True, 0.1, 1e-5)
    got = ops.call("_native_batch_norm_legit", x, None, None, mean, var, True, 0.1, 1e-5)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close((mean, var), (want_mean, want_var))
    # Eval mode leaves them alone.
    before = mean.clone()
    ops.call("_native_batch_norm_legit", x, None, None, mean, var, False, 0.1, 1e-5)
    torch.testing.assert_close(mean, before, rtol=0, atol=0)
