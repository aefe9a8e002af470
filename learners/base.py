"""The learner protocol every base learner and ensemble follows (river's API, ARCHITECTURE §2)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

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


def argmax_label(proba: dict[Label, float]) -> Label | None:
    """The most probable label; ties go to the label seen first (dict order). ``None`` if empty."""
    best, best_p = None, -1.0
    for label, p in proba.items():
        if p > best_p:
            best, best_p = label, p
    return best
