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
