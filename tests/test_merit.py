"""Split merits and split times (issue 41): a Hoeffding tree's split node keeps the merit the
Hoeffding test chose it with (``learners.tree.learn.attempt_split``) and the model's example
count when it split; feature importance sums them per feature over the members, optionally
weighted by recency (``half_life``). States saved before load with both unknown.

The merit is checked against a readable recomputation from the leaf's statistics at the moment
it splits: the kernels run as their interpreted twins (the same source in Python, on the same
arrays) with ``attempt_split`` wrapped, so the recomputation reads the leaf as the kernel does.
"""

from __future__ import annotations

import math
import random
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streams import same

import ensembles
import learners
from ensembles import load_state
from ensembles.explain import _add_split
from learners import jit
from learners.compiled import Split
from learners.tree.layout import (
    CRIT_GINI,
    LEAF,
    M2,
    MAX,
    MEAN,
    MIN,
    NO_SPLIT_SEEN,
    NUM_STATS,
    NUMERIC_SPLIT,
    UNKNOWN_MERIT,
    W,
)

DATA = Path(__file__).parent / "data"


def _ht(**kw) -> learners.HoeffdingTree:
    return learners.HoeffdingTree(grace_period=kw.pop("grace_period", 8), delta=0.3, tau=0.3, **kw)


def _stream(n: int, seed: int = 0) -> list[tuple[dict, str]]:
    """Numbers, categories and missing values; the label follows ``a`` and ``c``, 10% noise."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = {"a": rng.uniform(0, 10), "b": rng.gauss(0, 1), "c": rng.choice("uvw"),
             "d": rng.choice("pq")}  # fmt: skip
        if rng.random() < 0.1:
            del x["b"]
        y = "hi" if (x["a"] > 5) != (x["c"] == "u") else "lo"
        if rng.random() < 0.1:
            y = "mid"
        out.append((x, y))
    return out


# ------------------------------------------------------------------ a readable recomputation
def _impurity(ws: list[float], criterion: int) -> float:
    """Entropy in bits, or Gini impurity, of class weights ``ws``."""
    tot = sum(ws)
    if tot <= 0.0:
        return 0.0
    if criterion == CRIT_GINI:
        return 1.0 - sum((w / tot) ** 2 for w in ws)
    return -sum(w / tot * math.log2(w / tot) for w in ws if w > 0.0)


def _block(T, m, at, ln, n_classes, width=1) -> list[tuple[int, int]]:
    """(class, position in the pool) of a row's class entries below ``n_classes``."""
    cls = T.gc if width != 1 else T.wc
    return [(int(cls[m, at + i]), at + i) for i in range(ln) if cls[m, at + i] < n_classes]


def _chain(nxt, m, *heads) -> list[int]:
    out = []
    for i in heads:
        while i >= 0:
            out.append(int(i))
            i = nxt[m, i]
    return out


def _below(g: np.ndarray, t: float) -> float:
    """Weight of a class' Gaussian estimate ``g`` (W, MEAN, M2, MIN, MAX, ...) at or below t."""
    w = g[W]
    if w <= 0.0 or t < g[MIN]:
        return 0.0
    if t >= g[MAX]:
        return w
    var = g[M2] / (w - 1.0) if w > 1.0 else 0.0
    if var <= 0.0:
        return w if t >= g[MEAN] else 0.0
    return w * 0.5 * math.erfc(-(t - g[MEAN]) / math.sqrt(var) / math.sqrt(2.0))


