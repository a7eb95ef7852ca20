"""torch.compile(backend="tessera"): forward and backward graphs each run as one traced program
(replayed without Python per op), results match torch CPU, fallbacks are counted and warned,
and a small transformer's training curve follows torch's."""

import warnings

import pytest
import torch

import tessera
import tessera.torch as tt
from tessera import compile as tc

tc.register()


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                               torch.nn.Linear(64, 10))


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_backends_are_registered():
    names = torch._dynamo.list_backends(exclude_tags=())
    assert "tessera" in names and "tpu" in names


def test_forward_and_backward_are_one_program_each_and_match_torch():
    m = mlp()
    x = torch.randn(8, 20, generator=torch.Generator().manual_seed(1))
    cm = torch.compile(m, backend="tessera", fullgraph=True)
    before = tc.report()
    for _ in range(3):
        m.zero_grad()
        cm(x).square().mean().backward()
    got = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    m(x).square().mean().backward()
    for g, p in zip(got, m.parameters()):
        # float32 through 4 layers: within 1e-4 relative of torch's own float32 gradients.
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-6)
    after = tc.report()
    assert after["graphs"] - before.get("graphs", 0) == 2  # forward, backward
    # Traced once each; the two later steps replayed the programs.
    assert after["programs_traced"] - before.get("programs_traced", 0) == 2
    assert after["calls"] - before.get("calls", 0) == 6


def test_tpu_alias_and_outputs_of_many_kinds():
    def f(x, y):
        a = x.t()  # a view returned from the graph
        return a, x, (x @ y).softmax(-1), y.sum(0)

    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(5, 4, generator=g), torch.randn(4, 6, generator=g)
    got = torch.compile(f, backend="tpu", fullgraph=True)(x, y)
    for a, b in zip(got, f(x, y)):
        torch.testing.assert_close(a, b, rtol=1.3e-6, atol=1e-5)


def test_an_op_tessera_lacks_falls_back_with_a_warning_and_a_count():
    def f(x):
        return torch.lgamma(x.abs() + 1.0) * 2.0

    x = torch.rand(16, generator=torch.Generator().manual_seed(4)) + 0.5
    before = tc.report()["fallbacks"].get("lgamma", 0)
    tt.reset_warnings()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = torch.compile(f, backend="tessera")(x)
    torch.testing.assert_close(got, f(x))
    assert tc.report()["fallbacks"]["lgamma"] == before + 1
    assert tt.metrics()["fallbacks"]["lgamma"] >= 1
    assert any("lgamma" in str(m.message) for m in w)


def test_an_unsupported_dtype_is_a_clear_error():
    # `asinh`'s lowering is real-only: a complex input is refused, naming the op and the dtype.
    def f(x):
        return torch.asinh(x) * 2

    x = torch.ones(3, dtype=torch.complex64)
    with pytest.raises(tessera.UnsupportedError, match=r"aten::asinh.*complex tensors \(c64\) are not supported"):
        torch.compile(f, backend="tessera")(x)


def rotary_and_fourier(x, theta, r):
    """Llama 4's rotary embedding and FNet's Fourier mixing: complex64 inside the graph."""
    freqs = torch.polar(torch.ones_like(theta), theta) * 0.5
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    rot = torch.view_as_real(xc * freqs).flatten(-2)
    return rot, torch.fft.fftn(r, dim=(1, 2)).real


@pytest.mark.parametrize("device", ["cpu", "tpu"])
def test_complex64_in_a_compiled_graph_matches_torch(device):
    # Within rtol=1e-5, atol=1e-5 (the FFT of 5x6 points: atol=1e-4) of torch CPU, no fallbacks.
    g = torch.Generator().manual_seed(14)
    x, theta, r = torch.randn(2, 3, 8, generator=g), torch.randn(3, 4, generator=g), torch.randn(2, 5, 6, generator=g)
    want = rotary_and_fourier(x, theta, r)
    before = dict(tc.report()["fallbacks"])
    got = torch.compile(rotary_and_fourier, backend="tessera")(x.to(device), theta.to(device), r.to(device))
    assert all(t.device.type == device for t in got)
    torch.testing.assert_close(got[0].cpu(), want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1].cpu(), want[1], rtol=1e-5, atol=1e-4)
    assert tc.report()["fallbacks"] == before


