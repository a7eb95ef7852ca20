"""`torch.compile(model, backend="tessera")` (also `"tpu"`): AOTAutograd with PyTorch's core ATen
decompositions splits the model into a forward and a backward graph of ATen ops, and each
graph becomes ONE program of the eager runtime: its ops are traced once through the same
lowerings the eager modes use (overrides first) and replayed on later calls without running
Python per op (`tessera._native.CompiledFunction`).

An op the table lacks runs on torch CPU (counted in `tessera.torch.metrics()["fallbacks"]`,
warned once); the graph around it then runs as more than one program. Graph breaks are
Dynamo's (`torch._dynamo.explain`); `report()` gives the graphs and programs compiled here.
"""

import math
import operator
import weakref
from collections import Counter

import torch

from . import _native
from .device.dispatch import _COMPLEX_SCALAR_AS_TENSOR, KERNEL_OPS, _count_fallback
from .device.tensor import _contiguous_strides, _ref_meta, _Storage, _value_of_meta, _wrap
from .device import CPP, _eager_value, _eager_values, _from_eager, _from_eagers
from .device.backend import NAME as _TPU
from .device.dispatch import _native_arg as _device_arg
from .ops import _DTYPES, _TORCH_DTYPES

_counters = Counter()
_fallbacks = Counter()


def report():
    """{graphs, programs_traced, calls, fallbacks: {op: count}} since the process started."""
    return {**_counters, "fallbacks": dict(_fallbacks)}


def _overload_name(func):
    """`add.Tensor` for an ATen op; other namespaces stay qualified (`tessera::softmax`)."""
    ns, name = func._schema.name.split("::", 1)
    name = name if ns == "aten" else f"{ns}::{name}"
    return name if func._overloadname == "default" else f"{name}.{func._overloadname}"


def _native_arg(v):
    """An FX argument as `eager_call` takes it: CPU tensors uploaded (once while unchanged),
    everything else as the device converts it."""
    if isinstance(v, torch.Tensor) and v.is_meta:
        # The inner tensor of a tpu tensor input (AOTAutograd passes those): its device value.
        value = _value_of_meta(v)
        if value is None:
            raise _native.ArgumentError("tessera compile: a meta tensor input that is no tpu tensor's")
        return value
    if isinstance(v, torch.Tensor) and v.device.type == "cpu":
        return _upload(v)
    if isinstance(v, torch.Tensor) and CPP is not None and v.device.type == _TPU:
        # A device tensor of the C++ dispatch (a plain PrivateUse1 tensor): its value.
        return _eager_value(v)
    if isinstance(v, (list, tuple)):
        return [_native_arg(x) for x in v]
    return _device_arg(v)


# CPU tensors whose device copy is current: id -> (weakref, version, data_ptr, EagerTensor).
# Parameters (unchanged between optimizer steps) and the forward's saved results (read by the
# backward) are uploaded once, not per call; an in-place write bumps `_version` and re-uploads.
_resident = {}


def _remember(t, e):
    if len(_resident) > 4096:
        for k in [k for k, v in _resident.items() if v[0]() is None]:
            del _resident[k]
    _resident[id(t)] = (weakref.ref(t), t._version, t.data_ptr(), e)


def _upload(t):
    if t.dtype not in _DTYPES:
        raise _native.UnsupportedError(f"dtype {t.dtype} is not supported by Tessera")
    hit = _resident.get(id(t))
    if hit is not None and hit[0]() is t and hit[1] == t._version and hit[2] == t.data_ptr():
        return hit[3]
    e = _native.EagerTensor.upload(t.detach().contiguous().cpu())
    if t.device.type == "cpu" and not t._is_view():
        _remember(t, e)
    return e


def _download(e):
    dtype, shape, data = e.download()
    dtype = _TORCH_DTYPES[dtype]
    if len(data) == 0:
        return torch.empty(shape, dtype=dtype)
    t = torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
    _remember(t, e)
    return t


