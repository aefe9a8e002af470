"""Algorithm tests: a boosting case worked on paper, kernels == the readable Python path,
online bagging -> batch bagging, priming, batch ensembles."""

from __future__ import annotations

import math

import pytest
from streams import Proxy, categorical_stream, mixed_stream

from ensembles import AdaBoost, BatchBagging, OnlineBagging, OnlineBoosting
from learners import DecisionStump, HoeffdingTree, NaiveBayes


class Constant:
    """A scripted base learner that always predicts its label (trained or not)."""

    def __init__(self, label):
        self.label = label
        self.weights = []

    def learn_one(self, x, y, *, w=1.0):
        self.weights.append(w)

    def predict_proba_one(self, x):
        return {self.label: 1.0}

    def predict_one(self, x):
        return self.label

    def clone(self):
        return Constant(self.label)


def test_online_boosting_hand_worked():
    """Members always predict A, B, A. Fig. 4.3 worked by hand over the stream A, B, A."""
    model = OnlineBoosting(Constant("A"), n_models=3, seed=0)
    model._members = [Constant("A"), Constant("B"), Constant("A")]
    for y in ["A", "B", "A"]:
        model.learn_one({"x": 1.0}, y)
    # example 1 (A): lam=1 -> m1 right: sc1=1, e1=0, lam=1/2 -> m2 wrong: sw2=1/2, e2=1, lam=1/4
    #                -> m3 right: sc3=1/4, e3=0
    # example 2 (B): lam=1 -> m1 wrong: sw1=1, e1=1/2, lam=1 -> m2 right: sc2=1, e2=1/3, lam=3/4
    #                -> m3 wrong: sw3=3/4, e3=3/4
    # example 3 (A): lam=1 -> m1 right: sc1=2, e1=1/3, lam=3/4 -> m2 wrong: sw2=5/4, e2=5/9,
    #                lam=(3/4)/(10/9)=27/40 -> m3 right: sc3=1/4+27/40=37/40, e3=(3/4)/(67/40)=30/67
    assert list(model._lam_sc) == pytest.approx([2.0, 1.0, 37 / 40])
    assert list(model._lam_sw) == pytest.approx([1.0, 5 / 4, 3 / 4])
    assert model.epsilons == pytest.approx([1 / 3, 5 / 9, 30 / 67])
    # vote weights log((1-e)/e): m1 log 2; m2 has e >= 1/2 -> 0; m3 log(37/30)
    assert list(model.vote_weights) == pytest.approx([math.log(2), 0.0, math.log(37 / 30)])
    assert model.predict_proba_one({"x": 1.0}) == pytest.approx({"A": 1.0, "B": 0.0})


def test_boosting_edge_cases():
    # e = 0: a never-wrong member votes with log((1 - 1e-10) / 1e-10) and outvotes the others
    model = OnlineBoosting(Constant("A"), n_models=2, seed=0)
    model._members = [Constant("A"), Constant("B")]
    model.learn_one({}, "A")
    assert model.epsilons[0] == 0.0
    assert model.vote_weights[0] == pytest.approx(math.log((1 - 1e-10) / 1e-10))
    assert model.predict_one({}) == "A"
    # all members e >= 1/2: no votes -> member 1 predicts alone
    model = OnlineBoosting(Constant("A"), n_models=2, seed=0)
    model._members = [Constant("B"), Constant("B")]
    model.learn_one({}, "A")
    assert list(model.vote_weights) == [0.0, 0.0]
    assert model.predict_proba_one({}) == {"B": 1.0}
    # Poisson weights reach the members as sample weights, never as repeated calls
    model = OnlineBagging(Constant("A"), n_models=4, seed=2)
    for _ in range(50):
        model.learn_one({}, "A")
    ws = [w for m in model._members for w in m.weights]
    assert all(float(w).is_integer() and w >= 1 for w in ws) and max(ws) > 1


