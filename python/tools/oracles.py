"""How the sweep judges one call: Tessera's results (and the arguments it wrote) against torch
CPU's, with PyTorch's tolerance policy (tolerance.py), then, where they differ, against the
oracles of known_differences.py. Every oracle is torch's own op, run on transformed inputs;
none is Tessera's."""

import math

import torch
from torch.utils._pytree import tree_map

import tolerance

SHAPE_ONLY = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize_")
# Overloads whose index result is unspecified among equal values (torch's sorts are not stable
# unless asked): the position of `dim` in their positional arguments (else the `dim` keyword,
# default -1). `argsort` returns only the indices; the others (values, indices).
# Op -> position of its `dim` argument. `median`/`nanmedian` along a dim: "indices is not
# necessarily the first occurrence of each median value found, unless it is unique" (torch's
# docs); seen with bfloat16 ties (masked.median's samples).
UNORDERED_TIES = {"sort": 1, "sort.values": 1, "topk": 2, "topk.values": 2, "kthvalue": 2,
                  "kthvalue.values": 2, "argsort": 1, "argsort.stable": None, "argsort.stable_out": None,
                  "median.dim": 1, "median.dim_values": 1, "nanmedian.dim": 1, "nanmedian.dim_values": 1}
UPCAST = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64,
          torch.complex64: torch.complex128}


def clone_args(x):
    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def compare(name, tags, expected, actual, overrides=None):
    """None when `actual` matches `expected` within PyTorch's tolerance for the dtype (raised by
    the OpInfo's `overrides`), else a message."""
    if isinstance(expected, dict):
        return compare(name, tags, list(expected.values()), [actual.get(k) for k in expected], overrides)
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            return f"expected {len(expected)} results, got {type(actual).__name__}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            m = compare(name, tags, e, a, overrides)
            if m:
                return f"result {i}: {m}"
        return None
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"expected a Tensor, got {type(actual).__name__}"
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            return f"expected {expected.dtype}{list(expected.shape)}, got {actual.dtype}{list(actual.shape)}"
        if "Random" in tags or name.split(".")[0] in SHAPE_ONLY:
            return None
        atol, rtol = tolerance.tolerance(expected.dtype, overrides)
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True, atol=atol, rtol=rtol)
        except AssertionError as e:
            return " ".join(str(e).split()) + f" (atol {atol:g}, rtol {rtol:g})"
        return None
    if isinstance(expected, (bool, int, float)):
        if isinstance(expected, float) and isinstance(actual, float) and math.isnan(expected) and math.isnan(actual):
            return None
        if isinstance(expected, float) and isinstance(actual, (int, float)):
            atol, rtol = tolerance.tolerance(torch.float32, overrides)
            return None if math.isclose(actual, expected, rel_tol=rtol, abs_tol=atol) else f"expected {expected}, got {actual}"
        return None if actual == expected else f"expected {expected!r}, got {actual!r}"
    return None if actual == expected else f"expected {expected!r}, got {actual!r}"


