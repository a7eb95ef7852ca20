"""Real models through Tessera's ATen lowerings: every ATen call that a model's forward and a
training step (forward, backward, an SGD step) make is run by Tessera (`tessera.ops.call`)
instead of torch, so the model computes on Tessera's results end to end; outputs, the loss and
the gradients are compared with the same model run by torch CPU.

Models come from small configs with seeded random weights, nothing downloaded: torchvision
(resnet18, mobilenet_v3_small, squeezenet1_1, shufflenet_v2, mnasnet, convnext_tiny,
efficientnet_b0), transformers (BERT, RoBERTa, ALBERT, DistilBERT, GPT-2, Llama, T5, ViT) and
classic modules (MLP, CNN, LSTM, GRU, nn.Transformer). Ops Tessera lacks but PyTorch decomposes run
as their decomposition (each piece routed), and torch CPU's oneDNN path is off while routing (a device
takes the generic path).

    python python/tools/model_routing.py [MODEL ...]      # per model: ops, missing, match
"""

import argparse
import contextlib
import copy
import os
import sys
import warnings
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch._decomp  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import tessera  # noqa: E402
from oracles import clone_args, compare  # noqa: E402
from sweep import overload_name, writes_args  # noqa: E402
from tessera import ops as tops  # noqa: E402
from zoo.catalog import Recurrent  # noqa: E402

# Calls that only move or describe data on the host, which Tessera's table does not claim:
# running them in torch changes no number.
PASSTHROUGH = {"detach", "_to_copy", "lift_fresh", "lift_fresh_copy", "set_.source_Storage_storage_offset",
               "_local_scalar_dense", "is_same_size", "sym_size.int", "sym_stride.int", "sym_numel",
               # the profiler's markers around optimizer steps
               "_record_function_enter_new", "_record_function_exit._RecordFunction"}


def is_view(func):
    """Whether the overload returns an alias of an argument without writing it (a view)."""
    return any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)


class Route(TorchDispatchMode):
    """Runs each ATen call in Tessera where its table has the overload; records what ran where."""

    def __init__(self, table, compare=False):
        super().__init__()
        self.table, self.compare = table, compare
        self.differs = {}
        self.ran = Counter()
        self.missing = Counter()
        self.errors = Counter()
        self.views = Counter()
        self.decomposed = Counter()
        self.mkldnn = []  # oneDNN's state at each (re-)entry

    def __enter__(self):
        # oneDNN is torch CPU's private path (LSTM calls mkldnn_rnn_layer); a device takes the
        # generic one, whose ATen calls come through here.
        self.mkldnn.append(torch._C._get_mkldnn_enabled())
        torch._C._set_mkldnn_enabled(False)
        return super().__enter__()

    def __exit__(self, *exc):
        torch._C._set_mkldnn_enabled(self.mkldnn.pop())
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = overload_name(func)
        if is_view(func):
            # A view aliases its input's storage (`Tensor(a)`), and later in-place ops on it must
            # reach the base: `tessera.ops.call` returns new tensors, so views stay torch's
            # (they compute nothing; the eager runtime's device tensors alias them).
            self.views[name] += 1
            return func(*args, **kwargs)
        if name in self.table and name not in PASSTHROUGH:
            try:
                before = clone_args((args, kwargs)) if self.compare else None
                out = tops.call(name, *args, **kwargs)
                self.ran[name] += 1
                if self.compare:
                    # The same call in torch, on the same inputs: which op a model-level
                    # difference starts at (for calls that write arguments, what they wrote).
                    expected = func(*before[0], **before[1])
                    m = compare(name, [], before, (args, kwargs)) if writes_args(func, []) else compare(name, [], expected, out)
                    if m and len(self.differs.setdefault(name, [])) < 2:
                        self.differs[name].append(m[:300])
                return out
            except tessera.TesseraError as e:
                self.errors[f"{name}: {type(e).__name__}: {str(e)[:160]}"] += 1
        elif name not in PASSTHROUGH:
            decomposition = torch._decomp.decomposition_table.get(func)
            if decomposition is not None:
                # An op Tessera lacks but PyTorch decomposes (unsafe_split into slices, ...):
                # its pieces come back through this mode, as a device backend's would.
                self.decomposed[name] += 1
                with self:
                    return decomposition(*args, **kwargs)
            self.missing[name] += 1
        return func(*args, **kwargs)


