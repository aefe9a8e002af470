"""The random forests (``ensembles.forest``) and the trees' random feature subspaces
(``learners.tree.subspace``): the subspaces are what the docs say and a pure function of their
keys, the compiled forest is its readable reference, ARF recovers from a drift that OzaBag does
not, a background tree takes over at a drift, state and specs round-trip."""

from __future__ import annotations

import random

import numpy as np
import pytest
from streams import assert_same_state, same

from ensembles import (
    AdaptiveRandomForest,
    OnlineBagging,
    StreamingRandomPatches,
    build_model,
    load_state,
)
from ensembles import _forest as fk
from ensembles.forest import ForestReference
from learners import HoeffdingTree
from learners.tree import subspace


def dense(n: int, seed: int, n_features: int = 8, flip_at: int | None = None) -> list:
    """Numeric rows; the label depends on features 1 and 5 (flipped from ``flip_at`` on)."""
    r = random.Random(seed)
    out = []
    for i in range(n):
        x = {f"f{j}": r.random() for j in range(n_features)}
        y = (x["f1"] + x["f5"] > 1.0) != (flip_at is not None and i >= flip_at)
        out.append((x, y))
    return out


def observed(tree_bank, m: int = 0) -> dict[int, set[int]]:
    """Per leaf slot of member m: the numeric features it keeps statistics of."""
    T = tree_bank.T
    out: dict[int, set[int]] = {}
    for node in range(int(T.n_nodes[m])):
        if T.kind[m, node] != 0:
            continue
        s = int(T.slot[m, node])
        o = int(T.o_head[m, s])
        feats = set()
        while o >= 0:
            feats.add(int(T.o_attr[m, o]))
            o = int(T.o_next[m, o])
        o = int(T.o_pend[m, s])
        while o >= 0:
            feats.add(int(T.o_attr[m, o]))
            o = int(T.o_next[m, o])
        out[node] = feats
    return out


# ------------------------------------------------------------------ the trees' subspaces
@pytest.mark.parametrize(("max_features", "k"), [("sqrt", 4), ("log2", 4), (3, 3), (0.5, 5)])
def test_each_leaf_learns_k_features(max_features, k):
    """F = 10 features: sqrt -> round(3.16) + 1 = 4, log2 -> round(3.32) + 1 = 4, a count, a
    fraction (rounded half up); every leaf keeps statistics of exactly k of them."""
    tree = HoeffdingTree(grace_period=30, max_features=max_features, subspace_seed=5)
    data = dense(3000, 1, n_features=10)
    tree.learn_many([x for x, _ in data], [y for _, y in data])
    leaves = observed(tree._bank)
    assert len(leaves) > 3  # it split
    assert all(len(feats) == k for feats in leaves.values()), leaves
    assert len({frozenset(f) for f in leaves.values()}) > 1  # a draw per leaf


def test_tree_scope_one_subspace_for_every_leaf():
    tree = HoeffdingTree(grace_period=30, max_features=4, subspace="tree", subspace_seed=5)
    data = dense(3000, 2, n_features=10)
    tree.learn_many([x for x, _ in data], [y for _, y in data])
    leaves = observed(tree._bank)
    assert len({frozenset(f) for f in leaves.values() if f}) == 1
    assert all(len(f) == 4 for f in leaves.values() if f)
    splits = {int(a) for a, kd in zip(tree._bank.T.attr[0], tree._bank.T.kind[0]) if kd == 1}
    assert splits <= next(iter(leaves.values()))  # it splits on its subspace only


def test_a_tree_subspace_has_two_features_at_least():
    """As MOA's SRP: 30 % of 3 features rounds to 1, and a tree's subspace takes 2 (a leaf's
    draw may take 1)."""
    r = random.Random(6)
    X = [{f"f{j}": r.random() for j in range(3)} for _ in range(200)]
    y = [x["f0"] > 0.5 for x in X]
    for scope, k in (("tree", 2), ("leaf", 1)):
        tree = HoeffdingTree(grace_period=1000, max_features=0.3, subspace=scope)
        tree.learn_many(X, y)
        assert [len(f) for f in observed(tree._bank).values()] == [k]


