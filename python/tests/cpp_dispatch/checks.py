"""Run by test_cpp_dispatch.py in a process of its own, with TESSERA_TORCH_DISPATCH=cpp (the
dispatch is chosen when `tessera.torch` is imported): device tensors as plain PrivateUse1
tensors, every op through the C++ boxed kernel into the eager runtime, checked against torch
CPU on seeded random inputs (float32: rtol/atol 1e-5 per op, 1e-4 after a training step).
Prints one `ok <check>` line per check; any failure raises."""

import copy
import io
import sys
import warnings

import torch

import tessera.torch as tt
from tessera import device as td

assert td.CPP is not None, "the C++ dispatch did not load"
torch.manual_seed(0)
TPU = "tpu"


def close(got, want, tol=1e-5):
    assert got.device.type == TPU, got.device
    torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol)


def ok(name):
    print("ok", name, flush=True)


x, y = torch.randn(5, 6), torch.randn(5, 6)
w = torch.randn(6, 3)
dx, dy, dw = x.to(TPU), y.to(TPU), w.to(TPU)
assert type(dx) is torch.Tensor and dx.device == torch.device("tpu:0")

close(dx * dy + 2, x * y + 2)
close(torch.nn.functional.gelu(dx) - dy.exp(), torch.nn.functional.gelu(x) - y.exp())
close(dx @ dw, x @ w)
close(dx.sum(1), x.sum(1))
close(dx.mean(), x.mean())
close(torch.softmax(dx, -1), torch.softmax(x, -1))
close(dx.max(1).values, x.max(1).values)
close(dx.argmax(1), x.argmax(1))
close(torch.where(dx > 0, dx, dy), torch.where(x > 0, x, y))
close(torch.cat([dx, dy]), torch.cat([x, y]))
close(dx + torch.tensor(2.0), x + 2)  # a CPU scalar with device tensors, as torch allows
close(dx[torch.tensor([0, 2])], x[torch.tensor([0, 2])])
ok("ops")

# Views are torch's own strided metadata over the shared storage.
t, dt = x.t(), dx.t()
assert dt.stride() == t.stride() and not dt.is_contiguous()
s, ds = x[1:4, ::2], dx[1:4, ::2]
assert (ds.stride(), ds.storage_offset()) == (s.stride(), s.storage_offset())
close(dt @ dy, t @ y)
close(ds * 3, s * 3)
close(dx.as_strided((2, 3), (2, 5), 4), x.as_strided((2, 3), (2, 5), 4))
close(dt.contiguous(), t.contiguous())
ok("views")

# In-place ops write through views into the storage every view shares.
a, b = dx.clone(), x.clone()
a[:, 1] += 1
b[:, 1] += 1
close(a, b)
a.add_(dy, alpha=2)
b.add_(y, alpha=2)
close(a, b)
va, vb = a.view(30), b.view(30)
va[3:9].mul_(-1)
vb[3:9].mul_(-1)
close(a, b)
a.t()[2].zero_()
b.t()[2].zero_()
close(a, b)
ok("in-place through views")

# Copies and conversions; factories; an empty out= tensor takes the result's size.
close(dx.to(torch.float64), x.to(torch.float64))
close(dx.long(), x.long())
c = torch.empty(5, 6, device=TPU)
c.copy_(y)
close(c, y)
c[1:3].copy_(dx[1:3])
y2 = y.clone()
y2[1:3] = x[1:3]
close(c, y2)
close(torch.zeros(3, 4, device=TPU), torch.zeros(3, 4))
close(torch.full((2, 2), 3.5, device=TPU), torch.full((2, 2), 3.5))
out = torch.empty(0, device=TPU)
torch.abs(dx, out=out)
close(out, x.abs())
assert dx[0, 0].item() == x[0, 0].item()
torch.manual_seed(7)  # random ops draw from torch's CPU generator, as on the CPU
drawn = torch.randn(4, 5, device=TPU)
torch.manual_seed(7)
close(drawn, torch.randn(4, 5))
ok("copies")

# torch's lazy views (`conj()` of a complex tensor; the negative view `conj().imag` makes)
# reach the device's kernels with their bits set: read resolved, written as their values.
c = torch.complex(x, y)
dc = c.to(TPU)
close(dc.conj(), c.conj().resolve_conj())
close(dc.conj() * 2, c.conj() * 2)
close(dc.conj().t() @ dc, c.conj().t() @ c)  # matmuls take the bit (no resolve before them)
close(dc.conj().imag, c.conj().imag.resolve_neg())
close(dc.conj().imag + 1, c.conj().imag + 1)
e = torch.zeros(5, 6, dtype=torch.complex64)
de = torch.zeros(5, 6, dtype=torch.complex64, device=TPU)
e.conj().copy_(c)
de.conj().copy_(dc)  # stores conj(c): its conj view reads c
close(de, e)
ok("lazy views")

