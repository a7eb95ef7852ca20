"""The sweep's judgement (python/tools/oracles.py, tolerance.py, known_differences.py): each
known difference is explained by its own oracle and nothing else; a wrong result still fails;
sample draws are reproducible per seed and independent of what ran before."""

import itertools

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import sweep
import tolerance
from oracles import Call
from tessera import ops

TAGS = {t["name"]: t["tags"] for t in ops.table()}


def judge(name, func, args, actual=None, kwargs=None, overrides=None):
    kwargs = kwargs or {}
    call = Call(name, TAGS[name], func, args, kwargs, False, overrides)
    if actual is None:
        actual = ops.call(name, *args, **kwargs)
    return call.judge(actual, None)


def test_gelu_at_inf_is_judged_by_torchs_float64_result():
    # torch's vectorised f32 gelu gives NaN at +inf on AVX-512 (this machine) and for some
    # positions elsewhere; Tessera and torch's float64 kernel give +inf.
    x = torch.full((53,), 0.5)
    x[7] = float("inf")
    got = ops.call("gelu", x)
    assert got[7].item() == float("inf")
    error, known = judge("gelu", torch.ops.aten.gelu.default, (x,), got)
    assert error is None
    # The float64 oracle explains only torch's NaN at +inf; where torch gives +inf too (no
    # AVX-512), its f32 result may still differ by an ulp elsewhere, within tolerance.
    torch_nan_at_inf = torch.isnan(torch.nn.functional.gelu(x)[7]).item()
    assert known == ("float64_oracle" if torch_nan_at_inf else None)


def test_subnormal_flush_is_explained_and_counted():
    x = torch.tensor([1e-45, -1e-45, 0.5, 2.5])
    got = ops.call("ceil", x)
    assert got.tolist() == [0.0, -0.0, 1.0, 3.0]  # XLA CPU flushes 1e-45 to 0 before ceil
    error, known = judge("ceil", torch.ops.aten.ceil.default, (x,), got)
    assert (error, known) == (None, "denormal_flush")


def test_a_wrong_result_fails_every_oracle():
    x = torch.full((53,), 0.5)
    x[3] = 1e-45
    wrong = ops.call("ceil", x)
    wrong[10] += 1
    error, known = judge("ceil", torch.ops.aten.ceil.default, (x,), wrong)
    assert error is not None and known is None


def test_float32_contraction_uses_a_k_dependent_bound_and_still_fails_wrong_results():
    g = torch.Generator().manual_seed(5)
    a = torch.randn(2, 8, 4096, generator=g)
    b = torch.randn(2, 4096, 8, generator=g)
    ref = torch.bmm(a.double(), b.double())
    # A correct result summed in another order: the float64 result rounded to f32, off by
    # more than torch's fixed 1e-5 where k = 4096.
    shifted = (ref + ref.abs() * 3e-6 + 2e-5).float()
    error, known = judge("bmm", torch.ops.aten.bmm.default, (a, b), shifted)
    assert (error, known) == (None, "contraction_bound")
    wrong = shifted.clone()
    wrong[0, 0, 0] += 0.5
    error, known = judge("bmm", torch.ops.aten.bmm.default, (a, b), wrong)
    assert error is not None and known is None


def test_opinfo_tolerance_overrides_follow_pytorchs_decorators():
    by_name = {o.name: o for o in op_db if not o.variant_test_name}
    # bmm's OpInfo raises float32's tolerance for TestCommon.test_noncontiguous_samples on CPU.
    over = tolerance.opinfo_overrides(by_name["bmm"])
    assert over[torch.float32] == (1e-5, 1e-5)
    atol, rtol = tolerance.tolerance(torch.float32, over)
    assert (atol, rtol) == (1e-5, 1e-5)
    # Without an override: torch.testing's defaults.
    assert tolerance.tolerance(torch.float32, {}) == (1e-5, 1.3e-6)
    assert tolerance.tolerance(torch.int32, over) == (0.0, 0.0)


def _draw(opinfo, dtype):
    sweep.seed_for("opinfo", opinfo.name, opinfo.variant_test_name, dtype)
    return list(itertools.islice(opinfo.sample_inputs("cpu", dtype, set_seed=False), 4))


