"""The `tpu` torch device: tensors that live in Tessera's eager runtime.

    import tessera.torch as tt
    x = torch.randn(4, 4).to("tpu")          # or tt.to_device(x)
    model = MyModel().to("tpu")              # or tt.to_device(model)
    loss = model(x).sum(); loss.backward()   # forward and backward ATen ops run on the device
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
op, counted in `metrics()["fallbacks"]`.
"""

import threading
import warnings
from collections import Counter

import torch

from . import _native
from .ops import _DTYPES, _TORCH_DTYPES

__all__ = ["TpuTensor", "to_device", "metrics", "reset_metrics", "set_mode", "mode", "sync", "device"]

aten = torch.ops.aten
_NAME = "tpu"
_IGNORED = (torch.device, torch.layout, torch.memory_format, torch.Generator)

_fallbacks = Counter()
_counts = Counter()
_warned = set()
_lock = threading.Lock()
# The eager mode set through `set_mode` (None: the environment's); applied on each thread that
# dispatches (the eager runtime's mode is per thread; autograd runs backward on its own thread).
_mode = None
_thread = threading.local()


class _BackendModule:
    """`torch.tpu`: what torch asks a backend module (device count, RNG state, synchronize).
    The device has no generator of its own: random ops draw from torch's CPU generator (see
    the fallbacks), so its RNG state is empty and seeding is torch's `manual_seed`."""

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def device_count(self):
        return 1

    def current_device(self):
        return 0

    def _is_in_bad_fork(self):
        return False

    # `torch.manual_seed` seeds the CPU generator and then calls these.
    def manual_seed(self, seed):
        pass

    def manual_seed_all(self, seed):
        pass

    def get_rng_state(self, device=None):
        return torch.empty(0, dtype=torch.uint8)

    def set_rng_state(self, state, device=None):
        pass

    def synchronize(self, device=None):
        sync()


def _rename():
    """Renames PrivateUse1 to `tpu` (once per process)."""
    if torch._C._get_privateuse1_backend_name() == "privateuseone":
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        _setup_privateuseone_for_python_backend(rename=_NAME, backend_module=_BackendModule())
    elif torch._C._get_privateuse1_backend_name() != _NAME:
        raise RuntimeError(
            f"PrivateUse1 is already the `{torch._C._get_privateuse1_backend_name()}` backend"
        )


_rename()
device = torch.device(_NAME, 0)


class _Storage:
    """One contiguous eager tensor shared by a base tensor and its views."""

    __slots__ = ("value", "shape", "numel", "dtype", "error", "__weakref__")

    def __init__(self, value, numel, dtype, error=None):
        self.put(value)
        self.numel = numel
        self.dtype = dtype
        # Why there is no value (the op that should have made it failed on autograd's thread).
        self.error = error

    def put(self, value):
        """Replaces the value (an in-place write): every tensor over this storage sees it."""
        self.value = value  # EagerTensor, contiguous, numel elements (any shape)
        self.shape = None if value is None else tuple(value.shape)


class TpuTensor(torch.Tensor):
    """A tensor on the `tpu` device: torch metadata over a Tessera eager storage."""

    _storage_: _Storage

    @staticmethod
    def __new__(cls, storage, size, stride, offset, requires_grad=False, full=None):
        t = torch.Tensor._make_wrapper_subclass(
            cls,
            size,
            strides=stride,
            storage_offset=offset,
            dtype=storage.dtype,
            device=device,
            requires_grad=requires_grad,
        )
        t._storage_ = storage
        # Computed once: whether the tensor is its whole storage, contiguous (then its value is
        # the storage's value), and its shape as the storage's value shape is kept.
        t._shape = tuple(size)
        if full is None:
            full = (
                offset == 0
                and list(stride) == _contiguous_strides(t._shape)
                and t.numel() == storage.numel
            )
        t._full = full
        return t

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})

    def __reduce_ex__(self, protocol):
        # Pickled as torch pickles PrivateUse1 tensors without storage: a CPU copy moved back
        # to the device on load (a function `torch.load(weights_only=True)` allows).
        return (
            torch._utils._rebuild_device_tensor_from_cpu_tensor,
            (_to_cpu(self), self.dtype, str(self.device), self.requires_grad),
        )

    def tolist(self):
        """The values as nested Python lists (a sync point)."""
        return _to_cpu(self).tolist()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            new = self.clone()
        new.requires_grad_(self.requires_grad)
        if getattr(self, "_is_param", False):
            new._is_param = True
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = new
        return new

    def __repr__(self, *, tensor_contents=None):
        cpu = _to_cpu(self)
        body = repr(cpu)
        extra = f", device='{device}'"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        head = body.split(", grad_fn=")[0].split(", requires_grad=")[0]
        return head[:-1] + extra + ")" if head.endswith(")") else head + extra



