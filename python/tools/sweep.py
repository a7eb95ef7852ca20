"""The OpInfo-style sweep: every op in Tessera's table against PyTorch CPU.

Samples come from PyTorch's own OpInfo database (`op_db`) two ways:
  * intercepted: each OpInfo sample runs in torch under a TorchDispatchMode; every ATen overload
    it reaches that is in Tessera's table is also run by Tessera on the same arguments and
    compared with torch's result (so composite ops test the core ops they decompose into);
  * direct: the sample is also passed straight to each table overload named like the OpInfo
    (`softmax` -> `aten::softmax.int`), where torch accepts it.
and from generated samples (`samples.py`) for ops no OpInfo reaches.

Comparison: torch.testing.assert_close with torch's default tolerances for the dtype (exact for
integers and bool), NaN == NaN; ops tagged Random, and `empty*`, compare shape and dtype only.
Two oracles besides torch's own result, each independent of Tessera:
  * index results that PyTorch leaves unspecified among equal values (`sort`, which is not
    stable, and `topk`) pass when they are distinct, in range, and select torch's values;
  * a float16/bfloat16 result that differs from torch's passes when it matches torch's op run
    in float64 on the same (exactly upcast) inputs and rounded to the dtype, within the dtype's
    tolerance: torch's low-precision CPU kernels round partial sums where Tessera accumulates
    in f32 (convolutions), so the more accurate result is not counted as wrong.
"""

import itertools
import os
import json
import math
import time
import warnings
from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

import tessera
from tessera import ops as tops

# The dtypes Tessera claims (no unsigned beyond uint8 in OpInfo). Complex is claimed only by
# the ops whose lowerings take it: a complex sample that Tessera refuses as unsupported
# complex is skipped, not counted as a failure (see `check_call`).
CLAIMED = [
    torch.float32, torch.float64, torch.bfloat16, torch.float16,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
    torch.complex64, torch.complex128,
]
# Samples per (overload, dtype, source): enough to cover the OpInfo variety, bounded for CI time.
CAP = 6
SHAPE_ONLY = ("empty", "empty_like", "empty_strided", "new_empty", "resize_")
# Overloads whose index result is unspecified among equal values: the position of `dim` in
# their positional arguments (and its default, -1).
UNORDERED_TIES = {"sort": 1, "sort.values": 1, "topk": 2, "topk.values": 2}
LOW_PRECISION = (torch.float16, torch.bfloat16)


class Results:
    def __init__(self):
        self.ops = defaultdict(lambda: {"passed": 0, "failed": 0, "dtypes": set(), "errors": []})
        self.counts = defaultdict(int)
        # A few passing samples per functional op, reused for its in-place and out overloads.
        self.samples = defaultdict(list)
        # Variant samples skipped because torch's overload disagrees with its functional op.
        self.inconsistent = defaultdict(int)

    def want(self, name, dtype, source):
        return self.counts[(name, dtype, source)] < CAP

    def skip(self, name, dtype):
        """No more samples of `dtype` for `name` (it refuses the dtype as a whole): not a failure."""
        for source in ("opinfo", "direct", "generated", "variant"):
            self.counts[(name, dtype, source)] = CAP

    def record(self, name, dtype, source, error):
        self.counts[(name, dtype, source)] += 1
        r = self.ops[name]
        if error is None:
            r["passed"] += 1
            r["dtypes"].add(str(dtype).replace("torch.", ""))
        else:
            r["failed"] += 1
            if len(r["errors"]) < 4:
                r["errors"].append(f"[{str(dtype).replace('torch.', '')}] {error}"[:600])

    def to_json(self):
        return {k: {**v, "dtypes": sorted(v["dtypes"])} for k, v in sorted(self.ops.items())}


def overload_name(func):
    """`aten.add.Tensor` -> `add.Tensor`; `aten.abs.default` -> `abs`."""
    name = func._schema.name.split("::", 1)[1]
    ov = func._overloadname
    return name if ov == "default" else f"{name}.{ov}"


