"""The learner protocol every base learner and ensemble follows (river's API, ARCHITECTURE §2)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

Label = str | int | bool
Features = dict[str, Any]
State = dict[str, Any]  # {"header": JSON-able dict, "arrays": dict[str, numpy.ndarray]}


@runtime_checkable
class Learner(Protocol):
    """An incremental classifier.

    ``learn_one`` honours sample weights (``w=0`` does nothing), ``predict_proba_one`` returns
    ``{}`` before any training and otherwise probabilities summing to 1, ``clone`` returns a fresh
    untrained copy with the same parameters, and ``to_state``/``from_state`` round-trip the
    learned state without pickle.
    """

    def learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> None: ...

    def predict_proba_one(self, x: Features) -> dict[Label, float]: ...

    def predict_one(self, x: Features) -> Label | None: ...

    def clone(self) -> Learner: ...

    def to_state(self) -> State: ...


def check_weights(ws: Any, n: int) -> np.ndarray:
    """Sample weights as a float array, or ``ValueError`` unless there are ``n``, finite, >= 0."""
    w = np.asarray(ws, dtype=np.float64)
    if w.shape != (n,) or not np.all((w >= 0.0) & (w < np.inf)):
        raise ValueError("sample weights must be finite and >= 0, one per row")
    return w


def argmax_label(proba: dict[Label, float]) -> Label | None:
    """The most probable label; ties go to the label seen first (dict order). ``None`` if empty."""
    best, best_p = None, -1.0
    for label, p in proba.items():
        if p > best_p:
            best, best_p = label, p
    return best


class BatchMixin:
    """Batch and prequential forms of the model API, for learners that only implement the
    per-example methods (their natural form). Native learners have compiled versions instead."""

    def learn_many(self, X: list[Features], y: list, w: list[float] | None = None) -> None:
        weights = [1.0] * len(X) if w is None else list(w)
        for x, yy, ww in zip(X, y, weights, strict=True):
            self.learn_one(x, yy, w=ww)  # type: ignore[attr-defined]

    def predict_proba_many(self, X: list[Features]) -> list[dict[Label, float]]:
        return [self.predict_proba_one(x) for x in X]  # type: ignore[attr-defined]

    def predict_many(self, X: list[Features]) -> list:
        return [argmax_label(p) for p in self.predict_proba_many(X)]

    def predict_learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> dict[Label, float]:
        """Predict, then learn (prequential); returns the prediction made before learning."""
        p = self.predict_proba_one(x)  # type: ignore[attr-defined]
        self.learn_one(x, y, w=w)  # type: ignore[attr-defined]
        return p

    def predict_learn_many(self, X: list[Features], y: list, w: list[float] | None = None):
        weights = [1.0] * len(X) if w is None else list(w)
        return [
            self.predict_learn_one(x, yy, w=ww) for x, yy, ww in zip(X, y, weights, strict=True)
        ]
