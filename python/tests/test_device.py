"""The `tpu` torch device (tessera.device): results compared with torch CPU on seeded inputs.

Tolerances: float32 results within rtol=1e-5, atol=1e-5 (elementwise, views) and rtol=1e-4,
atol=1e-5 (matmul, softmax, layer_norm, gradients: XLA CPU reassociates sums); training curves
within rtol=1e-4, atol=1e-5 per step.
"""

import warnings

import numpy as np
import pytest
import torch

import tessera
import tessera.torch as tt
from tessera import device as td

MODES = ["strict", "debug", "defer"]


@pytest.fixture(autouse=True)
def _default_mode():
    yield
    td.set_mode(None)


def close(got, want, rtol=1e-5, atol=1e-5):
    assert got.device.type == "tpu", got.device
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol)


def test_round_trip_and_device_spellings():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, generator=g)
    for y in (x.to("tpu"), x.to(tt.device), tt.to_device(x), x.tpu()):
        assert isinstance(y, td.TpuTensor) and str(y.device) == "tpu:0"
        assert y.shape == x.shape and y.dtype == x.dtype and y.stride() == x.stride()
        torch.testing.assert_close(y.cpu(), x, rtol=0, atol=0)
    for dtype in (torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool):
        v = (x * 4).to(dtype)
        assert torch.equal(v.to("tpu").cpu(), v)
    # Factories on the device.
    z = torch.zeros(2, 3, device="tpu")
    assert z.device.type == "tpu" and torch.equal(z.cpu(), torch.zeros(2, 3))
    o = torch.full((4,), 2.5, device="tpu")
    assert torch.equal(o.cpu(), torch.full((4,), 2.5))
    td.reset_metrics()
    assert torch.equal(torch.arange(2, 9, 3, device="tpu").cpu(), torch.arange(2, 9, 3))
    a = torch.arange(1.5, 4, 0.5, device="tpu")
    assert a.dtype == torch.float32 and torch.equal(a.cpu(), torch.arange(1.5, 4, 0.5))
    assert torch.equal(torch.eye(3, 2, device="tpu").cpu(), torch.eye(3, 2))
    lin = torch.linspace(0, 1, 7, device="tpu")
    torch.testing.assert_close(lin.cpu(), torch.linspace(0, 1, 7), rtol=0, atol=1e-7)
    assert td.metrics()["fallbacks"] == {}  # these run on the device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # random numbers come from torch's CPU generator
        r = torch.randn(4, 4, device="tpu")
    assert r.device.type == "tpu" and r.shape == (4, 4)
    t = torch.tensor([[1.5, 2.0]], device="tpu")
    assert t.device.type == "tpu" and torch.equal(t.cpu(), torch.tensor([[1.5, 2.0]]))
    # Sync points.
    assert x.to("tpu")[1, 2].item() == x[1, 2].item()
    assert "device='tpu:0'" in repr(x.to("tpu"))
    assert torch.tpu.device_count() == 1
    torch.tpu.synchronize()


def test_elementwise_matmul_softmax_layer_norm():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g)
    w = torch.randn(6, 3, generator=g)
    da, db, dw = a.to("tpu"), b.to("tpu"), w.to("tpu")
    close(da + db * 2, a + b * 2)
    close(torch.exp(da) - db.abs(), torch.exp(a) - b.abs())
    close(torch.where(da > db, da, db), torch.where(a > b, a, b))
    close(da + 1.5, a + 1.5)
    close(da * torch.tensor(3.0), a * torch.tensor(3.0))  # a CPU scalar mixes in, as in torch
    close(da @ dw, a @ w, rtol=1e-4)
    close(torch.softmax(da, -1), torch.softmax(a, -1), rtol=1e-4)
    ln = torch.nn.functional.layer_norm
    close(ln(da, (6,)), ln(a, (6,)), rtol=1e-4)
    close(da.sum(0), a.sum(0), rtol=1e-4)