# Printing formats a host copy: torch's text with the device, and no device ops.
ops = tt.metrics()["ops"]
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    text = repr(dx)
assert text.startswith(repr(x)[:-1] + ",") and text.endswith("device='tpu:0')"), text
assert tt.metrics()["ops"] == ops, tt.metrics()["ops"] - ops
assert not [str(m.message) for m in seen if "tessera" in str(m.message)], seen
ok("print")

# Python numbers promote as in torch (the runtime has no wrapped numbers).
from promotion import check_python_numbers  # noqa: E402

tt.reset_metrics()
assert check_python_numbers(TPU) > 100
assert not tt.metrics()["fallbacks"], tt.metrics()["fallbacks"]
ok("numbers")

# The unboxed kernels (device.cpp kFastOps: arithmetic and its in-place forms, comparisons,
# pow, where, mm/bmm, common unary ops) give what the boxed kernel gives: broadcasting,
# strided views, promotion with Python numbers and CPU scalars, lazy views, alpha (not 1: the
# boxed path), autograd, and torch's errors.
tt.reset_metrics()
i, di = torch.arange(6), torch.arange(6).to(TPU)
c = torch.randn(4, dtype=torch.complex64)
dc = c.to(TPU)
for f in [lambda a, b, n, z: a + b, lambda a, b, n, z: a - b[0], lambda a, b, n, z: a * b,
          lambda a, b, n, z: a / b, lambda a, b, n, z: torch.add(a, b, alpha=2),
          lambda a, b, n, z: torch.sub(a, b, alpha=0.5), lambda a, b, n, z: a + n,
          lambda a, b, n, z: a * 2.5, lambda a, b, n, z: n / 3, lambda a, b, n, z: -n,
          lambda a, b, n, z: n + True, lambda a, b, n, z: a * torch.tensor(2.0),
          lambda a, b, n, z: a.t()[::2, 1:] * b[:1, ::2].t(), lambda a, b, n, z: -a.t(),
          lambda a, b, n, z: a.exp(), lambda a, b, n, z: a.relu(), lambda a, b, n, z: n.relu(),
          lambda a, b, n, z: a.tanh(), lambda a, b, n, z: a.sigmoid(),
          lambda a, b, n, z: a.abs().rsqrt(), lambda a, b, n, z: z.conj() * z,
          lambda a, b, n, z: -z.conj(), lambda a, b, n, z: z * 1j + 2,
          lambda a, b, n, z: a.abs().sqrt().log(), lambda a, b, n, z: a.sin() + a.t().cos().t(),
          lambda a, b, n, z: torch.nn.functional.silu(a).erf().reciprocal(),
          lambda a, b, n, z: a[:, :4] @ b[:4], lambda a, b, n, z: a[None].bmm(b.t()[None]),
          lambda a, b, n, z: torch.maximum(a, b) - torch.minimum(a, b[0]),
          lambda a, b, n, z: torch.stack([a == b, a != a, a < b, a <= b, a > b, a >= b[1]]),
          lambda a, b, n, z: torch.stack([a == 0, a != 1, a < 0.5, a <= 0, a > -1, a >= True]),
          lambda a, b, n, z: torch.stack([n == 2, n < 2.5, n > b[0, 0]]),
          lambda a, b, n, z: a.abs() ** b, lambda a, b, n, z: a ** 2, lambda a, b, n, z: n ** 2,
          lambda a, b, n, z: a.abs() ** 0.5, lambda a, b, n, z: torch.where(a > b, a, b[0])]:
    want = f(x, y, i, c)
    got = f(dx, dy, di, dc)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    close(got, want)
# In place (add_/sub_/mul_/div_.Tensor): through strided views, with numbers, on conjugates.
for f in [lambda a, b: a.add_(b), lambda a, b: a.sub_(b, alpha=2), lambda a, b: a.mul_(b),
          lambda a, b: a.div_(b), lambda a, b: a.__iadd__(1), lambda a, b: a.__imul__(2.5),
          lambda a, b: a[:, 1:3].mul_(b[:, :2]), lambda a, b: a.t().add_(a.t()),
          lambda a, b: a.add_(torch.tensor(2.0))]:
    want, got = x.clone(), dx.clone()
    close(f(got, dy), f(want, y))
    close(got, want)