def test_subspaces_are_a_pure_function_of_seed_and_key():
    data = dense(2000, 3)
    X, y = [x for x, _ in data], [t for _, t in data]

    def grown(seed, key, batch):
        tree = HoeffdingTree(grace_period=30, max_features=2, subspace_seed=seed)
        tree.reset_tree(key)
        for i in range(0, len(X), batch):
            tree.learn_many(X[i : i + batch], y[i : i + batch])
        return tree

    a = grown(7, 11, len(X))
    assert_same_state(a, grown(7, 11, 1))  # batches of any size
    assert_same_state(a, grown(7, 11, 333))
    X, y = X[:20], y[:20]  # (no split yet: the root is the one leaf)
    roots = {frozenset(observed(grown(s, key, 20)._bank)[0]) for s in range(3) for key in range(3)}
    assert len(roots) > 1 and all(len(r) == 2 for r in roots)  # other seeds or keys, other draws
    # the function itself: k lowest scores among the first row's features
    base = [subspace.feature_score.py_func(7, 11, 2 * j) for j in range(8)]
    assert all(0 <= s < 2**26 for s in base)
    assert base == [subspace.feature_score(7, 11, 2 * j) for j in range(8)]


def test_a_new_feature_mid_stream_gives_the_same_tree_in_any_batching():
    """A feature that first appears at example 700 joins some leaves' subspaces; the tree is
    the same whether the stream comes one example at a time or in batches."""
    r = random.Random(4)
    data = []
    for i in range(1500):
        x = {f"f{j}": r.random() for j in range(6)}
        if i >= 700:
            x["late"] = r.random()
        data.append((x, x["f2"] + x.get("late", 0.5) > 1.0))
    states = []
    for batch in (1, 64, 1500):
        tree = HoeffdingTree(grace_period=30, max_features="sqrt", subspace_seed=2)
        for i in range(0, len(data), batch):
            part = data[i : i + batch]
            tree.learn_many([x for x, _ in part], [t for _, t in part])
        states.append(tree.to_state())
    assert same(states[0], states[1])
    assert same(states[0], states[2])


def _root_subspaces(model, n_rows: int = 30, n_features: int = 5) -> list[frozenset[int]]:
    """The features each member's first tree learns at its root after ``n_rows`` rows."""
    X, y = _few_features(n_rows, n_features)
    model.learn_many(X, y)
    return [frozenset(observed(model._bank, m)[0]) for m in range(model.n_models)]


def _few_features(n: int, n_features: int) -> tuple[list, list]:
    r = random.Random(9)
    X = [{f"f{j}": r.random() for j in range(n_features)} for _ in range(n)]
    return X, [x["f0"] > 0.5 for x in X]


@pytest.mark.parametrize(("n_features", "size", "n_models"), [(5, 3, 10), (9, 0.6, 10),
                                                              (6, 2, 15), (20, 0.6, 30)])  # fmt: skip
def test_srp_deals_distinct_subspaces_while_there_are_enough(n_features, size, n_models):
    """C(F, k) >= n_models (C(5, 3) = 10, C(9, 5) = 126, C(6, 2) = 15): every member's first
    tree has a subspace of its own, for every seed (drawn independently, 10 members would all
    differ on C(5, 3) = 10 subsets with probability 10!/10**10 < 0.001)."""
    for seed in range(3):
        model = StreamingRandomPatches(n_models=n_models, seed=seed, subspace=size,
                                       training="subspaces")  # fmt: skip
        roots = _root_subspaces(model, n_features=n_features)
        k = len(roots[0])
        assert all(len(r) == k for r in roots) and 2 <= k < n_features
        assert len(set(roots)) == n_models, roots


def test_srp_deals_every_subset_before_repeating_one():
    """12 members, C(5, 3) = 10 subsets: all 10 taken, members 10 and 11 repeat members 0 and 1
    (MOA's cyclic copies)."""
    roots = _root_subspaces(StreamingRandomPatches(n_models=12, seed=4, subspace=3,
                                                   training="subspaces"))  # fmt: skip
    assert len(set(roots)) == 10
    assert roots[10:] == roots[:2]


def test_a_dealt_subspace_is_a_pure_function_of_seed_and_member():
    """Member d's subspace is the same in the forest and in a tree dealt alone as member d
    (its reference, ``ForestReference``, deals that way); another seed deals others."""
    forest = StreamingRandomPatches(n_models=10, seed=3, subspace=3, training="subspaces")
    roots = _root_subspaces(forest)
    X, y = _few_features(30, 5)
    for d in (0, 4, 9):
        tree = HoeffdingTree(grace_period=1000, max_features=3, subspace="tree", subspace_seed=3)
        tree.reset_tree(d, deal=True)
        tree.learn_many(X, y)
        assert frozenset(observed(tree._bank)[0]) == roots[d]
    other = _root_subspaces(StreamingRandomPatches(n_models=10, seed=8, subspace=3,
                                                   training="subspaces"))  # fmt: skip
    assert set(other) == set(roots) and other != roots  # all 10 subsets, dealt otherwise
    assert [subspace.n_subsets(f, k) for f, k in ((5, 3), (9, 5), (20, 10), (300, 150))] == [
        10, 126, 184756, 2**62]  # fmt: skip


