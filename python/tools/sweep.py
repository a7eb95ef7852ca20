"""The OpInfo-style sweep: every op in Tessera's table against PyTorch CPU.

Samples come from PyTorch's own OpInfo database (`op_db`) two ways:
  * intercepted: each OpInfo sample runs in torch under a TorchDispatchMode; every ATen overload
    it reaches that is in Tessera's table is also run by Tessera on the same arguments and
    compared with torch's result (so composite ops test the core ops they decompose into);
  * direct: the sample is also passed straight to each table overload named like the OpInfo
    (`softmax` -> `aten::softmax.int`), where torch accepts it;
  * backward: in float32 and bfloat16, the OpInfo's samples with requires_grad=True go through
    torch.autograd.grad under the interceptor, and each backward op autograd reaches is run
    by Tessera on the same arguments (`sweep_backward`).
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

Tolerances are PyTorch's own policy (tolerance.py): the dtype's default, raised by the OpInfo's
`toleranceOverride`/`precisionOverride` for a CPU comparison; float32 contractions are judged
against torch's float64 result with a k-dependent bound. Differences that are not Tessera's
errors (torch's CPU-dependent kernels, XLA CPU's subnormal flush) are listed and checked in
known_differences.py, and counted per op in the JSON's `known_differences`.

Determinism: every sample draw is seeded from (TESSERA_SWEEP_SEED, OpInfo or op, dtype, source),
so an OpInfo's samples never depend on what ran before it; the walk order is op_db's, dealt
round-robin to TESSERA_SWEEP_WORKERS processes (default 2), whose results are summed.
"""

import itertools
import json
import os
import random
import time
import warnings
import zlib
from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

import tessera
import tolerance
from oracles import UNORDERED_TIES, Call, clone_args, compare, compare_unordered_ties
from tessera import ops as tops

# The dtypes Tessera claims (no unsigned beyond uint8 in OpInfo). Complex is claimed only by
# the ops whose lowerings take it: a complex sample that Tessera refuses as unsupported
# complex is skipped, not counted as a failure (see `check_call`).
CLAIMED = [
    torch.float32, torch.float64, torch.bfloat16, torch.float16,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
    torch.complex64, torch.complex128,
]
# Samples per (overload, dtype, source): 6 covers the OpInfo variety. Fewer (TESSERA_SWEEP_CAP)
# draw the first part of the same seeded samples, but leave ops reached only by later samples
# unreached (measured with 3: four Core overloads, e.g. reflection_pad2d).
CAP = int(os.environ.get("TESSERA_SWEEP_CAP", "6"))
# TESSERA_SWEEP_SEED varies the samples on purpose; every draw is seeded from it (seed_for).
SEED = int(os.environ.get("TESSERA_SWEEP_SEED", "0"))
# Worker processes (TESSERA_SWEEP_WORKERS): the OpInfos and generated ops are dealt round-robin
# to this many shards, each walked in its own process. A fixed number, not the machine's core
# count, so the samples depend only on (seed, workers): the per-(op, dtype, source) cap counts
# per shard, and an op reached from OpInfos of two shards gets both shards' samples. 2 halves
# the gate's wall time on the 2-core CI machine (the walk is one busy core per process).
WORKERS = int(os.environ.get("TESSERA_SWEEP_WORKERS", "2"))


class Results:
    def __init__(self):
        self.ops = defaultdict(lambda: {"passed": 0, "failed": 0, "dtypes": set(), "errors": []})
        self.counts = defaultdict(int)
        # A few passing samples per functional op, reused for its in-place and out overloads.
        self.samples = defaultdict(list)
        # Variant samples skipped because torch's overload disagrees with its functional op.
        self.inconsistent = defaultdict(int)
        # Mismatches with torch's result explained by a known difference: op -> kind -> count.
        self.known = defaultdict(lambda: defaultdict(int))

    def want(self, name, dtype, source):
        return self.counts[(name, dtype, source)] < CAP

    def skip(self, name, dtype):
        """No more samples of `dtype` for `name` (it refuses the dtype as a whole): not a failure."""
        for source in ("opinfo", "direct", "generated", "variant", "backward"):
            self.counts[(name, dtype, source)] = CAP

    def record(self, name, dtype, source, error, known=None):
        self.counts[(name, dtype, source)] += 1
        if known is not None:
            self.known[name][known] += 1
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

    def known_json(self):
        return {k: dict(sorted(v.items())) for k, v in sorted(self.known.items())}


