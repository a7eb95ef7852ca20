"""`#[tpu_kernel]` kernels as real torch ops: `tessera.torch.register("softmax")` makes
`torch.ops.tessera.softmax` an op that runs the kernel on Tessera's device, with a fake
(meta) implementation traced from the kernel's launch spec, so `torch.compile` and
`torch.export` trace through it without running it.

    import torch, tessera.torch as tt
    op = tt.register("softmax")                 # torch.ops.tessera.softmax
    y = op(torch.randn(64, 128))

The launch (grid, blocks) is chosen per call from the input shapes by the kernel's own launch
rule. Shipped kernels are registered at import (`registered()` lists them). Bad inputs raise
`tessera.ArgumentError` naming the kernel and the problem.
"""

import torch

from . import _cpu_kernel_ops, _native
from .ops import _DTYPES, _TORCH_DTYPES

_REGISTERED = {}
# The torch.library.Library objects that own the registrations.
_LIBS = []


def kernels():
    """The shipped kernels: dicts of name, about, problem_dims, inputs, outputs."""
    return _native.kernel_list()


def _schema(info):
    params = ", ".join(f"Tensor {p}" for p in info["inputs"])
    outs = info["outputs"]
    ret = "Tensor" if len(outs) == 1 else "(" + ", ".join("Tensor" for _ in outs) + ")"
    return f"({params}) -> {ret}"


def _check_tensors(kernel, tensors):
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise _native.ArgumentError(f"kernel `{kernel}`: input {i} is a {type(t).__name__}, not a Tensor")
        if t.dtype not in _DTYPES:
            raise _native.ArgumentError(f"kernel `{kernel}`: input {i} has dtype {t.dtype}, which Tessera does not take")
        if t.device.type not in ("cpu", "meta"):
            raise _native.ArgumentError(
                f"kernel `{kernel}`: input {i} is on {t.device}; Tessera's kernel ops take CPU "
                "tensors, or tpu tensors (all inputs)")


def _run(kernel, library, tensors):
    # DLPack refuses tensors that require grad; the kernel reads contiguous memory in place.
    ts = [t if t.is_contiguous() and not t.requires_grad else t.detach().contiguous() for t in tensors]
    try:
        outs = _native.kernel_run(kernel, ts) if library is None else _native.library_run(library, kernel, ts)
    except _native.ArgumentError:
        # The native checks name the kernel and the input; these name the problem in torch's
        # terms where one applies (checked only on failure: a cached call skips them).
        _check_tensors(kernel, tensors)
        raise
    return outs[0] if len(outs) == 1 else tuple(outs)


def _fake(kernel, library, tensors):
    _check_tensors(kernel, tensors)
    sig = [(_DTYPES[t.dtype], list(t.shape)) for t in tensors]
    meta = _native.kernel_meta(kernel, sig) if library is None else _native.library_meta(library, kernel, sig)
    outs = [tensors[0].new_empty(shape, dtype=_TORCH_DTYPES[d]) for d, shape in meta]
    return outs[0] if len(outs) == 1 else tuple(outs)


class _CaptureAutograd:
    """The Library passed to `torch.library.register_autograd`: registers as the Library
    does, and keeps the autograd kernel it registers, which the C++ CPU implementation calls
    when a gradient is needed (calls that need none skip it). If torch registers it some
    other way, nothing is kept and the op keeps torch's autograd kernel alone."""

    def __init__(self, lib):
        self.lib, self.kernel = lib, None

    def impl(self, name, fn, key, *args, **kwargs):
        if key == "Autograd" and kwargs.get("with_keyset"):
            self.kernel = fn
        return self.lib.impl(name, fn, key, *args, **kwargs)

    def __getattr__(self, attr):
        return getattr(self.lib, attr)