def leaf_merits(T, P, m, node, n_classes) -> dict[tuple[str, int], float]:
    """The merit of the best split on each feature the leaf saw, from its statistics: the
    leaf's impurity minus its branches' weighted mean impurity (numeric features: the best of
    ``n_split_points`` thresholds evenly spaced between the smallest and largest value seen,
    each class' weight below a threshold from its Gaussian estimate; categorical ones: one
    branch per value). Keys ``("num", j)`` / ``("cat", a)``; a feature with no valid split is
    absent."""
    crit, frac = int(P.criterion), float(P.min_branch_frac)
    parent = [float(T.wv[m, p]) for _, p in _block(T, m, T.d_at[m, node], T.d_len[m, node],
                                                   n_classes)]  # fmt: skip
    h_parent = _impurity(parent, crit)
    s = int(T.slot[m, node])
    out = {}
    for o in _chain(T.o_next, m, T.o_head[m, s], T.o_pend[m, s]):
        gs = [T.gv[m, p * NUM_STATS : (p + 1) * NUM_STATS]
              for _, p in _block(T, m, T.g_at[m, o], T.g_len[m, o], n_classes, NUM_STATS)]  # fmt: skip
        seen = [g for g in gs if g[W] > 0.0]
        lo, hi = min(g[MIN] for g in seen), max(g[MAX] for g in seen)
        best = -math.inf
        n = int(P.n_split_points)
        for i in range(n):
            t = lo + (hi - lo) / (n + 1.0) * (i + 1.0)
            if not lo < t < hi:
                continue
            left = [_below(g, t) for g in gs]
            right = [g[W] - b for g, b in zip(gs, left, strict=True)]
            wl, wr = sum(left), sum(right)
            if frac > 0.0 and (wl < frac * (wl + wr) or wr < frac * (wl + wr)):
                continue
            post = (wl * _impurity(left, crit) + wr * _impurity(right, crit)) / (wl + wr)
            best = max(best, h_parent - post)
        if best > -math.inf:
            out["num", int(T.o_attr[m, o])] = best
    for f in _chain(T.f_next, m, T.f_head[m, s], T.f_pend[m, s]):
        tot = sum(float(T.wv[m, p]) for _, p in _block(T, m, T.fw_at[m, f], T.fw_len[m, f],
                                                        n_classes))  # fmt: skip
        values = [[float(T.wv[m, p]) for _, p in _block(T, m, T.vw_at[m, e], T.vw_len[m, e],
                                                         n_classes)]
                  for e in _chain(T.v_next, m, T.v_head[m, f], T.v_pend[m, f])]  # fmt: skip
        big = sum(1 for v in values if sum(v) > 0.0 and sum(v) >= frac * tot)
        if tot > 0.0 and big >= 2:
            post = sum(sum(v) * _impurity(v, crit) for v in values if sum(v) > 0.0) / tot
            out["cat", int(T.f_attr[m, f])] = h_parent - post
    return out


@contextmanager
def checked_splits(log: list):
    """Run the kernels interpreted, every split checked against ``leaf_merits`` (appended to
    ``log``: (merit recorded, merit recomputed))."""
    mod = jit.twin("learners.tree.learn")
    inner = mod.__dict__["attempt_split"]

    def attempt_split(T, P, m, node, n_classes, code_attr, seq):
        merits = leaf_merits(T, P, m, node, n_classes)
        inner(T, P, m, node, n_classes, code_attr, seq)
        if T.kind[m, node] == LEAF:
            return
        best = max(merits.values())
        chosen = ("num" if T.kind[m, node] == NUMERIC_SPLIT else "cat", int(T.attr[m, node]))
        assert T.merit[m, node] == pytest.approx(best, rel=1e-9, abs=1e-12)
        assert merits[chosen] == pytest.approx(best, rel=1e-9, abs=1e-12)  # (its feature's)
        assert T.merit[m, node] > 0.0
        assert T.split_seen[m, node] == seq + 1
        log.append((float(T.merit[m, node]), best))

    mod.__dict__["attempt_split"] = attempt_split
    jit.set_interpreted(True)
    try:
        with np.errstate(all="ignore"):
            yield
    finally:
        mod.__dict__["attempt_split"] = inner
        jit.set_interpreted(False)


MODELS = {
    "single": lambda crit: ensembles.Single(_ht(split_criterion=crit)),
    "bagging": lambda crit: ensembles.OnlineBagging(_ht(split_criterion=crit), n_models=3, seed=5),
    "boosting": lambda crit: ensembles.OnlineBoosting(
        _ht(split_criterion=crit), n_models=3, seed=6
    ),
    "arf": lambda crit: ensembles.AdaptiveRandomForest(
        _ht(split_criterion=crit), n_models=3, seed=7
    ),
}


@pytest.mark.parametrize("criterion", ["info_gain", "gini"])
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_split_records_the_merit_its_test_computed(kind, criterion):
    """On a fixed stream, every split of every member: the recorded merit is the best merit
    recomputed from the leaf (and that of the feature it splits on), > 0, and its time the
    model's example count. Fails if merits were not recorded (0) or were another split's."""
    log: list = []
    model = MODELS[kind](criterion)
    data = _stream(400, seed=1)
    with checked_splits(log):
        for x, y in data[:250]:
            model.predict_learn_one(x, y)
        model.learn_many([x for x, _ in data[250:]], [y for _, y in data[250:]])
        imp = model.feature_importance()
    assert len(log) >= 3, f"{len(log)} splits: checks too little"
    assert imp["merit"] > 0.0 and imp["merit_unknown"] == 0
    assert imp["criterion"] == criterion