@pytest.mark.parametrize("vote", ["average", "majority", "stacking"])
@pytest.mark.parametrize("cls", [OnlineBagging, OnlineBoosting])
@pytest.mark.parametrize(
    "learner", [NaiveBayes, DecisionStump, lambda: HoeffdingTree(grace_period=30)]
)
def test_compiled_kernel_equals_python_algorithm(cls, learner, vote):
    """The compiled kernel mirrors the readable per-member algorithm exactly (the stacked vote:
    the adaptive kernel's meta-learner, ``ensembles._stacking``, against ``stacking.MetaLearner``).

    Classes and feature kinds are declared up front so that every member codes them in the same
    order as the shared schema (tie-breaking follows code order)."""
    kinds = {
        "x1": "numeric",
        "x2": "numeric",
        "colour": "categorical",
        "size": "categorical",
        "late": "numeric",
    }
    classes = ["neg", "pos"]
    proto = learner()
    proto.declare(features=kinds, classes=classes)
    fast = cls(learner(), n_models=5, seed=11, vote=vote)
    fast.declare(features=kinds, classes=classes)
    slow = cls(Proxy(proto), n_models=5, seed=11, vote=vote)
    for member in slow._members:
        member.inner.declare(features=kinds, classes=classes)
    slow.declare(classes=classes)
    for x, y in mixed_stream(400, 4):
        pf, ps = fast.predict_proba_one(x), slow.predict_proba_one(x)
        assert set(k for k, v in pf.items() if v > 0) == set(k for k, v in ps.items() if v > 0)
        for k, v in ps.items():
            assert pf.get(k, 0.0) == pytest.approx(v, abs=1e-12)
        fast.learn_one(x, y)
        slow.learn_one(x, y)
    if cls is OnlineBoosting:
        assert list(fast._lam_sc) == pytest.approx(list(slow._lam_sc), rel=1e-12)
        assert list(fast._lam_sw) == pytest.approx(list(slow._lam_sw), rel=1e-12)
    if vote == "stacking":
        fast._settled()
        a, b = fast._stack_arrays(), slow._stack_arrays()
        assert a["stack.learned"][0] == b["stack.learned"][0] == 400
        assert a["stack.weights"] == pytest.approx(b["stack.weights"], abs=1e-12)


def test_imbalance_rates_hand_worked():
    """OOB / UOB (Wang, Minku & Yao 2015) over the stream A, A, B, A with decay 0.9, worked by
    hand: the sizes after each example and its Poisson rate."""
    # A: w_A = 0.1 -> 1 | A: w_A = 0.19 -> 1 | B: w_A = 0.171, w_B = 0.1 -> OOB 0.171 / 0.1,
    # UOB 1 | A: w_A = 0.1539 + 0.1 = 0.2539, w_B = 0.09 -> OOB 1, UOB 0.09 / 0.2539
    want = {"oob": [1.0, 1.0, 1.71, 1.0], "uob": [1.0, 1.0, 1.0, 0.09 / 0.2539]}
    for mode, rates in want.items():
        model = OnlineBagging(Constant("A"), n_models=2, seed=0, imbalance=mode,
                              imbalance_decay=0.9)  # fmt: skip
        assert [model._imbalance_rate(y) for y in "AABA"] == pytest.approx(rates, rel=1e-12)
        assert model._class_sizes == pytest.approx({"A": 0.2539, "B": 0.09}, rel=1e-12)
    # the rates reach the members: OOB's mean weight of B's examples approaches 1 / (B's share)
    # = 20, capped near 1 / (1 - decay): 10 with the papers' 0.9, 100 with the default 0.99
    for decay, low, high in ((0.9, 3.0, 10.0), (None, 10.0, 25.0)):
        opts = {} if decay is None else {"imbalance_decay": decay}
        model = OnlineBagging(Constant("A"), n_models=50, seed=1, imbalance="oob", **opts)
        model._members = [Constant("A") for _ in range(50)]
        for i in range(400):
            model.learn_one({}, "B" if i % 20 == 0 else "A")
        b_weight = sum(w for m in model._members for w in m.weights) - 380 * 50  # (A's: 1)
        assert low < b_weight / (20 * 50) < high, decay