def test_views_keep_strides_offsets_and_aliasing():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 6, generator=g)
    d = x.to("tpu")
    cases = [
        lambda t: t.view(6, 4),
        lambda t: t.reshape(2, 12),
        lambda t: t.transpose(0, 1),
        lambda t: t.permute(1, 0),
        lambda t: t[1:3],
        lambda t: t[:, 2:5],
        lambda t: t.select(1, 3),
        lambda t: t[2],
        lambda t: t[:1].expand(3, 6),
        lambda t: t.t()[1:4, ::2],
        lambda t: t.as_strided((3, 2), (2, 5), 1),
        # detach and alias (a direct path in the device's dispatch) keep the view as it is.
        lambda t: t.t()[1:4, ::2].detach(),
        lambda t: torch.ops.aten.alias(t[1:3, 2:]),
        # as_strided on a non-contiguous view reads the storage, as torch does.
        lambda t: t.t()[1:3].as_strided((2, 2), (1, 6), 2),
    ]
    for f in cases:
        want, got = f(x), f(d)
        assert got.shape == want.shape
        assert got.stride() == want.stride(), f
        assert got.storage_offset() == want.storage_offset()
        assert got.is_contiguous() == want.is_contiguous()
        close(got, want)
    # In-place ops through views are seen by the base and by other views.
    xc, dc = x.clone(), d.clone()
    for t in (xc, dc):
        t[1].add_(10)
        t.t()[2:4].mul_(-1)
        t[:, 5].zero_()
        v = t.view(24)
        v[3:7] = 7.0
    close(dc, xc)
    other = dc.transpose(0, 1)
    detached = dc[:, 1:].detach()
    dc[0, 0] = 42.0
    dc[1, 2] = -3.0
    assert other[0, 0].item() == 42.0
    assert detached[1, 1].item() == -3.0 and not detached.requires_grad


def test_in_place_on_strided_view_then_compute():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 4, generator=g)
    xc, dc = x.clone(), x.to("tpu")
    for t in (xc, dc):
        s = t[::2, 1:]
        s.mul_(3).add_(s * s)
        t.t()[::3].sub_(1)
    close(dc, xc)
    close(dc.sum(1), xc.sum(1), rtol=1e-4)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.norm(self.fc1(x))))


@pytest.mark.parametrize("mode", MODES)
def test_mlp_forward_backward_matches_cpu(mode):
    td.set_mode(mode)
    torch.manual_seed(4)
    cpu = MLP()
    dev = MLP()
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to("tpu")
    assert all(p.device.type == "tpu" for p in dev.parameters())
    assert all(isinstance(p, torch.nn.Parameter) for p in dev.parameters())
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)
    loss_c = torch.nn.functional.mse_loss(cpu(x), y)
    loss_d = torch.nn.functional.mse_loss(dev(x.to("tpu")), y.to("tpu"))
    close(loss_d, loss_c, rtol=1e-4)
    loss_c.backward()
    loss_d.backward()
    for (name, pc), pd in zip(cpu.named_parameters(), dev.parameters()):
        assert pd.grad is not None and pd.grad.device.type == "tpu", name
        close(pd.grad, pc.grad, rtol=1e-4)
    # The state dict stays on the device.
    assert all(v.device.type == "tpu" for v in dev.state_dict().values())


def _train(model, opt, x, y, steps=20):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_training_follows_cpu_loss_curve(mode, optimizer):
    td.set_mode(mode)
    torch.manual_seed(6)
    cpu = MLP()
    dev = MLP()
    dev.load_state_dict(cpu.state_dict())
    dev.to("tpu")
    g = torch.Generator().manual_seed(7)
    x, y = torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)

    def make(params):
        if optimizer == "sgd":
            return torch.optim.SGD(params, lr=0.1, momentum=0.9)
        return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.01)

    td.reset_metrics()
    curve_c = _train(cpu, make(cpu.parameters()), x, y)
    curve_d = _train(dev, make(dev.parameters()), x.to("tpu"), y.to("tpu"))
    torch.testing.assert_close(torch.tensor(curve_d), torch.tensor(curve_c), rtol=1e-4, atol=1e-5)
    assert curve_d[-1] < curve_d[0]
    for pc, pd in zip(cpu.parameters(), dev.parameters()):
        assert pd.device.type == "tpu"
        close(pd.detach(), pc.detach(), rtol=1e-3, atol=1e-4)
    m = td.metrics()
    # The optimizer's ops ran on the device: nothing fell back.
    assert m["fallbacks"] == {}, m["fallbacks"]
    assert m["ops"] > 0 and m["device_ops"] > 0