def compare_unordered_ties(name, tags, args, kwargs, expected, actual, overrides=None):
    """For UNORDERED_TIES ops: values as usual; indices right when they pick those values."""
    pos = UNORDERED_TIES[name]
    dim = args[pos] if pos is not None and len(args) > pos else kwargs.get("dim", -1)
    x = args[0]
    if kwargs.get("stable") is True:  # a stable sort's order is specified
        return compare(name, tags, expected, actual, overrides)
    if name.startswith("argsort"):
        if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape or actual.dtype != expected.dtype:
            return compare(name, tags, expected, actual)
        if x.dim() == 0 or actual.numel() == 0:
            return compare(name, tags, expected, actual)
        size = x.shape[dim]
        if bool(((actual < 0) | (actual >= size)).any()):
            return f"an index is out of range [0, {size})"
        # torch's indices select the sorted values; Tessera's must select the same ones.
        expected = (torch.gather(x, dim, expected), expected)
        actual = (torch.gather(x, dim, actual), actual)
    if not isinstance(actual, (tuple, list)) or len(actual) != 2:
        return compare(name, tags, expected, actual, overrides)
    m = compare(name, tags, expected[0], actual[0], overrides)
    if m:
        return f"result 0: {m}"
    (values, want), (_, got) = expected, actual
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
        return compare(name, tags, want, got)
    if x.dim() == 0 or got.numel() == 0:
        return compare(name, tags, want, got)
    if got.dim() < x.dim():  # a reduction without keepdim (kthvalue)
        got, values = got.unsqueeze(dim), values.unsqueeze(dim)
    size = x.shape[dim]
    if bool(((got < 0) | (got >= size)).any()):
        return f"result 1: an index is out of range [0, {size})"
    if got.shape[dim] > 1 and bool((got.sort(dim).values.diff(dim=dim) == 0).any()):
        return "result 1: an index repeats along the dim"
    try:
        torch.testing.assert_close(torch.gather(x, dim, got), values, equal_nan=True, rtol=0, atol=0)
    except AssertionError as e:
        return "result 1: the indices do not select the values: " + " ".join(str(e).split())
    return None