@pytest.mark.parametrize("imbalance", ["oob", "uob"])
@pytest.mark.parametrize("learner", [NaiveBayes, lambda: HoeffdingTree(grace_period=30)])
def test_imbalance_kernel_equals_python_algorithm(learner, imbalance):
    """The adaptive kernel's class sizes and Poisson rates (``_adaptive.imbalance_rate``) mirror
    ``OnlineBagging._imbalance_rate`` on the slow path exactly, on a stream with 1 class in 10
    and a third class arriving mid-stream."""
    kinds = {"x1": "numeric", "x2": "numeric", "colour": "categorical", "size": "categorical",
             "late": "numeric"}  # fmt: skip
    data = [(x, y if i % 10 == 0 else "neg") for i, (x, y) in enumerate(mixed_stream(400, 4))]
    classes = ["neg", "pos", "mid"]
    data[250] = (data[250][0], "mid")
    fast = OnlineBagging(learner(), n_models=5, seed=11, imbalance=imbalance)
    fast.declare(features=kinds, classes=classes)
    proto = fast.learner.clone()  # (its trees' rule as imbalance made it: "skip")
    proto.declare(features=kinds, classes=classes)
    slow = OnlineBagging(Proxy(proto), n_models=5, seed=11, imbalance=imbalance)
    for member in slow._members:
        member.inner.declare(features=kinds, classes=classes)
    slow.declare(classes=classes)
    for x, y in data:
        pf, ps = fast.predict_proba_one(x), slow.predict_proba_one(x)
        assert set(k for k, v in pf.items() if v > 0) == set(k for k, v in ps.items() if v > 0)
        for k, v in ps.items():
            assert pf.get(k, 0.0) == pytest.approx(v, abs=1e-12)
        fast.learn_one(x, y)
        slow.learn_one(x, y)
    fast._settled()
    a, b = fast._extra_arrays(), slow._extra_arrays()
    assert a["imbalance.class_sizes"].tolist() == b["imbalance.class_sizes"].tolist()
    assert (a["imbalance.class_sizes"] > 0).all()


def test_online_bagging_converges_to_batch_bagging():
    """Oza's theorem: with a lossless base learner online bagging converges to batch bagging."""
    train = list(categorical_stream(50_000, seed=3, n_features=8, n_values=5))
    test = [x for x, _ in categorical_stream(2_000, seed=4, n_features=8, n_values=5)]
    online = OnlineBagging(NaiveBayes(), n_models=10, seed=1)
    online.learn_many([x for x, _ in train], [y for _, y in train])
    batch = BatchBagging(NaiveBayes(), n_models=10, seed=1).fit(
        [x for x, _ in train], [y for _, y in train]
    )
    agree = sum(a == b for a, b in zip(online.predict_many(test), batch.predict_many(test)))
    assert agree / len(test) >= 0.99


def test_online_boosting_converges_to_adaboost():
    """Oza (2001) §4.5: with naive Bayes, online boosting converges to batch boosting."""
    train = list(categorical_stream(50_000, seed=3, n_features=8, n_values=5))
    test = [x for x, _ in categorical_stream(2_000, seed=4, n_features=8, n_values=5)]
    X, y = [x for x, _ in train], [t for _, t in train]
    online = OnlineBoosting(NaiveBayes(), n_models=10, seed=1)
    online.learn_many(X, y)
    batch = AdaBoost(NaiveBayes(), n_models=10, seed=1).fit(X, y)
    agree = sum(a == b for a, b in zip(online.predict_many(test), batch.predict_many(test)))
    assert agree / len(test) >= 0.99


def test_priming_then_online():
    data = list(mixed_stream(1200, 9))
    X, y = [x for x, _ in data], [t for _, t in data]
    for cls in (OnlineBagging, OnlineBoosting):
        primed = cls(HoeffdingTree(grace_period=20), n_models=5, seed=1).prime(X[:300], y[:300])
        assert primed.n_seen == 300
        preds = primed.predict_learn_many(X[300:], y[300:])
        acc = sum(max(p, key=p.get) == t for p, t in zip(preds, y[300:])) / len(preds)
        assert acc > 0.75
    boost = OnlineBoosting(NaiveBayes(), n_models=3, seed=1).prime(X[:300], y[:300])
    assert sum(boost._lam_sc + boost._lam_sw) == pytest.approx(900.0)


def test_batch_ensembles_beat_chance():
    data = list(mixed_stream(1500, 2))
    X, y = [x for x, _ in data], [t for _, t in data]
    for model in (
        BatchBagging(DecisionStump(), n_models=5, seed=1),
        AdaBoost(DecisionStump(), n_models=10, seed=1),
        AdaBoost(HoeffdingTree(grace_period=50), n_models=5, seed=1),
    ):
        model.fit(X[:1000], y[:1000])
        acc = sum(p == t for p, t in zip(model.predict_many(X[1000:]), y[1000:])) / 500
        assert acc > 0.75, model