def test_fallback_warns_once_and_counts():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(6, generator=g)
    d = x.to("tpu")
    td.reset_metrics()
    td.reset_warnings()
    op = "aten::_test_fallback_op"
    # An op Tessera's table does not have: a real torch op outside the table.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r1 = torch.ops.aten.special_erfcx(d)
        r2 = torch.ops.aten.special_erfcx(d * 2)
    close(r1, torch.special.erfcx(x))
    close(r2, torch.special.erfcx(x * 2))
    msgs = [str(w.message) for w in caught if "runs on torch CPU" in str(w.message)]
    assert len(msgs) == 1 and "special_erfcx" in msgs[0], (op, msgs)
    assert td.metrics()["fallbacks"] == {"special_erfcx": 2}
    assert td.metrics()["transfers"]["to_host"] >= 2


def test_bad_input_errors():
    x = torch.randn(3, 3)
    d = x.to("tpu")
    with pytest.raises(TypeError, match="complex32"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "ComplexHalf support is experimental"
        torch.zeros(2, dtype=torch.complex32).to("tpu")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        d + x
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(x, d)
    with pytest.raises(RuntimeError, match="cannot be multiplied|shape"):
        d @ torch.randn(4, 4).to("tpu")
    with pytest.raises(RuntimeError):
        d.view(4, 4)
    with pytest.raises(RuntimeError, match="resize"):
        torch.add(d, 1, out=torch.empty(0, device="tpu"))
    with pytest.raises(RuntimeError, match="resiz"):
        d.clone().resize_(9)
    # As a CUDA tensor: numpy() needs the host copy asked for (or force=True).
    with pytest.raises(TypeError, match="can't convert tpu:0 device type tensor to numpy"):
        d.numpy()
    np.testing.assert_array_equal(d.numpy(force=True), x.numpy())
    # An index out of range is refused, with no empty argument list in the message.
    with pytest.raises(RuntimeError, match="out of range") as e:
        torch.nn.functional.embedding(torch.tensor([9], device="tpu"), d).cpu()
    assert "(arguments: )" not in str(e.value)
    out = torch.empty(3, 3, device="tpu")
    torch.add(d, 1, out=out)
    close(out, x + 1)
    # The device still works after the errors.
    close(d + d, x + x)


def test_reading_a_failed_result_raises():
    """A result whose op failed on autograd's thread carries the error to its reader."""
    x = torch.randn(3, 4).to("tpu")
    failed = td.dispatch._failed(torch.ops.aten.mul.Tensor, (x, x), {}, RuntimeError("device lost"))
    assert failed.shape == (3, 4)
    with pytest.raises(tessera.DeviceError, match="aten.mul.Tensor.*device lost"):
        failed.cpu()
    with pytest.raises(tessera.DeviceError, match="device lost"):
        failed + x


@pytest.mark.parametrize("mode", ["strict", "defer"])
def test_wait_blocks_on_values_and_names_the_wrong_device(mode):
    """`tt.wait` (jax.block_until_ready for tensors): one call for many, deferred ops first."""
    td.set_mode(mode)
    x = torch.randn(32, 32)
    d = x.to("tpu")
    ys = [d @ d, (d + 1).relu(), d.sum(), d.t()]
    tt.wait(ys)
    tt.wait(ys[0])
    for y, want in zip(ys, [x @ x, (x + 1).relu(), x.sum(), x.t()]):
        close(y, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="expected tensors on the tpu device, got one on cpu"):
        tt.wait([ys[0], torch.ones(2)])
    with pytest.raises(TypeError, match="got int"):
        tt.wait([ys[0], 1])


@pytest.mark.parametrize("mode", ["strict", "defer"])
def test_eager_modes_count(mode):
    td.set_mode(mode)
    assert td.mode() == mode
    x = torch.ones(4).to("tpu")
    td.reset_metrics()
    y = (x + 1) * 3
    eager = td.metrics()["eager"][mode]
    assert eager["ops"] >= 2
    if mode == "defer":
        assert eager["launches"] == 0  # recorded, not yet run
    close(y, torch.full((4,), 6.0))
    if mode == "defer":
        assert td.metrics()["eager"][mode]["flushes"] >= 1


def test_cpu_index_tensors_are_allowed():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(5, 3, generator=g)
    idx = torch.tensor([4, 0, 2])
    close(x.to("tpu")[idx], x[idx])
    d, c = x.to("tpu"), x.clone()
    d[idx] = 1.0
    c[idx] = 1.0
    close(d, c)


@pytest.mark.parametrize(
    "env,want", [("TESSERA_LAUNCH_BLOCKING", "debug"), ("TESSERA_DEFER_AND_FUSE", "defer")]
)
def test_environment_selects_the_mode(env, want):
    import os
    import subprocess
    import sys

    code = (
        "import torch, tessera.torch as tt; x = torch.ones(3).to('tpu');"
        "print(tt.mode(), ((x + 1) * 2).cpu().tolist())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, env: "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == want and "[4.0, 4.0, 4.0]" in out.stdout


class TinyTransformer(torch.nn.Module):
    def __init__(self, vocab=32, width=16):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, width)
        self.enc = torch.nn.TransformerEncoderLayer(
            width, 2, 2 * width, dropout=0.0, batch_first=True
        )
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.enc(self.emb(tokens)))