def first_dtype(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.dtype
        if isinstance(a, (list, tuple)):
            d = first_dtype(a)
            if d is not None:
                return d
    return None


def has_complex(x):
    """Whether a sample holds a complex tensor or a complex dtype argument."""
    if isinstance(x, torch.Tensor):
        return x.is_complex()
    if isinstance(x, torch.dtype):
        return x.is_complex
    if isinstance(x, complex):
        return True
    if isinstance(x, dict):
        return any(has_complex(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(has_complex(v) for v in x)
    return False


def refused_complex(error, args, kwargs):
    """A complex sample of an op whose lowering does not take complex: not a claim, skipped."""
    return isinstance(error, tessera.UnsupportedError) and "complex" in str(error).lower() and has_complex((args, kwargs))


def clone_args(x):
    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def compare(name, tags, expected, actual):
    """None when `actual` matches `expected`, else a message."""
    if isinstance(expected, dict):
        return compare(name, tags, list(expected.values()), [actual.get(k) for k in expected])
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            return f"expected {len(expected)} results, got {type(actual).__name__}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            m = compare(name, tags, e, a)
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
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True)
        except AssertionError as e:
            return " ".join(str(e).split())
        return None
    if isinstance(expected, (bool, int, float)):
        if isinstance(expected, float) and isinstance(actual, float) and math.isnan(expected) and math.isnan(actual):
            return None
        if isinstance(expected, float) and isinstance(actual, (int, float)):
            return None if math.isclose(actual, expected, rel_tol=1.3e-6, abs_tol=1e-5) else f"expected {expected}, got {actual}"
        return None if actual == expected else f"expected {expected!r}, got {actual!r}"
    return None if actual == expected else f"expected {expected!r}, got {actual!r}"


def compare_unordered_ties(name, tags, args, kwargs, expected, actual):
    """For UNORDERED_TIES ops: values as usual; indices right when they pick those values."""
    if not isinstance(actual, (tuple, list)) or len(actual) != 2:
        return compare(name, tags, expected, actual)
    m = compare(name, tags, expected[0], actual[0])
    if m:
        return f"result 0: {m}"
    (values, want), (_, got) = expected, actual
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
        return compare(name, tags, want, got)
    x = args[0]
    if x.dim() == 0 or got.numel() == 0:
        return compare(name, tags, want, got)
    pos = UNORDERED_TIES[name]
    dim = args[pos] if len(args) > pos else kwargs.get("dim", -1)
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


def low_precision(x):
    if isinstance(x, torch.Tensor):
        return x.dtype in LOW_PRECISION
    return isinstance(x, (tuple, list)) and any(low_precision(v) for v in x)


def float64_reference(func, args, kwargs, expected):
    """torch's `func` on the float16/bfloat16 tensors of the sample upcast to float64, its
    results rounded to `expected`'s dtypes; None where that does not line up."""
    up = lambda t: t.double() if isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION else t
    try:
        ref = func(*tree_map(up, clone_args(args)), **tree_map(up, clone_args(kwargs)))
    except Exception:
        return None

    def back(r, e):
        if isinstance(e, torch.Tensor):
            return r.to(e.dtype) if isinstance(r, torch.Tensor) and r.shape == e.shape else None
        if isinstance(e, (tuple, list)) and isinstance(r, (tuple, list)) and len(r) == len(e):
            out = [back(a, b) for a, b in zip(r, e)]
            return None if any(o is None for o in out) else out
        return e

    return back(ref, expected)


def writes_args(func, tags):
    """Whether the overload writes into arguments: in-place and out= forms, and ops whose
    schema marks an argument written (`Tensor(a!) running_mean` of batch norm)."""
    return "Inplace" in tags or "Out" in tags or any(
        a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments
    )


def check_call(table, res, name, func, args, kwargs, source):
    """Runs one call in torch and in Tessera and records the comparison. Returns torch's result."""
    dtype = first_dtype(list(args) + list(kwargs.values()))
    if dtype is not None and dtype not in CLAIMED:
        return None
    if not res.want(name, dtype, source):
        return None
    tags = table[name]["tags"]
    mutates = writes_args(func, tags)
    t_args, t_kwargs = clone_args((args, kwargs))
    expected = func(*clone_args(args), **clone_args(kwargs)) if not mutates else None
    e_args, e_kwargs = clone_args((args, kwargs))
    if expected is None:
        expected = func(*e_args, **e_kwargs)
    try:
        actual = tops.call(name, *t_args, **t_kwargs)
    except tessera.TesseraError as e:
        if refused_complex(e, args, kwargs):
            if dtype is not None and dtype.is_complex:
                res.skip(name, dtype)
        else:
            res.record(name, dtype, source, f"{type(e).__name__}: {e}")
        return expected
    except Exception as e:  # a bug in the bridge: record it, keep sweeping
        res.record(name, dtype, source, f"{type(e).__name__}: {e}")
        return expected
    if name in UNORDERED_TIES:
        error = compare_unordered_ties(name, tags, args, kwargs, expected, actual)
        # The `out` tensors are the results just checked; the other arguments must be intact.
        outs = {a.name for a in func._schema.arguments if a.is_out}
        e_kwargs = {k: v for k, v in e_kwargs.items() if k not in outs}
        t_kwargs = {k: v for k, v in t_kwargs.items() if k not in outs}
    else:
        error = compare(name, tags, expected, actual)
        if error is not None and not mutates and low_precision(expected):
            ref = float64_reference(func, args, kwargs, expected)
            if ref is not None and compare(name, tags, ref, actual) is None:
                error = None
    if error is None and mutates:
        error = compare(name, tags, (e_args, e_kwargs), (t_args, t_kwargs))
    res.record(name, dtype, source, error)
    if error is None and sum(first_dtype(a) == dtype for a, _, _ in res.samples[name]) < 2:
        # A clone: `expected` goes back to torch as the op's result, and the composite op that
        # called it may change it in place (matmul squeezes its mm result with `squeeze_`).
        res.samples[name].append((clone_args(args), clone_args(kwargs), clone_args(expected)))
    return expected


class Intercept(TorchDispatchMode):
    def __init__(self, table, res, only, reached):
        super().__init__()
        self.table, self.res, self.only, self.reached = table, res, only, reached

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = overload_name(func)
        if name in self.table and (self.only is None or name in self.only):
            self.reached.add(name)
            try:
                out = check_call(self.table, self.res, name, func, args, kwargs, "opinfo")
            except Exception:
                out = None
            if out is not None and not writes_args(func, self.table[name]["tags"]):
                return out
        return func(*args, **kwargs)


def direct_overloads(table, opinfo):
    base = opinfo.aten_name or opinfo.name
    return [n for n in table if n == base or n.startswith(base + ".")]


def sweep_opinfo(table, res, only=None, log=print):
    from torch.testing._internal.common_methods_invocations import op_db

    # A wall-clock budget keeps CI inside its limit; ops not reached in it show as untested.
    deadline = time.time() + float(os.environ.get("TESSERA_SWEEP_BUDGET_S", "1800"))
    for opinfo in op_db:
        if time.time() > deadline:
            log("sweep: wall-clock budget spent, OpInfo walk stopped early")
            break
        direct = [n for n in direct_overloads(table, opinfo) if only is None or n in only]
        if only is not None and not direct and not _may_reach(opinfo, only):
            continue
        # The table ops this OpInfo reaches (learned on its first dtype): once all of them have
        # their samples for a dtype, its other samples would test nothing new.
        reached = set()
        for i, dtype in enumerate(CLAIMED):
            if dtype not in opinfo.supported_dtypes("cpu"):
                continue
            if reached and not any(res.want(n, dtype, src) for n in reached for src in ("opinfo", "direct")):
                continue
            try:
                samples = list(itertools.islice(opinfo.sample_inputs("cpu", dtype, requires_grad=False), 2 * CAP))
            except Exception:
                continue
            for s in samples:
                try:
                    with Intercept(table, res, only, reached):
                        opinfo.op(s.input, *s.args, **s.kwargs)
                except Exception:
                    pass
                reached.update(direct)
                for name in direct:
                    func = _aten(name)
                    args = (s.input, *s.args)
                    try:
                        func(*clone_args(args), **clone_args(s.kwargs))
                    except Exception:
                        continue  # not this overload's signature
                    check_call(table, res, name, func, args, dict(s.kwargs), "direct")


# Table ops that OpInfos reach under unrelated names: op -> prefixes of those OpInfos' names.
REACHED_VIA = {
    "_fft_r2c": ("fft_", "stft", "istft"),
    "_fft_c2r": ("fft_", "stft", "istft"),
}


def _may_reach(opinfo, only):
    """Whether an OpInfo may decompose into one of `only` (cheap name heuristic for focused runs)."""
    bases = {n.split(".")[0].rstrip("_") for n in only}
    name = (opinfo.aten_name or opinfo.name).split(".")[0]
    if any(name.startswith(p) for b in bases for p in REACHED_VIA.get(b, ())):
        return True
    return any(b in name or name in b for b in bases) or bool(bases & {"_to_copy", "copy", "clone", "view", "expand", "alias"})


def _aten(name):
    n, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, n), ov or "default")


