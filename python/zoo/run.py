"""Runs the zoo: each architecture in its own process (a crash or a hang costs one model, not
the run), forward on torch CPU vs Tessera, per mode; writes zoo_report.json and zoo_report.md.

    cd python && python -m zoo.run [--models SUBSTR ...] [--modes route ...] [--out DIR] [--resume]

Modes:
- `route`: every ATen call of the forward runs by Tessera's lowerings (`tessera.ops.call`, the
  host path), views stay torch's (python/tools/model_routing.py).
- `strict`, `debug`, `defer`: the model and inputs moved to the `tpu` device
  (python/tessera/device) in that eager mode; ops Tessera cannot lower fall back to torch CPU
  (listed per model as `<mode>_fallbacks`; the model still runs).
- `compiled`: `torch.compile(model, backend="tessera")`: each graph one traced program
  (python/tessera/compile.py); ops the table lacks fall back to torch CPU (reported).
- `compiled_tpu`: the same, of the model and inputs moved to the `tpu` device (parameters and
  results stay on the device).
Per model and mode the status is `match` (ran, output within tolerance of torch CPU), `run`
(ran, output differs) or `fail` (an op missing from Tessera's table, refused by it, or an
error), with the first failing op. Models torch itself cannot build or run are `skip`.
"""

import argparse
import json
import os
import select
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ["route", "strict", "debug", "defer", "compiled", "compiled_tpu"]


def max_map_count():
    """The kernel's limit on a process's memory mappings (`vm.max_map_count`)."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 65530


def map_count(pid):
    """How many memory mappings process `pid` holds (None where /proc does not say)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


class Worker:
    """A `python -m zoo.model` child fed model names one at a time (torch and transformers are
    imported once, not per model); restarted after a crash or a timeout, and before it runs out
    of memory mappings: every compiled program keeps ~3 mappings while it lives, and a child
    that ran a few hundred models reached `vm.max_map_count` (65,530) when the eager runtime's
    caches were unbounded (bounded since stop 18; torch.compile's programs and kernel ops' still
    are), after which XLA's CPU compiler fails ("Failed to materialize symbols") or the process
    dies of SIGSEGV (the full run of stops 15-17: nemotron_h, nllb-moe, nomic_bert failed so,
    then nystromformer crashed; each matches in a fresh process)."""

    # The share of `vm.max_map_count` past which the child is restarted after a model (the
    # largest models add a few thousand mappings).
    MAP_SHARE = 0.5

    def __init__(self, modes):
        self.modes, self.proc = modes, None
        self.max_maps = int(max_map_count() * self.MAP_SHARE)
        self.restarts = 0

    def _start(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "zoo.model", "--modes", *self.modes],
                                     cwd=os.path.dirname(HERE), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(self, name, timeout_s):
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        t = time.time()
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        while True:
            left = timeout_s - (time.time() - t)
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                self.stop()
                return self._failed(name, f"timed out after {timeout_s} s", t)
            line = self.proc.stdout.readline()
            if not line:
                code = self.proc.wait()
                self.proc = None
                return self._failed(name, f"the model's process died (exit {code})", t)
            if line.startswith("ZOO "):
                entry = json.loads(line[4:])
                entry["seconds"] = round(time.time() - t, 1)
                maps = map_count(self.proc.pid)
                if maps is not None and maps > self.max_maps:
                    self.stop()  # the next model starts a fresh child
                    self.restarts += 1
                return entry

    def _failed(self, name, why, t):
        return {"name": name, "torch": "ok", "status": {m: "fail" for m in self.modes}, "error": why,
                "seconds": round(time.time() - t, 1)}


def load_entries(path, modes):
    """The finished models of an earlier run of the same modes, by name (the last line wins)."""
    done = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                e = json.loads(line)
                if set(e["status"]) == set(modes):
                    done[e["name"]] = e
    return done


def why(e, modes):
    """What went wrong with a model: its first failing op, an error, torch's own failure, or
    each mode's error."""
    return (e.get("first_failing_op") or e.get("error")
            or (e["torch"] if e.get("torch") not in (None, "ok") else "")
            or "; ".join(f"{m}: {e[m + '_error']}" for m in modes if m + "_error" in e))


def summary(entries, modes):
    """Per mode: how many ran / matched out of the architectures torch runs."""
    built = [e for e in entries if e.get("torch") == "ok"]
    out = {"architectures": len(entries), "torch_runs": len(built)}
    for m in modes:
        ran = sum(e["status"].get(m) in ("run", "match") for e in built)
        match = sum(e["status"].get(m) == "match" for e in built)
        out[m] = {"run": ran, "match": match,
                  "run_pct": round(100 * ran / max(len(built), 1), 1),
                  "match_pct": round(100 * match / max(len(built), 1), 1)}
    return out


def markdown(entries, modes, s):
    lines = [f"# Tessera model zoo: {s['torch_runs']} architectures torch runs (of {s['architectures']})", ""]
    for m in modes:
        lines.append(f"- `{m}`: run {s[m]['run']} ({s[m]['run_pct']}%), match {s[m]['match']} ({s[m]['match_pct']}%)")
    lines += ["", "| model | params | " + " | ".join(modes) + " | first failing op / error | s |",
              "|---|---|" + "---|" * len(modes) + "---|---|"]
    for e in entries:
        lines.append(f"| {e['name']} | {e.get('params', '')} | " + " | ".join(e["status"].get(m, "") for m in modes)
                     + f" | {str(why(e, modes))[:120].replace('|', '/')} | {e.get('seconds', '')} |")
    return "\n".join(lines) + "\n"


def main():
    from zoo.catalog import catalog

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="*", help="substrings of model names (default: all)")
    p.add_argument("--modes", nargs="*", default=MODES, choices=MODES)
    p.add_argument("--timeout", type=int, default=900, help="seconds per model")
    p.add_argument("--out", default=os.path.join(HERE, "report"))
    p.add_argument("--resume", action="store_true",
                   help="keep the models already in OUT/zoo_entries.jsonl (same modes) and run the rest")
    a = p.parse_args()
    names = [n for n in catalog() if not a.models or any(s in n for s in a.models)]
    os.makedirs(a.out, exist_ok=True)
    done = load_entries(os.path.join(a.out, "zoo_entries.jsonl"), a.modes) if a.resume else {}
    entries = [done[n] for n in names if n in done]
    # One line per finished model, flushed at once: a run of hours survives a stop and resumes.
    log = open(os.path.join(a.out, "zoo_entries.jsonl"), "a" if a.resume else "w")
    worker = Worker(a.modes)
    try:
        for i, name in enumerate(names):
            if name in done:
                continue
            e = worker.run(name, a.timeout)
            entries.append(e)
            log.write(json.dumps(e) + "\n")
            log.flush()
            print(f"[{i + 1}/{len(names)}] {name}: {e['status']} {e['seconds']} s {why(e, a.modes)}"[:240], flush=True)
    finally:
        worker.stop()
        log.close()
    order = {n: i for i, n in enumerate(names)}
    entries.sort(key=lambda e: order[e["name"]])
    s = summary(entries, a.modes)
    with open(os.path.join(a.out, "zoo_report.json"), "w") as f:
        json.dump({"summary": s, "models": entries}, f, indent=1)
    with open(os.path.join(a.out, "zoo_report.md"), "w") as f:
        f.write(markdown(entries, a.modes, s))
    print(json.dumps(s))


if __name__ == "__main__":
    main()
