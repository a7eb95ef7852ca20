"""torch.compile(backend="tessera") side by side:

1. A training step (forward + backward, gradients of every weight) of a small pre-LN
   transformer: Tessera compiled (on the tpu device, and on CPU tensors) vs the same math in
   `jax.jit(jax.value_and_grad(..))` on jaxlib's own CPU client and on Tessera's PJRT plugin
   (the same XLA build as Tessera's programs) vs torch eager; each variant in its own process,
   the variants in turn, `--rounds` times. Then the step's programs alone (Tessera's forward
   and backward vs JAX's one program) on both XLA builds, without either framework's host work.
2. Forward of zoo models, medians in one process: compiled (one program) vs the model on the
   `tpu` device in Strict and DeferAndFuse vs op by op through `tessera.ops.call`
   (python/tools/model_routing.py) vs torch eager.

    python python/tools/bench_compile.py [--iters 10] [--rounds 3] [--d 128] [--seq 64] [--models ..]

The training step's Tessera processes dispatch the tpu device in C++
(TESSERA_TORCH_DISPATCH=cpp: plain PrivateUse1 tensors, no subclass for Dynamo and
AOTAutograd to flatten and wrap on every call)."""

import argparse
import json
import os
import shutil
import statistics
import subprocess
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


def jax_on_tessera_plugin():
    """Registers the CPU PJRT plugin Tessera's runtime loads with JAX as platform `tessera_cpu`
    (before JAX starts its backends) and returns that name."""
    from jax._src import xla_bridge

    from tessera import _native

    xla_bridge.register_plugin("tessera_cpu", library_path=_native.plugin_path("cpu"),
                               options={"cpu_device_count": 1})
    return "tessera_cpu"


# The training step's variants, each timed in its own process (see `training`).
STEPS = {
    "tessera": "tessera compiled on the tpu device (loss in the graph)",
    "tessera_cpu": "tessera compiled, CPU tensors",
    "jax": "jax.jit, jaxlib's CPU client",
    "jax_plugin": "jax.jit on Tessera's PJRT plugin",
    "torch": "torch eager",
}


def step_run(variant, d, seq, dump=None):
    """(run, loss of its first call) for one variant of the training step: two blocks, batch 4,
    loss mean(y^2), every weight's gradient; each run waits for its loss and gradients."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(d, 4), Block(d, 4))
    x = torch.randn(4, seq, d)
    if variant.startswith("jax"):
        platform = jax_on_tessera_plugin() if variant == "jax_plugin" else "cpu"
        import jax

        fn, params = jax_step(model, d, 4)
        params, xj = jax.device_put((params, np.asarray(x.numpy())), jax.devices(platform)[0])

        def run():
            loss, grads = fn(params, xj)
            jax.block_until_ready((loss, grads))
            return float(loss)
        return run, run()
    if variant == "tessera":
        # Weights, activations and gradients stay on the device.
        import tessera.torch as tt

        model.to("tpu")
        x = x.to("tpu")
        compiled = torch.compile(lambda x: model(x).square().mean(), backend="tessera")
        wait = tt.wait
    else:
        forward = model if variant == "torch" else torch.compile(model, backend="tessera")

        def compiled(x):
            return forward(x).square().mean()
        wait = None
    params = list(model.parameters())

    def run():
        model.zero_grad(set_to_none=True)
        loss = compiled(x)
        loss.backward()
        if wait is not None:
            wait([p.grad for p in params])
        return loss.item()

    # The first call traces the forward and backward programs; the eager runtime writes their
    # StableHLO to TESSERA_EAGER_DUMP as it compiles them (read by `programs_alone`).
    if dump is not None:
        os.environ["TESSERA_EAGER_DUMP"] = dump
    try:
        first = run()
    finally:
        os.environ.pop("TESSERA_EAGER_DUMP", None)
    return run, first


def step_child(args):
    """One variant's median step time, in this process alone: printed as a JSON line."""
    run, loss = step_run(args.step, args.d, args.seq, args.dump)
    print(json.dumps({"median_s": median_s(run, args.iters, warmup=5), "loss": loss}))


def run_child(args, flags, env, stdin=None):
    """This script run with `flags` (and the step's sizes), checked; its stdout."""
    cmd = [sys.executable, os.path.abspath(__file__), *flags, "--iters", str(args.iters),
           "--d", str(args.d), "--seq", str(args.seq)]
    out = subprocess.run(cmd, input=stdin, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(flags)}: exit {out.returncode}\n{out.stderr[-4000:]}")
    return out.stdout