def seed_for(*parts):
    """Seeds torch, random and numpy from (TESSERA_SWEEP_SEED, parts): a draw's samples depend on
    what it is, never on what ran before it."""
    seed = zlib.crc32("|".join(map(str, (SEED,) + parts)).encode())
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass


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


def has_complex32(x):
    """Whether a result holds a complex32 tensor (f16 parts: StableHLO has no such type)."""
    if isinstance(x, torch.Tensor):
        return x.dtype == torch.complex32
    if isinstance(x, (list, tuple)):
        return any(has_complex32(v) for v in x)
    return False


def refused_complex(error, args, kwargs, expected=None):
    """A complex sample of an op whose lowering does not take complex, or a sample whose torch
    result is complex32 (`complex`/`polar`/`view_as_complex` of f16 parts, which Tessera
    refuses): not a claim, skipped."""
    return (isinstance(error, tessera.UnsupportedError) and "complex" in str(error).lower()
            and (has_complex((args, kwargs)) or has_complex32(expected)))


def writes_args(func, tags):
    """Whether the overload writes into arguments: in-place and out= forms, and ops whose
    schema marks an argument written (`Tensor(a!) running_mean` of batch norm)."""
    return "Inplace" in tags or "Out" in tags or any(
        a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments
    )


def check_call(table, res, name, func, args, kwargs, source, overrides=None, origin=None, known=None):
    """Runs one call in torch and in Tessera and records the judgement (oracles.Call). Returns
    torch's result. `overrides`: the OpInfo's tolerance overrides (tolerance.opinfo_overrides);
    `origin`: the OpInfo whose sample it is (named in failures); `known`: the known difference
    that `func` (another oracle than torch's overload) stands for, counted on a pass."""
    dtype = first_dtype(list(args) + list(kwargs.values()))
    if dtype is not None and dtype not in CLAIMED:
        return None
    if not res.want(name, dtype, source):
        return None
    tags = table[name]["tags"]
    mutates = writes_args(func, tags)
    call = Call(name, tags, func, args, kwargs, mutates, overrides)
    expected = call.expected
    t_args, t_kwargs = clone_args((args, kwargs))
    try:
        actual = tops.call(name, *t_args, **t_kwargs)
    except tessera.TesseraError as e:
        if refused_complex(e, args, kwargs, expected):
            if dtype is not None and (dtype.is_complex or has_complex32(expected)):
                res.skip(name, dtype)
        else:
            res.record(name, dtype, source, f"{type(e).__name__}: {e}")
        return expected
    except Exception as e:  # a bug in the bridge: record it, keep sweeping
        res.record(name, dtype, source, f"{type(e).__name__}: {e}")
        return expected
    oracle_kind, known = known, None
    if name in UNORDERED_TIES:
        error = compare_unordered_ties(name, tags, args, kwargs, expected, actual, overrides)
        if error is None and mutates:
            # The `out` tensors are the results just checked; the other arguments must be intact.
            outs = {a.name for a in func._schema.arguments if a.is_out}
            e_args, e_kwargs = call.written
            drop = lambda kw: {k: v for k, v in kw.items() if k not in outs}
            error = compare(name, tags, (e_args, drop(e_kwargs)), (t_args, drop(t_kwargs)), overrides)
    else:
        error, known = call.judge(actual, (t_args, t_kwargs) if mutates else None)
    if error is not None and origin:
        error = f"(sample of OpInfo {origin}) {error}"
    if error is None and known is None:
        known = oracle_kind
    res.record(name, dtype, source, error, known)
    if error is None and sum(first_dtype(a) == dtype for a, _, _, _ in res.samples[name]) < 2:
        # A clone: `expected` goes back to torch as the op's result, and the composite op that
        # called it may change it in place (matmul squeezes its mm result with `squeeze_`).
        res.samples[name].append((clone_args(args), clone_args(kwargs), clone_args(expected), overrides))
    return expected