# ---- storage <-> values -------------------------------------------------------------------------


def _contiguous_strides(size):
    strides, acc = [], 1
    for d in reversed(size):
        strides.append(acc)
        acc *= max(d, 1)
    return list(reversed(strides))


def _covers(t):
    """Whether `t` is its whole storage, contiguous (then its value is the storage's value)."""
    return t._full


def _call(op, args, kwargs=None):
    _counts["device_ops"] += 1
    return _native.eager_call(op, args, kwargs or {})


def _value(t):
    """The eager value of a device tensor (reading its storage through its metadata)."""
    s = t._storage_
    if s.error is not None:
        raise _native.DeviceError(s.error)
    if t._full:
        if s.shape == t._shape:
            return s.value
        return _call("aten::view", [s.value, list(t._shape)])[0]
    flat = s.value if len(s.shape) == 1 else _call("aten::view", [s.value, [-1]])[0]
    return _call("aten::as_strided", [flat, list(t._shape), list(t.stride()), t.storage_offset()])[0]


_INDEX_CACHE = {}


def _flat_index(t):
    """The storage positions of `t`'s elements (row-major), as a device int64 tensor."""
    key = (t._storage_.numel, tuple(t.shape), tuple(t.stride()), t.storage_offset())
    idx = _INDEX_CACHE.get(key)
    if idx is None:
        cpu = torch.arange(t._storage_.numel).as_strided(t.shape, t.stride(), t.storage_offset())
        idx = _upload(cpu.reshape(-1).contiguous())
        if len(_INDEX_CACHE) > 256:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[key] = idx
    return idx


def _write(t, value):
    """Makes device tensor `t` hold eager value `value` (same shape), through its storage."""
    s = t._storage_
    if t._full:
        s.put(value)
        return
    flat = s.value if len(s.shape) == 1 else _call("aten::view", [s.value, [-1]])[0]
    src = _call("aten::reshape", [value, [-1]])[0]
    s.put(_call("aten::index_put", [flat, [_flat_index(t)], src])[0])


def _upload(cpu):
    _counts["to_device"] += 1
    cpu = cpu.detach().resolve_conj().resolve_neg().contiguous()
    return _native.EagerTensor.upload(cpu)


def _check_dtype(dtype):
    if dtype not in _DTYPES or dtype.is_complex:
        raise TypeError(f"tpu: dtype {dtype} is not supported by Tessera")


def _from_cpu(cpu, requires_grad=False):
    """A new device tensor holding a copy of CPU tensor `cpu` (contiguous)."""
    _check_dtype(cpu.dtype)
    value = _upload(cpu)
    return _wrap(value, requires_grad)


def _wrap(value, requires_grad=False):
    """A new device tensor over eager value `value`."""
    size = list(value.shape)
    n = 1
    for d in size:
        n *= d
    s = _Storage(value, n, _TORCH_DTYPES[value.dtype])
    return TpuTensor(s, size, _contiguous_strides(size), 0, requires_grad, True)


def _download(value):
    _counts["to_host"] += 1
    dtype, shape, data = value.download()
    dtype = _TORCH_DTYPES[dtype]
    if len(data) == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(data, dtype=dtype).reshape(shape)


def _to_cpu(t):
    """A CPU copy of device tensor `t` (a sync point)."""
    sync_for_thread()
    return _download(_value(t))


