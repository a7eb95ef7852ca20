"""Device tensors: `TpuTensor` (torch metadata: size, strides, storage offset) over a shared
`_Storage` (one contiguous eager tensor), and moving values between storage, device and host."""

import threading
from collections import Counter

import torch

from .. import _native
from ..ops import _DTYPES, _TORCH_DTYPES
from .backend import device

# Transfers and op counts (`metrics()`).
_counts = Counter()
# The eager mode set through `set_mode` (None: the environment's); applied on each thread that
# dispatches (the eager runtime's mode is per thread; autograd runs backward on its own thread).
_mode = None
_thread = threading.local()


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
            # An empty tensor's torch storage would have 0 bytes, which torch.compile's fake
            # tensors mirror by resizing a device storage (a C++ PrivateUse1 hook the Python
            # backend cannot give: dinov3 failed so); the wrapper's storage holds no data.
            **({"storage_size": 1} if 0 in size else {}),
        )
        t._storage_ = storage
        # Computed once: whether the tensor is its whole storage, contiguous (then its value is
        # the storage's value), and its shape as the storage's value shape is kept.
        t._shape = tuple(size)
        t._full = t._full_view() if full is None else full
        return t

    __torch_function__ = torch._C._disabled_torch_function_impl

    def _full_view(self):
        """Whether the tensor is its whole storage, contiguous from offset 0."""
        return (not self.storage_offset()
                and list(self.stride()) == _contiguous_strides(self._shape)
                and self.numel() == self._storage_.numel)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return dispatch.dispatch(func, args, kwargs or {})

    def __reduce_ex__(self, protocol):
        # Pickled as torch pickles PrivateUse1 tensors without storage: a CPU copy moved back
        # to the device on load (a function `torch.load(weights_only=True)` allows).
        return (
            torch._utils._rebuild_device_tensor_from_cpu_tensor,
            (_to_cpu(self), self.dtype, str(self.device), self.requires_grad),
        )

    # A traceable wrapper subclass, so that `nn.Module.to("tpu")` swaps each parameter in place
    # (`torch.utils.swap_tensors`) instead of making new Parameter objects, which would untie
    # shared weights (GPT-2's embedding and head), and so that torch.compile traces models on
    # the device: the one inner tensor is a meta tensor of the same size and strides (what
    # Dynamo and AOTAutograd fake-ify and trace; `__torch_dispatch__` runs a traced tensor's
    # ops on it, see `_traced_op`), and a real tensor's meta carries its storage and offset
    # (`_tessera_ref`), so the compiled program finds the device value of each input it gets
    # and each output it returns comes back as a tpu tensor (tessera/compile.py).
    def __tensor_flatten__(self):
        return ["_meta"], (self.storage_offset(),)

    @property
    def _meta(self):
        m = self.__dict__.get("_meta_")
        if m is None:
            m = _ref_meta(self._storage_, self.shape, self.stride(), self.storage_offset())
            self.__dict__["_meta_"] = m
        return m

    @staticmethod
    def __tensor_unflatten__(inner_tensors, ctx, outer_size, outer_stride):
        (offset,) = ctx
        m = inner_tensors["_meta"]
        if outer_stride is None:
            outer_stride = _contiguous_strides(list(outer_size))
        ref = getattr(m, "_tessera_ref", None)
        if ref is not None:
            storage, offset = ref
            t = TpuTensor(storage, outer_size, outer_stride, offset)
        else:
            # A traced tensor (fake or functional inner): metadata only, no value.
            t = TpuTensor(_Storage(None, 0, m.dtype, _TRACED), outer_size, outer_stride, offset, full=False)
            _note_traced()
        t.__dict__["_meta_"] = m
        return t

    def tolist(self):
        """The values as nested Python lists (a sync point)."""
        return _to_cpu(self).tolist()

    def numpy(self, *, force=False):
        """As for a CUDA tensor: refused with torch's hint, or (force=True) copied to host."""
        if not force:
            raise TypeError(f"can't convert {device} device type tensor to numpy. "
                            "Use Tensor.cpu() to copy the tensor to host memory first.")
        return _to_cpu(self).detach().numpy()

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

    def __format__(self, spec):
        # As torch formats a plain 0-d tensor: its number (`f"expert_{idx}"` in transformers'
        # MoE routing indexes a ModuleDict this way); torch only does it for exact Tensors.
        if self.dim() == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __repr__(self, *, tensor_contents=None):
        if self._storage_.error is _TRACED:
            # A torch.compile trace value (in Dynamo's error messages): metadata only.
            return f"TpuTensor(<traced>, size={tuple(self.shape)}, dtype={self.dtype}, device='{device}')"
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


