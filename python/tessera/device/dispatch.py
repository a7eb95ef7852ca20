"""The dispatcher of `tpu` tensors: every ATen op to the Rust dispatcher (`tessera_eager::call`)
or, for view ops, to torch metadata over shared storage; ops Tessera cannot lower to torch CPU
(warned once, counted); ops with device semantics of their own (moves, copies, factories)."""

import threading
import warnings
from collections import Counter

import torch

from .. import _native
from ..ops import _DTYPES
from . import amp as _amp
from .tensor import (
    TpuTensor,
    _call,
    _check_dtype,
    _contiguous_strides,
    _counts,
    _empty_memory_format,
    _empty_strided,
    _from_cpu,
    _mode_for_thread,
    _restride,
    _Storage,
    _storage_cpu,
    _to_cpu,
    _upload,
    _value,
    _wrap,
    _write,
    _zeros,
    _traced,
    _TRACED,
    device,
    sync_for_thread,
)

aten = torch.ops.aten
_NAME = device.type
_IGNORED = (torch.device, torch.layout, torch.memory_format, torch.Generator)

_fallbacks = Counter()
_warned = set()
_lock = threading.Lock()


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
        if v.dtype not in _DTYPES:
            raise TypeError(f"tpu: dtype {v.dtype} is not supported by Tessera ({func})")


def _on_autograd_thread():
    return isinstance(threading.current_thread(), threading._DummyThread)


def dispatch(func, args, kwargs):
    if _traced[0] and _has_traced(args, kwargs):
        return _traced_op(func, args, kwargs)
    try:
        return _dispatch_op(func, args, kwargs)
    except Exception as e:
        # An exception on autograd's device thread aborts the process (PyTorch's engine with a
        # Python device guard): the op's results carry the error instead, raised when read.
        if not _on_autograd_thread():
            raise
        return _failed(func, args, kwargs, e)


def _is_traced(v):
    return type(v) is TpuTensor and v._storage_.error is _TRACED


def _has_traced(args, kwargs):
    for v in (*args, *kwargs.values()):
        if _is_traced(v) or (isinstance(v, (list, tuple)) and any(map(_is_traced, v))):
            return True
    return False


_META = torch.device("meta")


def _traced_op(func, args, kwargs):
    """An op on torch.compile's traced device tensors (Dynamo's fake tensors, AOTAutograd's
    functional ones): run on their inner tensors, so the trace records it there; results are
    traced device tensors (an op returning an input, as in-place ops do, returns that input)."""
    inner_of = {}

    def inner(v):
        if isinstance(v, TpuTensor):
            m = v._meta
            inner_of[id(m)] = v
            return m
        if isinstance(v, torch.Tensor) and v.device.type == _NAME:
            # A traced factory's result on the device (`arange(.., device=x.device)` in a
            # decomposition): moved to the inner tensors' device in the trace (a copy the
            # compiled program runs as one).
            return v.to("meta")
        if isinstance(v, torch.device) and v.type == _NAME:
            return _META  # `_to_copy(.., device=tpu)` (`type_as`): the result stays inner
        if isinstance(v, torch.Tensor) and v.device == _META:
            return v  # a CPU index moved to the inner tensors' device (below)
        _check_arg(func, v)  # one device per op, as in eager
        if isinstance(v, torch.Tensor) and v.device.type == "cpu":
            # A CPU scalar (0-dim; `masked_fill(mask, torch.tensor(min))` in DeBERTa's and
            # SEW-D's XSoftmax), which eager takes with device tensors: moved to the inner
            # tensors' device in the trace, since the meta inner tensors take no CPU scalar
            # in some of torch's references ("Expected `value` to be on same device as `a`").
            return v.to(_META)
        return v

    if func in _CPU_INDICES_OK:
        # CPU index tensors with device tensors, as in eager (`rel_pos[coords.long()]` of
        # coordinates made on the CPU, SAM's relative positions): moved to the inner tensors'
        # device in the trace (a copy the compiled program runs as one).
        args = [_cpu_indices_to_meta(a) if isinstance(a, (list, tuple)) else a for a in args]
    out = func(*_tree_map(inner, list(args)), **{k: _tree_map(inner, v) for k, v in kwargs.items()})

    def outer(o):
        if not isinstance(o, torch.Tensor):
            return o
        if id(o) in inner_of:
            t = inner_of[id(o)]
            if torch.Tag.inplace_view in func.tags:
                _restride(t, o.shape, o.stride(), o.storage_offset())  # `unsqueeze_`: as inner
            return t
        return TpuTensor.__tensor_unflatten__({"_meta": o}, (o.storage_offset(),), o.shape, o.stride())

    return _tree_map(outer, out)