@pytest.mark.parametrize("device", ["cpu", "tpu"])
def test_gradients_through_complex64_in_a_compiled_graph(device):
    # The backward graph holds `grad * 1j` (torch.polar), `_conj` and complex sums; gradients
    # within rtol=1e-5, atol=1e-4 of torch CPU, no fallbacks.
    g = torch.Generator().manual_seed(16)
    x, theta, r = torch.randn(2, 3, 8, generator=g), torch.randn(3, 4, generator=g), torch.randn(2, 5, 6, generator=g)

    def loss(x, theta, r):
        rot, fourier = rotary_and_fourier(x, theta, r)
        return (rot ** 2).sum() + fourier.sum()

    want = [t.clone().requires_grad_() for t in (x, theta, r)]
    loss(*want).backward()
    got = [t.to(device).detach().requires_grad_() for t in (x, theta, r)]
    before = dict(tc.report()["fallbacks"])
    torch.compile(loss, backend="tessera")(*got).backward()
    for a, b in zip(got, want):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-5, atol=1e-4)
    assert tc.report()["fallbacks"] == before


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 32)
        self.enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0,
                                                                                batch_first=True), 2)
        self.head = torch.nn.Linear(32, 50)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids)))


def train(model, step_fn, ids, targets, steps=20):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(step_fn(ids).flatten(0, 1), targets.flatten())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def tiny_lms(seed):
    """Token ids and targets drawn from `seed`, and two TinyLMs with the same weights."""
    g = torch.Generator().manual_seed(seed)
    ids, targets = torch.randint(0, 50, (4, 12), generator=g), torch.randint(0, 50, (4, 12), generator=g)
    torch.manual_seed(0)
    ref = TinyLM()
    model = TinyLM()
    model.load_state_dict(ref.state_dict())
    return ids, targets, ref, model


def test_twenty_training_steps_of_a_small_transformer_follow_torch():
    ids, targets, ref, model = tiny_lms(5)
    want = train(ref, ref, ids, targets)
    got = train(model, torch.compile(model, backend="tessera"), ids, targets)
    # float32, 20 AdamW steps: the curves agree to 1e-3 relative (measured: ~1e-5).
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-3, atol=1e-4)
    assert got[-1] < got[0]


def test_dynamic_sizes_trace_one_program_per_size():
    def f(x):
        return (x * x.shape[0]).softmax(-1).sum(0)

    cf = torch.compile(f, backend="tessera", dynamic=True)
    g = torch.Generator().manual_seed(6)
    for n in (3, 5, 3):
        x = torch.randn(n, 7, generator=g)
        torch.testing.assert_close(cf(x), f(x), rtol=1.3e-6, atol=1e-5)


