"""One zoo model in this process: build it (seeded), run its forward on torch CPU, then per mode
on Tessera; print one JSON line (the report entry).

    cd python && python -m zoo.model [NAME ...] [--modes route]   (no NAME: names from stdin)
"""

import argparse
import copy
import json
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import model_routing  # noqa: E402
from zoo.catalog import catalog  # noqa: E402

# float32 tolerances of torch.testing.assert_close, applied elementwise; a model whose output
# misses them still matches when it is no further (relative Frobenius norm) from torch's float64
# run than model_routing.TORCH_FACTOR times torch's own float32 output is: deep float32
# networks compound rounding, and torch's float32 kernels are not the exact answer either.
# Where torch cannot run the model in float64, within model_routing.REL_TOL (relative norm).
RTOL, ATOL = 1.3e-6, 1e-5


def first_tensor(out):
    return model_routing._tensor_of(out)


def forward(model, kw, route=None):
    with torch.no_grad(), (route if route is not None else _null()):
        return first_tensor(model(**kw))


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


class OrderedRoute(model_routing.Route):
    """Route that also remembers the first op that was missing, refused, or differed."""

    first = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = (dict(self.missing), dict(self.errors), dict(self.differs))
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if self.first is None:
            name = model_routing.overload_name(func)
            if dict(self.missing) != before[0]:
                self.first = f"{name} (missing)"
            elif dict(self.errors) != before[1]:
                self.first = f"{name} (refused: {next(k for k in self.errors if k not in before[1])[:160]})"
            elif self.differs.keys() != before[2].keys():
                self.first = f"{name} (differs: {self.differs[name][0][:160]})"
        return out


def judge(got, want, want64):
    """(matches, detail) for one output tensor."""
    if got is None or want is None:
        return False, "no tensor output to compare"
    try:
        torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
        return True, "assert_close"
    except AssertionError:
        pass
    err32 = model_routing.rel_error(got, want)
    if want64 is None:  # torch has no float64 run of this model: float32 only
        return err32 <= model_routing.REL_TOL, f"rel err {err32:.2e} vs torch f32 (no float64 run)"
    err64 = model_routing.rel_error(got.double(), want64)
    torch_err = model_routing.rel_error(want.double(), want64)
    ok = err64 <= model_routing.TORCH_FACTOR * torch_err and err64 != float("inf")
    return ok, f"rel err {err32:.2e} vs torch f32, {err64:.2e} vs f64 (torch f32: {torch_err:.2e})"


def _brief(e):
    """An error in one line: its type and message; of Dynamo's long messages, the cause (after
    its explanation's "got ")."""
    text = " ".join(str(e).split())
    cause = text.find("): got ")
    return f"{type(e).__name__}: {text[cause + 7:] if cause >= 0 else text}"[:300]


def compiled(entry, model, kw, want, want64, mode="compiled"):
    """torch.compile(backend="tessera"), of the model on CPU tensors (`compiled`) or moved to
    the tpu device (`compiled_tpu`): status, graph count and fallbacks into `entry`."""
    import torch._dynamo
    from tessera import compile as tc

    tc.register()
    torch._dynamo.reset()
    before = tc.report()
    try:
        if mode == "compiled_tpu":
            import tessera.torch  # noqa: F401 - the tpu device

            model = copy.deepcopy(model).to("tpu")
            kw = {k: v.to("tpu") for k, v in kw.items()}
        got = forward(torch.compile(model, backend="tessera"), kw)
        got = got.cpu() if got is not None else None
    except Exception as e:  # noqa: BLE001 - reported per model
        entry["status"][mode] = "fail"
        entry[f"{mode}_error"] = _brief(e)
        return
    after = tc.report()
    entry[f"{mode}_graphs"] = after.get("graphs", 0) - before.get("graphs", 0)
    fallbacks = {k: v - before["fallbacks"].get(k, 0) for k, v in after["fallbacks"].items()
                 if v > before["fallbacks"].get(k, 0)}
    if fallbacks:
        entry[f"{mode}_fallbacks"] = fallbacks
    ok, detail = judge(got, want, want64)
    entry["status"][mode] = "match" if ok else "run"
    entry[f"{mode}_detail"] = detail


