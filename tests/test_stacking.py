"""The stacked vote (``vote="stacking"``, ``ensembles.stacking``): its meta-learner's compiled step
equals the readable reference, the meta-learner learns from what the members said *before* they
learned an example (a leaky one is detected), and its state is saved, checked, reloaded and
replayed exactly."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streams import CALL_PATTERNS, Proxy, learn_by, mixed_stream, same

from ensembles import (
    AdaptiveRandomForest,
    OnlineBagging,
    OnlineBoosting,
    StreamingRandomPatches,
    adaptive,
    build_model,
    load_state,
    stacking,
)
from ensembles._rng import poisson
from ensembles._stacking import META_L2, keep_member, meta_learn, meta_proba, meta_room
from ensembles.stacking import INIT, L2, RATE
from learners import HoeffdingTree, NaiveBayes
from learners.jit import kernel

KINDS = {"x1": "numeric", "x2": "numeric", "colour": "categorical", "size": "categorical",
         "late": "numeric"}  # fmt: skip


# --------------------------------------------------------------------------- the step
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_models=st.integers(1, 4), seed=st.integers(0, 2**32 - 1), l2=st.sampled_from([0.0, 0.05]),
       steps=st.integers(1, 40))  # fmt: skip
def test_the_compiled_step_equals_the_reference(n_models, seed, l2, steps) -> None:
    """``_stacking.meta_learn`` (and ``meta_room``, ``keep_member``, ``meta_proba``) against
    ``stacking.MetaLearner`` on random sparse member probabilities, classes arriving one by one
    (the arrays grow: capacity 2, 4, 8), weights from 0.1 to 1e6 (capped) and with an L2
    penalty: the same probabilities and weights after every step."""
    rng = np.random.default_rng(seed)
    st_ = adaptive.new_state(n_models, 0, 1.0, 0.002)
    st_.fpar[META_L2] = l2
    ref = stacking.MetaLearner(n_models, rate=RATE, l2=l2)
    n = 1
    pk, pv = np.zeros(8, np.int64), np.zeros(8)
    for _ in range(steps):
        n_out = n + 1 if n < 7 and rng.random() < 0.2 else n  # a new class, learned now
        y = n_out - 1 if n_out > n else int(rng.integers(n))
        w = float(rng.choice([0.1, 1.0, 3.0, 1e6]))
        kernel(meta_room)(st_, n)
        X = np.zeros((n_models, n_out))
        for m in range(n_models):
            k = int(rng.integers(n + 1))  # (0: the member gives nothing)
            codes = rng.choice(n, size=k, replace=False)
            p = rng.dirichlet(np.ones(k)) if k else np.zeros(0)
            pk[:k], pv[:k] = codes, p
            X[m, codes] = p
            kernel(keep_member)(st_, m, pk, pv, k)
        if ref.learned:  # (the softmax is over the classes learned: none before)
            out = np.zeros(n)
            kernel(meta_proba)(st_, n, n, out)
            np.testing.assert_allclose(out, ref.proba(X[:, :n]), rtol=0, atol=1e-12)
        kernel(meta_learn)(st_, n, n_out, y, w)
        ref.learn(X, y, w)
        n = n_out
        got = stacking.resized(st_.meta_w, n_models, n)
        np.testing.assert_allclose(got, ref.weights, rtol=0, atol=1e-12)
        assert int(st_.meta_n[0]) == ref.learned
    K = st_.meta_x.shape[1]  # (the capacity)
    assert K >= n and st_.meta_w.shape == (K, n_models * K + 1)


def test_a_hand_worked_step() -> None:
    """Two members, two classes, the initial weights (``INIT`` on a member's probability of a
    class for that class, biases -inf). A first example of class 1: class 1 joins the softmax
    (bias 0) alone, p_1 = 1, no gradient. Then class 0 with member 1 saying P(0) = 1 and
    member 2 saying P(1) = 1: class 0 joins, both classes have the logit INIT, so the softmax
    is (1/2, 1/2), the gradient of class 0 (learned) -1/2 and of class 1 +1/2: the weights of
    these two inputs and the bias move by +rate / 2 for class 0 and -rate / 2 for class 1,
    and no other weight (the inputs absent: 0)."""
    ref = stacking.MetaLearner(2)
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    h, i, inf = RATE / 2, INIT, float("inf")
    ref.learn(X, 1, 1.0)
    # columns: (m1, c0), (m1, c1), (m2, c0), (m2, c1), bias
    assert ref.weights.tolist() == [[i, 0.0, i, 0.0, -inf], [0.0, i, 0.0, i, 0.0]]
    ref.learn(X, 0, 1.0)
    assert ref.weights.tolist() == [[i + h, 0.0, i, h, h], [-h, i, 0.0, i - h, -h]]
    st_ = adaptive.new_state(2, 0, 1.0, 0.002)
    kernel(meta_room)(st_, 2)
    for m, (code, p) in enumerate([(0, 1.0), (1, 1.0)]):
        kernel(keep_member)(st_, m, np.array([code]), np.array([p]), 1)
    kernel(meta_learn)(st_, 2, 2, 1, 1.0)
    kernel(meta_learn)(st_, 2, 2, 0, 1.0)
    assert stacking.resized(st_.meta_w, 2, 2).tolist() == ref.weights.tolist()


# --------------------------------------------------------------------------- the models
def _pair(cls, learner, *, n_models=5, seed=11, declare_classes=True):
    """A compiled model and its slow-path reference (``Proxy`` members), features (and classes)
    declared so that both code them alike."""
    classes = ["neg", "pos"] if declare_classes else None
    fast = cls(learner(), n_models=n_models, seed=seed, vote="stacking")
    fast.declare(features=KINDS, classes=classes)
    proto = learner()
    proto.declare(features=KINDS, classes=classes)
    slow = cls(Proxy(proto), n_models=n_models, seed=seed, vote="stacking")
    for member in slow._members:
        member.inner.declare(features=KINDS, classes=classes)
    slow.declare(classes=classes)
    return fast, slow


@pytest.mark.parametrize("cls", [OnlineBagging, OnlineBoosting])
def test_a_new_class_mid_stream_grows_the_meta_learner_as_the_reference(cls) -> None:
    """A class first seen at example 200: the compiled meta-learner grows its arrays in the
    kernel (capacity 2 -> 4) and answers as the reference, whose weights are at 3 classes."""
    fast, slow = _pair(cls, NaiveBayes, declare_classes=False)
    for x, y in mixed_stream(400, 5, new_class_at=200):
        pf, ps = fast.predict_proba_one(x), slow.predict_proba_one(x)
        assert pf.keys() == ps.keys() or not ps
        for c, v in ps.items():
            assert pf[c] == pytest.approx(v, abs=1e-12)
        fast.learn_one(x, y)
        slow.learn_one(x, y)
    assert fast.classes == slow.classes and len(fast.classes) == 3
    fast._settled()  # (the last learn_one is kept until a reader runs it)
    a, b = fast._stack_arrays(), slow._stack_arrays()
    np.testing.assert_allclose(a["stack.weights"], b["stack.weights"], rtol=0, atol=1e-12)
    assert a["stack.learned"][0] == b["stack.learned"][0] == 400
    assert fast._float_state.meta_x.shape[1] == 4  # (grown by doubling)


class LeakyBagging(OnlineBagging):
    """Stacking done wrong: the members learn x first, then the meta-learner learns from their
    probabilities of x (what the test below must detect)."""

    def _py_learn(self, x, y, w, seq) -> None:
        meta, self._meta = self._meta, None  # (the members learn, the meta-learner not yet)
        try:
            super()._py_learn(x, y, w, seq)
        finally:
            self._meta = meta
        self._stack_learn(x, y, w)


def _quiet_first_member_seed(examples: int) -> int:
    """A seed whose member 0 draws k = 0 on examples 0 .. examples - 2 and k > 0 on the last
    (bagging's Poisson(1) draws; boosting's member 0 draws the same, with lambda = w = 1)."""
    for seed in range(10_000):
        ks = [poisson(1.0, seed, seq, 0) for seq in range(examples)]
        if all(k == 0 for k in ks[:-1]) and ks[-1] > 0:
            return seed
    raise AssertionError("no such seed")


ROWS = [({"x1": 0.2, "colour": "red"}, "neg"), ({"x1": 1.5, "colour": "blue"}, "pos"),
        ({"x1": 0.1, "colour": "red"}, "neg"), ({"x1": 1.7, "colour": "blue"}, "pos")]  # fmt: skip


def _member0_learned(model) -> np.ndarray:
    """What the meta-learner learned on member 0's probabilities: its weights on them (every
    output class) minus their initial ones."""
    model._settled()
    n = len(model.classes)
    return model._stack_arrays()["stack.weights"][:, :n] - INIT * np.eye(n)


@pytest.mark.parametrize("how", CALL_PATTERNS)
@pytest.mark.parametrize("cls", [OnlineBagging, OnlineBoosting])
def test_the_meta_learner_learns_what_the_members_said_before_learning(cls, how) -> None:
    """No leakage, checked where it shows exactly. Member 0 draws k = 0 on the first three
    examples and k > 0 on the fourth: before learning each example it has never learned
    anything and gives no probabilities, so the meta-learner's weights on member 0's inputs
    stay exactly as they started. Fed the members' probabilities *after* they learn
    (``LeakyBagging``), member 0 gives P(y) = 1 for the fourth example, those weights move,
    and so this
    test fails for a kernel (or ``_py_learn``) that lets the members learn first: shown below
    on the leaky reference. Every call pattern: the learn's member probabilities come from
    the prediction, a kept learn, a reused prediction or a batch."""
    seed = _quiet_first_member_seed(len(ROWS))
    fast = cls(NaiveBayes(), n_models=4, seed=seed, vote="stacking")
    learn_by(fast, ROWS, how)
    assert fast.n_seen == len(ROWS)
    w = _member0_learned(fast)
    assert w.shape == (2, 2) and not w.any(), w
    others = fast._stack_arrays()["stack.weights"][:, 2:-1]
    assert (others != stacking.resized(np.zeros((0, 1)), 4, 2)[:, 2:-1]).any()  # (it learned)
    if cls is OnlineBagging and how == "learn_one":  # the reference, and the leaky one
        slow = OnlineBagging(Proxy(NaiveBayes()), n_models=4, seed=seed, vote="stacking")
        learn_by(slow, ROWS, how)
        assert not _member0_learned(slow).any()
        leaky = LeakyBagging(Proxy(NaiveBayes()), n_models=4, seed=seed, vote="stacking")
        learn_by(leaky, ROWS, how)
        assert _member0_learned(leaky).any()  # the leak shows: this test detects it
        probe = {"x1": 1.6, "colour": "blue"}
        assert leaky.predict_proba_one(probe) != slow.predict_proba_one(probe)  # another model


# --------------------------------------------------------------------------- state
def _stacked(cls=OnlineBagging, **options):
    return cls(HoeffdingTree(grace_period=30), n_models=3, seed=5, vote="stacking", **options)


@pytest.mark.parametrize("cls", [OnlineBagging, OnlineBoosting, AdaptiveRandomForest,
                                 StreamingRandomPatches])  # fmt: skip
def test_state_round_trips_and_replays_bit_identically(cls) -> None:
    """A new class mid-stream (the meta-learner's arrays grow in the kernel), saved after 400
    examples: the state loads to the same state, pickle and deepcopy too, the copy goes on
    answering and learning as the original; the same stream one example at a time gives the
    same model as in batches (the forests too: their meta-learner is this one)."""
    data = list(mixed_stream(600, 8, new_class_at=300))
    model = _stacked(cls)
    model.predict_learn_many([x for x, _ in data[:400]], [y for _, y in data[:400]])
    saved = model.to_state()
    assert saved["arrays"]["stack.weights"].shape == (3, 3 * 3 + 1)
    assert int(saved["arrays"]["stack.learned"][0]) == 400
    loaded = load_state(saved)
    assert same(loaded.to_state(), saved)
    for other in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert same(other.to_state(), saved)
    rest = data[400:]
    a = [model.predict_learn_one(x, y) for x, y in rest]
    b = [loaded.predict_learn_one(x, y) for x, y in rest]
    assert same(a, b) and same(model.to_state(), loaded.to_state())
    replay = _stacked(cls)  # the same seed and stream, another call pattern: the same model
    for x, y in data:
        replay.learn_one(x, y)
    assert same(replay.to_state(), model.to_state())


def test_describe_shows_the_meta_learners_size() -> None:
    model = _stacked()
    assert model.describe()["meta_learner"]["learned"] == 0
    for x, y in mixed_stream(100, 2):
        model.learn_one(x, y)
    d = model.describe()["meta_learner"]
    assert d == {"kind": "softmax_regression", "classes": 2, "inputs": 3 * 2 + 1,
                 "weights": 2 * 7, "learned": 100, "rate": RATE, "l2": L2}  # fmt: skip
    assert "meta_learner" not in OnlineBagging(NaiveBayes(), n_models=2).describe()


def test_a_state_of_another_shape_is_refused_naming_the_array() -> None:
    """(Forged values: ``tests/test_forged_state.py``, ``EXTRAS_SCRIPT``.)"""
    model = _stacked()
    for x, y in mixed_stream(200, 3):
        model.learn_one(x, y)
    good = model.to_state()
    load_state(good)  # (as saved: loads)
    arrays = dict(good["arrays"])
    arrays["stack.weights"] = np.zeros((2, 8))  # another shape
    with pytest.raises(ValueError, match=r"stack\.weights.*shape"):
        load_state({"header": good["header"], "arrays": arrays})
    del arrays["stack.weights"]
    with pytest.raises(ValueError, match=r"stack\.weights is missing"):
        load_state({"header": good["header"], "arrays": arrays})


# --------------------------------------------------------------------------- options and specs
def test_options_and_specs() -> None:
    spec = {"ensemble": "boosting", "learner": "naive_bayes", "n_models": 3, "seed": 1,
            "params": {"vote": "stacking"}}  # fmt: skip
    model = build_model(spec)
    assert isinstance(model, OnlineBoosting) and model.vote == "stacking" and model.adaptive
    assert model.spec()["params"] == {"vote": "stacking"}
    with pytest.raises(ValueError, match="stacking"):  # the choices are named
        OnlineBagging(NaiveBayes(), vote="stacked")
    with pytest.raises(ValueError, match="output_codes"):
        OnlineBagging(NaiveBayes(), vote="stacking", output_codes=True)
    slow = OnlineBagging(Proxy(NaiveBayes()), n_models=2, vote="stacking")
    assert not slow.adaptive and slow._meta is not None  # (its meta-learner is Python's)
    for i in range(20):
        slow.learn_one({"a": float(i % 5)}, i % 5 > 2)
    assert slow._meta.learned == 20 and slow.predict_one({"a": 4.0}) is True


def test_the_arrays_grow_alike_compiled_and_interpreted() -> None:
    """Compiled, then interpreted twins (``learners.jit``) while new classes arrive (the twin
    grows the arrays of a struct that compiled code made: ``AdaptiveStruct``'s grown arrays are
    set in both), then compiled again: the same answers and state as compiled throughout."""
    from learners import jit

    data = list(mixed_stream(300, 4))
    for i in range(120, 300, 7):  # classes 3, 4, ...: capacity 2 -> 4 -> 8 in the twin's part
        data[i] = (data[i][0], f"c{i % 5}")

    def run(modes: list[bool]) -> tuple:
        model = _stacked()
        answers = []
        try:
            for part, mode in zip((data[:100], data[100:200], data[200:]), modes, strict=True):
                jit.set_interpreted(mode)
                answers += [model.predict_learn_one(x, y) for x, y in part]
        finally:
            jit.set_interpreted(False)
        return answers, model.to_state()

    compiled = run([False, False, False])
    assert len(compiled[1]["header"]["schema"]["classes"]) == 7
    assert same(run([False, True, False]), compiled)
