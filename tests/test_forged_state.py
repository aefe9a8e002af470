"""A saved state whose index fields point outside its arrays, or whose trees or lists never end,
is refused on load (``ValueError``), never handed to the kernels, which do not check their
indices: one out-of-range child, slot or class-block pointer in a snapshot with a valid plain
SHA-256 (which anyone can compute) made the loading process read and write outside its arrays
and die, and an in-range pointer back up the tree made it loop for ever
(``learners.tree.bounds.check_bounds``).

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
from learners.tree.bounds import BLOCKS, COUNTS, POINTS_AT

spec = json.loads(sys.argv[1])
model = build_model(spec)
rng = random.Random(3)
for i in range(1500):  # (a categorical split on c, numeric ones on a below it)
    x = {"a": rng.random(), "b": rng.gauss(0, 1), "c": "uvwxyz"[i % 6], "d": "pq"[i % 2]}
    model.learn_one(x, "l" if x["c"] in "uv" else "mn"[x["a"] > 0.5])
good = model.to_state()
load_state(good).predict_proba_one({"a": 0.3, "b": 0.1, "c": "u", "d": "p"})  # (as saved: loads)
fields = sorted(POINTS_AT) + [f for at, n, _ in BLOCKS for f in (at, n)] + sorted(COUNTS)
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
        if field == "free":  # (a saved state has no free slot: the entry is read once it has)
            forged["arrays"]["tree.n_free"] = np.ones_like(good["arrays"]["tree.n_free"])
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
    if SPECS[name]["learner"] == "hoeffding_tree":  # (cycles too: the trees have splits)
        assert sum(len(line.split()) == 5 and line.split()[0] in ("child", "sibling")
                   for line in lines) >= 4  # fmt: skip


# the scripts' way to try a forged state: prints "<label> refused <message as JSON>", or "<label>
# loaded" once the model has predicted and learned ``examples`` (a crash or hang fails _run)
TRY_LOAD = r"""
def try_load(good, arrays, label, examples):
    print(label, end=" ", flush=True)
    try:
        loaded = load_state({"header": good["header"], "arrays": arrays})
    except ValueError as exc:
        print("refused", json.dumps(str(exc)), flush=True)
        return
    for x, y in examples:
        loaded.predict_proba_one(x)
        loaded.learn_one(x, y)
    print("loaded", flush=True)
"""

# In range and without cycles, but not a state the kernels make: one forgery per problem
# ``check_structure`` names (``STRUCTURE_PROBLEMS``). Before it, such states loaded, and some
# made a later call loop for ever (a row on two lists is freed twice: a free list onto itself).
STRUCTURE_SCRIPT = r"""
import json, random, sys
import numpy as np
from ensembles import build_model, load_state
from learners.tree.checks import STRUCTURE_PROBLEMS
from learners.tree.layout import CATEGORICAL_SPLIT, LEAF, NUM_STATS, NUMERIC_SPLIT, SETTLED, W

model = build_model({"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 2,
                     "seed": 1, "params": {"grace_period": 30}})
rng = random.Random(3)
for i in range(1500):
    x = {"a": rng.random(), "b": rng.gauss(0, 1), "c": "uvwxyz"[i % 6], "d": rng.choice("pq")}
    model.learn_one(x, "l" if x["c"] in "uv" else "mn"[x["a"] > 0.5])
good = model.to_state()
A = {k[5:]: v.astype(np.int64) for k, v in good["arrays"].items() if k.startswith("tree.")
     and v.dtype.kind == "i"}
assert NUM_STATS == 7 and W == 0
m = 0
nn = int(A["n_nodes"][m])
kinds = A["kind"][m, :nn]
leaves = [n for n in range(nn) if kinds[n] == LEAF]
numeric = [n for n in range(nn) if kinds[n] == NUMERIC_SPLIT]
categorical = [n for n in range(nn) if kinds[n] == CATEGORICAL_SPLIT]
assert len(leaves) >= 2 and numeric and categorical, kinds


def children(n):
    c, out = A["child"][m, n], []
    while c >= 0:
        out.append(int(c))
        c = A["sibling"][m, c]
    return out


def walk(nxt, i):
    out = []
    while i >= 0:
        out.append(int(i))
        i = nxt[m, i]
    return out