def training(args):
    """The training step of each variant, each in its own process, in turn, `--rounds` times:
    in one process the clients' thread pools (jaxlib's, the plugin's under JAX, Tessera's)
    would compete for the cores. Medians of the processes' medians; then the step's programs
    alone."""
    env = dict(os.environ, TESSERA_TORCH_DISPATCH="cpp")  # the device dispatched in C++
    dump = tempfile.mkdtemp(prefix="bench_compile_")
    times = {v: [] for v in STEPS}
    losses = {}
    for r in range(args.rounds):
        for v in STEPS:
            flags = ["--step", v] + (["--dump", dump] if v == "tessera" and r == 0 else [])
            got = json.loads(run_child(args, flags, env).strip().splitlines()[-1])
            times[v].append(got["median_s"])
            losses[v] = got["loss"]
    ref = losses["torch"]
    for v, loss in losses.items():
        assert abs(loss - ref) <= 1e-4 * abs(ref), (v, loss, ref)
    med = {v: statistics.median(t) for v, t in times.items()}
    print(f"training step, 2 blocks d={args.d} seq={args.seq} batch 4 (median of {args.rounds} processes"
          f" per variant, each the median of {args.iters} steps; the variants' processes in turn):")
    for v, what in STEPS.items():
        spread = ", ".join(f"{t * 1e3:.2f}" for t in times[v])
        print(f"  {what:56} {med[v] * 1e3:8.2f} ms  ({spread})")
    t = med["tessera"]
    print(f"  jax.jit / tessera (>= 1.0: Tessera as fast): jaxlib's client {med['jax'] / t:.2f}x,"
          f" on the same XLA (Tessera's plugin) {med['jax_plugin'] / t:.2f}x;"
          f" CPU tensors: {med['jax'] / med['tessera_cpu']:.2f}x; torch eager / tessera {med['torch'] / t:.2f}x")
    programs = []
    for f in sorted(os.listdir(dump)):
        with open(os.path.join(dump, f)) as text:
            programs.append(text.read())
    shutil.rmtree(dump)
    # In a child too: JAX's clients (and their thread pools) stay out of this process, which
    # goes on to time the zoo models.
    print(run_child(args, ["--programs"], env, stdin=json.dumps(programs)), end="")


# MLIR element types of the programs' arguments, as numpy dtypes.
_NP_TYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64,
             "i32": np.int32, "i8": np.int8, "i1": np.bool_}


def programs_alone(args):
    """The step's programs without either framework's host work: Tessera's forward and
    backward programs (as dumped, read as JSON from stdin) and JAX's one program, compiled and
    run on random inputs by jaxlib's CPU client and by Tessera's PJRT plugin, interleaved.
    Separates the programs themselves (and the XLA build running them) from the host work
    around them."""
    import re

    tessera_texts = json.loads(sys.stdin.read())
    plugin = jax_on_tessera_plugin()
    import jax
    from jax._src.lib import xla_client as xc
    from jax.extend import backend

    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(args.d, 4), Block(args.d, 4))
    fn, params = jax_step(model, args.d, 4)
    jax_text = fn.lower(params, np.zeros((4, args.seq, args.d), np.float32)).as_text()
    rng = np.random.default_rng(0)

    def runner(client, texts):
        device = client.local_devices()[0]
        programs = []
        for text in texts:
            sig = re.search(r"@main\((.*?)\)\s*(->|\{)", text, re.S).group(1)
            inputs = []
            for ty in re.findall(r"tensor<([^>]*)>", sig):
                *dims, elem = ty.split("x")
                shape = [int(d) for d in dims]
                inputs.append(jax.device_put(np.asarray(rng.standard_normal(shape), _NP_TYPES[elem]), device))
            exe = client.compile_and_load(text, xc.DeviceList((device,)), xc.CompileOptions())
            programs.append((exe, inputs))

        def run():
            outs = [exe.execute(inputs) for exe, inputs in programs]
            for out in outs:
                for o in out:
                    o.block_until_ready()
        return run

    runs = {}
    for name, platform in (("jaxlib", "cpu"), ("plugin", plugin)):
        client = backend.get_backend(platform)
        runs[f"{name} tessera"] = runner(client, tessera_texts)
        runs[f"{name} jax"] = runner(client, [jax_text])
    med = interleaved_medians(runs, args.iters)
    print(f"  the programs alone (random inputs; tessera's {len(tessera_texts)}, forward and backward,"
          f" vs jax's one):")
    for name in ("jaxlib", "plugin"):
        t, j = med[f"{name} tessera"], med[f"{name} jax"]
        where = "jaxlib's CPU client" if name == "jaxlib" else "Tessera's PJRT plugin"
        print(f"    on {where:22} tessera {t * 1e3:8.2f} ms | jax {j * 1e3:8.2f} ms | jax / tessera {j / t:.2f}x")
    print(f"    the same programs, plugin / jaxlib's client: tessera's {med['plugin tessera'] / med['jaxlib tessera']:.2f}x,"
          f" jax's {med['plugin jax'] / med['jaxlib jax']:.2f}x")


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
    p.add_argument("--rounds", type=int, default=3, help="processes per training-step variant")
    p.add_argument("--models", nargs="*", default=["classic/mlp", "torchvision/resnet18", "transformers/bert"])
    p.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)
    p.add_argument("--dump", help=argparse.SUPPRESS)
    p.add_argument("--programs", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    if args.step:
        return step_child(args)
    if args.programs:
        return programs_alone(args)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    training(args)
    zoo_forward(args)


if __name__ == "__main__":
    main()