def _call(op, args, kwargs=None):
    _counts["device_ops"] += 1
    out = _native.eager_call(op, args, kwargs or {})
    if _thread.__dict__.get("autograd"):
        # The eager runtime counts per thread: what autograd's thread compiled is added here.
        now = _native.eager_compiles()
        _counts["autograd_compiles"] += now - _thread.__dict__.get("compiles", 0)
        _thread.compiles = now
    return out


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


# The error of a traced tensor's storage (torch.compile's fake tensors): read, it says why.
_TRACED = "this tensor is a torch.compile trace value (a fake tensor): it has no device value"
# Whether a traced tensor was ever made: then dispatch looks for them (`dispatch._traced_op`).
_traced = [False]


def _note_traced():
    _traced[0] = True


def _ref_meta(storage, size, stride, offset):
    """A meta tensor of `size` and `stride` (None: contiguous) that refers to `storage` at
    `offset` (the inner tensor of a device tensor, for torch.compile)."""
    if stride is None:
        m = torch.empty(size, dtype=storage.dtype, device="meta")
    else:
        m = torch.empty_strided(size, stride, dtype=storage.dtype, device="meta")
    m._tessera_ref = (storage, offset)
    return m


def _value_of_meta(m):
    """The device value that meta tensor `m` (a `_ref_meta`) refers to, as a tensor of its own
    (not a view); None if it refers to none."""
    ref = getattr(m, "_tessera_ref", None)
    if ref is None:
        return None
    storage, offset = ref
    if not offset and storage.error is None and m.shape == storage.shape and m.is_contiguous():
        # The whole storage as it is (what a compiled program's inputs mostly are): its value,
        # without a device tensor made only to read it (a compiled call reads dozens).
        return storage.value
    value = _value(TpuTensor(storage, m.shape, m.stride(), offset))
    if value is not storage.value:
        # A view of its storage (the gradient of a reshaped output): copied, since a compiled
        # program traced with a view argument is not replayed (it would trace every call).
        value = _call("aten::clone", [value])[0]
    return value


def _check_dtype(dtype):
    # Complex tensors (complex64, complex128) are stored as device values of complex element
    # type: ops whose lowering takes complex run on them, the others refuse them (and fall
    # back to torch CPU). complex32 has no StableHLO type and is not in `_DTYPES`.
    if dtype not in _DTYPES:
        raise TypeError(f"tpu: dtype {dtype} is not supported by Tessera")


def _from_cpu(cpu, requires_grad=False):
    """A new device tensor holding a copy of CPU tensor `cpu` (contiguous)."""
    _check_dtype(cpu.dtype)
    value = _upload(cpu)
    return _wrap(value, requires_grad)


def _wrap(value, requires_grad=False):
    """A new device tensor over eager value `value`."""
    size = value.shape
    n = 1
    for d in size:
        n *= d
    s = _Storage(value, n, _TORCH_DTYPES[value.dtype])
    # Strides None: torch makes them contiguous.
    return TpuTensor(s, size, None, None, requires_grad, True)


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


def _mode_for_thread():
    """Applies `set_mode`'s mode on this thread (once per thread and mode). Autograd's device
    threads (started by C++, so `_DummyThread`s here) do not defer: the gradients they make
    must be values the training thread can read (a deferred graph belongs to its thread)."""
    want = _mode
    if _thread.__dict__.get("applied", _thread) == want:
        return  # already applied on this thread (the common case: every op asks)
    autograd = isinstance(threading.current_thread(), threading._DummyThread)
    _thread.autograd = autograd
    if autograd:
        if want is None:
            want = _native.eager_mode()
        if want in ("defer", "compiled"):
            want = "strict"
    if want is not None and getattr(_thread, "mode", None) != want:
        _native.eager_set_mode(want)
        _thread.mode = want
    _thread.applied = _mode


def sync_for_thread():
    """Runs this thread's deferred ops (in its mode)."""
    _mode_for_thread()
    _native.eager_sync()


from . import dispatch  # noqa: E402  (it imports this module's names)


def _restride(t, size, stride, offset):
    """Sets device tensor `t`'s own sizes, strides and storage offset (an in-place view op):
    torch's strided kernel changes the wrapper's metadata, the storage stays."""
    with torch.utils._mode_utils.no_dispatch():
        torch.ops.aten.as_strided_.default(t, size, stride, offset)
    t._shape = tuple(size)
    t._full = t._full_view()
