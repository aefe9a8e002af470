"""Batch ensembles over native learners encode the training set once (``learners.EncodedRows``):
the members, their vote weights and every prediction must be exactly those of the generic path,
where each member reads the dicts itself (``learn_many`` on its resample, ``predict_many``)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from streams import Proxy, categorical_stream, mixed_stream

from ensembles import AdaBoost, BatchBagging
from learners import (
    DecisionStump,
    EncodedRows,
    FeatureTypeError,
    HoeffdingTree,
    NaiveBayes,
    Schema,
    argmax_label,
)


def _data(n: int = 1200, seed: int = 7):
    """Numeric + categorical features, missing values, features and categories that appear late,
    dict key order varying by row, and a class and a category that each occur in one row only
    (row 0: resamples that miss it number everything else differently)."""
    rng = random.Random(seed)
    X, y = [], []
    for i, (x, t) in enumerate(mixed_stream(n, seed, new_class_at=n // 2, missing=0.2)):
        if rng.random() < 0.3:
            x = dict(reversed(list(x.items())))
        if i % 50 == 3:
            x["count"] = rng.randint(0, 4)  # an int-valued numeric feature, now and then
        x["x2"] = math.nan if rng.random() < 0.1 else x.get("x2")
        X.append(x)
        y.append(t)
    X[0] = {"shape": "star", "x1": 0.0, **X[0]}  # a feature and a category seen once
    y[0] = "singleton"
    return X, y


LEARNERS = {
    "nb": NaiveBayes(),
    "stump": DecisionStump(),
    "stump_gini": DecisionStump(split_criterion="gini"),
    "ht": HoeffdingTree(grace_period=20, tau=0.2),
    "ht_nb": HoeffdingTree(grace_period=30, leaf_prediction="nb"),
}


def _snapshot(model) -> tuple:
    """Everything observable: member states, vote weights, probabilities (with key order)."""
    states = []
    for member in model._members:
        state = member.to_state() if not isinstance(member, Proxy) else member.inner.to_state()
        states.append((state["header"], {k: a.tolist() for k, a in state["arrays"].items()}))
    return states, model._weights


@pytest.mark.parametrize("cls", [BatchBagging, AdaBoost])
@pytest.mark.parametrize("name", list(LEARNERS))
def test_fast_path_equals_generic_path(cls, name):
    X, y = _data()
    test = X[::3] + [{"colour": "teal", "shape": "circle"}, {"unknown": 1.0}, {}]
    fast = cls(LEARNERS[name], n_models=8, seed=3).fit(X, y)
    slow = cls(Proxy(LEARNERS[name]), n_models=8, seed=3).fit(X, y)
    assert fast._schema is not None and slow._schema is None  # the paths under test
    assert _snapshot(fast) == _snapshot(slow)
    pf, ps = fast.predict_proba_many(test), slow.predict_proba_many(test)
    assert [list(p.items()) for p in pf] == [list(p.items()) for p in ps]
    assert fast.predict_many(test) == slow.predict_many(test)
    assert fast.predict_one(test[0]) == slow.predict_one(test[0])
    if cls is BatchBagging:  # the stream exercises members that miss the singleton class
        has = ["singleton" in m.classes for m in fast._members]
        assert any(has) and not all(has)


def _kept_rows(w):
    return [i for i, wi in enumerate(w) if wi > 0]


@pytest.mark.parametrize("name", list(LEARNERS))
def test_learn_and_predict_encoded_equal_the_dict_forms(name):
    X, y = _data(600)
    rng = np.random.default_rng(1)
    w = rng.poisson(1.0, len(X)).astype(float)
    w[0] = 0.0  # the singleton row is skipped: its class, feature and category stay unknown
    enc = EncodedRows.for_learning(X, y)
    fast, slow = LEARNERS[name].clone(), LEARNERS[name].clone()
    fast.learn_encoded(enc, w)
    keep = _kept_rows(w)
    slow.learn_many([X[i] for i in keep], [y[i] for i in keep], [w[i] for i in keep])
    assert fast.to_state()["header"] == slow.to_state()["header"]
    assert "singleton" not in fast.classes and fast.classes != enc.schema.classes
    for k, a in slow.to_state()["arrays"].items():
        np.testing.assert_array_equal(fast.to_state()["arrays"][k], a, err_msg=k)
    labels = [fast.classes[i] if i >= 0 else None for i in fast.predict_encoded(enc)]
    assert labels == slow.predict_many(X)
    # a learner that knows more than the encoding (learned on afterwards) reads the dicts
    fast.learn_one({"colour": "ultraviolet", "brand_new": 2.0}, "novel")
    slow.learn_one({"colour": "ultraviolet", "brand_new": 2.0}, "novel")
    test = [{"colour": "ultraviolet", "brand_new": 2.5}, *X[:50]]
    labels = [fast.classes[i] if i >= 0 else None for i in fast.predict_encoded(enc)]
    assert labels == slow.predict_many(X)
    pred = EncodedRows.for_prediction(test, enc.schema)
    assert [fast.classes[i] for i in fast.predict_encoded(pred)] == slow.predict_many(test)


def test_learn_encoded_needs_an_untrained_learner():
    X, y = _data(50)
    enc = EncodedRows.for_learning(X, y)
    nb = NaiveBayes()
    nb.learn_one(X[0], y[0])
    with pytest.raises(ValueError, match="untrained"):
        nb.learn_encoded(enc, np.ones(len(X)))
    with pytest.raises(ValueError, match="one per row"):
        NaiveBayes().learn_encoded(enc, np.ones(3))


def test_best_classes_breaks_ties_like_argmax_label():
    s = Schema()
    s.declare(classes=["a", "b", "c"])
    out = np.array(
        [
            [0.4, 0.4, 0.2],  # tie: first class
            [0.0, 0.0, 0.0],  # nothing: None
            [0.2, 0.5, 0.3],
            [0.0, 3.0, 3.0],  # not normalized: proba_dict renormalizes (exact path)
            [0.1, 0.45, 0.45],
        ]
    )
    want = [argmax_label(s.proba_dict(row)) for row in out]
    assert [s.classes[i] if i >= 0 else None for i in s.best_classes(out)] == want
    assert want == ["a", None, "b", "b", "b"]


def test_inputs_the_encoding_rejects_behave_as_on_the_generic_path():
    X, y = _data(200)
    X[150] = {**X[150], "size": [3.0]}  # no kind takes a list: members that draw this row fail
    for learner in (NaiveBayes(), Proxy(NaiveBayes())):
        with pytest.raises(FeatureTypeError, match="size"):
            BatchBagging(learner, n_models=4, seed=1).fit(X, y)
    X, y = _data(200)
    fast = BatchBagging(NaiveBayes(), n_models=4, seed=1).fit(X, y)
    slow = BatchBagging(Proxy(NaiveBayes()), n_models=4, seed=1).fit(X, y)
    for model in (fast, slow):
        with pytest.raises(FeatureTypeError, match="x1"):
            model.predict_many([{"x1": "high"}])


@pytest.mark.parametrize("criterion", ["info_gain", "gini"])
@pytest.mark.parametrize("data", ["mixed", "categorical"])
def test_stump_predict_only_runs_equal_per_row_predictions(data, criterion):
    """A predict-only run searches the stump's split once; every row must get what the per-row
    path (``tree_proba``, taken when learning: here with ``w = 0``, which learns nothing) gives."""
    if data == "mixed":
        X, y = _data(600)
    else:
        X, y = map(list, zip(*categorical_stream(600, seed=2)))
    stump = DecisionStump(split_criterion=criterion)
    stump.learn_many(X, y)
    per_row = stump.predict_learn_many(X, y, [0.0] * len(X))
    assert stump.predict_proba_many(X) == per_row
    assert [stump.predict_one(x) for x in X[:20]] == [argmax_label(p) for p in per_row[:20]]
    assert DecisionStump().predict_proba_many(X[:3]) == [{}, {}, {}]