def test_a_model_on_the_tpu_device_compiles_and_its_results_stay_on_the_device():
    m = mlp()
    x = torch.randn(8, 20, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        want = m(x)
    dev = mlp().to("tpu")
    xd = x.to("tpu")
    cm = torch.compile(dev, backend="tessera", fullgraph=True)
    before, moved = tc.report(), tt.metrics()["transfers"]
    with torch.no_grad():
        outs = [cm(xd) for _ in range(3)]
    # Inputs and parameters are read on the device, results come back as tpu tensors: no copy
    # to the host or from it per call; the forward is traced once and replayed.
    assert tt.metrics()["transfers"] == moved
    assert all(type(o).__name__ == "TpuTensor" and o.device.type == "tpu" for o in outs)
    assert tc.report()["programs_traced"] - before.get("programs_traced", 0) == 1
    for o in outs:
        torch.testing.assert_close(o.cpu(), want, rtol=1e-4, atol=1e-6)


def test_twenty_compiled_training_steps_on_the_tpu_device_follow_torch():
    ids, targets, ref, model = tiny_lms(8)
    model.to("tpu")
    want = train(ref, ref, ids, targets)
    before, moved = tc.report(), tt.metrics()["transfers"]["to_host"]
    got = train(model, torch.compile(model, backend="tessera"), ids.to("tpu"), targets.to("tpu"))
    # float32, 20 AdamW steps on the device (parameters, gradients and optimizer state stay
    # there): the curves agree to 1e-3 relative, as on CPU tensors.
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-3, atol=1e-4)
    assert got[-1] < got[0]
    assert all(type(p).__name__ == "TpuTensor" and type(p.grad).__name__ == "TpuTensor" for p in model.parameters())
    # One forward and one backward program, each traced once; the only copies to the host
    # are the 20 losses read by `.item()`.
    assert tc.report()["programs_traced"] - before.get("programs_traced", 0) == 2
    assert tt.metrics()["transfers"]["to_host"] - moved == 20
    assert not tc.report()["fallbacks"].get("embedding", 0)


def test_a_graph_break_on_the_tpu_device_runs_the_eager_part_on_the_device():
    # Dynamo does not compile RNNs: the GRU runs eagerly between graphs (its `torch.zeros`
    # state and decomposed cells on the device, Tessera's Python not traced by Dynamo).
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GRU(8, 12, batch_first=True))
    x = torch.randn(2, 5, 6, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        want = m(x)[0]
        got = torch.compile(m.to("tpu"), backend="tessera")(x.to("tpu"))[0]
    assert type(got).__name__ == "TpuTensor"
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-6)