def _fallback(func, args, kwargs, error):
    """Runs `func` on torch CPU (reading its device inputs: the trace is cut here); counted
    and warned as the device's fallbacks are (`tessera.torch.metrics()["fallbacks"]`)."""
    _fallbacks[_overload_name(func)] += 1
    _count_fallback(_overload_name(func), str(error).splitlines()[0])

    def host(v):
        if isinstance(v, torch.Tensor) and v.device.type == "meta":
            v = _native_arg(v)  # a tpu tensor input's device value
        if isinstance(v, _native.EagerTensor):
            return _download(v)
        if isinstance(v, torch.device) and v.type != "cpu":
            return torch.device("cpu")  # a factory of a graph traced on the device
        if isinstance(v, (list, tuple)):
            return type(v)(host(x) for x in v)
        return v

    return func(*host(args), **{k: host(v) for k, v in kwargs.items()})


def _kernel_call(target, kernel, library, args, kwargs):
    """A kernel op (`tessera.torch.register`) in the graph: an op of the traced program, which
    calls the kernel's module as a function (no fallback, no split of the program)."""
    if kwargs:
        raise _native.ArgumentError(f"kernel `{kernel}`: inputs are positional, got keywords {sorted(kwargs)}")
    values = [_native_arg(a) for a in args]
    if library is None:
        outs = _native.kernel_run_eager(kernel, values)
    else:
        outs = _native.library_run_eager(library, kernel, values)
    return outs[0] if len(target._schema.returns) == 1 else tuple(outs)


def _as_strided_args(node, args):
    """`as_strided(x, size, stride, offset)` reads `x`'s storage, as torch laid it out (the
    node's traced input: a view's strides and offset, LongFormer's chunks of a transposed
    tensor); the program's value of `x` is contiguous. Unless the traced `x` is contiguous at
    offset 0 (then the value is its storage), the arguments become those of `as_strided` over
    the storage positions `x` covers, gathered from the value: (x.flatten()[positions], ...)."""
    x = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(x, torch.Tensor):
        return args
    size, stride = [int(d) for d in args[1]], [int(d) for d in args[2]]
    offset = args[3] if len(args) > 3 and args[3] is not None else x.storage_offset()
    shape, strides, base = [int(d) for d in x.shape], [int(d) for d in x.stride()], int(x.storage_offset())
    if base == 0 and strides == _contiguous_strides(shape):
        return args
    # Storage position -> x's element (row-major), -1 where x does not cover the position.
    end = 1 + max(base + sum((d - 1) * st for d, st in zip(shape, strides) if d),
                  int(offset) + sum((d - 1) * st for d, st in zip(size, stride) if d))
    owner = torch.full((end,), -1, dtype=torch.int64)
    owner.as_strided(shape, strides, base).copy_(torch.arange(math.prod(shape)).reshape(shape))
    index = owner.as_strided(size, stride, int(offset)).reshape(-1)
    if (index < 0).any():
        raise _native.UnsupportedError(
            "tessera compile: as_strided reads storage its input does not cover")
    flat = _native.eager_call("reshape", [_native_arg(args[0]), [-1]], {})[0]
    taken = _native.eager_call("index_select", [flat, 0, _upload(index)], {})[0]
    return (taken, size, _contiguous_strides(size), 0)


def _sym_size(t, dim):
    return t.shape[dim]


def _sym_numel(t):
    n = 1
    for d in t.shape:
        n *= d
    return n


# Size queries in graphs with dynamic sizes, answered from the traced tensor's shape.
_SYM = {torch.ops.aten.sym_size.int: _sym_size, torch.ops.aten.sym_numel.default: _sym_numel,
        torch.sym_max: max, torch.sym_min: min}