for leaf in leaves:  # one with two feature rows, two observers, a row of two values
    s = int(A["slot"][m, leaf])
    fs = walk(A["f_next"], A["f_head"][m, s])
    os_ = walk(A["o_next"], A["o_head"][m, s])
    two = [f for f in fs if len(walk(A["v_next"], A["v_head"][m, f])) >= 2]
    if len(fs) >= 2 and len(os_) >= 2 and two:
        break
f = two[0]
vs = walk(A["v_next"], A["v_head"][m, f])
d_two = next(n for n in range(nn) if A["d_len"][m, n] >= 2)
g_two = next(o for o in range(int(A["n_o"][m])) if A["g_len"][m, o] >= 2)
CASES = {
    "n_nodes": [("n_nodes", (m,), 0)],
    "kind": [("kind", (m, numeric[0]), 7)],
    "slot": [("slot", (m, next(n for n in leaves if n != leaf)), s)],
    "free": [("n_free", (m,), 1), ("free", (m, 0), s)],
    "child": [("child", (m, categorical[0]), -1)],
    "branch": [("branch", (m, children(numeric[0])[1]), 0)],
    "f_next": [("n_f", (m,), int(A["n_f"][m]) - 1)],
    "f_tail": [("f_tail", (m, s), fs[0])],
    "f_attr": [("f_attr", (m, fs[1]), int(A["f_attr"][m, fs[0]]))],
    "v_next": [("n_v", (m,), int(A["n_v"][m]) - 1)],
    "v_tail": [("v_tail", (m, f), vs[0])],
    "v_code": [("v_code", (m, vs[1]), int(A["v_code"][m, vs[0]]))],
    "nvals": [("nvals", (m, f), int(A["nvals"][m, f]) + 1)],
    "o_next": [("n_o", (m,), int(A["n_o"][m]) - 1)],
    "o_tail": [("o_tail", (m, s), os_[0])],
    "o_attr": [("o_attr", (m, os_[1]), int(A["o_attr"][m, os_[0]]))],
    "wc": [("wc", (m, A["d_at"][m, d_two] + 1), int(A["wc"][m, A["d_at"][m, d_two]]))],
    "w_used": [("w_used", (m,), 0)],
    "gc": [("gc", (m, A["g_at"][m, g_two] + 1), int(A["gc"][m, A["g_at"][m, g_two]]))],
    "g_used": [("g_used", (m,), 0)],
    "wv": [("wv", (m, A["d_at"][m, d_two]), 0.0)],
    "gv": [("gv", (m, A["g_at"][m, g_two] * 7), -1.0)],  # (its weight: NUM_STATS = 7, W = 0)
    "o_fresh": [("o_fresh", (m, os_[0]), SETTLED + 1 + int(A["g_len"][m, os_[0]]))],
}
assert sorted(CASES) == sorted(name for name, _ in STRUCTURE_PROBLEMS)
x = {"a": 0.7, "b": 0.1, "c": "w", "d": "p"}
load_state(good).predict_proba_one(x)  # (as saved: loads)
after = []
for i in range(200):
    x = {"a": rng.random(), "b": rng.gauss(0, 1), "c": "uvwxyz"[i % 6], "d": rng.choice("pq")}
    after.append((x, "l" if x["c"] in "uv" else "mn"[x["a"] > 0.5]))
for case, edits in CASES.items():
    arrays = dict(good["arrays"])
    for name, at, value in edits:
        a = arrays["tree." + name].copy()
        a = a.astype(np.int64) if a.dtype.kind == "i" else a
        a[at] = value
        arrays["tree." + name] = a
    try_load(good, arrays, case, after)
