"""Sparse leaf statistics (issue 11): state grows with what each leaf saw (features, values and
classes), version-1 and version-2 states load and go on exactly."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streams import mixed_stream
from test_exactness import batch_naive_bayes

from ensembles import OnlineBagging, OnlineBoosting, load_state
from learners import HoeffdingTree, NaiveBayes
from learners.native import STATE_VERSION

V1 = Path(__file__).parent / "data" / "state_v1.npz"
V2 = Path(__file__).parent / "data" / "state_v2.npz"


def _v1_states(path: Path = V1) -> dict[str, tuple[dict, list]]:
    """The models of ``state_v1.npz``: version-1 states written by the dense-layout code after
    300 examples of ``mixed_stream(500, 3, new_class_at=250)``, with that code's prequential
    predictions on the 200 examples after."""
    raw = np.load(path)
    out = {}
    for name in {k.split(".")[0] for k in raw.files}:
        header = json.loads(str(raw[f"{name}.header"]))
        arrays = {k[len(name) + 1 :]: raw[k] for k in raw.files
                  if k.startswith(name + ".") and k.count(".") >= 2}  # fmt: skip
        after = json.loads(str(raw[f"{name}.after"]))
        out[name] = ({"header": header, "arrays": arrays}, after)
    return out


def assert_answers(preds: list[dict], after: list) -> None:
    """The answers are the saved code's: same classes, probabilities to 1e-12. (Bit for bit
    until session 9, when naive Bayes began to multiply its category likelihoods instead of
    adding their logs: the last bits of its answers moved.)"""
    got = [[list(kv) for kv in sorted(p.items(), key=str)] for p in preds]
    assert len(got) == len(after)
    for i, (g, a) in enumerate(zip(got, after, strict=True)):
        assert [k for k, _ in g] == [k for k, _ in a], i
        assert [v for _, v in g] == pytest.approx([v for _, v in a], rel=1e-12, abs=1e-15), i


@pytest.mark.parametrize("name", sorted(_v1_states()))
def test_version_1_state_loads_and_goes_on_exactly(name):
    state, after = _v1_states()[name]
    assert state["header"]["version"] == 1 and state["arrays"]["tree.cat"].ndim == 4
    model = load_state(state)
    data = list(mixed_stream(500, 3, new_class_at=250))[300:]
    preds = model.predict_learn_many([x for x, _ in data], [y for _, y in data])
    assert_answers(preds, after)
    again = load_state(model.to_state())  # and it saves in the current format
    assert again.to_state()["header"]["version"] == STATE_VERSION


def _many(y: str, x: dict) -> str:
    return y + str(int(x.get("x2") or 0))


@pytest.mark.parametrize("name", sorted(_v1_states(V2)))
def test_version_2_state_loads_and_goes_on_exactly(name):
    """``state_v2.npz``: version-2 states (sparse rows, dense over the classes) written by the
    code of a0899c5 after 300 weighted examples of ``mixed_stream(500, 3, new_class_at=250)``
    (the ``_many`` models with up to 33 classes), with its predictions on the 200 after."""
    state, after = _v1_states(V2)[name]
    assert state["header"]["version"] == 2 and state["arrays"]["tree.dist"].ndim == 3
    many = name.endswith("_many") or name == "boosting_nb"
    data = list(mixed_stream(500, 3, new_class_at=250))[300:]
    X = [x for x, _ in data]
    Y = [_many(y, x) if many else y for x, y in data]
    W = [1.0 if i % 7 else 0.5 + (i % 3) * 0.25 for i in range(300, 500)]
    model = load_state(state)
    preds = model.predict_learn_many(X, Y, W)
    assert_answers(preds, after)
    again = load_state(model.to_state())
    assert again.to_state()["header"]["version"] == STATE_VERSION
    assert again.predict_proba_many(X) == model.predict_proba_many(X)


def _label_stream(n: int, labels: int, seed: int = 0):
    """Two numeric features and a categorical one; ``labels`` distinct labels, each tied to a
    region of the features (so trees split and leaves hold a part of them)."""
    rng = random.Random(seed)
    for _ in range(n):
        c = rng.randrange(labels)
        x = {"a": c / labels + rng.gauss(0, 0.05), "b": rng.random(), "g": f"g{c % 7}"}
        yield x, f"label-{c}"


def test_state_grows_linearly_with_thousands_of_classes():
    """3 bagged trees, 4,000 distinct labels: the state after 2N examples is about twice that
    after N (a class axis dense over all classes would make every row as wide as the number of
    labels so far: quadratic)."""
    model = OnlineBagging(HoeffdingTree(grace_period=50), n_models=3, seed=1,
                          limits={"max_classes": 10_000})  # fmt: skip
    data = list(_label_stream(8000, 4000))
    sizes = {}
    for i in range(0, 8000, 1000):
        model.learn_many([x for x, _ in data[i : i + 1000]], [y for _, y in data[i : i + 1000]])
        sizes[i + 1000] = model.state_bytes
    assert len(model.classes) > 3000
    for n in (2000, 4000):
        assert sizes[2 * n] <= 2.6 * sizes[n], sizes
    assert sizes[8000] / 8000 < 3 * 3000, sizes  # bytes per example (3 members): small


def test_naive_bayes_over_many_classes_equals_batch():
    """Hundreds of classes, each row's class block grown (and the pools compacted) many times:
    naive Bayes still equals naive Bayes fitted in one batch."""
    rng = random.Random(3)
    data = [(x, y, rng.choice([1.0, 0.5, 2.0])) for x, y in _label_stream(1500, 300, seed=3)]
    nb = NaiveBayes(limits={"max_classes": 1000})
    probes = [x for x, _ in _label_stream(10, 300, seed=9)]
    for i, (x, y, w) in enumerate(data):
        nb.learn_one(x, y, w=w)
        if i in (40, 700, 1499):
            for probe in probes:
                online = nb.predict_proba_one(probe)
                batch = batch_naive_bayes(data[: i + 1], probe)
                for c, p in batch.items():
                    assert online[c] == pytest.approx(p, abs=1e-9), (i, c)
                assert all(online[c] == 0.0 for c in set(online) - set(batch))


def test_class_cap_can_be_raised_to_100000():
    model = OnlineBoosting(NaiveBayes(), n_models=2, seed=3, limits={"max_classes": 100_000})
    X = [{"a": float(i % 13), "s": f"v{i % 5}"} for i in range(3000)]
    Y = [f"c{i}" for i in range(3000)]  # every label new
    model.learn_many(X, Y)
    assert len(model.classes) == 3000
    p = model.predict_proba_one({"a": 3.0, "s": "v3"})
    assert math.isclose(sum(p.values()), 1.0) and min(p.values()) >= 0.0


_TEXT = st.one_of(
    st.text(min_size=1, max_size=30),
    st.text(alphabet="\u00e9\u4e2d\U0001f600\u200bab", min_size=200, max_size=2000),
)
_LABELS = st.one_of(  # a model's labels have one type
    st.lists(_TEXT, min_size=2, max_size=400, unique=True),
    st.lists(st.integers(-(2**40), 2**40), min_size=2, max_size=400, unique=True),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(labels=_LABELS,
       seed=st.integers(0, 2**16), nb_leaves=st.booleans())  # fmt: skip
def test_many_hostile_classes_give_valid_probabilities_and_round_trip(labels, seed, nb_leaves):
    rng = random.Random(seed)
    learner = NaiveBayes() if nb_leaves else HoeffdingTree(grace_period=10)
    model = OnlineBagging(learner, n_models=3, seed=seed, limits={"max_classes": 100_000})
    X = [{"u": rng.random(), "k": rng.choice(["\u00fc", "x" * 300, "\U0001f600"])}
         for _ in range(3 * len(labels))]  # fmt: skip
    Y = [labels[i % len(labels)] if i % 3 else rng.choice(labels) for i in range(len(X))]
    preds = model.predict_learn_many(X, Y)
    known = set()
    for p, y in zip(preds, Y, strict=True):
        if p:
            assert set(p) <= known and math.isclose(sum(p.values()), 1.0, abs_tol=1e-9)
            assert all(0.0 <= v <= 1.0 for v in p.values())
        known.add(y)
    copy = load_state(model.to_state())
    probes = X[:20] + [{}, {"u": float("nan")}, {"k": "never seen"}]
    assert copy.predict_proba_many(probes) == model.predict_proba_many(probes)
    copy.learn_many(X[:30], Y[:30])
    model.learn_many(X[:30], Y[:30])
    assert copy.predict_proba_many(probes) == model.predict_proba_many(probes)
