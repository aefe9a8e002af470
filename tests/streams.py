"""Seeded synthetic streams for the engine tests (no data files), the ``Proxy`` wrapper,
``same`` (bit-for-bit equality of answers and states) and ``learn_by`` (a stream learned in one
of the call patterns of a model's API)."""

from __future__ import annotations

import random

import numpy as np

from learners.checks import mixed_stream

__all__ = ["CALL_PATTERNS", "Proxy", "categorical_stream", "learn_by", "mixed_stream", "same"]

# the ways a model's API learns a stream (``learn_by``)
CALL_PATTERNS = ("learn_one", "predict_learn_one", "river_loop", "learn_many",
                 "predict_learn_many")  # fmt: skip


def learn_by(model, rows: list, how: str) -> None:
    """Learn ``rows`` (``(x, y)`` pairs) in call pattern ``how`` (``CALL_PATTERNS``)."""
    X, Y = [x for x, _ in rows], [y for _, y in rows]
    if how == "learn_one":  # (each learn kept and run by the next call: not predicted)
        for x, y in rows:
            model.learn_one(x, y)
    elif how == "predict_learn_one":  # (the row predicted, then learned, in one kernel call)
        for x, y in rows:
            model.predict_learn_one(x, y)
    elif how == "river_loop":  # (the learn reuses the prediction's member probabilities)
        for x, y in rows:
            model.predict_one(x)
            model.learn_one(x, y)
    elif how == "learn_many":
        model.learn_many(X, Y)
    else:
        model.predict_learn_many(X, Y)


def same(a, b) -> bool:
    """Whether two answers or states are equal bit for bit (NaN equal to NaN; arrays by dtype,
    shape and bytes), through dicts, lists and tuples."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return a == b or (a != a and b != b)


def categorical_stream(n: int, seed: int = 0, n_features: int = 6, n_values: int = 4):
    """Purely categorical stream; the label depends on two features, with 10% noise."""
    rng = random.Random(seed)
    for _ in range(n):
        x = {f"f{j}": f"v{rng.randrange(n_values)}" for j in range(n_features)}
        y = "a" if (x["f0"] in ("v0", "v1")) != (x["f1"] == "v2") else "b"
        if rng.random() < 0.1:
            y = "b" if y == "a" else "a"
        yield x, y


class Proxy:
    """A native learner seen through the learner protocol only: ensembles take their generic
    (slow) path over it, which calls its ``learn_one`` / ``predict_proba_one`` (online) or its
    ``learn_many`` / ``predict_many`` on the dicts (batch)."""

    def __init__(self, inner):
        self.inner = inner

    def learn_one(self, x, y, *, w=1.0):
        self.inner.learn_one(x, y, w=w)

    def learn_many(self, X, y, w=None):
        self.inner.learn_many(X, y, w)

    def predict_proba_one(self, x):
        return self.inner.predict_proba_one(x)

    def predict_one(self, x):
        return self.inner.predict_one(x)

    def predict_many(self, X):
        return self.inner.predict_many(X)

    def clone(self):
        return Proxy(self.inner.clone())


def assert_same_state(a, b) -> None:
    """Two models hold the same state: headers equal, every array of the same dtype, shape and
    values (NaN equal to NaN)."""
    sa, sb = a.to_state(), b.to_state()
    assert sa["header"] == sb["header"]
    assert sa["arrays"].keys() == sb["arrays"].keys()
    for name, arr in sa["arrays"].items():
        other = sb["arrays"][name]
        assert arr.dtype == other.dtype and arr.shape == other.shape, name
        assert np.array_equal(arr, other, equal_nan=True), name