want, got = c.clone(), dc.clone()
close(got.conj().mul_(2 + 1j), want.conj().mul_(2 + 1j))
close(got, want)
a, ca = dx.clone().requires_grad_(), x.clone().requires_grad_()
for t in (a, ca):
    ((t * t).sigmoid().tanh() - t.exp() / 3).relu().sum().backward()
close(a.grad, ca.grad)
assert not tt.metrics()["fallbacks"], tt.metrics()["fallbacks"]
try:
    dx * torch.randn(4).to(TPU)
    raise AssertionError("no error")
except RuntimeError as e:
    assert "must match the size of tensor b (4)" in str(e), e
try:
    dx + x
    raise AssertionError("no error")
except RuntimeError as e:
    assert "same device" in str(e) and "aten::add.Tensor" in str(e), e
ok("unboxed kernels")

from inplace_views import check_inplace_views  # noqa: E402

tt.reset_metrics()
assert check_inplace_views(TPU) == 10
assert not tt.metrics()["fallbacks"], tt.metrics()["fallbacks"]
ok("in-place views")

from grad_scaler import check_grad_scaler  # noqa: E402

tt.reset_metrics()
assert check_grad_scaler(TPU) == 29
assert not tt.metrics()["fallbacks"], tt.metrics()["fallbacks"]
ok("grad scaler")

from autocast import check_autocast  # noqa: E402

tt.reset_metrics()
assert check_autocast(TPU) == 16
assert not tt.metrics()["fallbacks"], tt.metrics()["fallbacks"]
ok("autocast")

# Storages used as bytes or as another dtype: torch.save and torch.load (storage copies,
# `set_`), deepcopy, view(dtype) written through.
torch.manual_seed(3)
lin = torch.nn.Linear(3, 2).to(TPU)
buf = io.BytesIO()
torch.save(lin.state_dict(), buf)
buf.seek(0)
loaded = torch.load(buf)
for k, v in lin.state_dict().items():
    assert loaded[k].device.type == TPU and torch.equal(loaded[k].cpu(), v.cpu()), k
twin = copy.deepcopy(lin)
assert twin.weight.device.type == TPU and twin.weight.untyped_storage().data_ptr() != \
    lin.weight.untyped_storage().data_ptr()
close(twin(dx[:, :3]), lin(dx[:, :3]).cpu())
bits = dx.view(torch.int32)
close(bits, x.view(torch.int32), 0)
bits.add_(1)  # written through the float storage
close(dx, (x.view(torch.int32) + 1).view(torch.float32), 0)
dx = x.to(TPU)
try:
    torch.empty(0, device=TPU).set_(dx.untyped_storage(), 0, (100,), (1,))
    raise AssertionError("a set_ beyond its storage was accepted")
except RuntimeError as e:
    assert "out of bounds for storage" in str(e), e
ok("storages")

# Autograd on the device, then an AdamW step.
torch.manual_seed(1)
cpu = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                          torch.nn.Linear(16, 2))
dev = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                          torch.nn.Linear(16, 2))
dev.load_state_dict(cpu.state_dict())
dev.to(TPU)
opt_c = torch.optim.AdamW(cpu.parameters(), 1e-2)
opt_d = torch.optim.AdamW(dev.parameters(), 1e-2)
for _ in range(3):
    opt_c.zero_grad()
    opt_d.zero_grad()
    lc = cpu(x).square().mean()
    ld = dev(dx).square().mean()
    lc.backward()
    ld.backward()
    close(ld, lc, 1e-4)
    for p, q in zip(dev.parameters(), cpu.parameters()):
        close(p.grad, q.grad, 1e-4)
    opt_c.step()
    opt_d.step()
for p, q in zip(dev.parameters(), cpu.parameters()):
    close(p.detach(), q.detach(), 1e-4)
# AdamW's step size changes every step and reaches `addcdiv_` as its `value`: a device input,
# so further steps compile nothing (DeferAndFuse's program included).
compiles = []
for _ in range(4):
    for model, opt, inp in ((dev, opt_d, dx), (cpu, opt_c, x)):
        opt.zero_grad()
        model(inp).square().mean().backward()
        opt.step()
    dev[0].weight.sum().item()
    compiles.append(tt.metrics()["compiles"])
