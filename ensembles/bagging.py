"""Online bagging (Oza 2001, Fig. 3.3)."""

from __future__ import annotations

import numpy as np

from learners.base import Features, Label

from . import _kernels
from ._rng import poisson
from ._voting import VotingEnsemble
from .base import resample_counts

_PRIME_TAG = 1 << 62


class OnlineBagging(VotingEnsemble):
    """Online bagging: each member sees each example with weight k ~ Poisson(1).

    Oza (2001), Fig. 3.3::

        for each base model h_m, m in {1..M}:
            k <- Poisson(1)
            do k times: h_m <- L_o(h_m, (x, y))      # here: one update with weight k

    As the number of examples grows, Poisson(1) tends to the Binomial(N, 1/N) count of batch
    bootstrap sampling, so with a lossless base learner the online ensemble converges to batch
    bagging (thesis, Theorem 3). Prediction averages the members' class probabilities (MOA's and
    river's rule; ``vote="majority"`` is the thesis' majority vote, measured 0–1 point less
    accurate, see docs/engine-api.md). ``k`` is passed as a sample weight, as MOA does.

    Parameters
    ----------
    learner
        The base learner prototype (a native learner runs compiled; any other follows the slow path).
    n_models
        Number of members M.
    seed
        Key of the counter-based Poisson draws: same seed + same stream = identical model.
    vote
        ``"average"`` (default: mean of the members' probabilities, as MOA and river) or
        ``"majority"`` (the thesis: one vote per member for its top class).

    Examples
    --------
    >>> from learners import NaiveBayes
    >>> from ensembles import OnlineBagging
    >>> model = OnlineBagging(NaiveBayes(), n_models=5, seed=1)
    >>> for i in range(100):
    ...     model.learn_one({"x": float(i % 10), "c": "ab"[i % 2]}, i % 10 >= 5)
    >>> model.predict_one({"x": 8.0, "c": "a"})
    True

    References
    ----------
    Oza, N. C. (2001). Online Ensemble Learning. PhD thesis, UC Berkeley, ch. 3.
    Oza, N. C. & Russell, S. (2001). Online bagging and boosting. AISTATS.
    """

    kind = "bagging"

    _kernel = staticmethod(_kernels.bagging_run)

    def _init_extra(self) -> None:
        self._int_params = self._ipar()

    # slow path: the same algorithm over Python member objects
    def _py_predict(self, x: Features) -> dict:
        votes: dict[Label, float] = {}
        voters = 0
        for member in self._members:
            p = member.predict_proba_one(x)
            if not p:
                continue
            voters += 1
            if self.vote == "majority":
                label = self._top_class(p)
                if label is not None:
                    votes[label] = votes.get(label, 0.0) + 1.0
            else:
                for label, v in p.items():
                    votes[label] = votes.get(label, 0.0) + v
        if not voters:
            return {}
        return {c: votes.get(c, 0.0) / voters for c in self._classes}

    def _py_learn(self, x: Features, y: Label, w: float, seq: int) -> None:
        for m, member in enumerate(self._members):
            k = poisson(1.0, self.seed, seq, m)
            if k > 0:
                member.learn_one(x, y, w=k * w)

    def prime(self, X: list[Features], y: list) -> OnlineBagging:
        """Fit the members by batch bagging on an initial block, then continue online.

        Member m learns a bootstrap sample (N draws with replacement) of the block, as
        ``BatchBagging`` does (thesis §4.6.2 primes boosting the same way). The sequence counter
        advances by N so later Poisson draws are fresh.
        """
        X, y = list(X), list(y)
        if not X:
            return self
        enc = self._encode_block(X, y)
        for m in range(self.n_models):
            counts = resample_counts(
                np.ones(len(X)), len(X), self.seed, m, _PRIME_TAG + self.n_seen
            )
            self._member_fit(m, X, y, counts, enc)
        self._set_n_seen(self.n_seen + len(X))
        return self