class Intercept(TorchDispatchMode):
    """Checks every table overload torch reaches (of those `select` names) as `source`."""

    def __init__(self, table, res, only, reached, overrides, origin, source="opinfo", select=None):
        super().__init__()
        self.table, self.res, self.only, self.reached = table, res, only, reached
        self.overrides, self.origin = overrides, origin
        self.source, self.select = source, select

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = overload_name(func)
        if (name in self.table and (self.only is None or name in self.only)
                and (self.select is None or self.select(name))):
            self.reached.add(name)
            try:
                out = check_call(self.table, self.res, name, func, args, kwargs, self.source, self.overrides, self.origin)
            except Exception:
                out = None
            if out is not None and not writes_args(func, self.table[name]["tags"]):
                return out
        return func(*args, **kwargs)


def direct_overloads(table, opinfo):
    base = opinfo.aten_name or opinfo.name
    return [n for n in table if n == base or n.startswith(base + ".")]


def draw_samples(opinfo, dtype, requires_grad, *seed):
    """Up to 2 * CAP of an OpInfo's samples in `dtype`, the draw seeded from `seed` (OpInfo
    would reseed every sample with one constant); None where the OpInfo cannot make them."""
    seed_for(*seed)
    try:
        return list(itertools.islice(
            opinfo.sample_inputs("cpu", dtype, requires_grad=requires_grad, set_seed=False), 2 * CAP))
    except Exception:
        return None


def sweep_opinfo(table, res, only=None, log=print, exact=False, shard=(0, 1)):
    """Every OpInfo of op_db in shard `shard` = (k, n) (the k-th of every n), in op_db's order.
    A focused run (`only`) walks the OpInfos that may reach `only` by name; with `exact`, all
    of them, so an op gets exactly its full-run samples."""
    from torch.testing._internal.common_methods_invocations import op_db

    # No wall-clock budget unless one is asked for (TESSERA_SWEEP_BUDGET_S): a walk cut by time
    # would test fewer ops on a slower or busier machine, and the gate must not depend on that.
    budget = os.environ.get("TESSERA_SWEEP_BUDGET_S")
    deadline = time.time() + float(budget) if budget else None
    for i, opinfo in enumerate(op_db):
        if i % shard[1] != shard[0]:
            continue
        if deadline is not None and time.time() > deadline:
            log("sweep: TESSERA_SWEEP_BUDGET_S spent, OpInfo walk stopped early (ops not reached show as untested)")
            break
        direct = [n for n in direct_overloads(table, opinfo) if only is None or n in only]
        if only is not None and not direct and not exact and not _may_reach(opinfo, only):
            continue
        overrides = tolerance.opinfo_overrides(opinfo)
        label = (opinfo.name, opinfo.variant_test_name)
        # The table ops this OpInfo reaches (learned on its first dtype): once all of them have
        # their samples for a dtype, its other samples would test nothing new.
        reached = set()
        for i, dtype in enumerate(CLAIMED):
            if dtype not in opinfo.supported_dtypes("cpu"):
                continue
            if reached and not any(res.want(n, dtype, src) for n in reached for src in ("opinfo", "direct")):
                continue
            samples = draw_samples(opinfo, dtype, False, "opinfo", *label, dtype)
            if samples is None:
                continue
            for k, s in enumerate(samples):
                # Composites draw inside (dropout's mask): seeded per sample too.
                seed_for("opinfo-run", *label, dtype, k)
                try:
                    with Intercept(table, res, only, reached, overrides, "/".join(filter(None, label))):
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
                    check_call(table, res, name, func, args, dict(s.kwargs), "direct", overrides, "/".join(filter(None, label)))
        sweep_backward(table, res, opinfo, only, label, overrides)