def _tv(name, **kw):
    def make():
        import torchvision

        return getattr(torchvision.models, name)(weights=None, **kw), torch.randn(2, 3, 64, 64)
    return make


def _hf(config_cls, model_cls, inputs, **cfg):
    def make():
        import transformers

        config = getattr(transformers, config_cls)(**cfg)
        return getattr(transformers, model_cls)(config), inputs()
    return make


def _ids(vocab=99, shape=(2, 12)):
    return lambda: torch.randint(0, vocab, shape)


SMALL_LM = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37)
MODELS = {
    "mlp": lambda: (torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                                        torch.nn.Linear(64, 10)), torch.randn(8, 20)),
    "cnn": lambda: (torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10)),
                    torch.randn(4, 3, 16, 16)),
    "lstm": lambda: (Recurrent("LSTM"), torch.randn(3, 7, 16)),
    "gru": lambda: (Recurrent("GRU"), torch.randn(3, 7, 16)),
    "transformer": lambda: (torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True,
                                                                                        dropout=0.0), 2),
                            torch.randn(2, 9, 32)),
    "resnet18": _tv("resnet18", num_classes=10),
    "mobilenet_v3_small": _tv("mobilenet_v3_small", num_classes=10),
    "squeezenet1_1": _tv("squeezenet1_1", num_classes=10),
    "shufflenet_v2": _tv("shufflenet_v2_x0_5", num_classes=10),
    "mnasnet": _tv("mnasnet0_5", num_classes=10),
    "convnext": _tv("convnext_tiny", num_classes=10, stochastic_depth_prob=0.0),
    "efficientnet": _tv("efficientnet_b0", num_classes=10, stochastic_depth_prob=0.0),
    "bert": _hf("BertConfig", "BertModel", _ids(), **SMALL_LM),
    "distilbert": _hf("DistilBertConfig", "DistilBertModel", _ids(), vocab_size=99, dim=32, n_layers=2, n_heads=4,
                      hidden_dim=37),
    "gpt2": _hf("GPT2Config", "GPT2LMHeadModel", _ids(), vocab_size=99, n_embd=32, n_layer=2, n_head=4),
    # As many key/value heads as query heads (Llama-2-7B's layout), and fewer (grouped-query
    # attention, Llama-3's layout): torch's CPU flash-attention entry points with K/V of 2 heads.
    "llama": _hf("LlamaConfig", "LlamaForCausalLM", _ids(), num_key_value_heads=4, **SMALL_LM),
    "llama_gqa": _hf("LlamaConfig", "LlamaForCausalLM", _ids(), num_key_value_heads=2, **SMALL_LM),
    "roberta": _hf("RobertaConfig", "RobertaModel", _ids(), pad_token_id=1, **SMALL_LM),
    "albert": _hf("AlbertConfig", "AlbertModel", _ids(), embedding_size=16, **SMALL_LM),
    "t5": _hf("T5Config", "T5EncoderModel", _ids(), vocab_size=99, d_model=32, d_kv=8, d_ff=37, num_layers=2,
              num_heads=4, dropout_rate=0.0),
    "vit": _hf("ViTConfig", "ViTModel", lambda: torch.randn(2, 3, 32, 32), image_size=32, patch_size=8,
               hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37),
}


def _tensor_of(out):
    """The first tensor of a model's output (a tensor, a tuple, a dict, or a ModelOutput)."""
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, dict):  # torchvision's segmentation models: {"out": ..., "aux": ...}
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        for o in out:
            t = _tensor_of(o)
            if t is not None:
                return t
    return None


