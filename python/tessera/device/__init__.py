"""The `tpu` torch device: tensors that live in Tessera's eager runtime.

    import tessera.torch as tt
    x = torch.randn(4, 4).to("tpu")          # or tt.to_device(x)
    model = MyModel().to("tpu")              # or tt.to_device(model)
    loss = model(x).sum(); loss.backward()   # forward and backward ATen ops run on the device
    tt.wait([p.grad for p in model.parameters()])  # block until computed (no copy)
    print(loss.item(), tt.metrics())

PyTorch's PrivateUse1 backend is renamed `tpu`; a device tensor is a `torch.Tensor` wrapper
subclass (`TpuTensor`) whose `__torch_dispatch__` sends every ATen op to the Rust dispatcher
(`tessera_eager::call`: kernel overrides first, in the current eager mode: Strict, Debug
(`TESSERA_LAUNCH_BLOCKING=1`), DeferAndFuse (`TESSERA_DEFER_AND_FUSE=1`); `set_mode` switches).

Storage model: a tensor is torch metadata (size, strides, storage offset, as torch computes them)
over a shared `_Storage` holding one contiguous eager tensor. View ops never run on the device:
their metadata comes from running the op on a meta tensor, and the result shares the storage.
A non-view op reads each input as the whole storage (when the tensor covers it contiguously) or
as `as_strided` of the flat storage; an in-place op writes back the same way (the storage
replaced, or `index_put` at the view's flat indices), so every tensor sharing the storage sees
the write, as in torch.

Ops Tessera cannot lower run on torch CPU (copy in, run, copy back) with a one-time warning per
op, counted in `metrics()["fallbacks"]`. Modules: `backend` (PrivateUse1 renamed `tpu`),
`tensor` (TpuTensor, storage, transfers), `dispatch` (every op's path).

Limits (measured or by design):
- Results of non-view ops are contiguous (torch keeps an elementwise input's layout: `x.t() * 2`
  has strides (1, n) in torch, (n, 1) here); views, `as_strided`, `storage_offset()` and
  aliasing follow torch exactly.
- Autograd runs backward on its own device thread; there ops launch one by one (Strict, or Debug
  if selected) even in DeferAndFuse, since a deferred graph belongs to the thread that made it.
  `backward()` / `autograd.grad` first run what the calling thread deferred.
- Random ops (`normal_`, `uniform_`, `randperm`, ...) draw from torch's CPU generator (counted
  fallbacks), so a seed gives the CPU's numbers.
- A device tensor is not resized: `out=` tensors must have the result's shape (else an error).
- Per-op overhead is bounded below by torch's Python dispatch (`python/tools/bench_device.py`
  prints that floor next to this device's cost).
"""

import torch

from .. import _native
from . import amp as _amp
from . import dispatch as _dispatch
from . import tensor as _tensor
from .backend import NAME, device
from .tensor import TpuTensor, sync_for_thread

__all__ = ["TpuTensor", "to_device", "metrics", "reset_metrics", "set_mode", "mode", "sync", "wait",
           "device"]


def _patch_autograd():
    """Autograd runs a `tpu` backward on its device thread, which cannot read values this
    thread deferred: `backward` and `autograd.grad` run what is pending first."""
    import torch.autograd
    import torch.autograd.graph

    run = torch.autograd.graph._engine_run_backward
    if getattr(run, "_tessera", False):
        return

    def engine_run_backward(*args, **kwargs):
        sync_for_thread()
        return run(*args, **kwargs)

    engine_run_backward._tessera = True
    torch.autograd.graph._engine_run_backward = engine_run_backward
    torch.autograd._engine_run_backward = engine_run_backward


# ---- the user API -------------------------------------------------------------------------------


def to_device(x):
    """Moves a tensor or module to the `tpu` device (what `x.to("tpu")` does)."""
    if isinstance(x, torch.nn.Module):
        return x.to(device)
    if isinstance(x, torch.Tensor):
        return x.to(device)
    raise TypeError(f"to_device: expected a torch.Tensor or nn.Module, got {type(x).__name__}")