def sweep_generated(table, res, only=None):
    import samples

    for name, gen in samples.GENERATED.items():
        if name not in table or (only is not None and name not in only):
            continue
        func = _aten(name)
        for args, kwargs in gen():
            try:
                func(*clone_args(args), **clone_args(kwargs))
            except Exception:
                continue  # a sample torch itself rejects tests nothing
            check_call(table, res, name, func, args, kwargs, "generated")


def sweep_variants(table, res, only=None):
    """In-place and `.out` overloads, on the passing samples of the functional op they write."""
    for name, entry in table.items():
        functional = entry.get("functional")
        if not functional or (only is not None and name not in only):
            continue
        func = _aten(name)
        outs = [a.name for a in func._schema.arguments if a.is_out]
        for args, kwargs, expected in res.samples.get(functional, []):
            kwargs = dict(kwargs)
            if outs:
                results = expected if isinstance(expected, (tuple, list)) else [expected]
                if len(results) != len(outs) or not all(isinstance(r, torch.Tensor) for r in results):
                    continue
                for o, r in zip(outs, results):
                    kwargs[o] = torch.empty(0, dtype=r.dtype)
            try:
                got = func(*clone_args(args), **clone_args(kwargs))
            except Exception:
                continue  # torch refuses this sample in place (dtype or shape change)
            # An out= or in-place overload computes its functional op: where torch's own kernel
            # disagrees with torch's functional result (binary_cross_entropy.out with a
            # reduction returns NaN into an empty `out`), torch is no oracle for the sample.
            if compare(functional, table[functional]["tags"], _as_written(expected, got), got) is not None:
                res.inconsistent[name] += 1
                continue
            check_call(table, res, name, func, args, kwargs, "variant")


def _as_written(expected, got):
    """The functional result `expected` cast to the dtypes of the tensors it is written into."""
    if isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor):
        return expected.to(got.dtype)
    if isinstance(expected, (tuple, list)) and isinstance(got, (tuple, list)) and len(expected) == len(got):
        return [_as_written(e, g) for e, g in zip(expected, got)]
    return expected


def run(only=None, out=None, log=print):
    table = {t["name"]: t for t in tops.table()}
    warnings.filterwarnings("ignore")
    res = Results()
    if only is not None:
        only = set(only) | {table[n]["functional"] for n in only if n in table and table[n]["functional"]}
    start = time.time()
    torch.manual_seed(0)
    sweep_opinfo(table, res, only, log)
    sweep_generated(table, res, only)
    sweep_variants(table, res, only)
    wall = time.time() - start
    report = {
        "torch_version": torch.__version__.split("+")[0],
        "wall_s": round(wall, 1),
        "cap_per_op_dtype": CAP,
        "ops": res.to_json(),
        "torch_inconsistent": dict(sorted(res.inconsistent.items())),
    }
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    return report
