"""torch.compile(backend="tessera") side by side, medians of repeated runs in one process:

1. A training step (forward + backward, gradients of every weight) of a small pre-LN
   transformer: Tessera compiled vs the same math in `jax.jit(jax.value_and_grad(..))` (the
   same XLA compiler) vs torch eager on the CPU; then the step's programs alone, Tessera's
   forward and backward vs JAX's one program, run by jaxlib's client without either's Python.
2. Forward of zoo models: compiled (one program) vs the model on the `tpu` device in Strict and
   DeferAndFuse vs op by op through `tessera.ops.call` (python/tools/model_routing.py) vs torch
   eager.

    python python/tools/bench_compile.py [--iters 10] [--d 128] [--seq 64]

With TESSERA_TORCH_DISPATCH=cpp the tpu device is the one dispatched in C++ (plain PrivateUse1
tensors: no subclass for Dynamo and AOTAutograd to flatten and wrap on every call).
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tessera import compile as tc  # noqa: E402

tc.register()


def median_s(fn, iters, warmup=2):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def interleaved_medians(runs, iters, warmup=2):
    """{name: median seconds} of `runs` ({name: fn}), run in turn `iters` times after `warmup`
    rounds: interleaved, so the machine's load falls on all alike."""
    for _ in range(warmup):
        for run in runs.values():
            run()
    rounds = {k: [] for k in runs}
    for _ in range(iters):
        for name, run in runs.items():
            t = time.perf_counter()
            run()
            rounds[name].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in rounds.items()}


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.w1, self.w2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        s, d = x.shape[-2:]
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, -1)
        q, k, v = (t.reshape(-1, s, h, d // h).transpose(1, 2) for t in (q, k, v))
        a = ((q @ k.transpose(-1, -2)) * (d // h) ** -0.5).softmax(-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(-1, s, d))
        return x + self.w2(torch.nn.functional.gelu(self.w1(self.ln2(x)), approximate="tanh"))


def jax_step(model, d, heads):
    """The same two blocks and loss in JAX, on the torch model's weights."""
    import jax
    import jax.numpy as jnp

    params = {k: jnp.asarray(v.detach().numpy()) for k, v in model.state_dict().items()}

    def ln(x, w, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * w + b

    def lin(x, p, name):
        return x @ p[f"{name}.weight"].T + p[f"{name}.bias"]

    def block(x, p, i):
        q = lambda n: {k[len(f"{i}.{n}."):]: v for k, v in p.items() if k.startswith(f"{i}.{n}.")}
        s = x.shape[-2]
        qkv = lin(ln(x, p[f"{i}.ln1.weight"], p[f"{i}.ln1.bias"]), {f"qkv.{k}": v for k, v in q("qkv").items()}, "qkv")
        qq, kk, vv = (t.reshape(-1, s, heads, d // heads).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, -1))
        a = jax.nn.softmax((qq @ kk.transpose(0, 1, 3, 2)) * (d // heads) ** -0.5, -1) @ vv
        x = x + lin(a.transpose(0, 2, 1, 3).reshape(-1, s, d), {f"o.{k}": v for k, v in q("o").items()}, "o")
        h = jax.nn.gelu(lin(ln(x, p[f"{i}.ln2.weight"], p[f"{i}.ln2.bias"]),
                            {f"w1.{k}": v for k, v in q("w1").items()}, "w1"), approximate=True)
        return x + lin(h, {f"w2.{k}": v for k, v in q("w2").items()}, "w2")

    def loss(p, x):
        return (block(block(x, p, 0), p, 1) ** 2).mean()

    return jax.jit(jax.value_and_grad(loss)), params


def training(args):
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(args.d, 4), Block(args.d, 4))
    x = torch.randn(4, args.seq, args.d)
    compiled = torch.compile(model, backend="tessera")

    def step(m):
        def run():
            model.zero_grad(set_to_none=True)
            loss = m(x).square().mean()
            loss.backward()
            return loss.item(), [p.grad for p in model.parameters()]
        return run

    ref_loss, ref_grads = step(model)()
    got_loss, got_grads = step(compiled)()
    assert abs(got_loss - ref_loss) <= 1e-4 * abs(ref_loss), (got_loss, ref_loss)
    fn, params = jax_step(model, args.d, 4)
    xj = np.asarray(x.numpy())
    jl, _ = fn(params, xj)
    assert abs(float(jl) - ref_loss) <= 1e-4 * abs(ref_loss), (float(jl), ref_loss)

    def jax_run():
        loss, grads = fn(params, xj)
        loss.block_until_ready()
        for g in grads.values():
            g.block_until_ready()

    # The model on the tpu device, compiled: weights, activations and gradients stay there;
    # each step waits for its gradients, as the JAX step does.
    import tessera.torch as tt

    on_device = torch.nn.Sequential(Block(args.d, 4), Block(args.d, 4))
    on_device.load_state_dict(model.state_dict())
    on_device.to("tpu")
    xd = x.to("tpu")
    compiled_dev = torch.compile(on_device, backend="tessera")

    def device_step(forward_loss):
        def run():
            on_device.zero_grad(set_to_none=True)
            loss = forward_loss()
            loss.backward()
            tt.wait([p.grad for p in on_device.parameters()])
            return loss.item()
        return run

    device_run = device_step(lambda: compiled_dev(xd).square().mean())
    dev_loss = device_run()
    assert abs(dev_loss - ref_loss) <= 1e-4 * abs(ref_loss), (dev_loss, ref_loss)

    # The loss inside the compiled graph too, as the JAX step has it (its backward then is
    # part of the compiled backward graph instead of eager ops on the device).
    compiled_loss = torch.compile(lambda x: on_device(x).square().mean(), backend="tessera")
    device_loss_run = device_step(lambda: compiled_loss(xd))
    # The first call traces the forward and backward programs; the eager runtime writes their
    # StableHLO to TESSERA_EAGER_DUMP as it compiles them (read by `programs_alone` below).
    dump = tempfile.mkdtemp(prefix="bench_compile_")
    os.environ["TESSERA_EAGER_DUMP"] = dump
    try:
        dev_loss = device_loss_run()
    finally:
        del os.environ["TESSERA_EAGER_DUMP"]
    assert abs(dev_loss - ref_loss) <= 1e-4 * abs(ref_loss), (dev_loss, ref_loss)

    runs = {"cpu": step(compiled), "tpu": device_run, "tpu+loss": device_loss_run, "jax": jax_run,
            "torch": step(model)}
    med = interleaved_medians(runs, args.iters)
    print(f"training step, 2 blocks d={args.d} seq={args.seq} batch 4 (medians of {args.iters}, interleaved):")
    print(f"  tessera compiled, CPU tensors {med['cpu'] * 1e3:8.2f} ms | on the tpu device {med['tpu'] * 1e3:8.2f} ms"
          f" | the same with the loss compiled {med['tpu+loss'] * 1e3:8.2f} ms"
          f" | jax.jit {med['jax'] * 1e3:8.2f} ms | torch eager {med['torch'] * 1e3:8.2f} ms")
    print(f"  jax.jit / tessera: CPU tensors {med['jax'] / med['cpu']:.2f}x, tpu device {med['jax'] / med['tpu']:.2f}x,"
          f" tpu device with the loss compiled {med['jax'] / med['tpu+loss']:.2f}x (>= 1.0: Tessera as fast);"
          f" torch eager / tessera (tpu device) = {med['torch'] / med['tpu']:.2f}x")
    programs = []
    for f in sorted(os.listdir(dump)):
        with open(os.path.join(dump, f)) as text:
            programs.append(text.read())
    shutil.rmtree(dump)
    programs_alone(programs, fn.lower(params, xj).as_text(), args.iters)


# MLIR element types of the programs' arguments, as numpy dtypes.
_NP_TYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64,
             "i32": np.int32, "i8": np.int8, "i1": np.bool_}


def programs_alone(tessera_texts, jax_text, iters):
    """The step's programs without either framework's Python: Tessera's forward and backward
    programs (as dumped) and JAX's one program, each compiled and run by jaxlib's CPU client
    on random inputs, interleaved. Shows how much of the gap above is the programs themselves
    and how much is the host work around them (which on a 2-core machine competes with XLA's
    threads rather than overlapping them)."""
    import re

    import jax
    from jax._src.lib import xla_client as xc
    from jax.extend import backend

    client = backend.get_backend()
    device = client.local_devices()[0]
    devices = xc.DeviceList((device,))
    rng = np.random.default_rng(0)

    def load(text):
        sig = re.search(r"@main\((.*?)\)\s*(->|\{)", text, re.S).group(1)
        args = []
        for ty in re.findall(r"tensor<([^>]*)>", sig):
            *dims, elem = ty.split("x")
            shape = [int(d) for d in dims]
            args.append(jax.device_put(np.asarray(rng.standard_normal(shape), _NP_TYPES[elem]),
                                       device))
        return client.compile_and_load(text, devices, xc.CompileOptions()), args

    def runner(programs):
        def run():
            outs = [exe.execute(args) for exe, args in programs]
            for out in outs:
                for o in out:
                    o.block_until_ready()
        return run

    runs = {"tessera": runner([load(text) for text in tessera_texts]),
            "jax": runner([load(jax_text)])}
    med = interleaved_medians(runs, iters)
    print(f"  the programs alone (jaxlib's CPU client, random inputs): tessera's {len(tessera_texts)}"
          f" {med['tessera'] * 1e3:8.2f} ms | jax's {med['jax'] * 1e3:8.2f} ms"
          f" | jax / tessera {med['jax'] / med['tessera']:.2f}x")


def zoo_forward(args):
    import model_routing
    from zoo.catalog import catalog

    cat = catalog()
    table = {t["name"] for t in __import__("tessera").ops.table()}
    print(f"forward, median of {args.iters}:")
    for name in args.models:
        torch.manual_seed(0)
        model, kw = cat[name][1]()
        model = model_routing.no_dropout(model).eval()
        torch._dynamo.reset()
        cm = torch.compile(model, backend="tessera")

        def fwd(m, route=None):
            def run():
                with torch.no_grad():
                    if route is None:
                        return m(**kw)
                    with route:
                        return m(**kw)
            return run

        t_c = median_s(fwd(cm), args.iters)
        t_r = median_s(fwd(model, model_routing.Route(table)), max(args.iters // 3, 2), warmup=1)
        t_t = median_s(fwd(model), args.iters)
        # The model on the tpu device, eager: Strict and DeferAndFuse (output read back).
        import copy

        import tessera.torch as tt

        dev = copy.deepcopy(model).to("tpu")
        kw_dev = {k: v.to("tpu") for k, v in kw.items()}
        eager = {}
        for mode in ("strict", "defer"):
            tt.set_mode(mode)

            def run_dev():
                with torch.no_grad():
                    model_routing._tensor_of(dev(**kw_dev)).cpu()
            eager[mode] = median_s(run_dev, args.iters)
        tt.set_mode(None)
        # Compiled on the device (output read back, as in the eager modes).
        torch._dynamo.reset()
        cdev = torch.compile(dev, backend="tessera")

        def run_cdev():
            with torch.no_grad():
                model_routing._tensor_of(cdev(**kw_dev)).cpu()
        eager["compiled_tpu"] = median_s(run_cdev, args.iters)
        print(f"  {name:24} compiled {t_c * 1e3:8.2f} ms | compiled on tpu {eager['compiled_tpu'] * 1e3:8.2f} ms"
              f" | tpu strict {eager['strict'] * 1e3:8.2f} ms | tpu defer "
              f"{eager['defer'] * 1e3:8.2f} ms | ops.call op by op {t_r * 1e3:8.2f} ms | torch {t_t * 1e3:8.2f} ms")
        print(f"  {'':24} strict/compiled {eager['strict'] / t_c:5.1f}x | defer/compiled {eager['defer'] / t_c:5.1f}x"
              f" | torch/compiled {t_t / t_c:5.2f}x")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--models", nargs="*", default=["classic/mlp", "torchvision/resnet18", "transformers/bert"])
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    training(args)
    zoo_forward(args)


if __name__ == "__main__":
    main()
