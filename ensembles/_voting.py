"""The ``vote`` option shared by online bagging and online boosting."""

from __future__ import annotations

from typing import Any

import numpy as np

from learners import Limits

from . import _kernels
from .base import OnlineEnsemble


class VotingEnsemble(OnlineEnsemble):
    """An online ensemble whose prediction combines members by ``vote``: ``"average"`` (their
    class probabilities, MOA's and river's rule) or ``"majority"`` (their top classes, the
    thesis' rule). Subclasses' kernels read the rule as ``ipar[VOTE]`` (``_kernels.VOTE``); ``votes`` are the rules a
    subclass offers."""

    votes: tuple[str, ...] = ("average", "majority")

    def __init__(self, learner: Any, *, n_models: int = 10, seed: int = 0, vote: str = "average",
                 limits: Limits | dict | None = None):  # fmt: skip
        _kernels.vote_code(vote, self.votes)  # ValueError naming the rules
        self.vote = vote
        super().__init__(learner, n_models=n_models, seed=seed, limits=limits)

    def _extra_params(self) -> dict:
        return {"vote": self.vote}

    def _ipar(self) -> np.ndarray:
        """``[seed, vote code]``, the kernels' integer parameters."""
        return np.array([self.seed, _kernels.vote_code(self.vote, self.votes)], dtype=np.int64)