# The dtypes in which each OpInfo's autograd runs under the interceptor (`sweep_backward`).
BACKWARD_DTYPES = (torch.float32, torch.bfloat16)


def is_backward(name):
    """A backward op: one autograd calls for the gradient of another (`threshold_backward`,
    `_softmax_backward_data`, `convolution_backward`)."""
    return "backward" in name.split(".")[0]


def sweep_backward(table, res, opinfo, only, label, overrides):
    """The backward ops an OpInfo's gradient reaches, the way PyTorch's tests do it: samples
    with requires_grad=True, torch.autograd.grad of the (processed) outputs with seeded random
    cotangents under the interceptor; each backward op reached runs in Tessera on the same
    arguments (its `output_mask`ed gradients must come back None, as in torch)."""
    if not opinfo.supports_autograd:
        return
    origin = "/".join(filter(None, label)) + " backward"
    for dtype in BACKWARD_DTYPES:
        if dtype not in opinfo.supported_backward_dtypes("cpu"):
            continue
        samples = draw_samples(opinfo, dtype, True, "opinfo-backward", *label, dtype)
        if samples is None:
            continue
        reached = set()
        for k, s in enumerate(samples):
            if reached and not any(res.want(n, dtype, "backward") for n in reached):
                break
            seed_for("opinfo-backward-run", *label, dtype, k)
            leaves = [t for t in tree_flatten((s.input, s.args, s.kwargs))[0]
                      if isinstance(t, torch.Tensor) and t.requires_grad]
            try:
                out = s.output_process_fn_grad(opinfo.op(s.input, *s.args, **s.kwargs))
                outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
                if not leaves or not outs:
                    continue
                cotangents = [torch.randn_like(t) for t in outs]
                with Intercept(table, res, only, reached, overrides, origin, "backward", is_backward):
                    torch.autograd.grad(outs, leaves, cotangents, allow_unused=True)
            except Exception:
                pass  # a sample torch's autograd rejects tests nothing