"""


def _run(script: str, *args: str, timeout: int = 300) -> list[str]:
    try:
        run = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT,
                             capture_output=True, text=True, timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired as exc:  # a forged walk that never ended
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(f"hung at: {out.splitlines()[-1:]}")
    lines = run.stdout.splitlines()
    assert run.returncode == 0, f"crashed at: {lines[-1:]} ({run.returncode})\n{run.stderr[-2000:]}"
    return lines


def _refusals(script: str, cases: int) -> list[tuple[str, str]]:
    """(label, message) of each of the ``cases`` forgeries ``script`` tries (``TRY_LOAD``), every
    one of which must be refused."""
    lines = _run(TRY_LOAD + script)
    assert len(lines) == cases, lines
    out = []
    for line in lines:
        label, verdict, *message = line.split(" ", 2)
        assert verdict == "refused", line
        out.append((label, json.loads(message[0])))
    return out


def test_states_that_do_not_hold_together_are_refused_naming_the_array() -> None:
    for case, message in _refusals(STRUCTURE_SCRIPT, 23):
        assert f"state array tree.{case}:" in message, (case, message)


# Random forgeries of 1-3 integer fields of a saved state (in range, or one off, or a value the
# array holds elsewhere), each loaded in a forked child that then predicts and learns 300
# examples, under a watchdog: refused or ran, never crashed or hung. Before ``check_structure``,
# trials 10, 23, 24, 51 and 95 of these hung (12 of the first 600).
FUZZ_SCRIPT = r"""
import json, os, random, resource, signal, sys, time
import numpy as np
from ensembles import build_model, load_state

SPECS = [
    {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 1,
     "params": {"grace_period": 30}},
    {"ensemble": "boosting", "learner": "naive_bayes", "n_models": 3, "seed": 2},
    {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 2, "seed": 3,
     "params": {"grace_period": 30, "drift": "adwin"}},
    {"ensemble": "single", "learner": "hoeffding_tree", "seed": 4,
     "params": {"grace_period": 20, "leaf_prediction": "nba"}},
]


def rows(rng, n):
    for i in range(n):
        x = {"a": rng.random(), "b": rng.gauss(0, 1), "c": "uvwxyz"[rng.randrange(6)],
             "d": "pq"[i % 2], "e": str(rng.randrange(12))}
        if rng.random() < 0.1:
            del x["b"]
        if rng.random() < 0.1:
            del x["c"]
        yield x, "lmn"[(x["a"] > 0.5) + (x.get("c", "a") in "uv")]


goods = []
if sys.argv[2] == "extras":  # the arrays beside the trees: detectors, window, boosting, MLP
    SPECS = [
        {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 2, "seed": 3,
         "params": {"grace_period": 30, "drift": "adwin", "window": 60}},
        {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 5,
         "params": {"grace_period": 30, "drift": "ddm", "vote": "weighted", "window": 50}},
        {"ensemble": "bagging", "learner": "naive_bayes", "n_models": 3, "seed": 6,
         "params": {"drift": "adwin", "poisson_lambda": 6.0, "output_codes": True}},
        {"ensemble": "boosting", "learner": "hoeffding_tree", "n_models": 3, "seed": 7,
         "params": {"grace_period": 30, "drift": "adwin", "window": 30}},
        {"ensemble": "bagging", "learner": "mlp", "n_models": 2, "seed": 8},
        {"ensemble": "bagging", "learner": "exact_tree", "n_models": 2, "seed": 10},
        {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 2, "seed": 11,
         "params": {"grace_period": 30, "vote": "stacking"}},
        {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 2, "seed": 12,
         "params": {"grace_period": 30, "imbalance": "uob"}},
    ]  # fmt: skip
if sys.argv[2] in ("current", "extras"):
    for spec in SPECS:
        model = build_model(spec)
        for x, y in rows(random.Random(3), 1500):
            model.learn_one(x, y)
        goods.append(model.to_state())
else:  # the version-1 and version-2 states of tests/data, converted on load
    sys.path.insert(0, "tests")
    from streams import mixed_stream

    for path in ("tests/data/state_v1.npz", "tests/data/state_v2.npz"):
        raw = np.load(path)
        for name in sorted({k.split(".")[0] for k in raw.files}):
            goods.append({"header": json.loads(str(raw[name + ".header"])),
                          "arrays": {k[len(name) + 1 :]: raw[k] for k in raw.files
                                     if k.startswith(name + ".") and k.count(".") >= 2}})  # fmt: skip
    stream = list(mixed_stream(500, 3, new_class_at=250))[300:]

    def rows(rng, n):
        yield from stream[:n]
for good in goods:  # (as saved: loads; and the children start with the kernels loaded)
    m = load_state(good)
    for x, y in rows(random.Random(1), 5):
        m.predict_proba_one(x)
        m.learn_one(x, y)