def test_bad_max_features_is_refused_naming_it():
    for bad in (0, -1, 1.5, 0.0, "half", True, float("nan")):
        with pytest.raises(ValueError, match="max_features"):
            HoeffdingTree(max_features=bad)
        with pytest.raises(ValueError, match="max_features"):
            AdaptiveRandomForest(max_features=bad)
    with pytest.raises(ValueError, match="subspace"):
        HoeffdingTree(max_features=2, subspace="forest")
    with pytest.raises(ValueError, match="subspace"):
        StreamingRandomPatches(subspace=0)
    with pytest.raises(ValueError, match="training"):
        StreamingRandomPatches(training="bagging")
    with pytest.raises(ValueError, match="HoeffdingTree"):
        AdaptiveRandomForest(OnlineBagging(HoeffdingTree()))


# ------------------------------------------------------------------ the forests
def _reference_run(make, data):
    """Predict-then-learn ``data`` with the compiled forest and with ``ForestReference``;
    their predictions, both objects."""
    forest = make()
    ref = ForestReference(forest)
    features = {name: "numeric" for name in data[0][0]}
    classes = sorted({t for _, t in data}, key=lambda c: [t for _, t in data].index(c))
    forest.declare(features, classes)
    ref.declare(features, classes)
    got, want = [], []
    for x, t in data:
        got.append(forest.predict_proba_one(x))
        want.append(ref.predict_proba_one(x))
        forest.learn_one(x, t)
        ref.learn_one(x, t)
    return got, want, forest, ref


@pytest.mark.parametrize("make", [
    lambda: AdaptiveRandomForest(n_models=4, seed=3),
    lambda: AdaptiveRandomForest(n_models=3, seed=4, vote="average", max_features=0.5),
    lambda: StreamingRandomPatches(n_models=4, seed=5),
    lambda: StreamingRandomPatches(n_models=3, seed=6, training="subspaces", subspace=3),
    lambda: StreamingRandomPatches(n_models=3, seed=7, training="resampling"),
    lambda: AdaptiveRandomForest(n_models=4, seed=3, vote="stacking"),
    lambda: StreamingRandomPatches(n_models=4, seed=5, vote="stacking"),
    lambda: StreamingRandomPatches(n_models=3, seed=6, training="subspaces", subspace=3,
                                   vote="stacking"),
], ids=["arf", "arf-average-half", "srp", "srp-subspaces", "srp-resampling", "arf-stacking",
        "srp-stacking", "srp-subspaces-stacking"])  # fmt: skip
def test_kernel_is_the_reference(make):
    """The compiled forest and ``ForestReference`` (Python trees, Python loop) give the same
    probabilities on every example of a stream with a drift, and count the same warnings,
    drifts and promotions; with the stacked vote the meta-learner's weights are the
    reference's ``stacking.MetaLearner``'s."""
    data = dense(3000, 11, flip_at=1500)
    got, want, forest, ref = _reference_run(make, data)
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys() or not w
        assert g == pytest.approx(w, rel=1e-12, abs=1e-12)
    st = forest._float_state
    assert (st.events == ref.events).all()
    assert st.events[fk.DRIFTS].sum() > 0  # the drift was seen
    if forest.vote == "stacking":  # (trees replaced: their members' inputs are the new trees)
        forest._settled()  # (the last learn_one is kept until a reader runs it)
        weights = forest._stack_arrays()["stack.weights"]
        np.testing.assert_allclose(weights, ref.meta.weights, rtol=0, atol=1e-12)
        assert forest.describe()["meta_learner"]["learned"] == ref.meta.learned == len(data)
    for m in range(forest.n_models):
        assert (
            int(forest._bank.T.n_nodes[st.slots[fk.FG, m]]) == ref.fg[m].describe_tree()["n_nodes"]
        )


def _window_accuracy(model, data, lo, hi):
    ok = 0
    for i, (x, t) in enumerate(data):
        if lo <= i < hi:
            ok += model.predict_one(x) == t
        model.learn_one(x, t)
    return ok / (hi - lo)