def register(kernel, name=None, *, library=None, backward=None, setup_context=None):
    """Makes the kernel `kernel` the torch op `name` (default `tessera::<kernel>`) and returns
    the op (`torch.ops.<ns>.<op>.default`). The kernel is a shipped one, or one of the kernel
    library at path `library` (see `load_library`). `backward`/`setup_context` as in
    `torch.library.register_autograd` pair it with a backward. Registering the same name
    twice returns the first registration."""
    infos = kernels() if library is None else _native.library_kernels(str(library))
    info = next((k for k in infos if k["name"] == kernel), None)
    if info is None:
        raise _native.ArgumentError(
            f"no kernel `{kernel}` ({'shipped' if library is None else library} kernels: "
            f"{', '.join(k['name'] for k in infos)})")
    qualname = name or f"tessera::{kernel}"
    if "::" not in qualname:
        raise _native.ArgumentError(f"op name `{qualname}` must be `namespace::name`")
    if qualname in _REGISTERED:
        return _REGISTERED[qualname]
    ns, opname = qualname.split("::", 1)
    library = None if library is None else str(library)
    lib = torch.library.Library(ns, "FRAGMENT")
    lib.define(opname + _schema(info))
    impl = lambda *ts: _run(kernel, library, ts)  # noqa: E731
    native = _cpu_kernel_ops.module()
    if native is not None:
        native.register_cpu(ns, opname, kernel, library or "", impl)
    else:
        lib.impl(opname, impl, "CPU")
    torch.library.register_fake(qualname, lambda *ts: _fake(kernel, library, ts), lib=lib)
    if backward is not None:
        captured = _CaptureAutograd(lib)
        torch.library.register_autograd(qualname, backward, setup_context=setup_context, lib=captured)
        if native is not None and captured.kernel is not None:
            native.register_autograd_cpu(ns, opname, captured.kernel)
    op = getattr(getattr(torch.ops, ns), opname).default
    _REGISTERED[qualname] = op
    # On tpu device tensors the kernel runs on their device buffers (tessera.device).
    from .device import dispatch as _device_dispatch
    _device_dispatch.KERNEL_OPS[op] = (kernel, library)
    # The Library object owns the registrations: keep it alive with the op.
    _LIBS.append(lib)
    return op


def load_library(path, namespace="tessera"):
    """Loads a kernel library of the user's own (a cdylib exporting kernels with
    `tessera_export::export_kernels!`, see examples/kernel-crate) and registers each of its
    kernels as `<namespace>::<kernel>`. Returns {qualified name: op}."""
    return {
        f"{namespace}::{k['name']}": register(k["name"], f"{namespace}::{k['name']}", library=path)
        for k in _native.library_kernels(str(path))
    }



def registered():
    """{qualified name: op} of the kernel ops registered so far."""
    return dict(_REGISTERED)


# Backwards of the shipped kernels, in torch ops (autograd through the kernel op).
def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return y * (grad - (grad * y).sum(-1, keepdim=True))


def _silu_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _silu_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    s = torch.sigmoid(x)
    return grad * s * (1 + x * (1 - s))


def _add_setup(ctx, inputs, output):
    pass


def _add_backward(ctx, grad):
    return grad, grad


def _matmul_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_backward(ctx, grad):
    x, y = ctx.saved_tensors
    return grad @ y.transpose(-1, -2), x.transpose(-1, -2) @ grad


def _layer_norm_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _layer_norm_backward(ctx, grad):
    # The kernel's math (biased variance, eps 1e-5) differentiated by hand, in f32.
    x, w, b = ctx.saved_tensors
    xf, g = x.float(), grad.float()
    mean = xf.mean(-1, keepdim=True)
    rstd = torch.rsqrt(((xf - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
    xhat = (xf - mean) * rstd
    dxhat = g * w.float()
    dx = rstd * (dxhat - dxhat.mean(-1, keepdim=True) - xhat * (dxhat * xhat).mean(-1, keepdim=True))
    rows = tuple(range(x.dim() - 1))
    return dx.to(x.dtype), (g * xhat).sum(rows).to(w.dtype), g.sum(rows).to(b.dtype)


_BACKWARDS = {
    "layer_norm": (_layer_norm_backward, _layer_norm_setup),
    "softmax": (_softmax_backward, _softmax_setup),
    "silu": (_silu_backward, _silu_setup),
    "add": (_add_backward, _add_setup),
    "matmul": (_matmul_backward, _matmul_setup),
}


def _register_shipped():
    for k in kernels():
        bwd, setup = _BACKWARDS.get(k["name"], (None, None))
        register(k["name"], backward=bwd, setup_context=setup)


_register_shipped()

# The `tpu` device (tessera.device): `to_device(x_or_module)`, `metrics()`, eager modes.
from .device import (  # noqa: E402
    device,
    metrics,
    mode,
    reset_metrics,
    reset_warnings,
    set_mode,
    sync,
    to_device,
    wait,
)

# torch.compile(backend="tessera" or "tpu"): registered with Dynamo at import.
from . import compile as _compile  # noqa: E402

_compile.register()