for t in range(int(sys.argv[1])):
    rng = random.Random(t)
    good = goods[t % len(goods)]
    forged = dict(good["arrays"])
    names = sorted(k for k, a in forged.items() if a.size and (
        a.dtype.kind in "if" if sys.argv[2] == "extras" and not k.startswith("tree.")
        else a.dtype.kind == "i" and k.startswith("tree.")))  # fmt: skip
    for _ in range(rng.randint(1, 3)):
        f = rng.choice(names)
        a = forged[f].astype(np.int64 if forged[f].dtype.kind == "i" else np.float64)
        flat = a.reshape(-1)
        i = rng.randrange(a.size)
        r = rng.random()
        if a.dtype.kind == "f":  # (extras only)
            flat[i] = rng.choice([np.nan, np.inf, -1.0, 0.0, 1e300, flat[rng.randrange(a.size)]])
        elif r < 0.5:
            flat[i] = rng.randint(-1, max(int(a.max()), 1))
        elif r < 0.7:
            flat[i] = flat[rng.randrange(a.size)]
        elif r < 0.9 or sys.argv[2] != "extras":
            flat[i] += rng.choice((-1, 1))
        else:
            flat[i] = rng.choice((2**40, -(2**40)))
        forged[f] = a
    pid = os.fork()
    if pid == 0:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        try:
            m = load_state({"header": good["header"], "arrays": forged})
        except ValueError:
            os._exit(3)
        for x, y in rows(random.Random(t + 1000), 300):
            m.predict_proba_one(x)
            m.learn_one(x, y)
        m.to_state()
        json.dumps(m.describe() if hasattr(m, "describe") else {}, allow_nan=False)
        os._exit(0)
    deadline = time.monotonic() + 10
    while not (done := os.waitpid(pid, os.WNOHANG))[0] and time.monotonic() < deadline:
        time.sleep(0.005)
    if not done[0]:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print(t, "hung", flush=True)
    elif os.WIFSIGNALED(done[1]):
        print(t, "crashed", os.WTERMSIG(done[1]), flush=True)
    else:
        print(t, {0: "ran", 3: "refused"}.get(os.WEXITSTATUS(done[1]), "failed"), flush=True)
"""


@pytest.mark.parametrize(("version", "trials"), [("current", 300), ("older", 200),
                                                  ("extras", 300)])  # fmt: skip
def test_random_forgeries_of_a_state_never_crash_or_hang(version, trials) -> None:
    """Versions 3/4 (``check_structure``), and 1/2, which ``load_state`` converts: before they
    were checked, 2 of 100 of the latter hung. ``extras``: the arrays beside the trees (ADWIN
    buckets, the window, DDM, boosting's sums, an MLP's statistics), ints and floats; before
    they were checked, 14 of 500 crashed (SIGSEGV) and 1 raised ZeroDivisionError; a forged
    NaN made ``describe()`` unserialisable."""
    lines = _run(FUZZ_SCRIPT, str(trials), version, timeout=600)
    verdicts = [line.split()[1] for line in lines]
    assert len(verdicts) == trials
    assert verdicts.count("hung") == verdicts.count("crashed") == verdicts.count("failed") == 0, [
        line for line in lines if line.split()[1] not in ("ran", "refused")
    ]
    assert verdicts.count("ran") >= 30 and verdicts.count("refused") >= 30  # (both kinds met)


# One forgery per check of the arrays beside the trees and of the other members' states, each
# refused naming its array: before the checks, the first two made a later learn read and write
# outside the arrays (SIGSEGV), and forged ExactTree codes corrupted the heap.
EXTRAS_SCRIPT = r"""
import json, random
import numpy as np
from ensembles import build_model, load_state

