"""Per-op overhead of the `tpu` device vs torch eager on CPU, measured side by side.

    PYTHONPATH=python python python/tools/bench_device.py [--n 2000] [--repeats 7]

For a 4-element float32 add (where the op's own work is negligible, so the time is the
dispatch path), prints the median per-op time of: torch eager on CPU, `tessera.ops.call` on CPU
tensors (copies in and out every op), and the tpu device in Strict (each op launched) and
DeferAndFuse (ops recorded, one fused program per sync) — with the ratio to torch eager; and the
floor of any `__torch_dispatch__` device (a wrapper subclass running ops on an inner CPU
tensor: torch's Python dispatch alone). A
chain of `n` adds is issued, then one sync point (`.cpu()`), so deferred work is included.
"""

import argparse
import statistics
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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="adds per timed run")
    p.add_argument("--repeats", type=int, default=7, help="timed runs (the median is kept)")
    a = p.parse_args()
    base = per_op(torch_cpu, a.n, a.repeats)
    rows = [("torch eager (CPU)", base)]
    rows.append(("__torch_dispatch__ floor (CPU inner)", per_op(floor_chain, a.n, a.repeats)))
    rows.append(("tessera.ops.call (CPU tensors)", per_op(ops_call, max(a.n // 10, 50), a.repeats)))
    for mode in ("strict", "defer"):
        td.set_mode(mode)
        rows.append((f"tpu device, {mode}", per_op(device_chain, a.n, a.repeats)))
        td.set_mode(None)
    print(f"4-element f32 add, median of {a.repeats} runs of {a.n} ops (then one .cpu()):")
    for name, t in rows:
        print(f"  {name:34s} {t * 1e6:9.2f} us/op   {t / base:8.2f}x torch eager")


if __name__ == "__main__":
    main()
