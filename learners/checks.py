"""Chorus's conformance suite, published the way river publishes ``river.checks``.

Call ``check_learner`` on your own learner (anything following ``learners.base.Learner``), or
iterate over ``yield_checks`` to run (and name) the checks one by one, e.g. in pytest::

    from learners.checks import check_learner
    check_learner(MyLearner())                 # raises AssertionError naming the failed check

Each check takes a fresh, untrained model (``model.clone()``) and runs it on ``mixed_stream``:
numeric and categorical features, missing values (absent keys, ``None``, NaN), a feature and a
category first seen mid-stream, and a class first seen mid-stream. The checks are those
``STYLE.md`` lists: probabilities in [0, 1] summing to 1, ``{}`` before training, inputs never
mutated, new / missing / unseen features and classes, ``to_state`` round trips (and ``pickle``
/ ``copy.deepcopy``, which go through it) continue bit-identically, same stream = same model,
``clone()`` is fresh, ``w=0`` does nothing, batch forms (lists of dicts or pandas) equal the
per-row forms (the pandas check only where pandas is installed: without it no DataFrame can reach
the model). ``check_learner(..., river=True)`` also runs river's own
``river.checks.check_estimator`` when the model is a river estimator; river's checks import
scikit-learn, so without it that raises an ``ImportError`` saying so (or pass ``river=False``).

Examples
--------
>>> from learners import NaiveBayes
>>> from learners.checks import check_learner
>>> check_learner(NaiveBayes(), river=False)
"""

from __future__ import annotations

import copy
import importlib
import math
import pickle
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .base import argmax_label


def mixed_stream(n: int, seed: int = 0, *, new_class_at: int | None = None, missing: float = 0.1):
    """Numeric + categorical features with missing values, categories that appear late, and
    (optionally) a class that first appears at ``new_class_at``.

    The label is a noisy function of ``x1``, ``colour`` and ``size``.
    """
    rng = random.Random(seed)
    colours = ["red", "green", "blue"]
    for i in range(n):
        if i == n // 2:
            colours.append("violet")  # a category first seen mid-stream
        x: dict[str, Any] = {
            "x1": rng.gauss(0.0, 1.0),
            "x2": rng.uniform(0, 10),
            "colour": rng.choice(colours),
            "size": rng.choice(["S", "M", "L"]),
        }
        if i > n // 3:
            x["late"] = rng.random()  # a feature first seen mid-stream
        for k in list(x):
            if rng.random() < missing:
                if rng.random() < 0.5:
                    del x[k]
                else:
                    x[k] = None
        score = (x.get("x1") or 0.0) + (1.0 if x.get("colour") == "red" else 0.0)
        score += 0.5 if x.get("size") == "L" else 0.0
        y = "pos" if score + rng.gauss(0, 0.3) > 0.5 else "neg"
        if new_class_at is not None and i >= new_class_at and (x.get("x2") or 0) > 8:
            y = "rare"
        yield x, y


def _stream(n: int = 300, seed: int = 1, **kw: Any) -> list:
    return list(mixed_stream(n, seed, **kw))


def _assert_proba(p: dict) -> None:
    assert isinstance(p, dict), f"predict_proba_one returned {type(p).__name__}, not a dict"
    assert all(0.0 <= v <= 1.0 for v in p.values()), f"probabilities outside [0, 1]: {p}"
    assert math.isclose(sum(p.values()), 1.0, abs_tol=1e-9), f"probabilities sum to != 1: {p}"


def check_empty_before_training(model: Any) -> None:
    """``predict_proba_one`` is ``{}`` and ``predict_one`` ``None`` before any training."""
    assert model.predict_proba_one({"x1": 1.0, "colour": "red"}) == {}
    assert model.predict_one({"x1": 1.0}) is None


def check_probabilities_and_purity(model: Any) -> None:
    """Probabilities are in [0, 1] and sum to 1; predicting and learning never mutate ``x``;
    ``predict_one`` is the argmax of ``predict_proba_one`` (ties: first label)."""
    for x, y in _stream(300, new_class_at=150):
        before = copy.deepcopy(x)
        p = model.predict_proba_one(x)
        if p:
            _assert_proba(p)
        assert model.predict_one(x) == argmax_label(p)
        model.learn_one(x, y)
        assert x == before, "the model mutated its input"


