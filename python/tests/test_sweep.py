"""The OpInfo-style sweep over the whole op table (python/tools/sweep.py), compared with torch
CPU; the results are written for `tessera ops coverage` (TESSERA_SWEEP_JSON, else
ops/coverage/sweep.json). The gate: every overload of the table passes (samples reached it,
none failed), so `tessera ops coverage` shows ops_passing == ops_total and Core 193/193. Per-op failures are in the results file and
in this test's message (`check_ops.py OP...` reruns some; `--exact` with the same
TESSERA_SWEEP_SEED reproduces an op's samples of this run). The samples are seeded per OpInfo,
dtype and source from TESSERA_SWEEP_SEED (default 0) and dealt to TESSERA_SWEEP_WORKERS
processes (default 2, whatever the machine's cores), so the gate is deterministic per seed."""

import os

import sweep
from tessera import ops

TABLE = {t["name"]: t for t in ops.table()}


def test_sweep_passes_every_overload_of_the_table():
    out = os.environ.get("TESSERA_SWEEP_JSON", os.path.join(os.path.dirname(__file__), "..", "..", "ops", "coverage", "sweep.json"))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    r = sweep.run(None, out)
    passing = lambda n: n in r["ops"] and r["ops"][n]["failed"] == 0 and r["ops"][n]["passed"] > 0
    core = [n for n, t in TABLE.items() if t["core"]]
    n_core, n_all = sum(map(passing, core)), sum(map(passing, TABLE))
    known = {}
    for kinds in r["known_differences"].values():
        for kind, n in kinds.items():
            known[kind] = known.get(kind, 0) + n
    print(f"\nsweep (seed {r['seed']}): {r['wall_s']} s; core {n_core}/{len(core)} passing; "
          f"all {n_all}/{len(TABLE)} passing; known differences {known}")
    assert os.path.exists(out)

    def why(n):
        o = r["ops"].get(n)
        return f"{n}: no sample reached it" if o is None else f"{n}: {o['passed']} passed, {o['failed']} failed: {o['errors'][:1]}"

    failing_core = [why(n) for n in core if not passing(n)]
    assert not failing_core, "Core ATen overloads not passing:\n" + "\n".join(failing_core)
    failing = [why(n) for n in TABLE if not passing(n)]
    assert not failing, f"{len(failing)} overloads not passing:\n" + "\n".join(failing)
