"""Explanations reproduce their predictions (``predict_explain_one``, ``ensembles.explain``).

An explanation gives every member's probabilities and vote weight and the vote rule; combining
them again (``recompute``) must give the probabilities the model predicted: bit for bit for
every vote but the stacked one, whose softmax takes ``exp`` in numba and here in Python (two
libraries' ``exp``), held to 1e-12. Hypothesis drives random streams (numbers, categories,
missing values, classes arriving mid-stream) through several kinds of ensembles and explains
random rows (unseen categories and features too); explaining must not change the model.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ensembles
import learners
from ensembles.explain import NotExplainable, recompute


def _ht(**kw) -> learners.HoeffdingTree:
    return learners.HoeffdingTree(grace_period=4, delta=0.3, tau=0.2, **kw)


MODELS = {
    "single_ht": lambda: ensembles.Single(_ht()),
    "single_mc": lambda: ensembles.Single(_ht(leaf_prediction="mc")),
    "single_nb": lambda: ensembles.Single(learners.NaiveBayes()),
    "single_stump": lambda: ensembles.Single(learners.DecisionStump()),
    "bag_ht": lambda: ensembles.OnlineBagging(_ht(), n_models=3, seed=2),
    "bag_majority": lambda: ensembles.OnlineBagging(
        _ht(leaf_prediction="nb"), n_models=3, seed=2, vote="majority"
    ),
    "bag_weighted": lambda: ensembles.OnlineBagging(
        learners.NaiveBayes(), n_models=3, seed=6, vote="weighted", window=20, drift="ddm"
    ),
    "bag_stacking": lambda: ensembles.OnlineBagging(_ht(), n_models=3, seed=9, vote="stacking"),
    "boost_ht": lambda: ensembles.OnlineBoosting(_ht(), n_models=3, seed=3),
    "boost_stump": lambda: ensembles.OnlineBoosting(
        learners.DecisionStump(), n_models=4, seed=3, vote="majority"
    ),
    "boost_adwin": lambda: ensembles.OnlineBoosting(
        _ht(), n_models=3, seed=8, drift="adwin", window=10
    ),
    "boost_stacking": lambda: ensembles.OnlineBoosting(
        learners.NaiveBayes(), n_models=3, seed=10, vote="stacking"
    ),
    "arf": lambda: ensembles.AdaptiveRandomForest(_ht(), n_models=3, seed=8),
    "srp": lambda: ensembles.StreamingRandomPatches(_ht(), n_models=3, seed=9, subspace=2),
    "codes": lambda: ensembles.OnlineBagging(
        _ht(), n_models=3, seed=7, drift="adwin", poisson_lambda=6.0, output_codes=True
    ),
    "codes_majority": lambda: ensembles.OnlineBagging(
        learners.NaiveBayes(), n_models=4, seed=7, output_codes=True, vote="majority"
    ),
    "codes_weighted": lambda: ensembles.OnlineBagging(
        _ht(), n_models=3, seed=5, output_codes=True, vote="weighted"
    ),
    "arf_average": lambda: ensembles.AdaptiveRandomForest(
        _ht(), n_models=2, seed=1, vote="average"
    ),
    "arf_stacking": lambda: ensembles.AdaptiveRandomForest(
        _ht(), n_models=3, seed=8, vote="stacking"
    ),
    "srp_stacking": lambda: ensembles.StreamingRandomPatches(
        _ht(), n_models=3, seed=9, subspace=2, vote="stacking"
    ),
}
STACKED = {"bag_stacking", "boost_stacking", "arf_stacking", "srp_stacking"}

VALUES = st.one_of(
    st.floats(-5, 5, allow_nan=False),
    st.sampled_from([0.0, -0.0, 1e300, -1e300, 2.5]),
    st.just(None),  # missing
)
CATS = st.sampled_from(["u", "v", "w", "x", "y"])


@st.composite
def rows(draw):
    x = {}
    for name in ("a", "b"):
        v = draw(VALUES)
        if v is not None:
            x[name] = v
    for name in ("c", "d"):
        if draw(st.booleans()):
            x[name] = draw(CATS)
    return x


@st.composite
def streams(draw):
    n = draw(st.integers(1, 120))
    out = []
    for _ in range(n):
        x = draw(rows())
        # a learnable concept with noise, and a class that arrives late
        y = "p" if x.get("a", 0.0) > 0.5 else ("q" if x.get("c") in ("u", "v") else "r")
        if len(out) > 60 and draw(st.integers(0, 9)) == 0:
            y = "late"
        out.append((x, y, draw(st.sampled_from([1.0, 1.0, 1.0, 2.5, 0.5]))))
    return out


def _close(a: dict, b: dict, tol: float) -> bool:
    if set(a) != set(b):
        return False
    return all(abs(a[k] - b[k]) <= tol for k in a)


def _check(model, name: str, x: dict) -> None:
    e = model.predict_explain_one(x)
    assert e["probabilities"] == model.predict_proba_one(x)
    got = recompute(e)
    if name in STACKED:
        assert _close(got, e["probabilities"], 1e-12), (got, e["probabilities"])
    else:
        assert got == e["probabilities"], (got, e["probabilities"])  # bit for bit
    p = e["probabilities"]
    if not p:
        assert e["prediction"] is None and e["margin"] is None
        return
    assert e["prediction"] == learners.argmax_label(p)
    ranked = sorted(p.values(), reverse=True) + [0.0]
    assert e["margin"] == ranked[0] - ranked[1]
    if e["vote"]["rule"] == "output_codes":  # a member agrees when its top bit is the class'
        pos = list(p).index(e["prediction"])
        want = [d["member"] for d in e["members"] if d["top"] is not None
                and d["codes"][pos] == d["top"]]  # fmt: skip
    else:
        want = [d["member"] for d in e["members"] if d["top"] == e["prediction"]]
    assert e["agreeing"] == want
    for d in e["members"]:
        tree = d.get("tree")
        if tree is None:
            continue
        for step in tree["path"]:  # each step's branch is the value's own, or says why not
            if step["kind"] == "numeric" and "why" not in step:
                assert step["branch"] == ("yes" if step["value"] <= step["threshold"] else "no")
            if step["kind"] == "categorical" and "why" not in step:
                assert step["branch"] == step["value"] == x[step["feature"]]
        leaf = tree["leaf"]
        if leaf["prediction"] == "majority" and d["probabilities"] and "codes" not in d:
            tot = sum(leaf["class_weights"].values())
            for c, w in leaf["class_weights"].items():
                assert math.isclose(d["probabilities"][c], w / tot, rel_tol=1e-12)


@pytest.mark.parametrize("name", sorted(MODELS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams(), probes=st.lists(rows(), min_size=1, max_size=6))
def test_explanation_reproduces_the_prediction(name, stream, probes):
    model = MODELS[name]()
    for i, (x, y, w) in enumerate(stream):
        model.learn_one(x, y, w=w)
        if i % 17 == 0:
            _check(model, name, x)
    twin = MODELS[name]()  # the same stream: the same model (not a deepcopy: an output-code
    for x, y, w in stream:  # model that saw one class does not load its own state, issue 41)
        twin.learn_one(x, y, w=w)
    for x in probes + [{"z": 1.0}, {}, {"c": "never seen"}]:
        _check(model, name, x)
    # explaining changed nothing: the model goes on exactly as its twin that never explained
    for x, y, w in stream[:20]:
        assert model.predict_proba_one(x) == twin.predict_proba_one(x)
        model.learn_one(x, y, w=w)
        twin.learn_one(x, y, w=w)
    assert model.predict_proba_one(stream[0][0]) == twin.predict_proba_one(stream[0][0])


def test_paths_name_features_tests_and_leaves():
    model = ensembles.OnlineBagging(_ht(leaf_prediction="mc"), n_models=2, seed=1)
    for i in range(400):
        x = {"a": float(i % 10), "c": "uv"[i % 2]}
        model.learn_one(x, "p" if i % 10 >= 5 else "q")
    e = model.predict_explain_one({"a": 7.0, "c": "u"})
    assert e["prediction"] == "p" and e["agreeing"] == [0, 1]
    for d in e["members"]:
        steps = d["tree"]["path"]
        assert steps and steps[0]["feature"] == "a" and steps[0]["test"].startswith("<= ")
        assert steps[0]["value"] == 7.0 and steps[0]["branch"] == "no"
        assert d["tree"]["leaf"]["prediction"] == "majority"
        assert set(d["tree"]["leaf"]["class_weights"]) == {"p"}
    missing = model.predict_explain_one({"c": "u"})["members"][0]["tree"]["path"][0]
    assert missing["value"] is None and missing["why"] == "missing: heaviest branch"


def test_slow_path_members_explain_without_paths():
    naive_bayes = pytest.importorskip("river.naive_bayes")
    model = ensembles.OnlineBoosting(
        learners.RiverLearner(naive_bayes.GaussianNB()), n_models=3, seed=1
    )
    for i in range(60):
        model.learn_one({"a": float(i % 7)}, i % 7 > 3)
    e = model.predict_explain_one({"a": 5.0})
    assert all("tree" not in d for d in e["members"])
    got, want = recompute(e), e["probabilities"]
    assert _close(got, {**dict.fromkeys(got, 0.0), **want}, 0.0)


def test_feature_importance_needs_native_trees():
    model = ensembles.OnlineBagging(learners.MLP(), n_models=2, seed=1)
    model.learn_one({"a": 1.0}, "p")
    with pytest.raises(NotExplainable, match="native trees") as info:
        model.feature_importance()
    assert info.value.field == "explain"


def test_feature_importance_counts_the_splits():
    model = ensembles.OnlineBagging(_ht(), n_models=3, seed=4)
    for i in range(600):
        x = {"a": float(i % 10), "noise": float((i * 7) % 13), "c": "uvw"[i % 3]}
        model.learn_one(x, "p" if i % 10 >= 5 else "q")
    imp = model.feature_importance()
    members = model.describe()["members"]
    assert imp["splits"] == sum(d["n_nodes"] - d["n_leaves"] for d in members) > 0
    assert next(iter(imp["features"])) == "a"  # the one that decides, first
    assert math.isclose(sum(d["share"] for d in imp["features"].values()), 1.0)
    assert imp["features"]["a"]["depth_weighted"] >= 1.0  # a root split counts 1
    decayed = model.feature_importance(decay=0.1)["features"]["a"]["depth_weighted"]
    assert decayed <= imp["features"]["a"]["depth_weighted"]
    with pytest.raises(ValueError, match="decay"):
        model.feature_importance(decay=0.0)


def test_a_stump_says_its_split_and_the_side_taken():
    model = ensembles.OnlineBoosting(learners.DecisionStump(), n_models=2, seed=1)
    for i in range(200):
        model.learn_one({"a": float(i % 10), "c": "uv"[i % 2]}, "p" if i % 10 >= 5 else "q")
    e = model.predict_explain_one({"a": 8.0, "c": "u"})
    leaf = e["members"][0]["tree"]["leaf"]
    assert leaf["prediction"] == "stump" and leaf["stump"]["feature"] == "a"
    assert leaf["stump"]["branch"] == ("yes" if 8.0 <= leaf["stump"]["threshold"] else "no")
    assert e["members"][0]["tree"]["leaf"]["stump"]["value"] == 8.0
    no_value = model.predict_explain_one({"c": "u"})["members"][0]["tree"]["leaf"]["stump"]
    assert no_value["value"] is None and no_value["branch"] is None


def test_the_interpreted_twins_explain_alike():
    """A server on a cold numba cache answers from the kernels' interpreted twins: its
    explanations are the compiled ones, to the bit."""
    from learners.jit import set_interpreted

    def explained() -> list[dict]:
        out = []
        for make in (MODELS["bag_ht"], MODELS["boost_stump"], MODELS["arf"]):
            model = make()
            for i in range(150):
                model.learn_one({"a": float(i % 10), "c": "uv"[i % 2]}, "pq"[i % 10 >= 5])
            out.append(model.predict_explain_one({"a": 8.0, "c": "u"}))
        return out

    compiled = explained()
    set_interpreted(True)
    try:
        interpreted = explained()
    finally:
        set_interpreted(False)
    assert interpreted == compiled
