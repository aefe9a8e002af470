"""Chorus models are river estimators: river's own checks, evaluate, pipelines, wrappers."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pandas as pd
import pytest
from river import (
    base,
    checks,
    compose,
    datasets,
    ensemble,
    evaluate,
    metrics,
    naive_bayes,
    preprocessing,
    tree,
)
from streams import mixed_stream

from ensembles import OnlineBagging, OnlineBoosting, Single
from learners import DecisionStump, ExactTree, HoeffdingTree, NaiveBayes, RiverLearner

MODELS = {
    "HoeffdingTree": lambda: HoeffdingTree(grace_period=50),
    "NaiveBayes": NaiveBayes,
    "DecisionStump": DecisionStump,
    "ExactTree": ExactTree,
    "RiverLearner": lambda: RiverLearner(tree.HoeffdingTreeClassifier(grace_period=50)),
    "Single(HT)": lambda: Single(HoeffdingTree(grace_period=50)),
    "Bagging(HT)": lambda: OnlineBagging(HoeffdingTree(grace_period=50), n_models=3, seed=1),
    "Bagging(NB,average)": lambda: OnlineBagging(NaiveBayes(), n_models=3, vote="average"),
    "Boosting(Stump)": lambda: OnlineBoosting(DecisionStump(), n_models=3, seed=1),
    "Boosting(river)": lambda: OnlineBoosting(
        RiverLearner(naive_bayes.GaussianNB()), n_models=2, seed=1
    ),
}
MINI_BATCH = ["HoeffdingTree", "NaiveBayes", "DecisionStump", "Single(HT)", "Bagging(HT)",
              "Bagging(NB,average)", "Boosting(Stump)", "Boosting(river)"]  # fmt: skip


@pytest.mark.parametrize("name", list(MODELS))
def test_river_check_estimator(name):  # ExactTree's run takes ~15 s (it keeps every example)
    model = MODELS[name]()
    assert isinstance(model, base.Classifier)
    assert isinstance(model, base.MiniBatchClassifier) or name not in MINI_BATCH
    # river skips nothing on its own classifiers, nor do we on ours
    assert model._unit_test_skips() == set()
    checks.check_estimator(model)


def test_river_contract_params_clone_mutate():
    model = OnlineBagging(HoeffdingTree(grace_period=50), n_models=3, seed=1)
    params = model._get_params()
    assert params["n_models"] == 3 and params["learner"][0] is HoeffdingTree
    other = model.clone({"seed": 2, "learner": (HoeffdingTree, {"grace_period": 20})})
    assert (other.seed, other.learner.grace_period, other.n_models) == (2, 20, 3)
    assert model.seed == 1 and model.learner.grace_period == 50
    model.mutate({})
    with pytest.raises(ValueError, match="not a mutable attribute"):
        model.mutate({"seed": 5})
    assert model._multiclass and model._supervised and isinstance(model._tags, set)
    for x, y in datasets.Phishing().take(50):
        model.learn_one(x, y)
    trained = model.clone(include_attributes=True)
    x = next(iter(datasets.Phishing()))[0]
    assert trained.predict_proba_one(x) == model.predict_proba_one(x) != {}
    assert model.clone().predict_proba_one(x) == {}


def _hand_loop(model, dataset, metric):
    """Predict, score (no score before the model can predict, as river does), learn."""
    for x, y in dataset:
        p = model.predict_one(x) if metric.requires_labels else model.predict_proba_one(x)
        if p is not None and p != {}:
            metric.update(y, p)
        model.learn_one(x, y)
    return metric.get()


@pytest.mark.parametrize("metric", [metrics.Accuracy, metrics.LogLoss, metrics.ROCAUC])
def test_progressive_val_score_equals_hand_loop(metric):
    make = MODELS["Bagging(HT)"]
    data = list(datasets.Phishing())
    got = evaluate.progressive_val_score(data, make(), metric()).get()
    assert got == _hand_loop(make(), data, metric())


def test_pipelines_and_river_wrappers_under_evaluate():
    data = list(datasets.Phishing())
    scaled = preprocessing.StandardScaler() | OnlineBagging(HoeffdingTree(), n_models=3, seed=1)
    assert isinstance(scaled, base.Classifier)
    assert evaluate.progressive_val_score(data, scaled, metrics.Accuracy()).get() > 0.8
    wrapped = ensemble.BaggingClassifier(HoeffdingTree(), n_models=3, seed=1)
    assert evaluate.progressive_val_score(data, wrapped, metrics.Accuracy()).get() > 0.8
    # mixed data: one-hot categories + scaled numbers into a boosting ensemble
    stream = list(mixed_stream(600, seed=2, missing=0.0))
    onehot = (
        (compose.SelectType(str) | preprocessing.OneHotEncoder())
        + (compose.SelectType(float) | preprocessing.StandardScaler())
    ) | OnlineBoosting(NaiveBayes(), n_models=3, seed=1)
    assert evaluate.progressive_val_score(stream, onehot, metrics.Accuracy()).get() > 0.75


class MajorityClass:
    """A third-party learner (plain Python, no state form): the most frequent label so far."""

    def __init__(self):
        self.counts = {}

    def learn_one(self, x, y, *, w=1.0):
        self.counts[y] = self.counts.get(y, 0.0) + w

    def predict_proba_one(self, x):
        total = sum(self.counts.values())
        return {k: v / total for k, v in self.counts.items()} if total else {}

    def clone(self):
        return MajorityClass()


@pytest.mark.parametrize(
    "name", ["Bagging(HT)", "Boosting(Stump)", "RiverLearner", "Bagging(third party)"]
)
def test_pickle_and_deepcopy_mid_stream(name):
    """Copies continue identically; an ensemble over a plain-Python third-party learner (no
    state form) pickles its members as they are."""
    model = (
        OnlineBagging(MajorityClass(), n_models=3, seed=1)
        if name == "Bagging(third party)"
        else MODELS[name]()
    )
    data = list(datasets.Phishing().take(400))
    for x, y in data[:200]:
        model.learn_one(x, y)
    copies = [pickle.loads(pickle.dumps(model)), copy.deepcopy(model)]
    for x, y in data[200:]:
        p = model.predict_proba_one(x)
        assert all(c.predict_proba_one(x) == p for c in copies)
        for m in (model, *copies):
            m.learn_one(x, y)


@pytest.mark.parametrize("name", ["Bagging(HT)", "NaiveBayes", "ExactTree"])
def test_numpy_labels_and_values_are_plain(name):
    a, b = MODELS[name](), MODELS[name]()
    for x, y in datasets.Phishing().take(300):
        a.learn_one({k: np.float64(v) for k, v in x.items()}, np.bool_(y))
        b.learn_one(x, y)
    x = {"empty_server_form_handler": np.float32(0.5), "is_popular": np.int64(1)}
    assert a.predict_proba_one(x) == b.predict_proba_one(x)
    for labels, want in (
        ((np.int64(0), np.int64(1), np.int64(2)), int),
        ((np.str_("s"), np.str_("t")), str),
    ):
        c = MODELS[name]()  # one label type per model (docs/http-api.md: label policy)
        for i, (x, _) in enumerate(datasets.Phishing().take(50)):
            c.learn_one(x, labels[i % len(labels)])
        assert set(c.predict_proba_one(x)) == {want(v) for v in labels}
        assert all(type(k) is want for k in c.predict_proba_one(x))


def test_dataframe_in_dataframe_out():
    X = pd.DataFrame([x for x, _ in datasets.Phishing().take(300)], index=range(1000, 1300))
    y = pd.Series([y for _, y in datasets.Phishing().take(300)], index=X.index)
    model, one = MODELS["Bagging(HT)"](), MODELS["Bagging(HT)"]()
    model.learn_many(X, y)
    one.learn_many(X.to_dict(orient="records"), y.tolist())
    proba = model.predict_proba_many(X)
    assert isinstance(proba, pd.DataFrame) and set(proba.columns) == {True, False}
    assert proba.index.equals(X.index)
    assert proba.to_dict(orient="records") == one.predict_proba_many(X.to_dict("records"))
    labels = model.predict_many(X)
    assert isinstance(labels, pd.Series) and labels.index.equals(X.index)
    assert labels.tolist() == one.predict_many(X.to_dict(orient="records"))
    prequential = MODELS["Bagging(HT)"]().predict_learn_many(X, y)
    assert isinstance(prequential, pd.DataFrame) and prequential.index.equals(X.index)


def test_predict_learn_one_returns_probabilities_not_a_label():
    model = MODELS["Bagging(HT)"]()
    for x, y in datasets.Phishing().take(100):
        p = model.predict_learn_one(x, y)
        assert isinstance(p, dict)
    assert set(p) == {True, False}