def set_mode(name):
    """Sets the eager mode of every thread that dispatches: `strict`, `debug` or `defer`
    (None: back to the environment's). What is pending runs first."""
    if name is not None:
        _native.eager_set_mode(name)  # validates the name
    else:
        _native.eager_sync()
    _tensor._mode = name
    _tensor._thread.mode = name


def mode():
    """This thread's eager mode."""
    _tensor._mode_for_thread()
    return _native.eager_mode()


def sync():
    """Runs this thread's deferred ops now (TorchTPU's `sync`)."""
    sync_for_thread()


def wait(tensors):
    """Blocks until device tensors' values are computed (`jax.block_until_ready` for a tensor
    or a list of them: a training step's gradients), in one call; raises the error of an op
    that failed. Runs this thread's deferred ops first, as any read does."""
    ts = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
    bad = next((t for t in ts if not isinstance(t, torch.Tensor) or t.device.type != NAME), None)
    if bad is not None:
        got = f"one on {bad.device}" if isinstance(bad, torch.Tensor) else type(bad).__name__
        raise TypeError(f"tessera.torch.wait: expected tensors on the {NAME} device, got {got}")
    sync_for_thread()
    values = _eager_values(ts) if CPP is not None else [_tensor._value(t) for t in ts]
    _native.eager_wait_all(values)


def metrics():
    """Counters since the last `reset_metrics()`: `fallbacks` (per op), `ops` (ATen ops the
    device dispatched), `compiles` (device programs compiled, by this thread and autograd's),
    `transfers` (`to_device`, `to_host` copies), and `eager` (the eager runtime's counters per
    mode, this thread)."""
    stats = _native.eager_stats()
    counts = _tensor._counts
    fallbacks = dict(_dispatch._fallbacks)
    cpp_fallbacks = CPP.fallbacks() if CPP is not None else {}
    for op, n in cpp_fallbacks.items():
        fallbacks[op] = fallbacks.get(op, 0) + n
    # The C++ dispatch: every op it dispatched ran on the device unless it fell back.
    cpp_ops = CPP.ops() if CPP is not None else 0
    to_device, to_host, autograd_compiles = _native.device_counts()
    return {
        "fallbacks": fallbacks,
        "ops": counts["ops"] + cpp_ops,
        "device_ops": counts["device_ops"] + cpp_ops - sum(cpp_fallbacks.values()),
        "compiles": sum(m["compiles"] for m in stats.values()) + counts["autograd_compiles"]
        + autograd_compiles,
        "transfers": {"to_device": counts["to_device"] + to_device,
                      "to_host": counts["to_host"] + to_host},
        "eager": stats,
    }


def reset_metrics():
    _dispatch._fallbacks.clear()
    _tensor._counts.clear()
    _native.eager_reset_stats()
    _native.device_counts(reset=True)
    if CPP is not None:
        CPP.reset_counts()


def reset_warnings():
    """Warn again for ops that already fell back (tests)."""
    _dispatch._warned.clear()
    if CPP is not None:
        CPP.reset_warnings()


def _register_factories():
    """`torch.empty(.., device="tpu")` and the factories built on it (`zeros`, `randn`, `.to`)
    reach the PrivateUse1 kernels."""
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("empty.memory_format", _tensor._empty_memory_format, "PrivateUse1")
    lib.impl("empty_strided", _tensor._empty_strided, "PrivateUse1")
    lib.impl("_copy_from", _dispatch._copy_from, "PrivateUse1")
    for name in _dispatch._HOST_FACTORIES:
        lib.impl(name, _dispatch._host_factory(name), "PrivateUse1")
    return lib


# Recurrent layers: torch runs them with fused cells on non-CPU devices (`_thnn_fused_lstm_cell`,
# CUDA-only kernels with no CPU fallback); on `tpu` they run as torch's own decompositions
# into differentiable ops, registered above autograd so backward goes through those ops.
_RNN_OPS = [
    "lstm.input",
    "lstm.data",
    "gru.input",
    "gru.data",
    "rnn_tanh.input",
    "rnn_tanh.data",
    "rnn_relu.input",
    "rnn_relu.data",
]