assert compiles[-1] == compiles[0], compiles
for p, q in zip(dev.parameters(), cpu.parameters()):
    close(p.detach(), q.detach(), 1e-4)
ok("autograd and AdamW")

# `model.to("tpu")` moves each parameter in place: tied weights stay tied, and an optimizer
# made before the move steps the device parameters.
torch.manual_seed(2)
emb, head = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False)
head.weight = emb.weight
tied = torch.nn.Sequential(emb, head)
tied_cpu = copy.deepcopy(tied)
before = emb.weight
opt_t = torch.optim.SGD(tied.parameters(), 0.1)
tied.to(TPU)
assert emb.weight is before and head.weight is emb.weight and before.device.type == TPU
opt_c = torch.optim.SGD(tied_cpu.parameters(), 0.1)
tokens = torch.tensor([1, 2, 7])
for model, opt, inp in ((tied, opt_t, tokens.to(TPU)), (tied_cpu, opt_c, tokens)):
    model(inp).square().mean().backward()
    opt.step()
close(emb.weight.detach(), tied_cpu[0].weight.detach())
ok("parameters moved in place")

# torch.compile on the device: the forward and the backward each one program, reading the
# device tensors' values; results and gradients stay on the device.
from tessera import compile as tc  # noqa: E402

tc.register()


def compiled_step_matches(model, inputs, device):
    """Two compiled training steps of `model` (a copy of `cpu`) match `cpu`'s; the result and
    the gradients are on `device`."""
    compiled = torch.compile(model, backend="tessera")
    for _ in range(2):
        model.zero_grad()
        cpu.zero_grad()
        got = compiled(inputs)
        got.square().mean().backward()
        cpu(x).square().mean().backward()
        assert got.device.type == device
        assert all(p.grad.device.type == device for p in model.parameters())
        torch.testing.assert_close(got.cpu(), cpu(x), rtol=1e-4, atol=1e-4)
        for p, q in zip(model.parameters(), cpu.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-4)


traced = tc.report()["programs_traced"]  # the in-place views' program came before
compiled_step_matches(dev, dx, TPU)
# Waiting for a step's gradients: one call, the values as read.
tt.wait([p.grad for p in dev.parameters()])
try:
    tt.wait([next(dev.parameters()).grad, x])
    raise AssertionError("waited on a CPU tensor")
except TypeError as e:
    assert "expected tensors on the tpu device, got one on cpu" in str(e), e
assert tc.report()["programs_traced"] == traced + 2 and not tc.report()["fallbacks"], tc.report()
# The same class compiled on CPU tensors: what the forward saves for the backward stays on
# the device, results and gradients come back to the CPU.
compiled_step_matches(copy.deepcopy(cpu), x, "cpu")
ok("compiled")

# An op Tessera does not lower runs on torch CPU: warned once, counted.
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for (a, b), (da, db) in (((x, y), (dx, dy)), ((y, x), (dy, dx))):
        close(torch.special.zeta(da.abs() + 2, db.abs() + 1),
              torch.special.zeta(a.abs() + 2, b.abs() + 1))
said = [str(m.message) for m in seen if "special_zeta" in str(m.message)]
assert len(said) == 1 and "runs on torch CPU" in said[0], said
assert tt.metrics()["fallbacks"].get("special_zeta") == 2, tt.metrics()["fallbacks"]
m = tt.metrics()
assert m["ops"] > 100 and m["device_ops"] == m["ops"] - sum(m["fallbacks"].values()), m
tt.reset_metrics()
assert "special_zeta" not in tt.metrics()["fallbacks"] and tt.metrics()["ops"] == 0
ok("fallback")

# Bad input: PyTorch's errors.
try:
    dx + torch.ones(5, 6)
    raise AssertionError("mixing devices was not refused")
except RuntimeError as e:
    assert "Expected all tensors to be on the same device" in str(e), e
try:
    torch.ones(2, dtype=torch.complex32, device=TPU)
    raise AssertionError("complex32 was not refused")
except TypeError as e:
    assert "dtype torch.complex32 is not supported by Tessera" in str(e), e
try:
    torch.empty(0, device=TPU).resize_(2**62)  # 2**64 bytes: wraps to 0 unless checked
    raise AssertionError("an overflowing resize was accepted")
except RuntimeError as e:
    assert "overflow" in str(e), e
ok("errors")
print("mode", tt.mode(), file=sys.stderr)