class _Program:
    """One FX graph as a traced program; inputs and outputs are torch CPU tensors."""

    def __init__(self, gm):
        self.gm = gm
        # One traced program per value of the graph's number inputs (sizes Dynamo made
        # dynamic): {numbers: (CompiledFunction, plan)}. A plan gives per graph output
        # ("none",), ("input", i) (an input returned as it is), ("const", v) (a number),
        # ("program", k): the k-th result of the program, or ("saved", k): the same, kept on
        # the device for the backward.
        self.programs = {}
        _counters["graphs"] += 1

    def _interpret(self, inputs, numbers, plan):
        """The graph run op by op on eager tensors (only while tracing); `numbers`: the number
        inputs by position; fills `plan`."""
        _counters["programs_traced"] += 1
        env = {}
        tensors = iter(inputs)
        position = iter(range(len(inputs) + len(numbers)))
        placeholders = {}
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                i = next(position)
                placeholders[node] = i
                env[node] = numbers[i] if i in numbers else next(tensors)
            elif node.op == "get_attr":
                env[node] = _upload(getattr(self.gm, node.target))
            elif node.op == "call_function":
                args = torch.fx.node.map_arg(node.args, lambda n: env[n])
                kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
                if node.target is torch.ops.aten.as_strided.default:
                    args = _as_strided_args(node, args)
                env[node] = self._call(node.target, args, kwargs)
            elif node.op == "output":
                outs = node.args[0]
                outs = outs if isinstance(outs, (list, tuple)) else [outs]
                plan.clear()
                results = []
                saved = [type(d).__name__ == "SavedForBackwardsAOTOutput" for d in node.meta.get("desc", [])]
                for n, o in enumerate(outs):
                    if o is None:
                        plan.append(("none",))
                    elif o in placeholders:
                        plan.append(("input", placeholders[o]))
                    elif not isinstance(env[o], (_native.EagerTensor, torch.Tensor)):
                        # A number (a size): fixed by the trace, as the shapes are; a trace
                        # that read device data on the host is not replayed.
                        plan.append(("const", env[o]))
                    else:
                        # What the forward saves for the backward stays on the device (a `tpu`
                        # tensor the backward program reads without a copy); what the user
                        # sees comes back as a CPU tensor.
                        kind = "saved" if n < len(saved) and saved[n] else "program"
                        plan.append((kind, len(results), _traced_device(o)))
                        results.append(self._result(o, env[o]))
                return results
            else:
                raise _native.UnsupportedError(f"tessera compile: FX node kind {node.op} ({node.target})")

    def _result(self, node, v):
        """A program result: a view (the forward's saved `t(weight)`, ...) is materialized,
        since a traced program returns new buffers, not aliases of its inputs."""
        if isinstance(v, torch.Tensor):
            return _upload(v)
        target = node.target if node.op == "call_function" else None
        if isinstance(target, torch._ops.OpOverload) and any(
                r.alias_info is not None for r in target._schema.returns):
            return _native.eager_call("clone", [v], {})[0]
        return v

    def _call(self, target, args, kwargs):
        if target is operator.getitem:
            return args[0][args[1]]
        if getattr(target, "__module__", None) in ("_operator", "math") or target in _SYM:
            return _SYM.get(target, target)(*args, **kwargs)  # arithmetic on sizes
        if not isinstance(target, torch._ops.OpOverload):
            raise _native.UnsupportedError(f"tessera compile: {target} is not an ATen op")
        kernel = KERNEL_OPS.get(target)
        if kernel is not None:
            return _kernel_call(target, *kernel, args, kwargs)
        if len(args) > 1 and type(args[1]) is complex and target in _COMPLEX_SCALAR_AS_TENSOR:
            # A Python complex number (`grad * 1j` in torch.polar's backward): as a 0-d complex
            # tensor, with the `.Tensor` overload (the eager runtime's scalars are real).
            target = _COMPLEX_SCALAR_AS_TENSOR[target]
            args = (args[0], torch.tensor(args[1]), *args[2:])
        if target is torch.ops.aten._conj.default:
            # PyTorch's conjugate view (complex backward formulas call it): the conjugate's
            # values, as on the device (a program's values are not views).
            target = torch.ops.aten.conj_physical.default
        name = _overload_name(target)
        try:
            outs = _native.eager_call(name, [_native_arg(a) for a in args],
                                      {k: _native_arg(v) for k, v in kwargs.items()})
        except _native.UnknownOpError as e:
            return _fallback(target, args, kwargs, e)
        return outs[0] if len(target._schema.returns) == 1 else tuple(outs)

    def __call__(self, args):
        _counters["calls"] += 1
        numbers = {i: a for i, a in enumerate(args) if not isinstance(a, torch.Tensor)}
        key = tuple(numbers.items())
        if key not in self.programs:
            plan = []
            fn = _native.CompiledFunction(lambda inputs: self._interpret(inputs, numbers, plan))
            self.programs[key] = (fn, plan)
        fn, plan = self.programs[key]
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        values = _eager_values(tensors) if CPP is not None else None
        outs = fn(values if values is not None else [_native_arg(a) for a in tensors])
        take = {"none": lambda: None, "input": lambda i: args[i], "const": lambda v: v,
                "program": lambda k, d: _download(outs[k]),
                "saved": lambda k, d: _from_eager(outs[k])}
        if any(a.is_meta for a in tensors):
            # Traced from tpu tensors (their inner meta tensors are the inputs): every result
            # stays on the device. One AOTAutograd wraps in a tpu tensor (traced as the inner
            # meta tensor of one) is returned as the inner tensor of a new tpu tensor; one
            # traced as a plain tensor on the device (made in the graph by a factory:
            # `arange(.., device=x.device)` returned to the code after a graph break) is not
            # wrapped by AOTAutograd, so it is returned as a tpu tensor itself (as the inner
            # meta tensor it would reach the next graph as a meta tensor: "found at least two
            # devices, tpu:0 and meta").
            take["program"] = lambda k, d: _wrap(outs[k]) if d == "tpu" else _device_out(outs[k])
            take["saved"] = lambda k, d: _device_out(outs[k])
        elif CPP is not None:
            # Under the C++ dispatch device tensors are plain PrivateUse1 tensors: a result
            # traced on the device (or saved for the backward) is made one over the program's
            # value, all of them in one call (taken below in the plan's order).
            made = iter(_from_eagers([outs[p[1]] for p in plan
                                      if p[0] == "saved" or (p[0] == "program" and p[2] == _TPU)]))
            take["program"] = lambda k, d: next(made) if d == _TPU else _download(outs[k])
            take["saved"] = lambda k, d: next(made)
        res = [take[p[0]](*p[1:]) for p in plan]
        args.clear()  # boxed calling convention: the caller's list is ours to free
        return res


