"""The zoo's CI-sized subset (`make zoo` runs all 326 architectures): the runner's worker
process, report and per-mode verdicts on three models, each of which matches torch CPU in every
eager mode on the tpu device and compiled."""

import json
import os

import pytest

SUBSET = ["classic/cnn", "classic/lstm", "transformers/bert"]
MODES = ["strict", "debug", "defer", "compiled", "compiled_tpu"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from zoo import run

    out = tmp_path_factory.mktemp("zoo")
    worker = run.Worker(MODES)
    try:
        entries = [worker.run(name, 600) for name in SUBSET]
    finally:
        worker.stop()
    s = run.summary(entries, MODES)
    (out / "zoo_report.md").write_text(run.markdown(entries, MODES, s))
    return entries, s, out


def test_every_subset_model_matches_torch_in_every_mode(report):
    entries, _, _ = report
    for e in entries:
        assert e["torch"] == "ok", e
        for m in MODES:
            assert e["status"][m] == "match", (e["name"], m, e)


def test_summary_and_markdown(report):
    entries, s, out = report
    assert s["torch_runs"] == len(SUBSET)
    for m in MODES:
        assert s[m]["match"] == len(SUBSET) and s[m]["match_pct"] == 100.0
    md = (out / "zoo_report.md").read_text()
    assert all(name in md for name in SUBSET)
    json.dumps(entries)  # the report is JSON


def test_a_crashing_model_costs_its_entry_not_the_run(monkeypatch):
    from zoo import run

    worker = run.Worker(["compiled"])
    try:
        e = worker.run("no/such-model", 120)  # the child raises KeyError and exits
        assert e["status"]["compiled"] == "fail" and "died" in e["error"]
        ok = worker.run("classic/cnn", 600)  # a fresh child takes the next model
        assert ok["status"]["compiled"] == "match", ok
    finally:
        worker.stop()
    assert os.path.basename(run.HERE) == "zoo"


def test_a_worker_is_restarted_before_it_runs_out_of_memory_mappings():
    # Compiled programs keep their mappings for the life of the process: past its share of
    # vm.max_map_count the child is replaced after the model it ran.
    from zoo import run

    worker = run.Worker(["strict"])
    try:
        first = worker.run("classic/rnn", 600)
        pid = worker.proc.pid
        assert worker.restarts == 0 and run.map_count(pid) > 0
        worker.max_maps = 1
        second = worker.run("classic/rnn", 600)
        assert worker.proc is None and worker.restarts == 1
        third = worker.run("classic/rnn", 600)
        assert worker.proc is None and worker.restarts == 2
        assert all(e["status"]["strict"] == "match" for e in (first, second, third))
    finally:
        worker.stop()