_rows = st.lists(
    st.tuples(st.floats(-5, 5), st.one_of(st.none(), st.floats(-1e3, 1e3)),
              st.sampled_from("uvwxy"), st.sampled_from(["p", "q", "r"]), st.floats(0.1, 3.0)),
    min_size=40, max_size=160,
)  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=_rows, criterion=st.sampled_from(["info_gain", "gini"]),
       n_models=st.integers(1, 3), points=st.integers(1, 12))  # fmt: skip
def test_merits_equal_the_recomputed_gain_on_random_streams(rows, criterion, n_models, points):
    """Hypothesis: random streams (numbers, missing values, categories, weights, three
    classes), bagging of 1-3 trees, either criterion, 1-12 candidate thresholds."""
    tree = _ht(split_criterion=criterion, grace_period=5, n_split_points=points)
    model = ensembles.OnlineBagging(tree, n_models=n_models, seed=len(rows))
    log: list = []
    with checked_splits(log):
        for a, b, c, d, w in rows:
            x = {"a": a, "c": c, "d": d} if b is None else {"a": a, "b": b, "c": c, "d": d}
            y = "k" if (a > 0) == (c in "uv") else ("l" if d != "r" else "m")
            model.learn_one(x, y, w=w)
        model.feature_importance()  # (the last learn, deferred, is learned here)
    for recorded, recomputed in log:
        assert recorded == pytest.approx(recomputed, rel=1e-9, abs=1e-12)


# ------------------------------------------------------------------ sums, times, half-lives
def _direct(model) -> dict[str, list[tuple[float, int]]]:
    """Per feature, the (merit, time) of every split of the members' trees, from the arrays."""
    bank = model._settled().bank
    T, s = bank.T, bank.schema
    out: dict[str, list] = {}
    for t in model._member_trees():
        for n in range(int(T.n_nodes[t])):
            kind = int(T.kind[t, n])
            if kind == LEAF:
                continue
            name = (s.num_names if kind == NUMERIC_SPLIT else s.cat_names)[int(T.attr[t, n])]
            out.setdefault(name, []).append((float(T.merit[t, n]), int(T.split_seen[t, n])))
    return out


@pytest.mark.parametrize("kind", ["bagging", "boosting", "arf"])
def test_importance_sums_merits_per_feature_over_members(kind):
    model = MODELS[kind]("info_gain")
    data = _stream(1500, seed=2)
    model.learn_many([x for x, _ in data], [y for _, y in data])
    imp = model.feature_importance(half_life=300)
    direct = _direct(model)
    assert set(direct) == set(imp["features"]) and imp["examples"] == model.n_seen == 1500
    for name, splits in direct.items():
        d = imp["features"][name]
        assert d["splits"] == len(splits)
        assert d["merit"] == pytest.approx(sum(m for m, _ in splits))
        assert d["recent_merit"] == pytest.approx(
            sum(m * 0.5 ** ((1500 - t) / 300) for m, t in splits)
        )
        assert d["recent_splits"] == pytest.approx(
            sum(0.5 ** ((1500 - t) / 300) for _, t in splits)
        )
        assert all(m > 0.0 and 0 < t <= 1500 for m, t in splits)
    total = sum(m for splits in direct.values() for m, _ in splits)
    assert imp["merit"] == pytest.approx(total)
    assert sum(d["merit_share"] for d in imp["features"].values()) == pytest.approx(1.0)
    assert sum(d["recent_share"] for d in imp["features"].values()) == pytest.approx(1.0)
    plain = model.feature_importance()
    assert plain["half_life"] is None
    assert all(d["recent_merit"] is None and d["recent_share"] is None
               for d in plain["features"].values())  # fmt: skip


def test_half_life_weights_a_split_by_its_age():
    """Hand-computed: a split made 200 examples ago weighs 0.5 under a half-life of 200, 0.25
    under one of 100; one of unknown time weighs nothing; a time past now reads as now."""
    d = {"splits": 0, "weight": 0.0, "depth_weighted": 0.0, "merit": 0.0, "merit_unknown": 0,
         "recent_splits": 0.0, "recent_merit": 0.0}  # fmt: skip
    _add_split(d, Split("a", "numeric", 1, 40.0, 0.3, 100), 0.5, 300, 200.0)
    assert d["recent_splits"] == 0.5 and d["recent_merit"] == 0.15
    assert d["depth_weighted"] == 0.5 and d["merit"] == 0.3 and d["weight"] == 40.0
    _add_split(d, Split("a", "numeric", 0, 10.0, 0.2, 100), 0.5, 300, 100.0)
    assert d["recent_splits"] == 0.75 and d["recent_merit"] == pytest.approx(0.2)
    _add_split(d, Split("a", "numeric", 0, 10.0, None, None), 0.5, 300, 100.0)
    assert d["splits"] == 3 and d["merit_unknown"] == 1 and d["recent_splits"] == 0.75
    _add_split(d, Split("a", "numeric", 0, 10.0, 1.0, 400), 0.5, 300, 100.0)
    assert d["recent_splits"] == 1.75 and d["recent_merit"] == pytest.approx(1.2)


