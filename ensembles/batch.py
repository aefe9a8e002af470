"""Batch bagging and AdaBoost over the same base learners (for the batch-vs-online comparison).

With a native base learner the training set is encoded once (``learners.EncodedRows``) and every
member learns and predicts from those arrays; the members, their votes and their predictions are
exactly those of the generic path, where each member reads the dicts itself (``learn_many`` on
its resample, ``predict_many``), which any other learner takes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from learners import EncodedRows, NativeLearner, Schema, argmax_label
from learners.base import Features, Label

from .base import check_int, check_learner, resample_counts
from .members import member_clone

_TAG = 1 << 60


class _BatchEnsemble:
    def __init__(self, learner: Any, *, n_models: int = 10, seed: int = 0):
        check_learner(learner)
        check_int("n_models", n_models, 1, 10_000)
        check_int("seed", seed, 0, 2**63 - 1)
        self.learner = learner
        self.n_models = n_models
        self.seed = seed
        self._members: list = []
        self._weights: list[float] = []
        self._schema: Schema | None = None  # of the encoded training set (native learners)

    def _encode(self, X: list, y: list) -> EncodedRows | None:
        """The training set encoded once for all members, or ``None`` (not a native learner, or
        rows that do not encode: each member then reads the dicts and fails, or not, as it
        would on its own)."""
        self._schema = None
        if not isinstance(self.learner, NativeLearner):
            return None
        try:
            enc = EncodedRows.for_learning(X, y)
        except (ValueError, TypeError):
            return None
        self._schema = enc.schema
        return enc

    @staticmethod
    def _fit_member(member: Any, X: list, y: list, counts: np.ndarray, enc: EncodedRows | None):
        if enc is not None:
            member.learn_encoded(enc, counts)
            return
        rows = [i for i in range(len(X)) if counts[i] > 0]
        if hasattr(member, "learn_many"):
            member.learn_many([X[i] for i in rows], [y[i] for i in rows], [counts[i] for i in rows])
        else:
            for i in rows:
                member.learn_one(X[i], y[i], w=float(counts[i]))

    @staticmethod
    def _member_labels(member: Any, X: list[Features], enc: EncodedRows | None) -> list:
        if enc is not None:
            labels = np.array([*member.classes, None], dtype=object)  # index -1: None
            return labels[member.predict_encoded(enc)].tolist()
        if hasattr(member, "predict_many"):  # one compiled call for native learners
            return list(member.predict_many(X))
        return [member.predict_one(x) for x in X]

    def predict_proba_many(self, X: list[Features]) -> list[dict[Label, float]]:
        """Weighted vote of the members' labels, one dict per row (``{}`` if nobody votes)."""
        X = list(X)
        enc = None
        if self._schema is not None:  # native members: encode X once for all of them
            try:
                enc = EncodedRows.for_prediction(X, self._schema)
            except (ValueError, TypeError):
                pass  # each member reads the dicts and raises, or not, as it would on its own
        votes: list[dict[Label, float]] = [{} for _ in X]
        for member, w in zip(self._members, self._weights, strict=True):
            if w <= 0:
                continue
            for row, label in zip(votes, self._member_labels(member, X, enc), strict=True):
                if label is not None:
                    row[label] = row.get(label, 0.0) + w
        out = []
        for row in votes:
            total = sum(row.values())
            out.append({k: v / total for k, v in row.items()} if total > 0 else {})
        return out

    def predict_proba_one(self, x: Features) -> dict[Label, float]:
        return self.predict_proba_many([x])[0]

    def predict_one(self, x: Features) -> Label | None:
        return argmax_label(self.predict_proba_one(x))

    def predict_many(self, X: list[Features]) -> list:
        return [argmax_label(p) for p in self.predict_proba_many(X)]


class BatchBagging(_BatchEnsemble):
    """Bagging (Breiman 1996): each member is fitted on a bootstrap sample of the training set;
    prediction is the majority vote.

    Examples
    --------
    >>> from learners import NaiveBayes
    >>> from ensembles import BatchBagging
    >>> X = [{"x": float(i % 10)} for i in range(100)]
    >>> y = [i % 10 >= 5 for i in range(100)]
    >>> BatchBagging(NaiveBayes(), n_models=5, seed=1).fit(X, y).predict_one({"x": 8.0})
    True
    """

    def fit(self, X: list[Features], y: list) -> BatchBagging:
        X, y = list(X), list(y)
        enc = self._encode(X, y)
        self._members, self._weights = [], []
        for m in range(self.n_models):
            member = member_clone(self.learner, m)
            counts = resample_counts(np.ones(len(X)), len(X), self.seed, m, _TAG)
            self._fit_member(member, X, y, counts, enc)
            self._members.append(member)
            self._weights.append(1.0)
        return self


class AdaBoost(_BatchEnsemble):
    """AdaBoost.M1 with resampling (Freund & Schapire 1996; Oza 2001, Fig. 4.1).

    Member m is fitted on N draws from the training set under the weights D; its weighted error
    ``e_m`` sets its vote ``log((1 - e_m) / e_m)`` and reweights D (correct: 1/(2(1 - e_m)),
    wrong: 1/(2 e_m)). As in the thesis, boosting stops when ``e_m > 1/2`` (that member is
    dropped); a member with ``e_m = 0`` ends boosting and votes with weight ``log(1e10)``, the
    convention ``OnlineBoosting`` uses.

    Examples
    --------
    >>> from learners import DecisionStump
    >>> from ensembles import AdaBoost
    >>> X = [{"a": "xy"[i % 2], "b": "uvw"[i % 3]} for i in range(60)]
    >>> y = [x["a"] == "x" or x["b"] == "u" for x in X]  # no single stump gets it right
    >>> model = AdaBoost(DecisionStump(), n_models=5, seed=1).fit(X, y)
    >>> [model.predict_one({"a": a, "b": b}) for a, b in [("x", "v"), ("y", "u"), ("y", "w")]]
    [True, True, False]
    """

    def fit(self, X: list[Features], y: list) -> AdaBoost:
        X, y = list(X), list(y)
        N = len(X)
        enc = self._encode(X, y)
        D = np.full(N, 1.0 / N)
        self._members, self._weights = [], []
        for m in range(self.n_models):
            member = member_clone(self.learner, m)
            self._fit_member(member, X, y, resample_counts(D, N, self.seed, m, _TAG), enc)
            labels = self._member_labels(member, X, enc)
            correct = np.array([p == t for p, t in zip(labels, y, strict=True)])
            eps = float(D[~correct].sum())
            if eps > 0.5:
                break
            self._members.append(member)
            if eps <= 0.0:
                self._weights.append(math.log((1 - 1e-10) / 1e-10))
                break
            self._weights.append(math.log((1.0 - eps) / eps))
            D = np.where(correct, D / (2.0 * (1.0 - eps)), D / (2.0 * eps))
        if not self._members:  # the first member was worse than chance: keep it alone
            member = member_clone(self.learner, 0)
            self._fit_member(member, X, y, np.ones(N), enc)
            self._members, self._weights = [member], [1.0]
        return self
