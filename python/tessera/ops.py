"""`tessera.ops.call`: one ATen overload on torch CPU tensors, run by Tessera."""

import itertools

import torch

from . import _native

_DTYPES = {
    torch.bool: "bool",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.uint16: "u16",
    torch.uint32: "u32",
    torch.uint64: "u64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.complex64: "c64",
    torch.complex128: "c128",
}
_TORCH_DTYPES = {v: k for k, v in _DTYPES.items()}
_IGNORED = (torch.device, torch.layout, torch.memory_format, torch.Generator)

# Seeds for random ops: a counter, so every call draws fresh numbers; `manual_seed` resets it.
_seed = itertools.count()


def manual_seed(seed: int) -> None:
    """Makes the following random ops reproducible."""
    global _seed
    _seed = itertools.count(seed)


def _arg(v):
    if isinstance(v, torch.Tensor):
        if v.dtype not in _DTYPES:
            raise _native.UnsupportedError(f"dtype {v.dtype} is not supported by Tessera")
        return v.detach().resolve_conj().resolve_neg().contiguous().cpu()
    if isinstance(v, torch.dtype):
        if v not in _DTYPES:
            raise _native.UnsupportedError(f"dtype {v} is not supported by Tessera")
        return _native.ScalarType(_DTYPES[v])
    if isinstance(v, complex):
        raise _native.UnsupportedError("complex Python numbers are not supported by Tessera")
    if isinstance(v, _IGNORED):
        return None
    if isinstance(v, torch.Size):
        return list(v)
    if isinstance(v, (list, tuple)):
        return [_arg(x) for x in v]
    if isinstance(v, torch.SymInt):
        return int(v)
    return v


def _tensor(out):
    dtype, shape, data = out
    dtype = _TORCH_DTYPES[dtype]
    if len(data) == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(data, dtype=dtype).reshape(shape)


def _result(out):
    if isinstance(out, tuple):
        return _tensor(out)
    if isinstance(out, list):
        return [_tensor(t) for t in out]
    return out


def call(op: str, *args, **kwargs):
    """Runs the ATen overload `op` (`"aten::add.Tensor"`, `"add.Tensor"`, `"abs"`) on torch CPU
    tensors and returns torch tensors, as `torch.ops.aten.<op>` would. In-place and `out=`
    overloads write into their tensors and return them.

    Raises `tessera.UnknownOpError`, `tessera.ArgumentError` (what PyTorch would reject),
    `tessera.UnsupportedError` (dtype or feature Tessera does not support) or
    `tessera.DeviceError`.
    """
    outputs, writes, _kernel, returns = _native.call(
        op, [_arg(a) for a in args], {k: _arg(v) for k, v in kwargs.items()}, next(_seed)
    )
    results = [_result(o) for o in outputs]
    for index, name, out in writes:
        target = kwargs[name] if name in kwargs else args[index]
        value = results[out]
        with torch.no_grad():
            # A list `out` (`split_copy.Tensor_out`) takes one result per tensor.
            for t, v in zip(*((target, value) if isinstance(target, (list, tuple)) else ([target], [value]))):
                if t.shape != v.shape:
                    t.resize_(v.shape)
                t.copy_(v)
        results[out] = target
    # Outputs past the op's returns only carried new values of written arguments.
    results = results[:returns]
    if len(results) == 1:
        return results[0]
    # An op without returns (`split_copy.Tensor_out`) returns None, as torch.ops.aten does.
    return tuple(results) if results else None


def last_kernel(op: str, *args, overrides: bool = True, **kwargs):
    """Like `call` for functional overloads, but returns `(result, kernel)`: the name of the
    override kernel that ran, or None when the default lowering did (for tests of dispatch).
    `overrides=False` runs the default lowering even where an override applies."""
    outputs, _writes, kernel, returns = _native.call(
        op, [_arg(a) for a in args], {k: _arg(v) for k, v in kwargs.items()}, next(_seed), overrides
    )
    results = [_result(o) for o in outputs[:returns]]
    return (results[0] if len(results) == 1 else tuple(results)), kernel


def table():
    """The op table: a dict per overload (name, schema, core, tags, implemented, overrides)."""
    return _native.op_table()