class Fixed(Constant):
    """A member that always predicts the same class probabilities."""

    def __init__(self, proba):
        super().__init__(max(proba, key=proba.get))
        self.proba = proba

    def predict_proba_one(self, x):
        return dict(self.proba)

    def clone(self):
        return Fixed(self.proba)


@pytest.mark.parametrize("cls", [OnlineBagging, OnlineBoosting])
def test_vote_average_weighs_confidence_majority_counts_heads(cls):
    """Two members lean to A (0.6), one is sure of B: the thesis' majority says A, the
    probability average (MOA's and river's rule, Chorus' default) says B."""
    members = [Fixed({"A": 0.6, "B": 0.4}), Fixed({"A": 0.6, "B": 0.4}), Fixed({"B": 1.0})]
    votes = {}
    for vote in ("average", "majority"):
        model = cls(Constant("A"), n_models=3, seed=0, vote=vote)
        model._members = [m.clone() for m in members]
        model.declare(classes=["A", "B"])
        if cls is OnlineBoosting:  # every member e = 1/4: equal vote weights
            model._float_state[0], model._float_state[1] = 3.0, 1.0
        votes[vote] = model.predict_one({})
    assert votes == {"average": "B", "majority": "A"}
    assert cls(Constant("A")).vote == "average"


def test_average_vote_beats_majority_on_a_noisy_stream():
    """On a noisy generated stream the probability average is the more accurate rule (why it is
    the default); measured over three seeds, prequential."""
    from river.datasets import synth

    def accuracy(vote, seed):
        rows = list(synth.SEA(variant=0, seed=seed, noise=0.1).take(1500))
        model = OnlineBoosting(HoeffdingTree(), n_models=10, seed=seed, vote=vote)
        preds = model.predict_learn_many([x for x, _ in rows], [y for _, y in rows])
        return sum(bool(p) and max(p, key=p.get) == y for p, (_, y) in zip(preds, rows)) / 1500

    mean = {v: sum(accuracy(v, s) for s in (1, 2, 3)) / 3 for v in ("average", "majority")}
    assert mean["average"] > mean["majority"] + 0.005, mean


def test_invalid_options_name_the_choices():
    with pytest.raises(ValueError, match="majority"):
        OnlineBagging(NaiveBayes(), vote="mean")
    with pytest.raises(ValueError, match="average"):
        OnlineBoosting(NaiveBayes(), vote="mean")
    with pytest.raises(ValueError, match="n_models"):
        OnlineBoosting(NaiveBayes(), n_models=0)
    with pytest.raises(ValueError, match="leaf_prediction"):
        HoeffdingTree(leaf_prediction="majority")
    with pytest.raises(ValueError, match="learn_one"):
        OnlineBagging(object())


@pytest.mark.parametrize("cls", [OnlineBagging, OnlineBoosting])
def test_slow_path_breaks_ties_in_the_ensembles_class_order(cls):
    """Stumps often predict exact 50/50 ties on a stream of pure noise over two binary
    features. The compiled kernel breaks a member's tie in the ensemble's class order; the slow
    path must too, even where a member met the classes in another order (classes undeclared)."""
    import random

    rng = random.Random(5)
    kinds = {"a": "categorical", "b": "categorical"}
    proto = DecisionStump()
    proto.declare(features=kinds)
    fast = cls(DecisionStump(), n_models=8, seed=3)
    fast.declare(features=kinds)
    slow = cls(Proxy(proto), n_models=8, seed=3)
    for member in slow._members:
        member.inner.declare(features=kinds)
    ties = 0
    for _ in range(300):
        x = {"a": rng.choice("pq"), "b": rng.choice("rs")}
        y = rng.choice(["late", "early"])
        ties += any(
            len(set(p.values())) == 1 and len(p) == 2
            for p in (m.predict_proba_one(x) for m in slow._members)
        )
        assert fast.predict_proba_one(x) == pytest.approx(slow.predict_proba_one(x), abs=1e-12)
        fast.learn_one(x, y)
        slow.learn_one(x, y)
    assert ties > 10  # the stream does exercise the tie-break
    if cls is OnlineBoosting:
        assert list(fast._lam_sc) == pytest.approx(list(slow._lam_sc), rel=1e-12)