@pytest.mark.parametrize("mode", MODES)
def test_transformer_adamw_follows_cpu_loss_curve(mode):
    """20 AdamW steps of a small transformer (embedding, attention, layer norm, cross
    entropy) on the device follow the CPU loss curve; in DeferAndFuse the steady-state steps
    reuse their fused programs (no compile after the first steps)."""
    td.set_mode(mode)
    torch.manual_seed(10)
    cpu = TinyTransformer()
    dev = TinyTransformer()
    dev.load_state_dict(cpu.state_dict())
    dev.to("tpu")
    g = torch.Generator().manual_seed(11)
    tok = torch.randint(0, 32, (4, 8), generator=g)
    tgt = torch.randint(0, 32, (4, 8), generator=g)

    def train(model, tok, tgt):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses, compiles = [], []
        for _ in range(20):
            opt.zero_grad()
            out = model(tok).reshape(-1, 32)
            loss = torch.nn.functional.cross_entropy(out, tgt.reshape(-1))
            loss.backward()
            opt.step()
            losses.append(loss.item())
            compiles.append(td.metrics()["compiles"])
        return losses, compiles

    want, _ = train(cpu, tok, tgt)
    td.reset_metrics()
    got, compiles = train(dev, tok.to("tpu"), tgt.to("tpu"))
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-4, atol=1e-5)
    assert got[-1] < 0.6 * got[0]
    assert td.metrics()["fallbacks"] == {}
    if mode == "defer":
        assert compiles[-1] == compiles[4], compiles


def test_state_dict_save_load_deepcopy_and_seeded_factories():
    import copy
    import io

    torch.manual_seed(12)
    m = torch.nn.Linear(3, 2).to("tpu")
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    loaded = torch.load(buf)  # weights_only: torch's own rebuild function
    for k, v in m.state_dict().items():
        assert loaded[k].device.type == "tpu"
        assert torch.equal(loaded[k].cpu(), v.cpu())
    twin = copy.deepcopy(m)
    assert twin.weight.device.type == "tpu" and isinstance(twin.weight, torch.nn.Parameter)
    assert not twin.weight._storage_ is m.weight._storage_
    assert torch.equal(twin.weight.cpu(), m.weight.cpu())
    cpu = torch.nn.Linear(3, 2)
    cpu.load_state_dict(m.state_dict())
    assert torch.equal(cpu.weight, m.weight.cpu())
    assert m.weight.tolist() == m.weight.cpu().tolist()
    # Random factories draw from torch's CPU generator (a counted fallback), so a seed gives
    # the CPU's numbers.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(13)
        a = torch.randn(5, device="tpu")
    torch.manual_seed(13)
    assert torch.equal(a.cpu(), torch.randn(5))