def _cpu_indices_to_meta(indices):
    return type(indices)(
        i.to(_META) if isinstance(i, torch.Tensor) and not isinstance(i, TpuTensor) and i.device.type == "cpu" else i
        for i in indices
    )


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


# `#[tpu_kernel]` kernel ops (tessera.torch.register): op -> (kernel, kernel library or None).
KERNEL_OPS = {}


# How each op overload is dispatched, decided on its first call: one dict lookup per op
# instead of one per table (an OpOverload hashes in Python, ~0.5 us a lookup).
_ROUTES = {}
_SPECIAL_OP, _KERNEL_OP, _ATEN_OP = 0, 1, 2


def _route(func):
    special = _SPECIAL.get(func)
    if special is not None:
        return (_SPECIAL_OP, special)
    if torch.Tag.inplace_view in func.tags and func._schema.name not in _STORAGE_SETTERS:
        return (_SPECIAL_OP, _inplace_view)
    kernel = KERNEL_OPS.get(func)
    if kernel is not None:
        return (_KERNEL_OP, kernel)
    return (_ATEN_OP, _schema(func), func in _CPU_INDICES_OK, _REWRITES.get(func))


def _dispatch_op(func, args, kwargs):
    _mode_for_thread()
    route = _ROUTES.get(func)
    if route is None:
        route = _ROUTES[func] = _route(func)
    if route[0] == _SPECIAL_OP:
        return route[1](func, args, kwargs)
    if route[0] == _KERNEL_OP:
        return _kernel_op(*route[1], args, kwargs)
    _, sch, cpu_indices_ok, rewrite = route
    for a in args:
        if type(a) is not TpuTensor and (not cpu_indices_ok or not isinstance(a, list)):
            _check_arg(func, a)
    for a in kwargs.values():
        if type(a) is not TpuTensor:
            _check_arg(func, a)
    _counts["ops"] += 1
    if rewrite is not None:
        return rewrite(func, args, kwargs)
    if sch.view:
        return _view(func, args, kwargs)
    return _run(func, sch, args, kwargs)


def _kernel_op(kernel, library, args, kwargs):
    """A kernel op on device tensors: an op of the eager runtime on their buffers (launched in
    strict and debug, recorded into the fused program in defer); its results stay on the
    device."""
    if kwargs:
        raise _native.ArgumentError(f"kernel `{kernel}`: inputs are positional, got keywords {sorted(kwargs)}")
    values = []
    for i, a in enumerate(args):
        if not isinstance(a, TpuTensor):
            where = a.device if isinstance(a, torch.Tensor) else type(a).__name__
            raise _native.ArgumentError(
                f"kernel `{kernel}`: input {i} is on {where}; with a tpu input, every input "
                "must be on the tpu device")
        values.append(_value(a))
    _counts["ops"] += 1
    if library is None:
        outs = _native.kernel_run_eager(kernel, values)
    else:
        outs = _native.library_run_eager(library, kernel, values)
    outs = [_wrap(o) for o in outs]
    return outs[0] if len(outs) == 1 else tuple(outs)


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


# The `.Tensor` overload of `.Scalar` overloads, for a Python complex number (the eager
# runtime's scalars are real; `x * 1j` in the backward of `torch.polar`).
_COMPLEX_SCALAR_AS_TENSOR = {
    aten.add.Scalar: aten.add.Tensor,
    aten.add_.Scalar: aten.add_.Tensor,
    aten.sub.Scalar: aten.sub.Tensor,
    aten.sub_.Scalar: aten.sub_.Tensor,
    aten.mul.Scalar: aten.mul.Tensor,
    aten.mul_.Scalar: aten.mul_.Tensor,
    aten.div.Scalar: aten.div.Tensor,
    aten.div_.Scalar: aten.div_.Tensor,
    aten.rsub.Scalar: aten.rsub.Tensor,
}


