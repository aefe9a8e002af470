"""A saved state whose index fields point outside its arrays, or whose trees or lists never end,
is refused on load (``ValueError``), never handed to the kernels, which do not check their
indices: one out-of-range child, slot or class-block pointer in a snapshot with a valid plain
SHA-256 (which anyone can compute) made the loading process read and write outside its arrays
and die, and an in-range pointer back up the tree made it loop for ever
(``learners._bank._check_bounds``).

Each model kind runs in a subprocess, so that a load that still crashed fails the test instead
of killing the run; the subprocess reports, per forged field, whether the load refused it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, random, sys
import numpy as np
from ensembles import build_model, load_state
from learners._bank import _BLOCKS, _COUNTS, _POINTS_AT

spec = json.loads(sys.argv[1])
model = build_model(spec)
rng = random.Random(3)
for i in range(1500):
    x = {"a": rng.random(), "b": rng.gauss(0, 1), "c": "uvwxyz"[i % 6], "d": "pq"[i % 2]}
    model.learn_one(x, "lmn"[(x["a"] > 0.5) + (x["c"] in "uv")])
good = model.to_state()
load_state(good).predict_proba_one({"a": 0.3, "b": 0.1, "c": "u", "d": "p"})  # (as saved: loads)
fields = sorted(_POINTS_AT) + [f for at, n, _ in _BLOCKS for f in (at, n)] + sorted(_COUNTS)
fields += ["wc", "gc", "attr", "f_attr", "o_attr", "o_fresh"]
for field in fields:
    key = "tree." + field
    arr = good["arrays"][key]
    for value in (2**40, -(2**40), -7):
        if arr.size == 0:
            continue
        forged = {"header": good["header"], "arrays": dict(good["arrays"])}
        a = arr.astype(np.int64)  # (a saved int32 array may be int64 too)
        at = 0
        if field == "attr":  # a split's feature (a leaf's is never read)
            splits = np.flatnonzero(good["arrays"]["tree.kind"].reshape(-1) != 0)
            if splits.size == 0:
                continue
            at = int(splits[0])
        a.reshape(-1)[at] = value
        if field in ("attr", "o_fresh") and value < 0:
            continue  # (a negative mark or a leaf's feature is no index)
        forged["arrays"][key] = a
        print(field, value, end=" ", flush=True)
        try:
            m = load_state(forged)
        except ValueError as exc:
            print("refused", flush=True)
            continue
        m.predict_proba_one({"a": 0.3, "b": 0.1, "c": "u", "d": "p"})
        m.learn_one({"a": 0.3, "b": 0.1, "c": "u", "d": "p"}, "l")
        print("loaded", flush=True)
# in range, but walks that would never end: a child or sibling back to the root or to itself,
# and a list row pointing at itself or at the row before it
arrays = good["arrays"]
cases = []
kind, n_nodes = arrays["tree.kind"], arrays["tree.n_nodes"]
for m in range(kind.shape[0]):
    splits = [i for i in range(int(n_nodes[m])) if kind[m, i] != 0]
    if splits:
        i = splits[-1]
        cases += [("child", m, i, 0), ("child", m, i, i)]
        last = int(n_nodes[m]) - 1
        cases += [("sibling", m, last, 0), ("sibling", m, last, last)]
for name, count in (("f_next", "n_f"), ("v_next", "n_v"), ("o_next", "n_o")):
    n, nxt = arrays["tree." + count], arrays["tree." + name]
    for m in range(n.shape[0]):
        for i in range(1, int(n[m])):
            if nxt[m, i - 1] == i:  # i - 1 -> i -> i - 1
                cases += [(name, m, i, i), (name, m, i, i - 1)]
                break
for name, m, i, value in cases:
    forged = {"header": good["header"], "arrays": dict(arrays)}
    a = arrays["tree." + name].astype(np.int64)
    a[m, i] = value
    forged["arrays"]["tree." + name] = a
    print(name, m, i, value, end=" ", flush=True)
    try:
        load_state(forged).predict_proba_one({"a": 0.3, "b": 0.1, "c": "u", "d": "p"})
    except ValueError:
        print("refused", flush=True)
        continue
    print("loaded", flush=True)
"""

SPECS = {
    "bagging_ht": {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 1,
                   "params": {"grace_period": 30}},
    "boosting_nb": {"ensemble": "boosting", "learner": "naive_bayes", "n_models": 3, "seed": 2},
    "adwin_ht": {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 2, "seed": 3,
                 "params": {"grace_period": 30, "drift": "adwin"}},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SPECS))
def test_out_of_range_indices_in_a_saved_state_are_refused(name) -> None:
    try:
        run = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(SPECS[name])], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
    except subprocess.TimeoutExpired as exc:  # a forged walk that never ended
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(f"hung at: {out.splitlines()[-1:]}")
    lines = run.stdout.splitlines()
    assert run.returncode == 0, f"crashed at: {lines[-1:]} ({run.returncode})\n{run.stderr[-2000:]}"
    loaded = [line for line in lines if not line.endswith("refused")]
    # a huge value is outside every array; -7 and -2**40 below every index's -1
    assert not loaded, loaded
    assert len(lines) > 60  # (every field was forged)
    assert sum(line.split()[0] in ("child", "sibling") for line in lines) >= 4  # (cycles too)
