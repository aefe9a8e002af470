"""One conformance suite over every learner and ensemble (STYLE.md, "Tests")."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from river import tree
from streams import mixed_stream

from ensembles import OnlineBagging, OnlineBoosting, Single, load_state
from learners import DecisionStump, ExactTree, HoeffdingTree, NaiveBayes, RiverLearner

MODELS = {
    "HoeffdingTree": lambda: HoeffdingTree(grace_period=20),
    "NaiveBayes": NaiveBayes,
    "DecisionStump": DecisionStump,
    "RiverLearner(HT)": lambda: RiverLearner(tree.HoeffdingTreeClassifier(grace_period=20)),
    "Single(HT)": lambda: Single(HoeffdingTree(grace_period=20), seed=3),
    "Bagging(HT)": lambda: OnlineBagging(HoeffdingTree(grace_period=20), n_models=4, seed=3),
    "Bagging(NB,average)": lambda: OnlineBagging(NaiveBayes(), n_models=4, seed=3, vote="average"),
    "Bagging(Stump)": lambda: OnlineBagging(DecisionStump(), n_models=4, seed=3),
    "Boosting(HT)": lambda: OnlineBoosting(HoeffdingTree(grace_period=20), n_models=4, seed=3),
    "Boosting(NB)": lambda: OnlineBoosting(NaiveBayes(), n_models=4, seed=3),
    "Boosting(Stump)": lambda: OnlineBoosting(DecisionStump(), n_models=4, seed=3),
    "ExactTree": ExactTree,
    "ExactTree(binary)": lambda: ExactTree(split="binary"),
    "Bagging(ExactTree)": lambda: OnlineBagging(ExactTree(), n_models=3, seed=3),
    "Boosting(ExactTree)": lambda: OnlineBoosting(ExactTree(), n_models=3, seed=3),
    "Bagging(river)": lambda: OnlineBagging(
        RiverLearner(tree.HoeffdingTreeClassifier(grace_period=20)), n_models=3, seed=3
    ),
    "Boosting(river)": lambda: OnlineBoosting(
        RiverLearner(tree.HoeffdingTreeClassifier(grace_period=20)), n_models=3, seed=3
    ),
}
STATEFUL = [k for k in MODELS if not k.startswith("RiverLearner")]


def stream(n=400, seed=1, **kw):
    return list(mixed_stream(n, seed, **kw))


@pytest.fixture(params=list(MODELS), ids=list(MODELS))
def make(request):
    return MODELS[request.param]


def check_proba(p):
    assert all(0.0 <= v <= 1.0 for v in p.values()), p
    assert math.isclose(sum(p.values()), 1.0, abs_tol=1e-9), p


def test_empty_before_training(make):
    model = make()
    assert model.predict_proba_one({"x1": 1.0, "colour": "red"}) == {}
    assert model.predict_one({"x1": 1.0}) is None


def test_probabilities_and_input_not_mutated(make):
    model = make()
    for x, y in stream(300, new_class_at=150):
        before = copy.deepcopy(x)
        p = model.predict_proba_one(x)
        if p:
            check_proba(p)
        model.learn_one(x, y)
        assert x == before
    assert (
        "rare" in model.predict_proba_one({"x2": 9.5})
        or "rare" in set(model.predict_one(x) for x, _ in stream(300, seed=5))
        or hasattr(model, "estimator")
    )


def test_new_missing_and_unseen_features(make):
    model = make()
    for x, y in stream(200):
        model.learn_one(x, y)
    for x in (
        {},
        {"x1": None},
        {"never_seen": 3.0},
        {"colour": "ultraviolet"},
        {"x1": float("nan"), "size": "XXL"},
        {"brand_new_cat": "q", "x2": 1.0},
    ):
        check_proba(model.predict_proba_one(x))


def test_new_classes_mid_stream(make):
    model = make()
    data = stream(600, new_class_at=300)
    for x, y in data:
        model.learn_one(x, y)
    labels = set()
    for x, _ in data:
        p = model.predict_proba_one(x)
        check_proba(p)
        labels |= set(p)
    assert "rare" in labels


@pytest.mark.parametrize("name", STATEFUL)
def test_state_round_trip_mid_stream(name):
    make = MODELS[name]
    data = stream(500, new_class_at=200)
    a = make()
    for x, y in data[:250]:
        a.learn_one(x, y)
    b = load_state(a.to_state())
    for x, y in data[250:]:
        assert a.predict_proba_one(x) == b.predict_proba_one(x)
        a.learn_one(x, y)
        b.learn_one(x, y)
    assert a.to_state()["header"] == b.to_state()["header"]


def test_same_seed_same_stream_identical(make):
    data = stream(300)
    a, b = make(), make()
    for x, y in data:
        assert a.predict_proba_one(x) == b.predict_proba_one(x)
        a.learn_one(x, y)
        b.learn_one(x, y)


def test_clone_is_fresh(make):
    model = make()
    for x, y in stream(100):
        model.learn_one(x, y)
    fresh = model.clone()
    assert fresh.predict_proba_one({"x1": 0.5}) == {}
    assert repr(fresh) == repr(model)


def test_zero_weight_does_nothing(make):
    a, b = make(), make()
    data = stream(150)
    for x, y in data:
        a.learn_one(x, y)
        b.learn_one(x, y)
        b.learn_one(x, "neg", w=0.0)
    for x, _ in data[:50]:
        assert a.predict_proba_one(x) == b.predict_proba_one(x)


@pytest.mark.parametrize("name", list(MODELS))
def test_batch_equals_row_by_row(name):
    """predict_learn_many == predict_learn_one row by row (also across schema growth)."""
    a, b = MODELS[name](), MODELS[name]()
    data = stream(300, new_class_at=100)
    many = a.predict_learn_many([x for x, _ in data], [y for _, y in data])
    one = [b.predict_learn_one(x, y) for x, y in data]
    assert many == one


def test_dict_mutated_between_predict_and_learn_is_honoured(make):
    """The one-row encoding reused by learn_one after predict_one must notice a changed dict."""
    a, b = make(), make()
    for i, (x, y) in enumerate(stream(200)):
        a.predict_one(x)
        x2 = dict(x)
        if i % 2:
            x["x1"] = 5.0  # mutate the same object after predicting
            x2["x1"] = 5.0
        a.learn_one(x, y)
        b.learn_one(x2, y)
    for x, _ in stream(50, seed=9):
        assert a.predict_proba_one(x) == b.predict_proba_one(x)


def test_predict_one_is_argmax_of_proba(make):
    model = make()
    for x, y in stream(300, new_class_at=150):
        p = model.predict_proba_one(x)
        label = model.predict_one(x)
        assert label == (max(p, key=p.get) if p else None)
        model.learn_one(x, y)


@pytest.mark.parametrize("name", [k for k in STATEFUL if not k.startswith("ExactTree")])
def test_rejected_input_leaves_no_trace(name):
    """A batch rejected for a type error (after new features, categories and classes were seen
    in it) changes nothing: same state, same predictions as a model that never saw it."""
    from learners import FeatureTypeError

    a, b = MODELS[name](), MODELS[name]()
    data = stream(150)
    for x, y in data:
        a.learn_one(x, y)
        b.learn_one(x, y)
    bad = [{"x1": 1.0, "brand_new": "cat", "colour": "mauve"}, {"x1": "not a number"}]
    with pytest.raises(FeatureTypeError, match="x1"):
        a.learn_many(bad, ["new_class", "pos"])
    with pytest.raises(FeatureTypeError):
        a.learn_one({"other_new": 2.0, "size": "s", "x1": "3.5x"}, "another_new")
    with pytest.raises(ValueError, match="weight"):  # bad weights: rejected before encoding
        a.learn_many([{"third_new": "v"}, {"x1": 1.0}], ["new_class", "pos"], [1.0, -1.0])
    assert a.to_state()["header"] == b.to_state()["header"]
    for x, y in stream(100, seed=3):
        assert a.predict_learn_one(x, y) == b.predict_learn_one(x, y)


@pytest.mark.parametrize("name", STATEFUL)
def test_state_is_a_snapshot_not_a_view(name):
    model = MODELS[name]()
    data = stream(300)
    for x, y in data[:150]:
        model.learn_one(x, y)
    state = model.to_state()
    frozen = {k: v.copy() for k, v in state["arrays"].items()}
    for x, y in data[150:]:
        model.learn_one(x, y)
    for k, v in state["arrays"].items():
        assert np.array_equal(v, frozen[k], equal_nan=v.dtype.kind == "f"), k
