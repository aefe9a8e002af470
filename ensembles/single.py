"""A single base learner behind the ensemble API (spec ``"ensemble": "single"``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from learners import HoeffdingTree, Limits
from learners.base import Features, Label
from learners.compiled import single_run

from .base import OnlineEnsemble


class Single(OnlineEnsemble):
    """One learner, trained on every example with its own weight — the thesis' "single model"
    baseline — with the same API, state and spec handling as the ensembles.

    Examples
    --------
    >>> from learners import HoeffdingTree
    >>> from ensembles import Single
    >>> model = Single(HoeffdingTree(grace_period=20))
    >>> for i in range(100):
    ...     model.learn_one({"x": float(i % 10)}, i % 10 >= 5)
    >>> model.predict_one({"x": 9.0}), model.n_seen
    (True, 100)
    """

    kind = "single"

    def __init__(self, learner, *, n_models: int = 1, seed: int = 0,
                 limits: Limits | dict | None = None):  # fmt: skip
        if n_models != 1:
            raise ValueError(f"n_models must be 1 for a single model, got {n_models!r}")
        super().__init__(learner, n_models=1, seed=seed, limits=limits)

    _kernel = staticmethod(single_run)

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        yield {"learner": HoeffdingTree(grace_period=50)}

    def _py_predict(self, x: Features) -> dict:
        return self._members[0].predict_proba_one(x)

    def _py_learn(self, x: Features, y: Label, w: float, seq: int) -> None:
        self._members[0].learn_one(x, y, w=w)