CASES = [  # (spec params, array, index, value)
    ({"drift": "adwin"}, "adwin.cnt", (0, 0), 2**40),
    ({"drift": "adwin", "window": 40}, "window.counters", (0,), 10**6),
    ({"drift": "adwin"}, "adwin.iv", (0, 0), 7),
    ({"drift": "adwin"}, "adwin.fs", (0, 0), np.nan),
    ({"drift": "ddm", "vote": "weighted", "window": 30}, "window.win_n", (1,), -31),
    ({"drift": "ddm", "vote": "weighted", "window": 30}, "window.win_ok", (0,), 31),
    ({"drift": "ddm"}, "ddm.state", (0, 1), np.nan),
    ({"drift": "ddm"}, "ddm.state", (0, 0), 0.5),
    ({"vote": "stacking"}, "stack.weights", (0, 0), np.nan),
    ({"vote": "stacking"}, "stack.weights", (0, 1), -np.inf),  # (only a bias may be -inf)
    ({"vote": "stacking"}, "stack.weights", (1, 3), 1e300),
    ({"vote": "stacking"}, "stack.learned", (0,), 10**9),
    ({"vote": "stacking"}, "stack.learned", (0,), -1),
    ({"imbalance": "uob"}, "imbalance.class_sizes", (0,), np.nan),
    ({"imbalance": "oob"}, "imbalance.class_sizes", (1,), 1.0),  # (the sizes sum to > 1)
    ({"imbalance": "oob"}, "imbalance.class_sizes", (2,), -1e-9),
    ("boosting", "boost.lam_sc", (0,), -1.0),
    ("boosting", "boost.lam_sw", (1,), -1e-300),
    ("mlp", "m1.stat_w", (0,), -1.0),
    ("mlp", "m0.cls_w", (0,), -2.0),
    ("exact", "m0.y", (0,), 3),
    ("exact", "m1.X", (0, 2), 6.0),
    ("exact", "m0.w", (1,), 0.0),
]
rng = random.Random(3)
data = [({"a": rng.random(), "b": rng.gauss(0, 1), "c": "uvwxyz"[i % 6]},) for i in range(400)]
data = [(x, "l" if x["c"] in "uv" else "mn"[x["a"] > 0.5]) for (x,) in data]
for params, name, at, value in CASES:
    if params == "boosting":
        spec = {"ensemble": "boosting", "learner": "naive_bayes", "n_models": 3, "seed": 2}
    elif params in ("mlp", "exact"):
        spec = {"ensemble": "bagging", "learner": "mlp" if params == "mlp" else "exact_tree",
                "n_models": 2, "seed": 8}
    else:
        spec = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 2, "seed": 3,
                "params": {"grace_period": 30, **params}}
    model = build_model(spec)
    for x, y in data:
        model.learn_one(x, y)
    good = model.to_state()
    load_state(good)  # (as saved: loads)
    arrays = dict(good["arrays"])
    a = np.array(arrays[name])
    a[at] = value
    arrays[name] = a
    try_load(good, arrays, name, data)
"""


def test_forged_detectors_windows_and_sums_are_refused_naming_the_array() -> None:
    for name, message in _refusals(EXTRAS_SCRIPT, 23):
        member_array = name.startswith(
            ("m0.", "m1.")
        )  # ("MLP state stat_w: ...", "ExactTree state y: ...")
        assert (name[3:] if member_array else name) + ":" in message, (name, message)


@pytest.mark.parametrize("seed", range(6))
def test_output_code_members_with_one_class_seen_reload(seed) -> None:
    """Leveraging bagging's output codes: a member learns bit 1 of a class before the model has
    seen a second class; its own state (a snapshot, ``copy.deepcopy``) must load again, while
    the same code in a model without output codes is still refused."""
    import copy

    import numpy as np

    from ensembles import OnlineBagging, load_state
    from learners import HoeffdingTree

    m = OnlineBagging(HoeffdingTree(), n_models=3, seed=seed, output_codes=True)
    m.learn_one({"a": 1.0}, "p")
    m.learn_one({"a": 2.0}, "p")
    again = copy.deepcopy(m)
    assert again.predict_proba_one({"a": 1.5}) == m.predict_proba_one({"a": 1.5})
    plain = OnlineBagging(HoeffdingTree(), n_models=3, seed=seed)
    plain.learn_one({"a": 1.0}, "p")
    forged = plain.to_state()
    forged["arrays"]["tree.wc"] = np.where(
        forged["arrays"]["tree.wc"] == 0, 1, forged["arrays"]["tree.wc"]
    )
    assert (forged["arrays"]["tree.wc"] == 1).any()
    with pytest.raises(ValueError, match="a class code outside -1..0"):
        load_state(forged)