# Table ops that OpInfos reach under unrelated names: op -> prefixes of those OpInfos' names.
REACHED_VIA = {
    "_fft_r2c": ("fft_", "stft", "istft"),
    "_fft_c2r": ("fft_", "stft", "istft"),
    "_fft_c2c": ("fft_", "stft", "istft"),
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


def sweep_generated(table, res, only=None, shard=(0, 1)):
    import samples

    for i, (name, gen) in enumerate(samples.GENERATED.items()):
        if i % shard[1] != shard[0] or name not in table or (only is not None and name not in only):
            continue
        func = _aten(name)
        seed_for("generated", name)
        for args, kwargs in gen():
            try:
                func(*clone_args(args), **clone_args(kwargs))
            except Exception:
                continue  # a sample torch itself rejects tests nothing
            check_call(table, res, name, func, args, kwargs, "generated")


def sweep_variants(table, res, only=None):
    """In-place and `.out` overloads, on the passing samples of the functional op they write.
    `out` arguments are first given empty (torch resizes them), then sized like the functional
    results where torch's kernel refuses or mishandles an empty one (`normal.Tensor_float_out`
    keeps a 0-d result empty). Where torch's own out= overload still disagrees with its
    functional result or refuses the sample (known difference 5: `binary_cross_entropy.out`
    with a reduction), the oracle is torch's functional op written into the arguments
    (`written_functional`)."""
    for name, entry in table.items():
        functional = entry.get("functional")
        if not functional or (only is not None and name not in only):
            continue
        func = _aten(name)
        outs = [a for a in func._schema.arguments if a.is_out]
        for args, kwargs, expected, overrides in res.samples.get(functional, []):
            results = list(expected) if isinstance(expected, (tuple, list)) else [expected]
            if outs and not (all(isinstance(r, torch.Tensor) for r in results) and _fill_outs({}, outs, results, False)):
                continue  # the out arguments do not line up with the results
            found = None
            for sized in ((False, True) if outs else (False,)):
                kw = dict(kwargs)
                if outs:
                    _fill_outs(kw, outs, results, sized)
                try:
                    got = _written(func, outs, *clone_args((args, kw)))
                except Exception:
                    continue  # torch refuses this sample in place (dtype or shape change)
                consistent = compare(functional, table[functional]["tags"], _as_written(expected, got), got, overrides) is None
                found = (kw, consistent)
                if consistent:
                    break
            if found is None:
                if not outs:
                    continue  # torch refuses this sample in place (dtype or shape change)
                # torch's out= kernel refuses outs of the result's dtype, empty and sized, where
                # its functional op takes the sample (`binary_cross_entropy.out` with a weight
                # and a reduction): not a claim about out=, so judged like a disagreement.
                found = (kw, False)
            kw, consistent = found
            if consistent:
                check_call(table, res, name, func, args, kw, "variant", overrides)
            else:
                res.inconsistent[name] += 1
                oracle = written_functional(_aten(functional), outs, func)
                check_call(table, res, name, oracle, args, kw, "variant", overrides, known="torch_out_kernel")


def _fill_outs(kwargs, outs, results, sized):
    """Puts `out` tensors for `results` into `kwargs` (empty, or sized like the results); False
    when the schema's out arguments do not line up with the results."""
    if len(outs) == 1 and isinstance(outs[0].type, torch.ListType):
        kwargs[outs[0].name] = [torch.empty_like(r) if sized else torch.empty(0, dtype=r.dtype) for r in results]
        return True
    if len(outs) != len(results):
        return False
    for o, r in zip(outs, results):
        kwargs[o.name] = torch.empty_like(r) if sized else torch.empty(0, dtype=r.dtype)
    return True


def _written(func, outs, args, kwargs):
    """Runs an in-place or out overload; what it wrote: the out arguments (a tensor, a tuple of
    them, or a list argument), else the returned tensor (in place)."""
    ret = func(*args, **kwargs)
    if not outs:
        return ret
    got = [kwargs[o.name] for o in outs]
    return got[0] if len(got) == 1 else tuple(got)


def written_functional(functional, outs, variant):
    """torch's functional op, its results written into the `out` arguments (or into `self` in
    place) and returned as the overload returns them: the oracle for an overload whose own
    torch kernel disagrees with its functional op."""
    def call(*args, **kwargs):
        fkw = {k: v for k, v in kwargs.items() if k not in {o.name for o in outs}}
        r = functional(*args, **fkw)
        rs = list(r) if isinstance(r, (tuple, list)) else [r]
        if not outs:
            return args[0].copy_(rs[0])
        dst = kwargs[outs[0].name] if len(outs) == 1 and isinstance(kwargs[outs[0].name], list) else [kwargs[o.name] for o in outs]
        for d, x in zip(dst, rs):
            d.resize_(x.shape).copy_(x)
        return None if not variant._schema.returns else dst[0] if len(dst) == 1 else tuple(dst)
    call.__name__ = f"written_{variant._schema.name}"
    return call


def _as_written(expected, got):
    """The functional result `expected` cast to the dtypes of the tensors it is written into."""
    if isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor):
        return expected.to(got.dtype)
    if isinstance(expected, (tuple, list)) and isinstance(got, (tuple, list)) and len(expected) == len(got):
        return [_as_written(e, g) for e, g in zip(expected, got)]
    return expected