def _complex_numbers_as_tensors(func, args):
    """`func` and `args` with each Python complex number that torch takes as a tensor (`x * 1j`
    reaches here as `mul.Tensor(x, 1j)`; `mul.Scalar` becomes `mul.Tensor`) as a 0-dim CPU
    tensor that promotes as torch promotes the number: complex64 (the default), complex128 next
    to a float64 or complex128 tensor, where the number also keeps its precision."""
    func = _COMPLEX_SCALAR_AS_TENSOR.get(func, func)
    wide = any(isinstance(a, torch.Tensor) and a.dtype in (torch.float64, torch.complex128)
               for a in args)
    specs = func._schema.arguments
    return func, tuple(
        (torch.tensor(a, dtype=torch.complex128) if wide else torch.tensor(a))
        if type(a) is complex and i < len(specs) and isinstance(specs[i].type, torch.TensorType)
        else a
        for i, a in enumerate(args)
    )


def _run(func, sch, args, kwargs):
    if complex in map(type, args):  # in C: no frame per argument on the hot path
        twin, args = _complex_numbers_as_tensors(func, args)
        if twin is not func:
            return twin(*args, **kwargs)
        if complex in map(type, args):
            return _fallback(func, sch, args, kwargs,
                             "a complex number where the eager runtime takes a real one")
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
    # Written arguments: the eager runtime wrote into the values passed. A value that is a view
    # of the tensor's storage (the whole storage, or an `as_strided` view of it) wrote through
    # to it; any other (a copy) is written back into the storage here.
    for i, name in sch.writes:
        target = kwargs[name] if name in kwargs else args[i] if i < len(args) else None
        passed = nkw[name] if name in nkw else nargs[i] if i < len(nargs) else None
        # A list `out` (`split_copy.Tensor_out`) pairs its tensors with the values passed.
        pairs = zip(target, passed) if isinstance(target, (list, tuple)) and isinstance(passed, (list, tuple)) else [(target, passed)]
        for t, p in pairs:
            if isinstance(t, TpuTensor) and isinstance(p, _native.EagerTensor):
                if not p.shares_storage(t._storage_.value):
                    _write(t, p)
    return _single(_returns(sch, args, kwargs, outs, _from_native))


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
            f"tessera: {name if '::' in name else 'aten::' + name} runs on torch CPU (copies to and from the tpu device): {why}",
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

    final = _returns(sch, args, kwargs, out if isinstance(out, tuple) else (out,), _out_to_device)
    return tuple(final) if isinstance(out, tuple) else final[0]


def _returns(sch, args, kwargs, outs, convert):
    """An op's results: the argument it wrote where a return aliases one (`add_`, `out=`),
    else `convert` of the computed result."""
    final = []
    for j, r in enumerate(outs):
        w = sch.returns_written[j] if j < len(sch.returns_written) else None
        if w is not None:
            i, name = w
            final.append(kwargs[name] if name in kwargs else args[i])
        else:
            final.append(convert(r))
    return final


def _out_to_device(r):
    if isinstance(r, torch.Tensor):
        if r.dtype not in _DTYPES:
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


def _copied_view(func, args, kwargs):
    """A view that reinterprets its input's elements as another dtype (`view_as_real`,
    `view_as_complex`): a device storage holds values of one element type, so the result cannot
    alias the input's storage as in torch; it is computed as a copy (Tessera's lowering), and
    writes to one are not seen through the other (torch's models read these views)."""
    return _run(func, _schema(func), args, kwargs)


def _conj(func, args, kwargs):
    """`_conj` (what `torch.conj` calls on complex tensors): in torch a view with the
    conjugate bit set, which the device does not keep; the conjugate is computed as a copy
    (`conj_physical`), not aliasing the input."""
    x = args[0]
    if not x.is_complex():
        return _view(func, args, kwargs)
    return aten.conj_physical.default(x)


