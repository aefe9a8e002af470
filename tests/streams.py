"""Seeded synthetic streams for the engine tests (no data files), and the ``Proxy`` wrapper."""

from __future__ import annotations

import random


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
        x = {
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