def run(only=None, out=None, log=print, exact=False, workers=None):
    """The sweep (or the ops in `only`), in `workers` processes (default TESSERA_SWEEP_WORKERS);
    the merged report, also written to `out`."""
    workers = WORKERS if workers is None else workers
    if only is not None:
        table = {t["name"]: t for t in tops.table()}
        only = set(only) | {table[n]["functional"] for n in only if n in table and table[n]["functional"]}
    start = time.time()
    if workers <= 1:
        parts = [run_shard(only, log, exact, (0, 1))]
    else:
        parts = _run_shards(only, exact, workers)
    report = {
        "torch_version": torch.__version__.split("+")[0],
        "wall_s": round(time.time() - start, 1),
        "cap_per_op_dtype": CAP,
        "seed": SEED,
        "workers": max(workers, 1),
        **_merge(parts),
    }
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    return report


def run_shard(only, log, exact, shard):
    """One shard's walk: its OpInfos, its generated ops, and the in-place and out variants of
    the functional ops whose samples it collected."""
    table = {t["name"]: t for t in tops.table()}
    warnings.filterwarnings("ignore")
    res = Results()
    sweep_opinfo(table, res, only, log, exact, shard)
    sweep_generated(table, res, only, shard)
    sweep_variants(table, res, only)
    return {
        "ops": res.to_json(),
        "torch_inconsistent": dict(sorted(res.inconsistent.items())),
        # known_differences.py: mismatches with torch's own result judged by another oracle.
        "known_differences": res.known_json(),
    }


def _run_shards(only, exact, workers):
    """Each shard in a process of its own (`python sweep.py --shard K N`); a shard that crashes
    or fails is an error naming it, its output passed through."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tessera-sweep-") as tmp:
        spec = os.path.join(tmp, "spec.json")
        with open(spec, "w") as f:
            json.dump({"only": None if only is None else sorted(only), "exact": exact}, f)
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--shard", str(k), str(workers), spec,
                                   os.path.join(tmp, f"part{k}.json")]) for k in range(workers)]
        codes = [p.wait() for p in procs]
        bad = [f"shard {k}/{workers} exited with {c}" for k, c in enumerate(codes) if c != 0]
        if bad:
            raise RuntimeError("sweep: " + "; ".join(bad) + " (its output is above)")
        parts = []
        for k in range(workers):
            with open(os.path.join(tmp, f"part{k}.json")) as f:
                parts.append(json.load(f))
        return parts


def _merge(parts):
    """The shards' results as one: counts summed, dtypes joined, the first errors kept."""
    ops, inconsistent, known = {}, defaultdict(int), defaultdict(lambda: defaultdict(int))
    for part in parts:
        for name, r in part["ops"].items():
            m = ops.setdefault(name, {"passed": 0, "failed": 0, "dtypes": set(), "errors": []})
            m["passed"] += r["passed"]
            m["failed"] += r["failed"]
            m["dtypes"].update(r["dtypes"])
            m["errors"] = (m["errors"] + r["errors"])[:4]
        for name, n in part["torch_inconsistent"].items():
            inconsistent[name] += n
        for name, kinds in part["known_differences"].items():
            for kind, n in kinds.items():
                known[name][kind] += n
    return {
        "ops": {k: {**v, "dtypes": sorted(v["dtypes"])} for k, v in sorted(ops.items())},
        "torch_inconsistent": dict(sorted(inconsistent.items())),
        "known_differences": {k: dict(sorted(v.items())) for k, v in sorted(known.items())},
    }


if __name__ == "__main__":
    # A shard worker of `_run_shards`: --shard K N SPEC OUT.
    import sys

    _, flag, k, n, spec, part = sys.argv
    assert flag == "--shard", sys.argv
    with open(spec) as f:
        spec = json.load(f)
    only = None if spec["only"] is None else set(spec["only"])
    result = run_shard(only, print, spec["exact"], (int(k), int(n)))
    with open(part, "w") as f:
        json.dump(result, f)