def _storage_cpu(s):
    """The whole storage as a flat CPU tensor."""
    return _download(s.value).reshape(-1)


# ---- factories (device="tpu") -------------------------------------------------------------------


def _zeros(size, dtype):
    dtype = dtype or torch.get_default_dtype()
    _check_dtype(dtype)
    return _from_cpu(torch.zeros(size, dtype=dtype))


def _empty_memory_format(size, dtype=None, layout=None, device=None, pin_memory=None,
                         memory_format=None):
    return _zeros(list(size), dtype)


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    size, stride = list(size), list(stride)
    dtype = dtype or torch.get_default_dtype()
    _check_dtype(dtype)
    numel = 1 + sum((d - 1) * st for d, st in zip(size, stride)) if all(size) else 0
    s = _Storage(_upload(torch.zeros(numel, dtype=dtype)), numel, dtype)
    return TpuTensor(s, size, stride, 0)


# ---- the dispatcher -----------------------------------------------------------------------------


def _mode_for_thread():
    """Applies `set_mode`'s mode on this thread (once per thread and mode). Autograd's device
    threads (started by C++, so `_DummyThread`s here) do not defer: the gradients they make
    must be values the training thread can read (a deferred graph belongs to its thread)."""
    want = _mode
    if isinstance(threading.current_thread(), threading._DummyThread):
        if want is None:
            want = _native.eager_mode()
        if want in ("defer", "compiled"):
            want = "strict"
    if want is not None and getattr(_thread, "mode", None) != want:
        _native.eager_set_mode(want)
        _thread.mode = want


def sync_for_thread():
    _mode_for_thread()
    _native.eager_sync()


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