def test_sample_draws_depend_on_the_seed_and_the_op_only(monkeypatch):
    bmm = next(o for o in op_db if o.name == "bmm")
    first = _draw(bmm, torch.float32)
    torch.randn(1000)  # unrelated draws in between change nothing
    again = _draw(bmm, torch.float32)
    assert all(torch.equal(a.input, b.input) for a, b in zip(first, again))
    monkeypatch.setattr(sweep, "SEED", sweep.SEED + 1)
    other = _draw(bmm, torch.float32)
    assert not all(torch.equal(a.input, b.input) for a, b in zip(first, other))


@pytest.mark.parametrize("name", ["mm", "addmm", "convolution"])
def test_contraction_k_is_read_from_the_arguments(name):
    args = {
        "mm": (torch.zeros(3, 7), torch.zeros(7, 2)),
        "addmm": (torch.zeros(3, 2), torch.zeros(3, 7), torch.zeros(7, 2)),
        "convolution": (torch.zeros(1, 4, 5, 5), torch.zeros(6, 4, 3, 3)),
    }[name]
    want = {"mm": 7, "addmm": 7, "convolution": 36}[name]
    assert tolerance.contraction_k(name, args, {}) == want


def test_a_wrong_half_precision_result_is_not_as_accurate_as_torch():
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(64, generator=g).half(), torch.randn(64, generator=g).half()
    wrong = (x + y).clone()
    wrong[5] += 0.25
    error, known = judge("add.Tensor", torch.ops.aten.add.Tensor, (x, y), wrong)
    assert error is not None and known is None


def _variant_results(names, functional, samples):
    """Runs the sweep's variant pass for `names` over `samples` of their functional op."""
    table = {t["name"]: t for t in ops.table()}
    res = sweep.Results()
    for args in samples:
        sweep.check_call(table, res, functional, sweep._aten(functional), args, {}, "direct")
    sweep.sweep_variants(table, res, set(names))
    return res


def test_an_out_kernel_that_disagrees_with_torch_is_judged_by_the_functional_op():
    # torch's binary_cross_entropy.out with a reduction returns NaN into an empty `out` and
    # refuses a sized one when a weight is given: known difference 5.
    g = torch.Generator().manual_seed(3)
    x, y, w = torch.rand(4, 5, generator=g), torch.rand(4, 5, generator=g), torch.rand(5, generator=g)
    res = _variant_results(["binary_cross_entropy.out"], "binary_cross_entropy", [(x, y, None, 1), (x, y, w, 2)])
    r = res.ops["binary_cross_entropy.out"]
    assert (r["passed"], r["failed"]) == (2, 0), r["errors"]
    assert res.known["binary_cross_entropy.out"]["torch_out_kernel"] == 2


def test_the_functional_oracle_still_fails_a_wrong_out_result():
    g = torch.Generator().manual_seed(4)
    x, y = torch.rand(4, 5, generator=g), torch.rand(4, 5, generator=g)
    oracle = sweep.written_functional(torch.ops.aten.binary_cross_entropy.default,
                                      [a for a in torch.ops.aten.binary_cross_entropy.out._schema.arguments if a.is_out],
                                      torch.ops.aten.binary_cross_entropy.out)
    out = torch.empty(0)
    call = Call("binary_cross_entropy.out", TAGS["binary_cross_entropy.out"], oracle, (x, y, None, 1), {"out": out}, True, None)
    wrong = call.expected + 0.01
    error, _ = call.judge(wrong, ((x, y, None, 1), {"out": wrong}))
    assert error is not None


@pytest.mark.parametrize("name,functional,args", [
    ("split_copy.Tensor_out", "split_copy.Tensor", (2, 0)),
    ("split_with_sizes_copy.out", "split_with_sizes_copy", ([1, 3, 1], 0)),
    ("unbind_copy.int_out", "unbind_copy.int", (1,)),
])
def test_list_out_overloads_write_each_tensor(name, functional, args):
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(5))
    res = _variant_results([name], functional, [(x, *args)])
    r = res.ops[name]
    assert (r["passed"], r["failed"]) == (1, 0), r["errors"]
    outs = [torch.empty(0) for _ in sweep._aten(functional)(x, *args)]
    assert ops.call(name, x, *args, out=outs) is None
    for o, e in zip(outs, sweep._aten(functional)(x, *args)):
        torch.testing.assert_close(o, e, rtol=0, atol=0)
