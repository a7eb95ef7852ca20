"""Per-op overhead of the `tpu` device vs torch eager on CPU, measured side by side.

    PYTHONPATH=python python python/tools/bench_device.py [--n 2000] [--repeats 7]

For a 4-element float32 add (where the op's own work is negligible, so the time is the
dispatch path), prints the median per-op time of: torch eager on CPU, `tessera.ops.call` on CPU
tensors (copies in and out every op), and the tpu device in Strict (each op launched) and
DeferAndFuse (ops recorded, one fused program per sync) — with the ratio to torch eager; and the
floor of any `__torch_dispatch__` device (a wrapper subclass running ops on an inner CPU
tensor: torch's Python dispatch alone); then the device dispatched in C++
(`TESSERA_TORCH_DISPATCH=cpp`, in a child process, next to torch eager there). A
chain of `n` adds is issued, then one sync point (`.cpu()`), so deferred work is included.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

import tessera.ops
from tessera import device as td


def per_op(fn, n, repeats):
    fn(n)  # warm up: compiles, caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(n)
        times.append((time.perf_counter() - start) / n)
    return statistics.median(times)


def torch_cpu(n):
    x = torch.ones(4)
    y = torch.ones(4)
    for _ in range(n):
        x = x + y
    return x


def ops_call(n):
    x = torch.ones(4)
    y = torch.ones(4)
    for _ in range(n):
        x = tessera.ops.call("aten::add.Tensor", x, y)
    return x


class Floor(torch.Tensor):
    """The least a `__torch_dispatch__` device costs: a wrapper subclass over a CPU tensor
    that runs each op on its inner tensor (torch's Python dispatch, nothing else)."""

    @staticmethod
    def __new__(cls, inner):
        t = torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype)
        t.inner = inner
        return t

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        args = [a.inner if isinstance(a, Floor) else a for a in args]
        return Floor(func(*args, **(kwargs or {})))


def floor_chain(n):
    x = Floor(torch.ones(4))
    y = Floor(torch.ones(4))
    for _ in range(n):
        x = x + y
    return x.inner


def device_chain(n):
    x = torch.ones(4).to("tpu")
    y = torch.ones(4).to("tpu")
    for _ in range(n):
        x = x + y
    return x.cpu()


def device_rows(n, repeats):
    rows = []
    for mode in ("strict", "defer"):
        td.set_mode(mode)
        rows.append((f"tpu device, {mode}", per_op(device_chain, n, repeats)))
        td.set_mode(None)
    return rows


def cpp_dispatch_rows(n, repeats):
    """The device dispatched in C++ (TESSERA_TORCH_DISPATCH=cpp, chosen per process): measured
    in a child process, each mode next to torch eager there; scaled to this process's torch."""
    env = {**os.environ, "TESSERA_TORCH_DISPATCH": "cpp"}
    out = subprocess.run([sys.executable, __file__, "--child", "--n", str(n), "--repeats", str(repeats)],
                         capture_output=True, text=True, env=env, check=True)
    child = json.loads(out.stdout.strip().splitlines()[-1])
    return child["torch"], [(name.replace("tpu device", "tpu device (C++ dispatch)"), t)
                            for name, t in child["rows"]]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="adds per timed run")
    p.add_argument("--repeats", type=int, default=7, help="timed runs (the median is kept)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps({"torch": per_op(torch_cpu, a.n, a.repeats), "rows": device_rows(a.n, a.repeats)}))
        return
    base = per_op(torch_cpu, a.n, a.repeats)
    rows = [("torch eager (CPU)", base)]
    rows.append(("__torch_dispatch__ floor (CPU inner)", per_op(floor_chain, a.n, a.repeats)))
    rows.append(("tessera.ops.call (CPU tensors)", per_op(ops_call, max(a.n // 10, 50), a.repeats)))
    rows += device_rows(a.n, a.repeats)
    child_base, cpp = cpp_dispatch_rows(a.n, a.repeats)
    print(f"4-element f32 add, median of {a.repeats} runs of {a.n} ops (then one .cpu()):")
    for name, t in rows:
        print(f"  {name:44s} {t * 1e6:9.2f} us/op   {t / base:8.2f}x torch eager")
    print(f"  in a process dispatching in C++ (torch eager there: {child_base * 1e6:.2f} us/op):")
    for name, t in cpp:
        print(f"  {name:44s} {t * 1e6:9.2f} us/op   {t / child_base:8.2f}x torch eager")


if __name__ == "__main__":
    main()