def test_a_split_time_is_the_example_that_made_it():
    """One example at a time: the nodes a learn splits record the model's count after it; in
    batches and one by one the same times (the example numbers, not the calls)."""
    data = _stream(900, seed=3)
    model = ensembles.OnlineBagging(_ht(), n_models=3, seed=1)

    def splits(t: int) -> list[int]:
        T = model._settled().bank.T
        return [n for n in range(int(T.n_nodes[t])) if T.kind[t, n] != LEAF]

    made = 0
    for x, y in data:
        before = {t: (int(model._settled().bank.T.n_nodes[t]), len(splits(t))) for t in range(3)}
        model.learn_one(x, y)
        T = model._settled().bank.T
        for t in range(3):
            for n in range(before[t][0], int(T.n_nodes[t])):  # (children, new branches)
                assert T.kind[t, n] == LEAF and T.split_seen[t, n] == NO_SPLIT_SEEN
            now = [n for n in splits(t) if T.split_seen[t, n] == model.n_seen]
            assert len(now) == len(splits(t)) - before[t][1] <= 1  # (one leaf splits at most)
            assert all(0 < T.split_seen[t, n] <= model.n_seen for n in splits(t))
            made += len(now)
    assert made >= 3
    batched = ensembles.OnlineBagging(_ht(), n_models=3, seed=1)
    for i in range(0, 900, 64):
        batched.predict_learn_many([x for x, _ in data[i : i + 64]],
                                   [y for _, y in data[i : i + 64]])  # fmt: skip
    a, b = model.to_state()["arrays"], batched.to_state()["arrays"]
    for name in ("tree.split_seen", "tree.merit"):
        assert same(a[name], b[name])
    assert (a["tree.merit"] > 0).sum() >= 3


def test_primed_splits_take_their_rows_example_numbers():
    data = _stream(600, seed=4)
    model = ensembles.OnlineBagging(_ht(), n_models=2, seed=3)
    model.prime([x for x, _ in data[:300]], [y for _, y in data[:300]])
    seen = [t for splits in _direct(model).values() for _, t in splits]
    assert seen and all(1 <= t <= 300 for t in seen) and model.n_seen == 300
    model.learn_many([x for x, _ in data[300:]], [y for _, y in data[300:]])
    assert max(t for splits in _direct(model).values() for _, t in splits) <= 600


def test_twins_record_the_compiled_merits():
    """The interpreted twins and the compiled kernels give the same merits and times (every
    kind: ``test_interpreted`` compares whole states, these arrays included)."""
    data = _stream(700, seed=5)
    states = []
    for mode in (False, True):
        model = ensembles.OnlineBagging(_ht(), n_models=3, seed=2)
        try:
            jit.set_interpreted(mode)
            model.learn_many([x for x, _ in data], [y for _, y in data])
        finally:
            jit.set_interpreted(False)
        states.append(model.to_state()["arrays"])
    assert (states[0]["tree.merit"] > 0).sum() >= 3
    for name in ("tree.merit", "tree.split_seen"):
        assert same(states[0][name], states[1][name])


# ------------------------------------------------------------------ older states, forged ones
def _fixtures(path: Path) -> list[dict]:
    import json

    raw = np.load(path)
    return [{"header": json.loads(str(raw[name + ".header"])),
             "arrays": {k[len(name) + 1 :]: raw[k] for k in raw.files
                        if k.startswith(name + ".") and k.count(".") >= 2}}
            for name in sorted({k.split(".")[0] for k in raw.files})]  # fmt: skip


