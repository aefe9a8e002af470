"""Smoke test of the thesis reproduction: ``benchmarks/thesis.py --quick`` end to end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("scipy")  # the t-tests; scipy is a benchmark dependency

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("CHORUS_UCI_DIR", ROOT.parent / "shared" / "datasets" / "raw"))

pytestmark = pytest.mark.skipif(
    not (DATA / "promoters" / "promoters.data").exists(),
    reason=f"UCI data not found in {DATA} (set CHORUS_UCI_DIR; CHORUS_DATA_DIR is the service store)",
)


def _run(out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable, str(ROOT / "benchmarks" / "thesis.py"), "--data-dir", str(DATA),
        "--quick", "--datasets", "promoters", "--out", str(out),
        "--cache-dir", str(out.parent / "cache"), *extra,
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("thesis") / "thesis.md"
    _run(out, "--quiet")
    return out


def test_report_structure(quick_run):
    text = quick_run.read_text()
    assert text.startswith("# Oza (2001) reproduced with Chorus")
    assert "Produced by: `python benchmarks/thesis.py --data-dir" in text
    assert "--quick" in text.splitlines()[2] and "numpy" in text
    for heading in (
        "## Table 3.3", "## Table 3.4", "## Table 3.5", "## Boosting", "## Running times",
        "## Table 3.12", "## Fig. 4.5", "## Why the thesis' stump numbers differ",
    ):  # fmt: skip
        assert heading in text, heading
    # the thesis' published numbers sit beside ours
    assert "| promoters | 5 |" in text and "0.7837" in text and "0.8774" in text
    png = quick_run.with_name("thesis_car_curves.png")
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_accuracies_are_sane(quick_run):
    res = json.loads(quick_run.with_suffix(".json").read_text())
    assert res["command"].startswith("python benchmarks/thesis.py")
    accs = res["accuracy"]["promoters"]
    assert set(accs) == {"tree", "nb", "stump"}
    for learner, r in accs.items():
        assert set(r["acc"]) == {
            "single",
            "bagging",
            "online_bagging",
            "boosting",
            "online_boosting",
        }
        for algo, folds in r["acc"].items():
            assert len(folds) == 5
            assert all(0.0 <= a <= 1.0 for a in folds)
            assert sum(folds) / 5 > 0.55, (learner, algo)  # two balanced classes: beat chance
    assert sum(accs["nb"]["acc"]["single"]) / 5 > 0.8  # thesis: 0.8774
    for key, targets in res["calendar"].items():
        for target, values in targets.items():
            assert all(0.0 < v < 1.0 for v in values), (key, target)
    curves = res["curves"]["curves"]
    assert len(curves) == 3 and all(0.5 < v <= 1.0 for c in curves.values() for v in c)
    md = quick_run.read_text()
    numbers = [float(x) for x in re.findall(r"\| \**_?(0\.\d{4})", md)]
    assert numbers and all(0.0 <= v <= 1.0 for v in numbers)


def test_a_rerun_resumes_from_the_cache(quick_run):
    """Every finished task is cached: a second run (as after an interruption) recomputes
    nothing and reports the same numbers."""
    again = quick_run.with_name("again.md")
    proc = _run(again)
    done = [line for line in proc.stdout.splitlines() if " done in " in line]
    cached = [line for line in proc.stdout.splitlines() if ": cached (" in line]
    assert not done and len(cached) >= 15, proc.stdout[-2000:]
    first, second = (json.loads(p.with_suffix(".json").read_text()) for p in (quick_run, again))
    assert first["accuracy"] == second["accuracy"] and first["calendar"] == second["calendar"]
    assert first["curves"] == second["curves"]


def test_networks_on_synthetic_data_merged_into_an_earlier_run(quick_run):
    """``--learners mlp`` on a small Synthetic1, merged into the quick run: Table 3.6 (batch and
    online network columns), the network running times, and the earlier cells kept."""
    merged = quick_run.with_name("merged.md")
    _run(merged, "--quiet", "--learners", "mlp", "--datasets", "synthetic1", "--synthetic-n",
         "2000", "--merge", str(quick_run.with_suffix(".json")))  # fmt: skip
    text = merged.read_text()
    for heading in ("## Table 3.6", "## Table 3.11", "## Table 3.3", "Merged with (`--merge`)"):
        assert heading in text, heading
    res = json.loads(merged.with_suffix(".json").read_text())
    assert res["command"] == json.loads(quick_run.with_suffix(".json").read_text())["command"]
    assert set(res["accuracy"]) == {"promoters", "synthetic1"}
    mlp = res["accuracy"]["synthetic1"]["mlp"]["acc"]
    assert set(mlp) == {"single", "bagging", "online_bagging", "boosting", "online_boosting",
                        "online_single"}  # fmt: skip
    assert sum(mlp["single"]) / 5 > 0.55  # Synthetic1: naive Bayes is at chance, networks not
    assert "| synthetic1 | 5 |" in text and "0.7217" in text  # the thesis' batch network


def _thesis_module():
    sys.path.insert(0, str(ROOT))
    from benchmarks import thesis

    return thesis


def test_a_merged_run_whose_cells_later_runs_all_replaced_is_dropped():
    thesis = _thesis_module()
    args = thesis.parse_args(["--data-dir", str(DATA), "--learners", "mlp"])

    def run(command: str, cells: str) -> dict:
        return {"command": command, "protocol": "", "finished": "", "wall_seconds": 0,
                "cells": cells}  # fmt: skip

    base = {"accuracy": {}, "dataset_notes": [],
            "merged": [run("a", "mlp/car, mlp/german"), run("b", "mlp/car"), run("c", "nb/car")]}  # fmt: skip
    new = {"accuracy": {"german": {"mlp": {"acc": {"single": [0.7]}, "secs": {}}}},
           "dataset_notes": [], "finished": "now", "wall_seconds": 1}  # fmt: skip
    out = thesis.merge_results(base, new, args, "d")
    # a's two cells are replaced by b (car) and d (german) together; b and c keep theirs
    assert [r["command"] for r in out["merged"]] == ["b", "c", "d"]


def test_max_examples_keeps_a_fixed_split_in_proportion():
    thesis = _thesis_module()
    ds = thesis.Dataset("d", [{"a": float(i)} for i in range(90)], ["yes", "no"] * 45,
                        {"a": "numeric"}, list(range(60)), list(range(60, 90)))  # fmt: skip
    sub = thesis.subsample(ds, 30)
    assert (len(sub), len(sub.train_idx), len(sub.test_idx)) == (30, 20, 10)
    assert all(x["a"] < 60 for x in sub.X[:20]) and all(x["a"] >= 60 for x in sub.X[20:])
    assert sub.X == thesis.subsample(ds, 30).X  # seeded
    assert "20 train / 10 test" in sub.notes[-1]