def _inplace_view(func, args, kwargs):
    """An in-place view op (`squeeze_`, `t_`, `transpose_`, `as_strided_`, ...): the tensor's
    own sizes, strides and offset change as torch computes them on a meta tensor; its storage
    and values stay. Run as ordinary ops these left the metadata as it was."""
    _counts["ops"] += 1
    x = args[0]
    m = _meta(x)
    func(m, *args[1:], **kwargs)
    _restride(x, m.shape, m.stride(), m.storage_offset())
    return x


# In-place view ops that replace the storage (or resize it) rather than view it anew.
_STORAGE_SETTERS = {"aten::set_", "aten::resize_", "aten::resize_as_"}


# Ops run as other ops (after the device and dtype checks), views included.
_REWRITES = {
    aten.view_as_real.default: _copied_view,
    aten.view_as_complex.default: _copied_view,
    aten._conj.default: _conj,
}

def _alias(func, args, kwargs):
    """`detach` and `alias`: the same view of the same storage, made directly (the generic
    view path runs torch's meta kernel to find that out). Autograd detaches every gradient it
    accumulates, so a training step makes one per parameter."""
    _counts["ops"] += 1
    t = args[0]
    return TpuTensor(t._storage_, t.shape, t.stride(), t.storage_offset(), full=t._full)


# Ops with device semantics of their own (moves, copies across devices, factories), and
# GradScaler's ops (tessera.device.amp).
_SPECIAL = {
    **{getattr(aten, name).default: _amp.handler(fn) for name, fn in _amp.OPS.items()},
    aten.detach.default: _alias,
    aten.alias.default: _alias,
    aten._to_copy.default: _to_copy,
    aten.copy_.default: _copy_,
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.resize_.default: _resize_,
    aten.new_empty.default: _new_empty,
    aten.new_empty_strided.default: _new_empty_strided,
    aten.empty.memory_format: _factory,
    aten.empty_strided.default: lambda f, a, k: _empty_strided(*a, **k),
}


# Factories whose torch kernels fill an `out=` tensor they resize (which a device tensor
# cannot do), registered as PrivateUse1 kernels: the deterministic ones run on the device where
# Tessera lowers them with torch's result type; random ones draw from torch's CPU generator
# (Tessera's random ops take an explicit seed); both fallbacks are counted.
_DEVICE_FACTORIES = ["arange", "arange.start", "arange.start_step", "eye", "eye.m", "linspace",
                     "logspace"]
_HOST_FACTORIES = _DEVICE_FACTORIES + ["randperm", "randint", "randint.low"]


def _overload(name):
    base, _, overload = name.partition(".")
    return getattr(getattr(aten, base), overload or "default")


def _host_factory(name):
    op = _overload(name)
    on_device = name in _DEVICE_FACTORIES

    def build(*args, **kwargs):
        kwargs.pop("device", None)
        why = "Tessera draws random numbers from explicit seeds, torch from its generator"
        if on_device:
            want = op(*args, **kwargs, device="meta")
            nkw = {k: _native_arg(v) for k, v in kwargs.items()}
            try:
                out = _wrap(_call("aten::" + name, [_native_arg(a) for a in args], nkw)[0])
                if out.dtype == want.dtype and out.shape == want.shape:
                    return out
                why = f"Tessera's result is {out.dtype}{list(out.shape)}, torch's " \
                      f"{want.dtype}{list(want.shape)}"
            except _FALLBACK_ERRORS as e:
                why = str(e).splitlines()[0]
        cpu = op(*args, **kwargs, device="cpu")
        _count_fallback(name, why)
        return _from_cpu(cpu)

    return build


def _copy_from(src, dst, non_blocking=False):
    """`dst.copy_(src)` reached the PrivateUse1 kernel (torch's own code, e.g. `torch.tensor(..,
    device="tpu")`, runs with Python dispatch off)."""
    return _copy_(aten.copy_.default, (dst, src), {})
