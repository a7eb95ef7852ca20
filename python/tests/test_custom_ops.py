"""Shipped #[tpu_kernel] kernels as torch ops (tessera.torch.register): torch.library.opcheck,
results against torch's own math (f32 and bf16), torch.compile(fullgraph=True) without graph
breaks, autograd through the kernel ops, and bad inputs."""

import os

import pytest
import torch

import tessera
import tessera.torch as tt

# torch's own implementation of each shipped kernel's math.
TORCH_MATH = {
    "add": lambda x, y: x + y,
    "silu": torch.nn.functional.silu,
    "matmul": torch.matmul,
    "softmax": lambda x: torch.softmax(x.float(), -1).to(x.dtype),
    "layer_norm": lambda x, w, b: torch.nn.functional.layer_norm(x.float(), x.shape[-1:], w.float(), b.float(), 1e-5).to(x.dtype),
}
# Small problem shapes per kernel (input shapes), inside the TPU tiling rules.
SHAPES = {
    "add": [(16, 256), (16, 256)],
    "silu": [(16, 256)],
    "matmul": [(16, 128), (128, 256)],
    "softmax": [(16, 256)],
    "layer_norm": [(16, 256), (256,), (256,)],
}
# Largest |got - want| / max(1, |want|): f32 one rounding plus f32 internals; bf16 one rounding.
TOL = {torch.float32: 2e-5, torch.bfloat16: 1e-2}
KERNELS = sorted(SHAPES)


def inputs(name, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g).to(dtype) for s in SHAPES[name]]


def op(name):
    return tt.registered()[f"tessera::{name}"]


def test_every_shipped_kernel_is_registered_and_tested_here():
    assert {k["name"] for k in tt.kernels()} == set(KERNELS)
    assert set(tt.registered()) >= {f"tessera::{k}" for k in KERNELS}