class _KernelModel(torch.nn.Module):
    """A kernel op between ATen ops."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(128, 128)

    def forward(self, x):
        return torch.ops.tessera.softmax(self.lin(x)) * 2


@pytest.mark.parametrize("device", ["cpu", "tpu"])
def test_a_kernel_op_in_a_compiled_model_runs_inside_its_program(device):
    torch.manual_seed(0)
    m = _KernelModel()
    x = torch.randn(8, 128, generator=torch.Generator().manual_seed(10))
    with torch.no_grad():
        want = torch.softmax(m.lin(x), -1) * 2
        before = tc.report()
        f = torch.compile(m.to(device), backend="tessera", fullgraph=True)
        for _ in range(3):
            got = f(x.to(device))
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-7)
    after = tc.report()
    # The kernel's module is called from the graph's one program: no fallback, one trace,
    # three calls of it.
    assert after["fallbacks"] == before["fallbacks"]
    assert after["programs_traced"] - before.get("programs_traced", 0) == 1
    assert after["calls"] - before.get("calls", 0) == 3


def test_mixing_devices_in_a_compiled_model_on_the_tpu_device_is_pytorchs_error():
    m = torch.nn.Linear(8, 4).to("tpu")
    with pytest.raises(Exception, match=r"same device, but found at least two devices, tpu:0 and cpu"):
        torch.compile(m, backend="tessera")(torch.randn(2, 8))


def test_tensors_made_on_the_tpu_device_inside_a_compiled_graph():
    # `arange(.., device=x.device)` in user code and in interpolate's decomposition: traced
    # as the device's tensors, run in the same program.
    def f(x):
        up = torch.nn.functional.interpolate(x, size=(8, 8), mode="bilinear", align_corners=False)
        return up * torch.arange(8, device=x.device)

    x = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(11))
    before = tc.report()
    got = torch.compile(f, backend="tessera", fullgraph=True)(x.to("tpu"))
    torch.testing.assert_close(got.cpu(), f(x), rtol=1e-5, atol=1e-6)
    assert tc.report()["fallbacks"] == before["fallbacks"]


def test_tensors_made_from_data_on_the_tpu_device_inside_a_compiled_graph():
    # `torch.tensor(data, device=x.device)` and `.to(x.device)` (transformers' cache and MoE
    # code): made on the CPU and moved by the program; an empty one concatenated; `type_as` of
    # a device tensor (RoBERTa's position ids) keeps the device.
    def f(x, ids):
        scale = torch.tensor([0.5, -2.0, 3.0], device=x.device)
        empty = torch.tensor([], device=x.device)
        shift = torch.tensor(1).to(x.device)
        rows = torch.nn.functional.embedding(ids + shift, x)
        positions = (torch.cumsum(ids.ne(0).int(), dim=0).type_as(ids) + 2) * ids
        return torch.cat([empty, (rows * scale).flatten()]), positions

    g = torch.Generator().manual_seed(12)
    x, ids = torch.randn(5, 3, generator=g), torch.tensor([0, 3, 2])
    compiled = torch.compile(f, backend="tessera", fullgraph=True)
    before = tc.report()
    for _ in range(2):
        got = compiled(x.to("tpu"), ids.to("tpu"))
        assert all(t.device.type == "tpu" for t in got)
        for g_, w in zip(got, f(x, ids)):
            torch.testing.assert_close(g_.cpu(), w, rtol=1e-6, atol=1e-6)
    after = tc.report()
    assert after["fallbacks"] == before["fallbacks"]
    assert after["programs_traced"] - before.get("programs_traced", 0) == 1


def test_an_empty_parameter_on_the_tpu_device_compiles():
    # DINOv3's register tokens with a count of 0: an empty device tensor as a graph input.
    class Tokens(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.registers = torch.nn.Parameter(torch.zeros(1, 0, 4))
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(torch.cat([self.registers.expand(x.shape[0], -1, -1), x], dim=1))

    torch.manual_seed(13)
    m, x = Tokens(), torch.randn(2, 3, 4)
    with torch.no_grad():
        want = m(x)
    got = torch.compile(m.to("tpu"), backend="tessera", fullgraph=True)(x.to("tpu"))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


def test_random_ops_in_a_compiled_graph_draw_new_numbers_each_call_and_follow_manual_seed():
    # Dropout in a compiled training graph: the program takes a new random key per call from
    # the eager runtime's generator (not a seed baked into the program), which
    # `torch.manual_seed` restarts.
    def f(x):
        return torch.nn.functional.dropout(x * 1.0, 0.5, training=True)

    x = torch.ones(4096)
    compiled = torch.compile(f, backend="tessera", fullgraph=True)
    before = tc.report()
    torch.manual_seed(3)
    a, b = compiled(x), compiled(x)
    assert not torch.equal(a, b), "two calls dropped the same elements"
    for y in (a, b):
        kept = y != 0
        assert torch.all(y[kept] == 2.0)
        # 4096 Bernoulli(1/2): within 6 standard deviations (0.047) of 1/2.
        assert abs(kept.float().mean().item() - 0.5) < 0.047
    torch.manual_seed(3)
    assert torch.equal(compiled(x), a) and torch.equal(compiled(x), b)
    after = tc.report()
    assert after["fallbacks"] == before["fallbacks"]
    assert after["programs_traced"] - before.get("programs_traced", 0) == 1


def test_a_tensor_made_on_the_tpu_device_in_a_graph_reaches_the_code_after_a_graph_break():
    # XLM/Flaubert's `get_masks`: `arange(.., device=lengths.device)` made in the graph before
    # an `.item()` break is an output of that graph (traced as a plain device tensor, not one
    # AOTAutograd wraps): it must come back as a tpu tensor, not as an inner meta tensor
    # ("found at least two devices, tpu:0 and meta" in the graph after the break).
    def f(x, lengths):
        alen = torch.arange(x.shape[1], dtype=torch.long, device=lengths.device)
        assert lengths.max().item() <= x.shape[1]
        return x * (alen < lengths[:, None]).float()

    x, lengths = torch.randn(2, 5, generator=torch.Generator().manual_seed(14)), torch.tensor([5, 3])
    got = torch.compile(f, backend="tessera")(x.to("tpu"), lengths.to("tpu"))
    assert type(got).__name__ == "TpuTensor"
    torch.testing.assert_close(got.cpu(), f(x, lengths), rtol=0, atol=0)


def test_cpu_indices_of_a_tpu_tensor_in_a_compiled_graph():
    # SAM's relative positions: `rel_pos[coords.long()]` of coordinates made on the CPU, as
    # eager allows (CPU index tensors with device tensors, as torch does for CUDA).
    def f(rel_pos):
        coords = torch.arange(4)[:, None] - torch.arange(4)[None, :] + 3
        return rel_pos[coords] * 2

    rel_pos = torch.randn(7, 3, generator=torch.Generator().manual_seed(15))
    got = torch.compile(f, backend="tessera", fullgraph=True)(rel_pos.to("tpu"))
    torch.testing.assert_close(got.cpu(), f(rel_pos), rtol=0, atol=0)


@pytest.mark.parametrize("kv_heads,masked", [(2, False), (1, True)])
def test_grouped_query_attention_compiles_forward_and_backward(kv_heads, masked):
    # GPT-BigCode (multi-query) and Laguna: `enable_gqa=True` reaches torch's CPU flash
    # attention op with fewer key/value heads than query heads, which Tessera lowers as it is
    # (causal; or with a float mask and a scale).
    mask = torch.zeros(6, 6).masked_fill(torch.eye(6, dtype=torch.bool).roll(1, 1), float("-inf"))

    def f(q, k, v):
        if masked:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3,
                                                                    enable_gqa=True)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    g = torch.Generator().manual_seed(16)
    q, k, v = (torch.randn(2, h, 6, 8, generator=g, requires_grad=True) for h in (4, kv_heads, kv_heads))
    want = f(q, k, v)
    want.sum().backward()
    want_grads = [t.grad for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    before = tc.report()
    got = torch.compile(f, backend="tessera")(q, k, v)
    got.sum().backward()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for t, w in zip((q, k, v), want_grads):
        torch.testing.assert_close(t.grad, w, rtol=1e-5, atol=1e-5)
    assert tc.report()["fallbacks"] == before["fallbacks"]


def test_a_cpu_scalar_tensor_with_tpu_tensors_in_a_compiled_graph():
    # DeBERTa's / SEW-D's XSoftmax: `masked_fill(rmask, torch.tensor(finfo.min))`, a CPU
    # scalar tensor with device tensors, as eager allows.
    def f(x, mask):
        rmask = ~mask.to(torch.bool)
        out = torch.softmax(x.masked_fill(rmask, torch.tensor(torch.finfo(x.dtype).min)), -1)
        return out.masked_fill(rmask, 0) + torch.tensor(1.5)

    x = torch.randn(2, 5, generator=torch.Generator().manual_seed(17))
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    got = torch.compile(f, backend="tessera", fullgraph=True)(x.to("tpu"), mask.to("tpu"))
    torch.testing.assert_close(got.cpu(), f(x, mask), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "tpu"])
def test_as_strided_of_a_non_contiguous_view_reads_torchs_storage_layout(device):
    # LongFormer's `_chunk`: overlapping windows by `as_strided` over a transposed tensor's
    # storage; the program's values are contiguous, so the windows are gathered from the
    # positions torch's layout gives (else it read other elements: 1e-4 off in LongFormer).
    def f(x):
        z = x.transpose(0, 1).unsqueeze(1)  # (4, 1, 6, 8): a transposed view, not contiguous
        return z.as_strided((4, 2, 4, 8), (8, 64, 32, 1)) * 2 + 1

    x = torch.randn(6, 4, 8, generator=torch.Generator().manual_seed(18))
    got = torch.compile(f, backend="tessera", fullgraph=True)(x.to(device))
    torch.testing.assert_close(got.cpu(), f(x), rtol=0, atol=0)