def check_new_missing_and_unseen_features(model: Any) -> None:
    """Empty rows, missing values, unknown features and unseen categories predict fine."""
    for x, y in _stream(200):
        model.learn_one(x, y)
    for x in ({}, {"x1": None}, {"never_seen": 3.0}, {"colour": "ultraviolet"},
              {"x1": float("nan"), "size": "XXL"}, {"brand_new_cat": "q", "x2": 1.0}):  # fmt: skip
        _assert_proba(model.predict_proba_one(x))


def check_new_class_mid_stream(model: Any) -> None:
    """A class first seen mid-stream gets probabilities."""
    data = _stream(600, new_class_at=300)
    for x, y in data:
        model.learn_one(x, y)
    labels: set = set()
    for x, _ in data:
        p = model.predict_proba_one(x)
        _assert_proba(p)
        labels |= set(p)
    assert "rare" in labels, "a class learned mid-stream never gets a probability"


def _continue_identically(a: Any, b: Any, data: list) -> None:
    for x, y in data:
        assert a.predict_proba_one(x) == b.predict_proba_one(x), "copies diverged"
        a.learn_one(x, y)
        b.learn_one(x, y)


def check_copies_continue_identically(model: Any) -> None:
    """Mid-stream, ``to_state`` -> ``from_state``, ``pickle`` and ``copy.deepcopy`` give models
    that continue exactly as the original (bit-identical probabilities, same state)."""
    data = _stream(400, new_class_at=150)
    for x, y in data[:200]:
        model.learn_one(x, y)
    copies = [copy.deepcopy(model), pickle.loads(pickle.dumps(model))]
    if hasattr(model, "to_state"):
        copies.append(type(model).from_state(model.to_state()))
    for x, y in data[200:]:
        p = model.predict_proba_one(x)
        for other in copies:
            assert other.predict_proba_one(x) == p, "a copy diverged from the original"
            other.learn_one(x, y)
        model.learn_one(x, y)
    if hasattr(model, "to_state"):
        header = model.to_state()["header"]
        assert all(other.to_state()["header"] == header for other in copies)


def check_state_is_a_snapshot(model: Any) -> None:
    """``to_state()`` arrays do not change when the model learns on."""
    data = _stream(300)
    for x, y in data[:150]:
        model.learn_one(x, y)
    state = model.to_state()
    frozen = {k: v.copy() for k, v in state["arrays"].items()}
    for x, y in data[150:]:
        model.learn_one(x, y)
    for k, v in state["arrays"].items():
        assert np.array_equal(v, frozen[k], equal_nan=v.dtype.kind == "f"), k


def check_same_stream_same_model(model: Any) -> None:
    """Two clones fed the same stream predict identically (randomness is keyed, not drawn)."""
    _continue_identically(model, model.clone(), _stream(300))


def check_clone_is_fresh(model: Any) -> None:
    """``clone()`` of a trained model is untrained, with the same parameters."""
    for x, y in _stream(100):
        model.learn_one(x, y)
    fresh = model.clone()
    assert fresh.predict_proba_one({"x1": 0.5}) == {}
    assert repr(fresh) == repr(model)


def check_zero_weight_does_nothing(model: Any) -> None:
    """``learn_one(x, y, w=0)`` changes nothing."""
    other = model.clone()
    data = _stream(150)
    for x, y in data:
        model.learn_one(x, y)
        other.learn_one(x, y)
        other.learn_one(x, "neg", w=0.0)
    for x, _ in data[:50]:
        assert model.predict_proba_one(x) == other.predict_proba_one(x)


def check_dict_changed_after_predict(model: Any) -> None:
    """A dict changed between ``predict_one`` and ``learn_one`` is learned as changed."""
    other = model.clone()
    for i, (x, y) in enumerate(_stream(200)):
        model.predict_one(x)
        x2 = dict(x)
        if i % 2:
            x["x1"] = 5.0  # mutate the same object after predicting
            x2["x1"] = 5.0
        model.learn_one(x, y)
        other.learn_one(x2, y)
    for x, _ in _stream(50, seed=9):
        assert model.predict_proba_one(x) == other.predict_proba_one(x)