@pytest.mark.parametrize("name", KERNELS)
def test_opcheck(name):
    torch.library.opcheck(op(name), tuple(inputs(name, torch.float32)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", KERNELS)
def test_results_match_torch(name, dtype):
    for seed in range(2):
        xs = inputs(name, dtype, seed)
        got = op(name)(*xs)
        want = TORCH_MATH[name](*xs)
        assert got.dtype == dtype and got.shape == want.shape
        g, w = got.double(), want.double()
        err = ((g - w).abs() / w.abs().clamp(min=1)).max().item()
        assert err <= TOL[dtype], f"{name} {dtype}: max relative error {err}"


@pytest.mark.parametrize("name", KERNELS)
def test_inputs_read_in_place_at_any_offset_and_layout(name):
    """The kernel reads CPU inputs in place (zero copy where the memory is 64-byte aligned,
    one copy where it is not) and writes fresh outputs: inputs at a 4-byte offset into their
    storage, transposed (non-contiguous) inputs, and aligned ones give the same results, and
    the inputs are left unchanged."""
    xs = inputs(name, torch.float32, seed=3)
    want = TORCH_MATH[name](*xs)
    # The same values 4 bytes into a larger storage: not 64-byte aligned.
    shifted = [torch.cat([torch.zeros(1), x.flatten()])[1:].view(x.shape) for x in xs]
    assert all(s.data_ptr() % 64 != 0 for s in shifted)
    # The same values as the transpose of a transposed copy: not contiguous.
    strided = [x.t().contiguous().t() if x.dim() == 2 else x for x in xs]
    before = [x.clone() for x in xs]
    for args in (xs, shifted, strided):
        got = op(name)(*args)
        assert torch.allclose(got, want, rtol=2e-5, atol=2e-5), name
        assert all(got.data_ptr() != a.data_ptr() for a in args)
    assert all(torch.equal(a, b) for a, b in zip(xs, before))


class Block(torch.nn.Module):
    """A module using kernel ops between torch ops."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(256, 128, bias=False)
        self.w = torch.nn.Parameter(torch.ones(256))
        self.b = torch.nn.Parameter(torch.zeros(256))

    def forward(self, x):
        h = torch.ops.tessera.layer_norm(x, self.w, self.b)
        h = torch.ops.tessera.silu(h)
        return torch.ops.tessera.softmax(self.proj(h) * 2.0)


def test_compile_fullgraph_has_no_graph_breaks():
    torch.manual_seed(0)
    m = Block()
    x = torch.randn(16, 256)
    eager = m(x)
    explained = torch._dynamo.explain(m)(x)
    assert explained.graph_break_count == 0, explained.break_reasons
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), eager)


def test_autograd_matches_torchs_gradients():
    g = torch.Generator().manual_seed(3)
    for name in KERNELS:
        xs = [torch.randn(s, generator=g, requires_grad=True) for s in SHAPES[name]]
        ref = [x.detach().clone().requires_grad_() for x in xs]
        up = torch.randn(op(name)(*xs).shape, generator=g)
        got = torch.autograd.grad((op(name)(*xs) * up).sum(), xs)
        want = torch.autograd.grad((TORCH_MATH[name](*ref) * up).sum(), ref)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_gradcheck_in_float64():
    # `add` is exact in float64 on the CPU plugin (no f32 internals), so gradcheck applies.
    xs = [torch.randn(8, 128, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    assert torch.autograd.gradcheck(op("add"), xs, eps=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "name, args, message",
    [
        ("matmul", [torch.randn(16, 128), torch.randn(64, 256)], "kernel `matmul` takes 2 input(s) shaped [m, k], [k, n]"),
        ("softmax", [torch.randn(16, 256), torch.randn(16, 256)], "tessera::softmax() expected at most 1 argument(s)"),
        ("add", [torch.randn(16, 256), torch.randn(16, 256, dtype=torch.float64)], "kernel `add`"),
        ("softmax", [torch.ones(16, 256, dtype=torch.int32)], "kernel `softmax`"),
        ("silu", [torch.randn(16, 256, dtype=torch.complex64)], "kernel `silu`"),
    ],
)
def test_bad_inputs_raise_naming_the_kernel(name, args, message):
    with pytest.raises((tessera.ArgumentError, RuntimeError)) as e:
        op(name)(*args)
    assert message in str(e.value)


def test_unknown_kernel_and_bad_names():
    with pytest.raises(tessera.ArgumentError, match="no kernel `nope`"):
        tt.register("nope")
    with pytest.raises(tessera.ArgumentError, match="namespace::name"):
        tt.register("add", "plain")


def test_custom_name_registers_another_op():
    f = tt.register("add", "tessera_test::my_add")
    x = torch.randn(16, 256)
    torch.testing.assert_close(torch.ops.tessera_test.my_add(x, x), x + x)
    assert tt.register("add", "tessera_test::my_add") is f


def test_the_example_runs():
    import subprocess
    import sys

    example = os.path.join(os.path.dirname(__file__), "..", "examples", "custom_op.py")
    out = subprocess.run([sys.executable, example], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    diffs = [float(line.rsplit(":", 1)[1]) for line in out.stdout.splitlines() if "max |diff|" in line]
    assert len(diffs) == 2 and all(d < 1e-5 for d in diffs), out.stdout


def test_launch_config_comes_from_the_autotune_cache_or_the_shipped_rule():
    """Every shipped kernel has tunable blocks; a kernel op runs with the autotuner's cached
    winner for its problem where `tessera tune` stored one, else the shipped launch's
    (kernels/tests/tuned_launch_tests.rs checks the cache round trip)."""
    from tessera import _native

    for name in KERNELS:
        sig = [("f32", list(s)) for s in SHAPES[name]]
        c = _native.kernel_launch_config(name, sig)
        assert c["source"] in ("default", "cache"), c
        assert "=" in c["config"], c
    with pytest.raises(tessera.ArgumentError, match="kernel `matmul`"):
        _native.kernel_launch_config("matmul", [("f32", [16, 128]), ("f32", [64, 256])])


def test_kernel_ops_on_the_interpreter_device():
    """TESSERA_DEVICE=interp runs kernel ops on the reference interpreter (its own process:
    the device is chosen once per process)."""
    import subprocess
    import sys

    script = """
import torch, tessera.torch
g = torch.Generator().manual_seed(0)
x, y = torch.randn(16, 256, generator=g), torch.randn(16, 256, generator=g)
assert torch.equal(torch.ops.tessera.add(x, y), x + y)
b = x.bfloat16()
err = (torch.ops.tessera.softmax(b).double() - torch.softmax(b.double(), -1)).abs().max().item()
assert err < 1e-2, err
print("ok")
"""
    env = dict(os.environ, TESSERA_DEVICE="interp")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_kernel_ops_run_through_the_cpp_implementation():
    # The C++ CPU implementation built (g++ and ninja are installed by `make test`): the
    # dispatcher calls it without Python. Bypassing the Python implementation is observable:
    # a Python function patched in its place is never called on a call the runtime takes.
    from tessera import _cpu_kernel_ops

    assert _cpu_kernel_ops.module() is not None
    calls = []
    real = tt._run
    tt._run = lambda *a: calls.append(a) or real(*a)
    try:
        x = torch.randn(16, 256, generator=torch.Generator().manual_seed(8))
        torch.testing.assert_close(op("silu")(x), torch.nn.functional.silu(x), rtol=1e-5, atol=1e-6)
        assert calls == []
        # A call the runtime does not take (the kernel's launch rejects the shape) goes to the
        # Python implementation, which raises the kernel's own error.
        with pytest.raises(tessera.ArgumentError, match="kernel `matmul`"):
            op("matmul")(torch.randn(16, 128), torch.randn(64, 3))
        assert len(calls) == 1
    finally:
        tt._run = real
    # Autograd on CPU tensors is C++ too: a call needing no gradient skips torch.library's
    # Python autograd kernel; one that needs it still gets the kernel's backward.
    table = torch._C._dispatch_dump_table("tessera::silu")
    assert any(l.startswith("AutogradCPU:") and "kernel_ops.cpp" in l for l in table.splitlines()), table
    x.requires_grad_(True)
    y = op("silu")(x)
    assert y.grad_fn is not None
    (g,) = torch.autograd.grad(y.sum(), x)
    xd = x.detach().requires_grad_(True)
    torch.testing.assert_close(g, torch.autograd.grad(torch.nn.functional.silu(xd).sum(), xd)[0], rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        assert op("silu")(x).grad_fn is None


def _resident_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024


def test_cpp_kernel_op_outputs_are_the_result_buffers_and_are_freed():
    # On the CPU plugin an output tensor is made over the runtime's result buffer (no copy):
    # its storage is not torch's allocation (not resizable), it stays correct after later
    # calls, and freeing the tensor frees the buffer (300 calls of 2 MiB results, each
    # dropped, would add ~600 MiB if buffers were kept).
    g = torch.Generator().manual_seed(9)
    x, y = torch.randn(512, 1024, generator=g), torch.randn(512, 1024, generator=g)
    first = op("add")(x, y)
    assert not first.untyped_storage().resizable()
    want = x + y
    for _ in range(20):
        op("add")(y, y)
    assert torch.equal(first, want)
    first.add_(1)  # the tensor owns its memory: writing it is allowed
    assert torch.equal(first, want + 1)
    before = _resident_mb()
    for _ in range(300):
        assert op("add")(x, y).shape == (512, 1024)
    assert _resident_mb() - before < 200, (before, _resident_mb())


def test_kernel_ops_through_the_python_implementation():
    """TESSERA_CPU_KERNEL_OPS=python: the op's Python implementation (no C++ build), same
    results and errors (its own process: the choice is made at registration)."""
    import subprocess
    import sys

    script = """
import torch, tessera, tessera.torch
from tessera import _cpu_kernel_ops
assert _cpu_kernel_ops.module() is None
g = torch.Generator().manual_seed(0)
x, y = torch.randn(16, 256, generator=g), torch.randn(16, 256, generator=g)
assert torch.equal(torch.ops.tessera.add(x, y), x + y)
try:
    torch.ops.tessera.matmul(x, y)
    raise SystemExit("no error")
except tessera.ArgumentError as e:
    assert "kernel `matmul`" in str(e), e
print("ok")
"""
    env = dict(os.environ, TESSERA_CPU_KERNEL_OPS="python")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_kernel_ops_on_tpu_tensors_stay_on_the_device(name, dtype):
    # tpu tensors in, tpu tensors out: the kernel runs on the eager runtime's buffers, and no
    # value goes to the host until the result is read.
    xs = inputs(name, dtype, seed=5)
    dev = [tt.to_device(x) for x in xs]
    tt.reset_metrics()
    got = op(name)(*dev)
    assert got.device.type == "tpu"
    assert tt.metrics()["transfers"]["to_host"] == 0
    want = TORCH_MATH[name](*xs)
    g, w = got.cpu().double(), want.double()
    err = ((g - w).abs() / w.abs().clamp(min=1)).max().item()
    assert err <= TOL[dtype], f"{name} {dtype} on tpu: max relative error {err}"


def test_kernel_ops_between_device_ops_and_autograd_on_the_device():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(16, 256, generator=g, requires_grad=True)
    w = torch.randn(256, 128, generator=g)
    xd = tt.to_device(x.detach()).requires_grad_()
    wd = tt.to_device(w)
    # Device ops make the kernel's inputs; the kernel's result feeds device ops again.
    yd = (torch.ops.tessera.softmax(torch.ops.tessera.matmul(xd * 2.0, wd)) * 3.0).sum()
    y = (torch.softmax((x * 2.0) @ w, -1) * 3.0).sum()
    torch.testing.assert_close(yd.cpu(), y, atol=1e-4, rtol=1e-4)
    (gd,) = torch.autograd.grad(yd, xd)
    (gx,) = torch.autograd.grad(y, x)
    assert gd.device.type == "tpu"
    torch.testing.assert_close(gd.cpu(), gx, atol=1e-4, rtol=1e-4)


def test_kernel_ops_fuse_with_device_ops_in_defer_mode():
    # In DeferAndFuse the kernel op is recorded like an ATen op: the ops before it, the kernel
    # and the ops after it run as one program at the read.
    import tessera.device as td

    g = torch.Generator().manual_seed(7)
    x, w = torch.randn(16, 128, generator=g), torch.randn(128, 256, generator=g)
    xd, wd = tt.to_device(x), tt.to_device(w)
    want = torch.softmax((x * 2.0) @ w, -1) + 1.0
    td.set_mode("defer")
    try:
        td.reset_metrics()
        for _ in range(3):
            yd = torch.ops.tessera.softmax(torch.ops.tessera.matmul(xd * 2.0, wd)) + 1.0
            torch.testing.assert_close(yd.cpu(), want, atol=1e-4, rtol=1e-4)
        defer = td.metrics()["eager"]["defer"]
    finally:
        td.set_mode(None)
    # One program per read (mul, matmul kernel, softmax kernel, add), compiled once.
    assert defer["launches"] == 3, defer
    assert defer["compiles"] == 1, defer


def test_kernel_ops_refuse_mixed_devices_naming_the_kernel():
    xd = tt.to_device(torch.randn(16, 128))
    with pytest.raises(tessera.ArgumentError, match=r"kernel `matmul`: input 1 is on cpu"):
        op("matmul")(xd, torch.randn(128, 256))
    with pytest.raises(tessera.ArgumentError, match=r"kernel `matmul` takes 2 input\(s\) shaped"):
        op("matmul")(xd, tt.to_device(torch.randn(64, 3)))