def _traced_device(node):
    """The device type of graph output `node` as traced (its fake value's), or None."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val.device.type if isinstance(val, torch.Tensor) else None


def _device_out(e):
    """Eager value `e` as the inner tensor of a tpu tensor (AOTAutograd wraps it in one)."""
    shape = e.shape
    storage = _Storage(e, math.prod(shape), _TORCH_DTYPES[e.dtype])
    return _ref_meta(storage, shape, None, 0)


def _compile_graph(gm, example_inputs):
    program = _Program(gm)
    program._boxed_call = True  # takes its arguments as one list (AOTAutograd's boxed convention)
    return program


def backend(gm, example_inputs):
    """The torch.compile backend (registered as "tessera" and "tpu")."""
    from torch._decomp import core_aten_decompositions
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    decompositions = core_aten_decompositions()
    # torch's decomposition of the CPU flash-attention forward returns the attention weights
    # as its logsumexp, which the op's own backward then rejects; Tessera lowers the op and its
    # backward as they are, grouped-query attention (fewer key/value heads) included.
    decompositions.pop(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default, None)
    # The forward and the backward are two programs, so whatever the forward saves for the
    # backward is written out in full. AOTAutograd's default partition saves views, e.g. every
    # linear layer's transposed weight (a materialized transpose per weight per step); the
    # min-cut partition (Inductor's) saves the weights themselves and recomputes cheap ops in
    # the backward, where XLA fuses them. In bench_compile's training step the forward writes
    # 1.71M -> 1.18M floats; as fast on an idle machine, 1.01-1.29x faster on a loaded one.
    return aot_autograd(fw_compiler=_compile_graph, bw_compiler=_compile_graph,
                        partition_fn=min_cut_rematerialization_partition,
                        decompositions=decompositions)(gm, example_inputs)


_skipped = []


def register():
    from torch._dynamo import list_backends, register_backend, trace_rules

    # Tessera's Python (the tpu device's dispatch and factories, this backend) runs as it is:
    # called from C++ in the eager code around a graph break, a frame of it would otherwise
    # be compiled by Dynamo, which cannot trace into the native runtime.
    if not _skipped:
        trace_rules.add("tessera")
        _skipped.append(True)
    for name in ("tessera", "tpu"):
        if name not in list_backends(exclude_tags=()):
            register_backend(backend, name=name)