class Call:
    """One call's torch side: the op, its arguments (untouched), torch's result and the
    arguments torch wrote (for calls that write them), and the OpInfo's tolerance overrides."""

    def __init__(self, name, tags, func, args, kwargs, mutates, overrides):
        self.name, self.tags, self.func = name, tags, func
        self.args, self.kwargs = args, kwargs
        self.mutates, self.overrides = mutates, overrides
        e_args, e_kwargs = clone_args((args, kwargs))
        self.expected = func(*e_args, **e_kwargs)
        self.written = (e_args, e_kwargs) if mutates else None

    def judge(self, actual, t_written):
        """(error or None, the known difference that explained a mismatch or None)."""
        error = self._against(self.expected, self.written, actual, t_written)
        if error is None:
            return None, None
        for kind, oracle in (("contraction_bound", self._contraction), ("float64_oracle", self._float64),
                             ("denormal_flush", self._flushed), ("as_accurate_as_torch", self._as_accurate)):
            try:
                verdict = oracle(actual, t_written)
            except Exception:
                verdict = "oracle failed"
            if verdict is None:
                return None, kind
        return error, None

    def _against(self, expected, written, actual, t_written):
        m = compare(self.name, self.tags, expected, actual, self.overrides)
        if m is None and written is not None:
            m = compare(self.name, self.tags, written, t_written, self.overrides)
        return m

    def _rerun(self, transform):
        """torch's op on transformed clones of the arguments: (result, written arguments)."""
        args, kwargs = tree_map(transform, clone_args((self.args, self.kwargs)))
        return self.func(*args, **kwargs), ((args, kwargs) if self.mutates else None)

    def _float64(self, actual, t_written):
        """known_differences 1: torch's op in float64 on the exactly upcast inputs, rounded back."""
        up = lambda t: t.to(UPCAST[t.dtype]) if isinstance(t, torch.Tensor) and t.dtype in UPCAST else t
        if not _holds(self.expected, lambda t: t.dtype in UPCAST):
            return "no float result"
        ref, written = self._rerun(up)
        ref = like(ref, self.expected)
        written = like(written, self.written) if written is not None else None
        if ref is None or (self.written is not None and written is None):
            return "the float64 run does not line up"
        return self._against(ref, written, actual, t_written)

    def _as_accurate(self, actual, t_written):
        """known_differences 4: a float16/bfloat16 result where torch's own kernel rounds in the
        dtype: no further from torch's float64 result than torch's result is at its worst
        element, plus the dtype's tolerance."""
        e = self.expected
        if self.mutates or not isinstance(e, torch.Tensor) or e.dtype not in (torch.float16, torch.bfloat16):
            return "not a float16/bfloat16 result"
        if not isinstance(actual, torch.Tensor) or actual.shape != e.shape or actual.dtype != e.dtype:
            return "shape or dtype differ"
        up = lambda t: t.to(UPCAST[t.dtype]) if isinstance(t, torch.Tensor) and t.dtype in UPCAST else t
        ref, _ = self._rerun(up)
        if not isinstance(ref, torch.Tensor) or ref.shape != e.shape:
            return "the float64 run does not line up"
        ref = ref.double()
        # torch's largest error over the tensor: its rounding does not land on the same elements.
        torch_err = float((e.double() - ref).abs().nan_to_num(0.0).max()) if e.numel() else 0.0
        atol, rtol = tolerance.tolerance(e.dtype, self.overrides)
        return tolerance.within(actual, ref, atol + torch_err, rtol)

    def _flushed(self, actual, t_written):
        """known_differences 2: torch's op on inputs with subnormals flushed, results flushed."""
        if not (_holds((self.args, self.kwargs), tolerance.is_subnormal) or _holds(self.expected, tolerance.is_subnormal)):
            return "no subnormals"
        ref, written = self._rerun(tolerance.flush_subnormals)
        flush = lambda x: tree_map(tolerance.flush_subnormals, x)
        return self._against(flush(ref), flush(written) if written is not None else None, actual, t_written)

    def _contraction(self, actual, t_written):
        """known_differences 3: a float32 contraction against float64 with a k-dependent bound."""
        k = tolerance.contraction_k(self.name, self.args, self.kwargs)
        # A tuple of results (convolution_backward's gradients): each against its own bound.
        many = isinstance(self.expected, tuple)
        es = self.expected if many else (self.expected,)
        got = actual if many else (actual,)
        tensors = [e for e in es if e is not None]
        if k is None or self.mutates or not tensors or any(
                not isinstance(e, torch.Tensor) or e.dtype != torch.float32 for e in tensors):
            return "not a float32 contraction"
        if not isinstance(got, (list, tuple)) or len(got) != len(es) or any(
                (e is None) != (a is None) or (e is not None and (
                    not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype))
                for e, a in zip(es, got)):
            return "shape or dtype differ"
        up = lambda t: t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
        ref, _ = self._rerun(up)
        bound = tolerance.contraction_bound(self.func, self.args, self.kwargs, k, torch.float32)
        refs, bounds = (ref, bound) if many else ((ref,), (bound,))
        atol, rtol = tolerance.tolerance(torch.float32, self.overrides)
        for i, (a, r, b) in enumerate(zip(got, refs, bounds)):
            if a is None:
                continue
            wrong = tolerance.within(a, r, atol, rtol, b)
            if wrong is not None:
                return f"result {i}: {wrong}" if many else wrong
        return None


def _holds(x, pred):
    if isinstance(x, torch.Tensor):
        return bool(pred(x))
    if isinstance(x, dict):
        return any(_holds(v, pred) for v in x.values())
    if isinstance(x, (tuple, list)):
        return any(_holds(v, pred) for v in x)
    return False


def like(r, e):
    """`r` (a float64 run's result) with `e`'s structure and dtypes; None where it does not line up."""
    if isinstance(e, torch.Tensor):
        return r.to(e.dtype) if isinstance(r, torch.Tensor) and r.shape == e.shape else None
    if isinstance(e, dict) and isinstance(r, dict):
        out = {k: like(r.get(k), v) for k, v in e.items()}
        return None if any(o is None and e[k] is not None for k, o in out.items()) else out
    if isinstance(e, (tuple, list)) and isinstance(r, (tuple, list)) and len(r) == len(e):
        out = [like(a, b) for a, b in zip(r, e)]
        return None if any(o is None and b is not None for o, b in zip(out, e)) else type(e)(out) if isinstance(e, tuple) else out
    return e