def _step(model, x, route=None):
    """Forward, a scalar loss, backward, one SGD step; returns (output, loss, grads, new params)."""
    model.zero_grad(set_to_none=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with route if route is not None else contextlib.nullcontext():
        out = _tensor_of(model(x))
        loss = (out.float() ** 2).mean()
        loss.backward()
        opt.step()
    grads = [p.grad.detach().clone() if p.grad is not None else None for p in model.parameters()]
    params = [p.detach().clone() for p in model.parameters()]
    return out.detach(), loss.detach(), grads, params


def no_dropout(model):
    """Dropout draws its mask from the backend's generator, so torch and Tessera would drop
    different elements: every dropout is set to p = 0 (the ops still run)."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = 0.0
    config = getattr(model, "config", None)
    if config is not None:
        for key, value in vars(config).items():
            if ("dropout" in key or key.endswith("pdrop") or key == "dropout_rate") and isinstance(value, float):
                setattr(config, key, 0.0)
    return model


REL_TOL = 1e-4
TORCH_FACTOR = 4.0
# Elementwise floor of the norm comparison: gradients that are zero in exact arithmetic (a
# conv bias before batch norm) are rounding noise of ~1e-9 on both sides.
ABS_TOL = 1e-6


def rel_error(got, want):
    """||got - want|| / max(||want||, ABS_TOL * sqrt(n)), in float64; inf where shapes or NaNs
    differ."""
    if got.shape != want.shape:
        return float("inf")
    g, w = got.detach().double(), want.detach().double()
    if not torch.equal(g.isnan(), w.isnan()):
        return float("inf")
    g, w = g.nan_to_num(0.0), w.nan_to_num(0.0)
    floor = ABS_TOL * w.numel() ** 0.5
    return ((g - w).norm() / w.norm().clamp(min=floor)).item() if w.numel() else 0.0


def run_model(name, table=None, compare_ops=False):
    """{'ops', 'missing', 'errors', 'mismatch'} for one model."""
    table = table or {t["name"] for t in tops.table()}
    torch.manual_seed(0)
    model, x = MODELS[name]()
    no_dropout(model).train()
    twin, m64 = copy.deepcopy(model), copy.deepcopy(model).double()
    torch.manual_seed(1)
    want = _step(model, x)
    # torch's own float32 CPU kernels are not always the accurate ones (measured: its
    # convolutions in squeezenet's training step are 1.4e-2 from float64 in the first layer's
    # gradient, Tessera 4e-7): a tensor matching torch's float64 run passes too.
    torch.manual_seed(1)
    want64 = _step(m64, x.double() if x.is_floating_point() else x)
    route = Route(table, compare_ops)
    torch.manual_seed(1)
    got = _step(twin, x, route)
    mismatch = []
    labels = ["output", "loss", "grads", "params"]
    for label, w, w64, g in zip(labels, want, want64, got):
        ws, w64s, gs = (w, w64, g) if isinstance(w, list) else ([w], [w64], [g])
        for i, (a, a64, b) in enumerate(zip(ws, w64s, gs)):
            if a is None or b is None:
                if (a is None) != (b is None):
                    mismatch.append(f"{label}[{i}]: None on one side")
                continue
            # float32 end to end through a network: each op is within its own tolerance and the
            # differences compound over depth, so a tensor is compared as a whole (relative error
            # of the Frobenius norm). It passes within REL_TOL of torch's float32 result, or when
            # it is no further from torch's float64 result than TORCH_FACTOR times torch's own
            # float32 result is (a small model's gradients can be ill-conditioned: measured for
            # BERT's embedding gradient, torch float32 is 2.3e-3 from float64).
            err32, err64 = rel_error(b, a), rel_error(b.double(), a64)
            torch_err = rel_error(a.double(), a64)
            if err32 > REL_TOL and err64 > max(REL_TOL, TORCH_FACTOR * torch_err):
                mismatch.append(f"{label}[{i}]: relative error {err32:.2e} from torch float32, {err64:.2e} "
                                f"from float64 (torch float32: {torch_err:.2e}; shape {list(a.shape)})")
    return {"ops": sum(route.ran.values()), "distinct": len(route.ran), "missing": dict(route.missing),
            "views": sum(route.views.values()),
            "errors": dict(route.errors), "mismatch": mismatch, "differs": route.differs}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="*")
    p.add_argument("--compare-ops", action="store_true", help="also compare every routed call with torch's")
    a = p.parse_args()
    warnings.filterwarnings("ignore")
    table = {t["name"] for t in tops.table()}
    for name in a.models or MODELS:
        try:
            r = run_model(name, table, a.compare_ops)
        except Exception as e:
            print(f"{name:>20}: FAIL {type(e).__name__}: {str(e)[:200]}")
            continue
        ok = not r["missing"] and not r["errors"] and not r["mismatch"]
        print(f"{name:>20}: {'MATCH' if ok else 'FAIL'} {r['ops']} calls ({r['distinct']} overloads) by Tessera, {r['views']} views in torch; "
              f"missing {r['missing']}; errors {list(r['errors'])[:3]}; mismatch {r['mismatch'][:2]}")
        for op, ms in r["differs"].items():
            print(f"{'':>22}{op} differs from torch: {ms[0]}")


if __name__ == "__main__":
    main()