def test_metrics_count_what_backward_compiles():
    """Autograd runs backward on its own thread; its compiles count in `metrics()` too."""
    td.set_mode("strict")
    g = torch.Generator().manual_seed(14)
    w = torch.randn(13, 11, generator=g).to("tpu").requires_grad_()
    x = torch.randn(3, 13, generator=g).to("tpu")
    y = torch.tanh(x @ w).sum()
    td.reset_metrics()
    y.backward()
    m = td.metrics()
    assert m["compiles"] > m["eager"]["strict"]["compiles"], m  # this thread's alone
    close(w.grad, x.cpu().t() @ (1 - torch.tanh(x.cpu() @ w.detach().cpu()) ** 2), rtol=1e-4)


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
def test_recurrent_layers_forward_backward(cls):
    """torch runs recurrent layers with CUDA-only fused cells on non-CPU devices; on tpu they
    run as torch's decompositions, forward and backward on the device."""
    import copy

    torch.manual_seed(15)
    cpu = cls(8, 16, num_layers=2, batch_first=True, bidirectional=True)
    dev = copy.deepcopy(cpu).to("tpu")
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(16))
    td.reset_metrics()
    out, _ = cpu(x)
    out.sum().backward()
    out_d, _ = dev(x.to("tpu"))
    out_d.sum().backward()
    close(out_d, out, rtol=1e-4)
    for pc, pd in zip(cpu.parameters(), dev.parameters()):
        close(pd.grad, pc.grad, rtol=1e-4, atol=1e-5)
    assert td.metrics()["fallbacks"] == {}


def test_module_to_keeps_parameter_identity_and_tied_weights():
    """`model.to("tpu")` moves parameters in place, as torch does for CUDA: tied weights stay
    tied and an optimizer made before the move updates the device parameters."""
    torch.manual_seed(17)
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = torch.nn.Sequential(emb, head)
    before = emb.weight
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model.to("tpu")
    assert emb.weight is before and head.weight is emb.weight
    assert emb.weight.device.type == "tpu"
    tok = torch.tensor([[1, 2, 3]]).to("tpu")
    loss = model(tok).logsumexp(-1).sum()
    loss.backward()
    old = emb.weight.detach().cpu()
    opt.step()
    assert not torch.equal(emb.weight.detach().cpu(), old)


def test_histc_of_integers_runs_on_the_device():
    # torch CPU has no integer histc (CUDA has; transformers' MoE routing calls it on int
    # expert ids): Tessera's histc takes integers as CUDA does, no fallback.
    g = torch.Generator().manual_seed(11)
    x = torch.randint(0, 8, (64,), generator=g, dtype=torch.int32)
    tt.reset_metrics()
    got = torch.histc(x.to("tpu"), bins=8, min=0, max=7)
    assert got.dtype == torch.int32
    assert torch.equal(got.cpu(), torch.histc(x.double(), bins=8, min=0, max=7).to(torch.int32))
    assert tt.metrics()["fallbacks"] == {}


def test_a_0d_tensor_formats_as_its_number_like_torch():
    # transformers' MoE routing indexes a ModuleDict with f"expert_{idx}" (idx a 0-d tensor).
    for x in (torch.tensor(3), torch.tensor(2.5), torch.tensor(True)):
        d = tt.to_device(x)
        assert f"expert_{d}" == f"expert_{x}"
    assert f"{tt.to_device(torch.tensor(1.0 / 3)):.3f}" == "0.333"
    assert f"{tt.to_device(torch.ones(2))}".startswith("tensor([1., 1.], device='tpu:0'")