class _Schema:
    """What dispatch needs from an op's schema, computed once per overload."""

    __slots__ = ("name", "qualified", "view", "writes", "outs", "returns_written")

    def __init__(self, func):
        s = func._schema
        # `add.Tensor` (the schema's name carries the `aten::` namespace).
        self.name = s.name.split("::")[-1] + ("." + s.overload_name if s.overload_name else "")
        self.qualified = "aten::" + self.name
        self.view = any(
            r.alias_info is not None and not r.alias_info.is_write for r in s.returns
        )
        self.writes = [
            (i, a.name) for i, a in enumerate(s.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        ]
        # `out=` arguments (keyword-only written ones; in-place ops write `self`).
        self.outs = [
            a.name for a in s.arguments
            if a.alias_info is not None and a.alias_info.is_write and a.kwarg_only
        ]
        # For each return, the argument it is (in-place and out= overloads), or None.
        sets = {
            frozenset(a.alias_info.before_set): (i, a.name)
            for i, a in enumerate(s.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        }
        self.returns_written = [
            sets.get(frozenset(r.alias_info.before_set)) if r.alias_info is not None else None
            for r in s.returns
        ]


_SCHEMAS = {}


def _schema(func):
    sch = _SCHEMAS.get(func)
    if sch is None:
        sch = _SCHEMAS[func] = _Schema(func)
    return sch


# Helpers are module-level functions, not nested recursive closures: a closure that calls
# itself is a reference cycle, which kept every op's arguments alive until the cycle
# collector ran (and so kept deferred results live, changing the fused program each flush).


def _tree_map(fn, v):
    """`fn` applied to the leaves of nested lists/tuples."""
    if isinstance(v, (list, tuple)):
        return type(v)(_tree_map(fn, x) for x in v)
    return fn(v)


# Ops that take CPU index tensors with device tensors, as torch does for CUDA.
_CPU_INDICES_OK = {
    aten.index.Tensor,
    aten.index_put.default,
    aten.index_put_.default,
    aten._index_put_impl_.default,
}


def _check_arg(func, v):
    """PyTorch's rule: one device per op, except CPU scalars (0-dim); and a dtype Tessera has.
    (A device tensor's dtype was checked when it was made.)"""
    if isinstance(v, (list, tuple)):
        for x in v:
            _check_arg(func, x)
    elif isinstance(v, torch.Tensor) and not isinstance(v, TpuTensor):
        if v.dim() != 0:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two "
                f"devices, {device} and {v.device}! (when checking arguments for {func})"
            )
        if v.dtype not in _DTYPES or v.dtype.is_complex:
            raise TypeError(f"tpu: dtype {v.dtype} is not supported by Tessera ({func})")


def _on_autograd_thread():
    return isinstance(threading.current_thread(), threading._DummyThread)


def _dispatch(func, args, kwargs):
    try:
        return _dispatch_op(func, args, kwargs)
    except Exception as e:
        # An exception on autograd's device thread aborts the process (PyTorch's engine with a
        # Python device guard): the op's results carry the error instead, raised when read.
        if not _on_autograd_thread():
            raise
        return _failed(func, args, kwargs, e)


def _failed(func, args, kwargs, error):
    """Results of `func` (shapes from its meta kernel) whose storage holds `error`."""
    message = (
        f"this tensor has no value: it is the result of `{func}` on the tpu device "
        f"(in backward), which failed: {type(error).__name__}: {error}"
    )

    def to_meta(v):
        if isinstance(v, torch.Tensor):
            return _meta(v) if isinstance(v, TpuTensor) else v.to("meta")
        return v

    out = func(*_tree_map(to_meta, list(args)), **{k: _tree_map(to_meta, v) for k, v in kwargs.items()})
    for i, name in _schema(func).writes:
        target = kwargs[name] if name in kwargs else args[i] if i < len(args) else None
        if isinstance(target, TpuTensor):
            target._storage_.error = message

    def back(m):
        if isinstance(m, torch.Tensor):
            s = _Storage(None, m.numel(), m.dtype, message)
            return TpuTensor(s, m.shape, _contiguous_strides(list(m.shape)), 0)
        return m

    return _tree_map(back, out)


def _dispatch_op(func, args, kwargs):
    _mode_for_thread()
    special = _SPECIAL.get(func)
    if special is not None:
        return special(func, args, kwargs)
    sch = _SCHEMAS.get(func) or _schema(func)
    for a in args:
        if type(a) is not TpuTensor and (func not in _CPU_INDICES_OK or not isinstance(a, list)):
            _check_arg(func, a)
    for a in kwargs.values():
        if type(a) is not TpuTensor:
            _check_arg(func, a)
    _counts["ops"] += 1
    if sch.view:
        return _view(func, args, kwargs)
    rewrite = _REWRITES.get(func)
    if rewrite is not None:
        return rewrite(func, args, kwargs)
    return _run(func, sch, args, kwargs)


def _meta(t):
    s = t._storage_
    base = torch.empty(s.numel, dtype=s.dtype, device="meta")
    return base.as_strided(t.shape, t.stride(), t.storage_offset())


def _view(func, args, kwargs):
    """A view op: torch computes the metadata (on meta tensors); the result shares storage."""
    storages = []

    def to_meta(v):
        if isinstance(v, TpuTensor):
            storages.append(v._storage_)
            return _meta(v)
        return v

    margs = _tree_map(to_meta, list(args))
    mkw = {k: _tree_map(to_meta, v) for k, v in kwargs.items()}
    out = func(*margs, **mkw)
    s = storages[0]

    def back(m):
        if isinstance(m, torch.Tensor):
            if m.dtype != s.dtype:
                raise NotImplementedError(f"tpu: {func} reinterprets {s.dtype} as {m.dtype}")
            return TpuTensor(s, m.shape, m.stride(), m.storage_offset())
        return m

    return _tree_map(back, out)


def _native_arg(v):
    tv = type(v)
    if tv is TpuTensor:
        return _value(v)
    if tv is int or tv is float or tv is bool or v is None:
        return v
    if isinstance(v, TpuTensor):
        return _value(v)
    if isinstance(v, torch.Tensor):  # a CPU scalar
        return _upload(v)
    if isinstance(v, torch.dtype):
        _check_dtype(v)
        return _native.ScalarType(_DTYPES[v])
    if isinstance(v, complex):
        raise TypeError("tpu: complex numbers are not supported by Tessera")
    if isinstance(v, _IGNORED):
        return None
    if isinstance(v, torch.Size):
        return list(v)
    if isinstance(v, (list, tuple)):
        return [_native_arg(x) for x in v]
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return v.node.hint if hasattr(v.node, "hint") else int(v)
    return v


def _from_native(v):
    if isinstance(v, _native.EagerTensor):
        return _wrap(v)
    if isinstance(v, list):
        return [_from_native(x) for x in v]
    return v


_FALLBACK_ERRORS = (_native.UnknownOpError, _native.UnsupportedError, _native.ArgumentError)


def _check_out_shapes(func, sch, args, kwargs):
    """An `out=` tensor must already have the result's shape (a device tensor is not
    resized); the result shapes come from the op's meta kernel."""

    def to_meta(v):
        if isinstance(v, torch.Tensor):
            return _meta(v) if isinstance(v, TpuTensor) else v.to("meta")
        return v

    margs = _tree_map(to_meta, list(args))
    mkw = {k: _tree_map(to_meta, v) for k, v in kwargs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "resized a non-empty out tensor"
        func(*margs, **mkw)
    for name in sch.outs:
        for t, m in zip(_leaves(kwargs.get(name)), _leaves(mkw.get(name))):
            if isinstance(t, TpuTensor) and t.shape != m.shape:
                raise RuntimeError(
                    f"tpu: {func} would resize its out= tensor `{name}` from {list(t.shape)} "
                    f"to {list(m.shape)}; a device tensor is not resized: pass one of the "
                    f"result's shape"
                )


def _leaves(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _run(func, sch, args, kwargs):
    if sch.outs:
        _check_out_shapes(func, sch, args, kwargs)
    nargs = [_native_arg(a) for a in args]
    nkw = {k: _native_arg(v) for k, v in kwargs.items()}
    try:
        outs = _call(sch.qualified, nargs, nkw)
    except _FALLBACK_ERRORS as e:
        return _fallback(func, sch, args, kwargs, e)
    if not sch.writes:
        if len(outs) == 1:
            return _from_native(outs[0])
        return tuple(_from_native(o) for o in outs)
    # Written arguments: the eager runtime wrote into the values passed; a tensor that is not
    # its whole storage gets the value written back into the storage.
    for i, name in sch.writes:
        target = kwargs[name] if name in kwargs else args[i] if i < len(args) else None
        passed = nkw[name] if name in nkw else nargs[i] if i < len(nargs) else None
        if isinstance(target, TpuTensor) and isinstance(passed, _native.EagerTensor):
            if not _covers(target) or not passed.shares_storage(target._storage_.value):
                _write(target, passed)
    results = []
    for j, o in enumerate(outs):
        w = sch.returns_written[j] if j < len(sch.returns_written) else None
        if w is not None:
            i, name = w
            results.append(kwargs[name] if name in kwargs else args[i])
        else:
            results.append(_from_native(o))
    return _single(results)


def _single(results):
    if len(results) == 1:
        return results[0]
    return tuple(results)


def _count_fallback(name, why):
    """Counts a fallback of op `name`; warns the first time."""
    with _lock:
        _fallbacks[name] += 1
        first = name not in _warned
        _warned.add(name)
    if first:
        warnings.warn(
            f"tessera: aten::{name} runs on torch CPU (copies to and from the tpu device): {why}",
            RuntimeWarning,
            stacklevel=4,
        )


def _fallback(func, sch, args, kwargs, error):
    """Runs `func` on torch CPU: inputs copied out (views over a CPU copy of their storage),
    written storages copied back, results uploaded. Warned once per op and counted. Where torch
    rejects the call too, its error is raised (PyTorch's message), and nothing is counted."""
    sync_for_thread()
    cpu_storages = {}

    def to_cpu(v):
        if isinstance(v, TpuTensor):
            s = v._storage_
            if id(s) not in cpu_storages:
                cpu_storages[id(s)] = (s, _storage_cpu(s))
            flat = cpu_storages[id(s)][1]
            return flat.as_strided(v.shape, v.stride(), v.storage_offset())
        if isinstance(v, torch.device):
            return torch.device("cpu")
        return v

    cargs = _tree_map(to_cpu, list(args))
    ckw = {k: _tree_map(to_cpu, v) for k, v in kwargs.items()}
    out = func(*cargs, **ckw)
    _count_fallback(sch.name, str(error).splitlines()[0])
    written = set()
    for i, name in sch.writes:
        target = kwargs[name] if name in kwargs else args[i] if i < len(args) else None
        targets = target if isinstance(target, (list, tuple)) else [target]
        for t in targets:
            if isinstance(t, TpuTensor):
                written.add(id(t._storage_))
    for key in written:
        s, flat = cpu_storages[key]
        s.put(_upload(flat))

    results = out if isinstance(out, tuple) else (out,)
    final = []
    for j, r in enumerate(results):
        w = sch.returns_written[j] if j < len(sch.returns_written) else None
        if w is not None:
            i, name = w
            final.append(kwargs[name] if name in kwargs else args[i])
        else:
            final.append(_out_to_device(r))
    return tuple(final) if isinstance(out, tuple) else final[0]


def _out_to_device(r):
    if isinstance(r, torch.Tensor):
        if r.dtype not in _DTYPES or r.dtype.is_complex:
            raise TypeError(f"tpu: dtype {r.dtype} is not supported by Tessera")
        return _from_cpu(r)
    if isinstance(r, (list, tuple)):
        return type(r)(_out_to_device(x) for x in r)
    return r


# ---- ops with device semantics --------------------------------------------------------------


def _to_copy(func, args, kwargs):
    x = args[0]
    target = kwargs.get("device")
    dtype = kwargs.get("dtype") or x.dtype
    if target is not None and torch.device(target).type != _NAME:
        if not isinstance(x, TpuTensor):
            return func(*args, **kwargs)
        cpu = _to_cpu(x)
        return cpu.to(dtype=dtype, copy=True)
    _check_dtype(dtype)
    if not isinstance(x, TpuTensor):
        return _from_cpu(x.to(dtype))
    _counts["ops"] += 1
    return _run(func, _schema(func), (x,), {"dtype": dtype})


def _copy_(func, args, kwargs):
    dst, src = args[0], args[1]
    if isinstance(dst, TpuTensor) and not isinstance(src, TpuTensor):
        _check_dtype(src.dtype)
        _write(dst, _upload(src.to(dst.dtype).expand(dst.shape)))
        return dst
    if not isinstance(dst, TpuTensor):
        dst.copy_(_to_cpu(src))
        return dst
    _counts["ops"] += 1
    return _run(func, _schema(func), args, kwargs)


def _resize_(func, args, kwargs):
    x, size = args[0], list(args[1])
    if isinstance(x, TpuTensor) and list(x.shape) != size:
        raise RuntimeError(
            f"tpu: resizing a device tensor from {list(x.shape)} to {size} is not supported "
            f"(an out= tensor must have the result's shape)"
        )
    return x


def _local_scalar_dense(func, args, kwargs):
    return _to_cpu(args[0]).item()


def _new_empty(func, args, kwargs):
    x, size = args[0], args[1]
    return _zeros(list(size), kwargs.get("dtype") or x.dtype)


def _new_empty_strided(func, args, kwargs):
    x, size, stride = args[0], args[1], args[2]
    return _empty_strided(size, stride, kwargs.get("dtype") or x.dtype)


def _factory(func, args, kwargs):
    return _empty_memory_format(*args, **kwargs)


def _addc(func, args, kwargs):
    """`addcdiv`/`addcmul` with a float `value` (Adam's step size changes every step) as
    `self + (value * t1) / t2`, the order torch's CPU kernel computes in, so the value is a
    device input (see the eager runtime's scalar lifting) rather than a constant that
    recompiles DeferAndFuse's program every step."""
    value = kwargs.get("value", args[3] if len(args) > 3 else 1)
    self, t1, t2 = args[:3]
    if (
        type(value) is not float
        or value == 1.0
        or not all(type(t) is TpuTensor and t.dtype in (torch.float32, torch.float64)
                   for t in (self, t1, t2))
        or not self.dtype == t1.dtype == t2.dtype
    ):
        return _run(func, _schema(func), args, kwargs)
    combine = aten.div.Tensor if func in (aten.addcdiv.default, aten.addcdiv_.default) else aten.mul.Tensor
    r = combine(aten.mul.Tensor(t1, value), t2)
    if func in (aten.addcdiv_.default, aten.addcmul_.default):
        return aten.add_.Tensor(self, r)
    return aten.add.Tensor(self, r)


# Ops run as other ops (after the device and dtype checks).
_REWRITES = {
    aten.addcdiv.default: _addc,
    aten.addcdiv_.default: _addc,
    aten.addcmul.default: _addc,
    aten.addcmul_.default: _addc,
}

# Ops with device semantics of their own (moves, copies across devices, factories).
_SPECIAL = {
    aten._to_copy.default: _to_copy,
    aten.copy_.default: _copy_,
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.resize_.default: _resize_,
    aten.new_empty.default: _new_empty,
    aten.new_empty_strided.default: _new_empty_strided,
    aten.empty.memory_format: _factory,
    aten.empty_strided.default: lambda f, a, k: _empty_strided(*a, **k),
}


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
    global _mode
    if name is not None:
        _native.eager_set_mode(name)  # validates the name
    else:
        _native.eager_sync()
    _mode = name
    _thread.mode = name


def mode():
    """This thread's eager mode."""
    _mode_for_thread()
    return _native.eager_mode()


def sync():
    """Runs this thread's deferred ops now (TorchTPU's `sync`)."""
    sync_for_thread()


def metrics():
    """Counters since the last `reset_metrics()`: `fallbacks` (per op), `ops` (ATen ops the
    device dispatched), `compiles` (device programs compiled), `transfers` (`to_device`,
    `to_host` copies), and `eager` (the eager runtime's counters per mode, this thread)."""
    stats = _native.eager_stats()
    return {
        "fallbacks": dict(_fallbacks),
        "ops": _counts["ops"],
        "device_ops": _counts["device_ops"],
        "compiles": sum(m["compiles"] for m in stats.values()),
        "transfers": {"to_device": _counts["to_device"], "to_host": _counts["to_host"]},
        "eager": stats,
    }


def reset_metrics():
    _fallbacks.clear()
    _counts.clear()
    _native.eager_reset_stats()


def reset_warnings():
    """Warn again for ops that already fell back (tests)."""
    _warned.clear()


# Factories whose torch kernels fill an `out=` tensor they resize (which a device tensor
# cannot do): built on torch CPU and copied to the device, counted as fallbacks.
_HOST_FACTORIES = [
    "arange",
    "arange.start",
    "arange.start_step",
    "eye",
    "eye.m",
    "linspace",
    "logspace",
    "randperm",
    "randint",
    "randint.low",
]


def _host_factory(name):
    def build(*args, **kwargs):
        kwargs["device"] = torch.device("cpu")
        op = getattr(aten, name.split(".")[0])
        cpu = getattr(op, name.split(".")[1] if "." in name else "default")(*args, **kwargs)
        _count_fallback(name, "a factory torch builds into a resized out= tensor")
        return _from_cpu(cpu)

    return build


def _copy_from(src, dst, non_blocking=False):
    """`dst.copy_(src)` reached the PrivateUse1 kernel (torch's own code, e.g. `torch.tensor(..,
    device="tpu")`, runs with Python dispatch off)."""
    return _copy_(aten.copy_.default, (dst, src), {})


def _register_factories():
    """`torch.empty(.., device="tpu")` and the factories built on it (`zeros`, `randn`, `.to`)
    reach the PrivateUse1 kernels."""
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("empty.memory_format", _empty_memory_format, "PrivateUse1")
    lib.impl("empty_strided", _empty_strided, "PrivateUse1")
    lib.impl("_copy_from", _copy_from, "PrivateUse1")
    for name in _HOST_FACTORIES:
        lib.impl(name, _host_factory(name), "PrivateUse1")
    return lib


_LIB = _register_factories()
_patch_autograd()