def check_batch_equals_row_by_row(model: Any) -> None:
    """``predict_learn_many`` / ``learn_many`` / ``predict_*_many`` equal the per-row forms
    (row i predicted after rows < i were learned), also across schema growth."""
    one = model.clone()
    data = _stream(300, new_class_at=100)
    X, y = [x for x, _ in data], [y for _, y in data]
    many = model.predict_learn_many(X[:200], y[:200])
    assert many == [one.predict_learn_one(x, yy) for x, yy in zip(X[:200], y[:200], strict=True)]
    model.learn_many(X[200:], y[200:])
    for x, yy in zip(X[200:], y[200:], strict=True):
        one.learn_one(x, yy)
    assert list(model.predict_proba_many(X)) == [one.predict_proba_one(x) for x in X]
    assert list(model.predict_many(X)) == [one.predict_one(x) for x in X]


def check_pandas_batches(model: Any) -> None:
    """A DataFrame (NaN = missing) and a Series work as river's mini-batch classifiers take
    them, and give pandas back: probabilities as a DataFrame with a column per class, labels as
    a Series, both indexed like ``X``; numpy scalar labels and values are plain ones."""
    import pandas as pd

    one = model.clone()
    data = _stream(200)
    X = pd.DataFrame([x for x, _ in data], index=range(100, 300))
    y = pd.Series([np.str_(y) for _, y in data], index=X.index)
    model.learn_many(X, y)
    for x, yy in data:
        one.learn_one({k: v for k, v in x.items() if v is not None}, yy)
    proba = model.predict_proba_many(X)
    assert isinstance(proba, pd.DataFrame) and list(proba.index) == list(X.index)
    labels = model.predict_many(X)
    assert isinstance(labels, pd.Series) and list(labels.index) == list(X.index)
    for i, (x, _) in enumerate(data):
        p = one.predict_proba_one(x)
        assert {k: proba.iloc[i][k] for k in p} == p
        assert labels.iloc[i] == one.predict_one(x)
    assert all(type(c) is str for c in model.classes) if hasattr(model, "classes") else True


CHECKS: tuple[Callable[[Any], None], ...] = (
    check_empty_before_training,
    check_probabilities_and_purity,
    check_new_missing_and_unseen_features,
    check_new_class_mid_stream,
    check_same_stream_same_model,
    check_clone_is_fresh,
    check_zero_weight_does_nothing,
    check_dict_changed_after_predict,
    check_batch_equals_row_by_row,
    check_pandas_batches,
    check_copies_continue_identically,
    check_state_is_a_snapshot,
)


def _installed(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def yield_checks(model: Any) -> Iterator[Callable[[Any], None]]:
    """The Chorus checks that apply to ``model``; each takes a fresh model."""
    for check in CHECKS:
        if check is check_state_is_a_snapshot and not hasattr(model, "to_state"):
            continue
        if check in (check_batch_equals_row_by_row, check_pandas_batches) and not hasattr(
            model, "predict_learn_many"
        ):
            continue
        if check is check_pandas_batches and not _installed("pandas"):
            continue  # an optional dependency: without it no DataFrame reaches the model
        yield check


def check_learner(model: Any, *, river: bool = True) -> None:
    """Run every Chorus check on a clone of ``model`` (and river's ``check_estimator`` when
    ``river`` and the model is a river estimator); ``AssertionError`` names the failed check."""
    for check in yield_checks(model):
        try:
            check(model.clone())
        except AssertionError as e:
            raise AssertionError(f"{check.__name__}: {e}") from e
    if river:
        from river import base, checks

        if isinstance(model, base.Estimator):
            if not _installed("sklearn"):
                raise ImportError(
                    "river's check_estimator imports scikit-learn: `pip install scikit-learn`,"
                    " or call check_learner(model, river=False) to run only Chorus's checks"
                )
            checks.check_estimator(model)


__all__ = ["CHECKS", "check_learner", "mixed_stream", "yield_checks"]