def rotary(x, freqs):
    """Llama 4's rotary embedding: pairs of x as complex numbers times the frequencies."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs).flatten(-2)


@pytest.mark.parametrize("mode", MODES)
def test_complex64_tensors_on_the_device(mode):
    # complex64 within rtol=1e-5, atol=1e-5 of torch CPU (elementwise; the FFT of 5x6 points
    # within atol=1e-4: XLA's FFT sums in another order).
    td.set_mode(mode)
    g = torch.Generator().manual_seed(13)
    x = torch.randn(2, 3, 4, 8, generator=g)
    theta = torch.randn(4, 4, generator=g)
    freqs = torch.polar(torch.ones(4, 4), theta).unsqueeze(0) * 0.5
    dfreqs = torch.polar(torch.ones(4, 4).to("tpu"), theta.to("tpu")).unsqueeze(0) * 0.5
    assert dfreqs.dtype == torch.complex64 and dfreqs.device.type == "tpu"
    close(dfreqs, freqs)
    close(rotary(x.to("tpu"), dfreqs), rotary(x, freqs))
    c = torch.complex(x[..., 0], x[..., 1])
    dc = c.to("tpu")
    torch.testing.assert_close(dc.cpu(), c, rtol=0, atol=0)  # upload and download are exact
    close(dc * dc - dc / (dc + 3), c * c - c / (c + 3))
    close(dc.abs(), c.abs())
    close(torch.conj(dc), torch.conj(c).resolve_conj())
    close(dc.exp(), c.exp())
    close(dc.to(torch.float32), c.real)  # torch warns that the imaginary part is dropped
    # FNet's Fourier mixing: fftn of a real tensor (made complex, then `_fft_c2c`), real part.
    r = torch.randn(2, 5, 6, generator=g)
    close(torch.fft.fftn(r.to("tpu"), dim=(1, 2)).real, torch.fft.fftn(r, dim=(1, 2)).real, atol=1e-4)
    close(torch.fft.ifft(dc, dim=-1), torch.fft.ifft(c, dim=-1))
    assert td.metrics()["fallbacks"] == {}


def test_gradients_through_complex_ops_on_the_device():
    # Backward of the rotary embedding and of torch.polar (`grad * 1j`, complex sums, `sgn`)
    # runs on the device, within rtol=1e-5, atol=1e-5 of torch CPU.
    g = torch.Generator().manual_seed(15)
    x, theta = torch.randn(2, 3, 4, 8, generator=g), torch.randn(4, 4, generator=g)

    def loss(x, theta):
        freqs = torch.polar(torch.ones_like(theta), theta)
        return (rotary(x, freqs) ** 2).sum() + (torch.fft.fftn(x, dim=(1, 2)).abs()).sum()

    want = [t.clone().requires_grad_() for t in (x, theta)]
    loss(*want).backward()
    got = [t.to("tpu").requires_grad_() for t in (x, theta)]
    td.reset_metrics()
    loss(*got).backward()
    for a, b in zip(got, want):
        close(a.grad, b.grad, atol=1e-4)
    assert td.metrics()["fallbacks"] == {}


# Checks shared with the C++ dispatch's checks.py (python/tests/cpp_dispatch/): module,
# function, how many comparisons it makes. Each runs on the device without a fallback.
SHARED_CHECKS = [
    # In-place views change the tensor's own metadata, in eager and in compiled programs.
    ("inplace_views", "check_inplace_views", 10),
    # torch.amp.GradScaler's ops on the device, against torch CPU's kernels.
    ("grad_scaler", "check_grad_scaler", 29),
    # torch.autocast("tpu") takes CUDA's cast policy.
    ("autocast", "check_autocast", 16),
]


@pytest.mark.parametrize("module, check, compared", SHARED_CHECKS)
def test_shared_device_checks(module, check, compared):
    import importlib

    td.reset_metrics()
    assert getattr(importlib.import_module(f"cpp_dispatch.{module}"), check)("tpu") == compared
    assert td.metrics()["fallbacks"] == {}


def test_python_numbers_promote_as_in_torch():
    # int * 2.5 is float32, float32 * 1j complex64, float64 * (0.1+0.3j) complex128 at full
    # precision; a complex number where the runtime takes only real ones (fill_ in rsub's
    # decomposition) runs on torch CPU, counted.
    from cpp_dispatch.promotion import check_python_numbers

    td.reset_metrics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert check_python_numbers("tpu") > 100
    assert set(td.metrics()["fallbacks"]) <= {"fill_.Scalar"}, td.metrics()["fallbacks"]


def test_complex_views_across_dtypes_are_copies():
    # `view_as_real` / `view_as_complex` alias storage in torch; a device storage holds one
    # element type, so on the device they are copies: a write to one is not seen in the other.
    c = torch.complex(torch.ones(3), torch.zeros(3)).to("tpu")
    r = torch.view_as_real(c)
    r.mul_(2)
    torch.testing.assert_close(r.cpu(), torch.tensor([[2.0, 0.0]] * 3))
    torch.testing.assert_close(c.cpu(), torch.ones(3, dtype=torch.complex64))


def test_a_real_only_op_refuses_complex_and_falls_back():
    # `asinh` lowers real tensors only: on complex it runs on torch CPU, warned and counted.
    c = torch.complex(torch.randn(4), torch.randn(4))
    td.reset_metrics()
    tt.reset_warnings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.asinh(c.to("tpu"))
    close(got, torch.asinh(c))
    msgs = [str(w.message) for w in caught if "runs on torch CPU" in str(w.message)]
    assert len(msgs) == 1 and "complex tensors (c64) are not supported" in msgs[0], msgs
    assert td.metrics()["fallbacks"] == {"asinh": 1}

