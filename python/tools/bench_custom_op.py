"""Per-call cost of a kernel registered as a torch op (tessera.torch), side by side in one run:
  op        torch.ops.tessera.<kernel>(...)  (dispatcher, Python wrapper, Tessera)
  native    tessera._native.kernel_run(...)  (Tessera alone: DLPack in, PJRT execute, out)
  aten      torch.ops.aten.<same math>       (torch's own CPU kernel, for scale)
Medians of interleaved rounds; the op's overhead is op - native.

    python python/tools/bench_custom_op.py [--rounds 2000]
"""

import argparse
import statistics
import time

import torch

import tessera.torch  # noqa: F401
from tessera import _native

CASES = {
    "add": ([(8, 128), (8, 128)], torch.ops.aten.add.Tensor),
    "softmax": ([(8, 128)], lambda x: torch.ops.aten._softmax.default(x, -1, False)),
    "add_512x1024": ([(512, 1024), (512, 1024)], torch.ops.aten.add.Tensor),
}


def median_us(f, rounds):
    for _ in range(20):
        f()
    times = []
    for _ in range(rounds):
        t = time.perf_counter_ns()
        f()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2000)
    a = p.parse_args()
    for case, (shapes, aten) in CASES.items():
        kernel = case.split("_")[0]
        xs = [torch.randn(s) for s in shapes]
        op = getattr(torch.ops.tessera, kernel)
        rounds = a.rounds if xs[0].numel() < 10_000 else max(a.rounds // 20, 50)
        t_op = median_us(lambda: op(*xs), rounds)
        t_native = median_us(lambda: _native.kernel_run(kernel, xs), rounds)
        t_aten = median_us(lambda: aten(*xs), rounds)
        print(f"{case:>14}: op {t_op:8.1f} us  native {t_native:8.1f} us  aten {t_aten:7.1f} us  "
              f"op overhead {t_op - t_native:6.1f} us")


if __name__ == "__main__":
    main()