@pytest.mark.parametrize("path", ["state_v1.npz", "state_v2.npz"])
def test_states_saved_before_load_with_merits_unknown(path):
    """The version-1/2 fixtures (written before merits were kept): every split of unknown
    merit and time, counted in ``merit_unknown``; saved again, the unknown marks stay (and
    load); learning on records merits for the new splits."""
    some = 0
    for state in _fixtures(DATA / path):
        model = load_state(state)
        if not hasattr(model, "feature_importance"):
            continue
        imp = model.feature_importance(half_life=100)
        assert imp["merit_unknown"] == imp["splits"] and imp["merit"] == 0.0
        assert all(d["merit_share"] == 0.0 and d["recent_splits"] == 0.0
                   for d in imp["features"].values())  # fmt: skip
        some += imp["splits"]
        again = load_state(model.to_state())
        merits = [{f: (d["splits"], d["merit"], d["merit_unknown"]) for f, d in m.feature_importance()[
            "features"].items()} for m in (model, again)]  # fmt: skip
        assert merits[0] == merits[1]
        arrays = model.to_state()["arrays"]
        split = arrays["tree.kind"] != LEAF  # (rows past a member's nodes: 0, leaves)
        assert (arrays["tree.merit"][split] == UNKNOWN_MERIT).all()
        assert (arrays["tree.split_seen"] == NO_SPLIT_SEEN).all()
    assert some > 0, "no split in the fixtures: checks nothing"


def test_a_state_without_the_arrays_loads_with_merits_unknown_and_learns_on():
    """A version-4 state of before issue 41's merits (no ``merit`` / ``split_seen``): loads,
    predicts as the model, reports its splits as of unknown merit; new splits have merits."""
    data = _stream(1200, seed=6)
    model = ensembles.OnlineBagging(_ht(), n_models=3, seed=4)
    model.learn_many([x for x, _ in data[:600]], [y for _, y in data[:600]])
    state = model.to_state()
    old = {"header": state["header"],
           "arrays": {k: v for k, v in state["arrays"].items()
                      if k not in ("tree.merit", "tree.split_seen")}}  # fmt: skip
    loaded = load_state(old)
    assert [loaded.predict_proba_one(x) for x, _ in data[600:700]] == [
        model.predict_proba_one(x) for x, _ in data[600:700]
    ]
    imp = loaded.feature_importance()
    assert imp["splits"] == model.feature_importance()["splits"] == imp["merit_unknown"] > 0
    splits_before = imp["splits"]
    loaded.learn_many([x for x, _ in data[600:]], [y for _, y in data[600:]])
    model.learn_many([x for x, _ in data[600:]], [y for _, y in data[600:]])
    after = loaded.feature_importance()
    assert after["merit_unknown"] == splits_before < after["splits"]
    assert after["merit"] > 0.0
    assert after["splits"] == model.feature_importance()["splits"]  # (the same trees otherwise)


def _node(arrays, leaf: bool) -> tuple[int, int]:
    """A live leaf, or a split, of the saved arrays: (member, node)."""
    kind = arrays["tree.kind"]
    live = np.arange(kind.shape[1]) < arrays["tree.n_nodes"][:, None]
    m, n = np.argwhere(live & ((kind == LEAF) == leaf))[0]
    return int(m), int(n)


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [("merit", math.nan, "split"), ("merit", math.inf, "split"), ("merit", -0.5, "split"),
     ("merit", 2.0, "leaf"), ("split_seen", -5, "split"), ("split_seen", 3, "leaf")],
)  # fmt: skip
def test_forged_merits_and_times_are_refused(field, value, where):
    data = _stream(600, seed=7)
    model = ensembles.OnlineBagging(_ht(), n_models=2, seed=4)
    model.learn_many([x for x, _ in data], [y for _, y in data])
    state = model.to_state()
    arrays = dict(state["arrays"])
    a = arrays["tree." + field].astype(np.float64 if field == "merit" else np.int64)
    m, n = _node(arrays, leaf=where == "leaf")
    a[m, n] = value
    arrays["tree." + field] = a
    with pytest.raises(ValueError, match=f"tree.{field}"):
        load_state({"header": state["header"], "arrays": arrays})
    arrays["tree." + field] = state["arrays"]["tree." + field]
    load_state({"header": state["header"], "arrays": arrays})  # (the state as saved loads)


def test_bad_half_life_and_decay_are_refused():
    model = MODELS["single"]("info_gain")
    for x, y in _stream(100):
        model.learn_one(x, y)
    for bad in (0, -1.0, math.nan, math.inf, "10", True):
        with pytest.raises(ValueError, match="^half_life"):
            model.feature_importance(half_life=bad)
    with pytest.raises(ValueError, match="^decay"):
        model.feature_importance(decay=1.5)
