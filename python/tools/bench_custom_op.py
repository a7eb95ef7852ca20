"""Per-call cost of a kernel registered as a torch op (tessera.torch), side by side in one run:
  op        torch.ops.tessera.<kernel>(...)  (dispatcher, the C++ CPU implementation, Tessera)
  op_py     the same kernel registered with its Python implementation (TESSERA_CPU_KERNEL_OPS=python)
  native    tessera._native.kernel_run(...)  (from Python: DLPack in, PJRT execute, out)
  exec      the kernel's own time, timed in Rust (upload without a copy, execute, wait; the op's
            outputs are tensors over the result buffers, not copies)
  aten      torch.ops.aten.<same math>       (torch's own CPU kernel, for scale)
and on tpu device tensors (tessera.device; the launch is asynchronous in Strict mode, so these
are the per-call host costs, the device's execution overlapping the next call):
  op_tpu    torch.ops.tessera.<kernel>(...)  (dispatcher, TpuTensor dispatch, Tessera)
  run_tpu   tessera._native.kernel_run_eager (Tessera alone: PJRT execute on the buffers)
  aten_tpu  torch.ops.aten.<same math>       (the same math as an ATen op on the device)
Medians; the op's overhead is op - exec (op_tpu - run_tpu). On CPU tensors op, exec and aten are
also timed interleaved, one call of each per round (this machine's load changes within a
run): "interleaved" gives their medians and the median of the per-round op - exec.

    python python/tools/bench_custom_op.py [--rounds 2000]
"""

import argparse
import statistics
import time

import torch

import tessera.torch as tt
from tessera import _native
from tessera.device.tensor import _value

# The small cases measure the overhead itself: XLA's CPU client runs a program of fewer than
# 1,000 flops on the calling thread, and a larger one on its thread pool, whose wake-up (tens
# of us, varying from call to call on a shared 2-core machine) then falls on the op and on
# `exec` alike but not always equally, so their difference is noisy there.
CASES = {
    "add_4x64": ([(4, 64), (4, 64)], torch.ops.aten.add.Tensor),
    "softmax_4x32": ([(4, 32)], lambda x: torch.ops.aten._softmax.default(x, -1, False)),
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


def interleaved_us(op, kernel, aten, xs, rounds):
    """Medians of op, exec and aten timed one call each per round, and of op - exec."""
    t_op, t_exec, t_aten, diff = [], [], [], []
    for i in range(rounds + 20):
        t = time.perf_counter_ns()
        op(*xs)
        a = (time.perf_counter_ns() - t) / 1e3
        e = _native.kernel_execute_us(kernel, xs, 1)
        t = time.perf_counter_ns()
        aten(*xs)
        b = (time.perf_counter_ns() - t) / 1e3
        if i >= 20:
            t_op.append(a), t_exec.append(e), t_aten.append(b), diff.append(a - e)
    return [statistics.median(v) for v in (t_op, t_exec, t_aten, diff)]


def _python_op(kernel):
    """The kernel registered a second time (`tessera_py::<kernel>`) with its Python
    implementation, for comparison."""
    from tessera import _cpu_kernel_ops

    native = _cpu_kernel_ops._state.get("module")
    _cpu_kernel_ops._state["module"] = None
    try:
        return tt.register(kernel, f"tessera_py::{kernel}")
    finally:
        _cpu_kernel_ops._state["module"] = native


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2000)
    a = p.parse_args()
    for case, (shapes, aten) in CASES.items():
        kernel = case.split("_")[0]
        xs = [torch.randn(s) for s in shapes]
        op = getattr(torch.ops.tessera, kernel)
        op_py = _python_op(kernel)
        rounds = a.rounds if xs[0].numel() < 10_000 else max(a.rounds // 20, 50)
        t_op = median_us(lambda: op(*xs), rounds)
        t_py = median_us(lambda: op_py(*xs), rounds)
        t_native = median_us(lambda: _native.kernel_run(kernel, xs), rounds)
        t_exec = _native.kernel_execute_us(kernel, xs, rounds)
        t_aten = median_us(lambda: aten(*xs), rounds)
        print(f"{case:>14}: op {t_op:8.1f} us  op_py {t_py:8.1f} us  native {t_native:8.1f} us  "
              f"exec {t_exec:8.1f} us  aten {t_aten:7.1f} us  op overhead {t_op - t_exec:6.1f} us "
              f"(op_py {t_py - t_exec:6.1f} us)")
        i_op, i_exec, i_aten, i_diff = interleaved_us(op, kernel, aten, xs, rounds)
        print(f"{'interleaved':>14}: op {i_op:8.1f} us  exec {i_exec:8.1f} us  aten {i_aten:7.1f} us  "
              f"op overhead {i_diff:6.1f} us (median of per-round op - exec)")
        ds = [tt.to_device(x) for x in xs]
        vs = [_value(d) for d in ds]
        t_op_d = median_us(lambda: op(*ds), rounds)
        t_run_d = median_us(lambda: _native.kernel_run_eager(kernel, vs), rounds)
        t_aten_d = median_us(lambda: aten(*ds), rounds)
        tt.sync()
        print(f"{case + ' tpu':>14}: op {t_op_d:8.1f} us  run    {t_run_d:8.1f} us  aten {t_aten_d:7.1f} us  "
              f"op overhead {t_op_d - t_run_d:6.1f} us")


if __name__ == "__main__":
    main()