def _register_rnns():
    import torch._dynamo
    from torch._decomp import decomposition_table

    lib = torch.library.Library("aten", "IMPL")
    for name in _RNN_OPS:
        base, overload = name.split(".")
        decomposed = decomposition_table[getattr(getattr(torch.ops.aten, base), overload)]
        # Not traced by Dynamo: called from C++ in the eager code around a graph break (Dynamo
        # does not compile RNNs), its frame would be compiled down into Tessera's dispatch.
        lib.impl(name, torch._dynamo.disable(decomposed, recursive=True), "AutogradPrivateUse1")
    return lib


def _dispatch_in_cpp():
    """Whether device tensors are plain PrivateUse1 tensors dispatched in C++
    (`TESSERA_TORCH_DISPATCH=cpp`, csrc/device.cpp): then the C++ extension registers the
    device's kernels (factories, copies, torch's strided views, unboxed kernels for the
    hottest arithmetic ops, and one boxed kernel for every other op) instead of `_register_factories`. Its ops cost what the eager runtime does, not
    torch's Python dispatch (see the note of issue 13); torch.compile runs on its tensors
    (tessera/compile.py); `metrics()` counts its ops and fallbacks; random ops draw from
    torch's CPU generator (through the CPU fallback)."""
    import os

    choice = os.environ.get("TESSERA_TORCH_DISPATCH", "python")
    if choice not in ("python", "cpp"):
        raise ValueError(f"TESSERA_TORCH_DISPATCH={choice!r}: expected `python` or `cpp`")
    return choice == "cpp"


def _load_cpp_dispatch():
    from .. import _cpp_extension

    m = _cpp_extension.build("tessera_device", "device.cpp")
    m.set_calls(*_native.device_call_addresses())
    return m


def _print_from_host():
    """Printing a C++-dispatched device tensor formats a host copy (one transfer), as torch
    does for its xla and lazy devices; torch would otherwise format the device tensor itself
    with a dozen small device ops and a CPU fallback (`masked_select`). The text keeps torch's
    suffixes (device, dtype, grad_fn). (The Python device's TpuTensor has its own __repr__.)"""
    import torch._tensor_str as tensor_str

    plain = tensor_str._str

    def _str(self, *, tensor_contents=None):
        if (tensor_contents is None and self.device.type == NAME
                and self.layout == torch.strided and self.numel() > 0):
            with torch.no_grad():
                host = self.detach().to("cpu")
            tensor_contents = tensor_str._tensor_str(host, len("tensor("))
        return plain(self, tensor_contents=tensor_contents)

    tensor_str._str = _str


CPP = _load_cpp_dispatch() if _dispatch_in_cpp() else None
if CPP is not None:
    _print_from_host()


def _eager_value(t):
    """Device tensor `t`'s eager value (an EagerTensor), under either dispatch."""
    if CPP is not None:
        raws = CPP.values([t])
        if raws is None:
            raise TypeError(f"expected a tensor on the tpu device, got one on {t.device}")
        return _native.eager_from_raws(raws)[0]
    return _tensor._value(t)


def _eager_values(ts):
    """Under the C++ dispatch, device tensors `ts`'s eager values (one call for all), or None
    if one of them is not a device tensor."""
    raws = CPP.values(ts)
    return None if raws is None else _native.eager_from_raws(raws)


def _from_eager(e):
    """Eager value `e` as a device tensor of this process's dispatch."""
    if CPP is not None:
        return CPP.wrap_all(_native.eager_into_raws([e]))[0]
    return _tensor._wrap(e)


def _from_eagers(es):
    """Under the C++ dispatch, eager values `es` as device tensors (one call for all)."""
    return CPP.wrap_all(_native.eager_into_raws(es))


_LIB = _register_factories() if CPP is None else None
_RNN_LIB = _register_rnns()
_AMP_LIB = _amp.register() if CPP is not None else None
_patch_autograd()