def on_device(entry, mode, model, kw, want, want64):
    """The model moved to the `tpu` device (python/tessera/device) and run in eager mode `mode`
    (strict, debug, defer): status, fallbacks (ops run on torch CPU) into `entry`."""
    import tessera.torch as tt

    tt.reset_metrics()
    try:
        tt.set_mode(mode)
        m = copy.deepcopy(model).to("tpu")
        got = forward(m, {k: v.to("tpu") for k, v in kw.items()})
        got = got.cpu() if got is not None else None
    except Exception as e:  # noqa: BLE001 - reported per model
        entry["status"][mode] = "fail"
        entry.setdefault("error", f"{mode}: {_brief(e)}")
        return
    finally:
        tt.set_mode(None)
    fallbacks = tt.metrics()["fallbacks"]
    if fallbacks:
        entry[f"{mode}_fallbacks"] = fallbacks
    ok, detail = judge(got, want, want64)
    entry["status"][mode] = "match" if ok else "run"
    entry[f"{mode}_detail"] = detail


def evaluate(name, modes):
    """The report entry of one model."""
    entry = {"name": name, "status": {}}
    source, make = catalog()[name]
    entry["source"] = source
    try:
        torch.manual_seed(0)
        model, kw = make()
        model = model_routing.no_dropout(model).eval()
        entry["params"] = sum(p.numel() for p in model.parameters())
        want = forward(model, kw)
        entry["torch"] = "ok"
    except Exception as e:  # noqa: BLE001 - torch itself cannot run it: reported, not counted
        entry["torch"] = _brief(e)
        entry["status"] = {m: "skip" for m in modes}
        return entry
    try:
        m64 = copy.deepcopy(model).double()
        kw64 = {k: v.double() if v.is_floating_point() else v for k, v in kw.items()}
        want64 = forward(m64, kw64)
    except Exception:  # noqa: BLE001 - some kernels have no float64 path (grouped_mm)
        want64 = None
    import tessera.ops as tops

    table = {t["name"] for t in tops.table()}
    for mode in modes:
        if mode in ("compiled", "compiled_tpu"):
            compiled(entry, model, kw, want, want64, mode)
            continue
        if mode in ("strict", "debug", "defer"):
            on_device(entry, mode, model, kw, want, want64)
            continue
        route = OrderedRoute(table, compare=True)
        try:
            got = forward(model, kw, route)
        except Exception as e:  # noqa: BLE001 - any failure is this model's, reported
            entry["status"][mode] = "fail"
            entry["first_failing_op"] = route.first
            entry["error"] = _brief(e)
            continue
        entry["ops"] = sum(route.ran.values())
        if route.missing or route.errors:
            entry["status"][mode] = "fail"
            entry["first_failing_op"] = route.first
            entry["missing"] = dict(route.missing)
            continue
        ok, detail = judge(got, want, want64)
        entry["status"][mode] = "match" if ok else "run"
        entry["detail"] = detail
        if not ok:
            entry["first_failing_op"] = route.first
    return entry


def main():
    p = argparse.ArgumentParser()
    p.add_argument("names", nargs="*", help="models to run; none: read one name per line from stdin")
    p.add_argument("--modes", nargs="*", default=["route"])
    a = p.parse_args()
    warnings.filterwarnings("ignore")
    # One JSON line per model on stdout, flushed: the zoo runner reads them as they come, and
    # restarts this process when a model crashes it or runs past its time.
    for name in a.names or (line.strip() for line in sys.stdin):
        if name:
            print("ZOO " + json.dumps(evaluate(name, a.modes)), flush=True)


if __name__ == "__main__":
    main()