def test_arf_recovers_from_a_drift_that_ozabag_does_not():
    """An abrupt flip of the concept at 4000: over the 1500 examples after 5000, ARF's
    background trees have taken over and OzaBag's trees still hold the old concept."""
    data = dense(6500, 21, flip_at=4000)
    arf = _window_accuracy(AdaptiveRandomForest(n_models=5, seed=1), data, 5000, 6500)
    oza = _window_accuracy(OnlineBagging(HoeffdingTree(grace_period=50), n_models=5, seed=1),
                           data, 5000, 6500)  # fmt: skip
    assert arf > 0.85, arf
    assert arf - oza > 0.1, (arf, oza)


def test_background_tree_replaces_its_foreground_tree_at_a_drift():
    """A member warned before the drift grows a background tree in its other slot; at the
    drift that slot becomes its foreground tree (the tree it had grown, one example more), and
    the old foreground tree is emptied."""
    r = random.Random(5)  # a gradual drift: the new concept from 2000 on, more often until 4000
    data = [(x, t != (r.random() < (i - 2000) / 2000)) for i, (x, t) in enumerate(dense(5000, 12))]
    model = AdaptiveRandomForest(n_models=3, seed=2, warning_delta=0.05)
    st = model._float_state
    grown_bg = 0
    for x, t in data:
        model.predict_one(x)  # (runs the learn learn_one kept: st is this example's)
        T = model._bank.T  # (the bank's arrays: replaced when they grow)
        before = st.events[fk.PROMOTED].copy()
        slots = st.slots.copy()
        nodes = {int(s): int(T.n_nodes[s]) for s in slots.ravel() if s >= 0}
        model.learn_one(x, t)
        model.predict_one(x)
        T = model._bank.T
        for m in np.nonzero(st.events[fk.PROMOTED] > before)[0]:
            old_fg, old_bg = int(slots[fk.FG, m]), int(slots[fk.BG, m])
            assert st.slots[fk.FG, m] == (old_fg + 3) % 6  # the member's other slot
            assert st.slots[fk.BG, m] == -1
            assert int(T.n_nodes[old_fg]) == 1  # emptied
            if old_bg >= 0 and nodes[old_bg] > 1:  # a background tree that had grown
                assert int(T.n_nodes[old_bg]) >= nodes[old_bg]
                grown_bg += 1
    assert st.events[fk.PROMOTED].sum() > 0 and grown_bg > 0


def test_state_round_trip_goes_on_identically():
    data = dense(3000, 13, flip_at=1500)
    whole = AdaptiveRandomForest(n_models=3, seed=9)
    half = AdaptiveRandomForest(n_models=3, seed=9)
    for x, t in data[:1600]:
        whole.learn_one(x, t)
        half.learn_one(x, t)
    copy = load_state(half.to_state())
    assert same(copy.describe(), half.describe())
    a = [whole.predict_learn_one(x, t) for x, t in data[1600:]]
    b = [copy.predict_learn_one(x, t) for x, t in data[1600:]]
    assert a == b
    assert_same_state(whole, copy)


def test_a_state_saved_before_the_deal_deals_alike():
    """An SRP saved before its first example (its roots still waiting for their deal) and
    loaded deals and learns as the forest never saved."""
    data = dense(800, 15)
    whole = StreamingRandomPatches(n_models=5, seed=2, subspace=3)
    copy = load_state(StreamingRandomPatches(n_models=5, seed=2, subspace=3).to_state())
    a = [whole.predict_learn_one(x, t) for x, t in data]
    b = [copy.predict_learn_one(x, t) for x, t in data]
    assert a == b
    assert_same_state(whole, copy)
    subspaces = {frozenset().union(*observed(copy._bank, m).values()) for m in range(5)}
    assert len(subspaces) == 5 and all(len(f) == 3 for f in subspaces)


def test_batches_learn_what_single_examples_learn():
    data = dense(2500, 14, flip_at=1200)
    X, y = [x for x, _ in data], [t for _, t in data]
    one = StreamingRandomPatches(n_models=3, seed=1)
    many = StreamingRandomPatches(n_models=3, seed=1)
    p1 = [one.predict_learn_one(x, t) for x, t in data]
    p2 = []
    for i in range(0, len(X), 400):
        p2 += many.predict_learn_many(X[i : i + 400], y[i : i + 400])
    assert p1 == p2
    assert_same_state(one, many)


def test_forged_state_is_refused_naming_the_array():
    model = AdaptiveRandomForest(n_models=2, seed=1)
    for x, t in dense(300, 1):
        model.learn_one(x, t)
    for name, forge in [("forest.slots", lambda a: a.__setitem__((0, 0), 7)),
                        ("forest.slots", lambda a: a.__setitem__((1, 1), 0)),
                        ("forest.acc", lambda a: a.__setitem__((0, 0), 1e9)),
                        ("forest.acc", lambda a: a.__setitem__((1, 0), np.nan)),
                        ("forest.events", lambda a: a.__setitem__((0, 0), -1))]:  # fmt: skip
        state = model.to_state()
        forge(state["arrays"][name])
        with pytest.raises(ValueError, match=name):
            load_state(state)


def test_specs_build_and_round_trip():
    spec = {"ensemble": "arf", "learner": "hoeffding_tree", "n_models": 3, "seed": 2,
            "params": {"max_features": 3, "vote": "average", "drift_delta": 0.001}}  # fmt: skip
    model = build_model(spec)
    assert isinstance(model, AdaptiveRandomForest)
    assert model.max_features == 3 and model.learner.grace_period == 50  # ARF's tree defaults
    again = build_model(model.spec())
    assert again.spec() == model.spec()
    srp = build_model({"ensemble": "srp", "params": {"training": "subspaces", "subspace": 0.5}})
    assert (srp.training, srp.subspace, srp.n_models) == ("subspaces", 0.5, 10)
    with pytest.raises(ValueError, match="max_features"):
        build_model({"ensemble": "arf", "params": {"max_features": "all"}})


# ------------------------------------------------------------------ the service and the CLI
@pytest.mark.parametrize("kind", ["arf", "srp"])
def test_served_over_http_and_recovered_from_the_log(kind, tmp_path):
    """A forest created over HTTP learns and predicts; a restart rebuilds it from the store's
    log (no snapshot) to the model that went on in memory, prediction for prediction."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", snapshot_interval=3600)
    data = dense(400, 3, n_features=6, flip_at=200)
    spec = {"name": "f", "ensemble": kind, "learner": "hoeffding_tree", "n_models": 3,
            "seed": 5, "params": {"grace_period": 20}}  # fmt: skip
    with TestClient(create_app(settings)) as client:
        r = client.post("/models", json=spec)
        assert r.status_code in (200, 201), r.text
        for x, t in data[:300]:
            r = client.post("/learn", json={"model": "f", "features": x, "label": t})
            assert r.status_code == 200, r.text
        before = [client.post("/predict", json={"model": "f", "features": x}).json()
                  for x, _ in data[300:]]  # fmt: skip
        described = client.get("/models/f").json()
        assert described["spec"]["ensemble"] == kind
        metrics = client.get("/metrics")  # (a forest's drifts and diversity: it was a 500)
        assert metrics.status_code == 200, metrics.text
        assert 'chorus_model_drifts_total{model="f"}' in metrics.text
        assert 'chorus_model_diversity{measure="kappa",model="f"}' in metrics.text
    with TestClient(create_app(settings)) as client:  # a restart: the log replayed
        after = [client.post("/predict", json={"model": "f", "features": x}).json()
                 for x, _ in data[300:]]  # fmt: skip
    assert [b["probabilities"] for b in before] == [a["probabilities"] for a in after]
    bad = {**spec, "name": "g", "params": {"max_features": "most"}}
    with TestClient(create_app(settings)) as client:
        r = client.post("/models", json=bad)
        assert r.status_code == 422 and "max_features" in r.text


def test_replay_takes_the_forests():
    from app.replay import parse_spec

    assert parse_spec("arf:hoeffding_tree:5:3")["ensemble"] == "arf"
    assert parse_spec("srp:hoeffding_tree")["n_models"] == 10
    model = build_model(parse_spec("arf:hoeffding_tree:5:3"))
    assert isinstance(model, AdaptiveRandomForest) and model.seed == 3


def test_window_gives_member_accuracy_and_diversity():
    """describe() has each member's accuracy over the window and the members' diversity, as
    adaptive bagging's; a tree replaced at a drift is counted from its replacement on; the
    window is saved and a forged one refused."""
    data = dense(3000, 15, flip_at=1500)
    model = AdaptiveRandomForest(n_models=3, seed=4, window=200)
    for x, t in data:
        model.learn_one(x, t)
    d = model.describe()
    assert set(d["diversity"]) >= {"disagreement", "q_statistic", "kappa", "window"}
    assert d["diversity"]["window"] == 200
    assert all(0.0 <= m["window_accuracy"] <= 1.0 for m in d["members"])
    st = model._float_state
    assert (st.win_n <= 200).all() and st.counters[1] == 200
    assert model.diversity() == d["diversity"]
    state = model.to_state()
    assert same(load_state(state).describe(), d)
    state["arrays"]["forest.window.counters"][0] = 10_000
    with pytest.raises(ValueError, match="forest.window.counters"):
        load_state(state)
    assert AdaptiveRandomForest(n_models=2, window=0).describe().get("diversity") is None
