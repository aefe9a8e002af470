"""Online boosting (Oza 2001, Fig. 4.3)."""

from __future__ import annotations

import math

import numpy as np

from learners.base import Features, Label
from learners.jit import kernel

from . import _kernels
from ._rng import poisson
from ._voting import VotingEnsemble
from .base import resample_counts

_PRIME_TAG = 1 << 61


class OnlineBoosting(VotingEnsemble):
    """Online boosting (Oza & Russell): AdaBoost's example weights as Poisson rates.

    Oza (2001), Fig. 4.3, for each arriving example (x, y)::

        lambda <- 1
        for m = 1..M:
            k <- Poisson(lambda); update h_m with (x, y) and weight k
            if h_m(x) == y:  lsc_m += lambda;  e_m = lsw_m / (lsc_m + lsw_m);  lambda *= 1 / (2 (1 - e_m))
            else:            lsw_m += lambda;  e_m = lsw_m / (lsc_m + lsw_m);  lambda *= 1 / (2 e_m)

    Prediction (``vote="average"``, the default, MOA's and river's rule):
    ``argmax_y sum_m log((1 - e_m) / e_m) P_m(y | x)``, each member's class probabilities weighted
    by its vote weight. ``vote="majority"`` is the thesis' rule,
    ``argmax_y sum_m log((1 - e_m) / e_m) [h_m(x) = y]``, measured ~1 point less accurate
    (docs/engine-api.md).

    Edge cases (decided here; MOA and river differ):

    * ``e_m >= 1/2`` — the member gets vote weight 0 and the vote continues with the next member
      (batch AdaBoost would stop at it; MOA stops the vote at the first such member; river gives it
      weight 1). Its training is unaffected.
    * ``e_m = 0`` — never wrong so far: its weight would be infinite; it votes as if
      ``e_m = 1e-10`` (weight ≈ 23), so in practice the never-wrong members decide.
    * a member with no weight yet (``lsc_m + lsw_m = 0``) does not vote; if no member has a vote,
      member 1 (trained on every example, lambda = 1) predicts alone.

    An example's sample weight ``w`` is its initial lambda (as MOA does).

    Parameters
    ----------
    learner
        The base learner prototype.
    n_models
        Number of members M.
    seed
        Key of the counter-based Poisson draws.
    vote
        ``"average"`` (default: vote-weighted member probabilities, as MOA and river) or
        ``"majority"`` (the thesis: each member's vote weight goes to its top class).

    Examples
    --------
    >>> from learners import DecisionStump
    >>> from ensembles import OnlineBoosting
    >>> model = OnlineBoosting(DecisionStump(), n_models=3, seed=1)
    >>> X = [{"a": "xy"[i % 2], "b": "uvw"[i % 3]} for i in range(60)]
    >>> for x in X:  # y = a is x OR b is u: no single stump gets it right
    ...     model.learn_one(x, x["a"] == "x" or x["b"] == "u")
    >>> [model.predict_one({"a": a, "b": b}) for a, b in [("x", "v"), ("y", "u"), ("y", "w")]]
    [True, True, False]

    References
    ----------
    Oza, N. C. (2001). Online Ensemble Learning. PhD thesis, UC Berkeley, ch. 4.
    """

    kind = "boosting"

    def _init_extra(self) -> None:
        self._int_params = self._ipar()
        self._float_state = np.zeros((2, self.n_models))  # rows: lambda_sc, lambda_sw

    @property
    def _lam_sc(self) -> np.ndarray:
        return self._float_state[0]

    @property
    def _lam_sw(self) -> np.ndarray:
        return self._float_state[1]

    _kernel = staticmethod(_kernels.boosting_run)

    @property
    def vote_weights(self) -> np.ndarray:
        out = np.empty(self.n_models)
        kernel(_kernels.vote_weights)(self._lam_sc, self._lam_sw, out)
        return out

    @property
    def epsilons(self) -> list[float | None]:
        tot = self._lam_sc + self._lam_sw
        return [float(sw / t) if t > 0 else None for sw, t in zip(self._lam_sw, tot, strict=True)]

    # slow path
    def _py_predict(self, x: Features) -> dict:
        wts = self.vote_weights
        votes: dict[Label, float] = {}
        total = 0.0
        for m, member in enumerate(self._members):
            if wts[m] <= 0.0:
                continue
            p = member.predict_proba_one(x)
            label = self._top_class(p)
            if label is None:
                continue
            total += wts[m]
            if self.vote == "majority":
                votes[label] = votes.get(label, 0.0) + wts[m]
            else:
                for c, v in p.items():
                    votes[c] = votes.get(c, 0.0) + wts[m] * v
        if total <= 0.0:
            return self._members[0].predict_proba_one(x)
        return {c: votes.get(c, 0.0) / total for c in self._classes}

    def _py_learn(self, x: Features, y: Label, w: float, seq: int) -> None:
        lam = w
        for m, member in enumerate(self._members):
            k = poisson(lam, self.seed, seq, m)
            if k > 0:
                member.learn_one(x, y, w=float(k))
            if self._top_class(member.predict_proba_one(x)) == y:
                self._lam_sc[m] += lam
                eps = self._lam_sw[m] / (self._lam_sc[m] + self._lam_sw[m])
                lam = lam / (2.0 * (1.0 - eps))
            else:
                self._lam_sw[m] += lam
                eps = self._lam_sw[m] / (self._lam_sc[m] + self._lam_sw[m])
                lam = lam / (2.0 * eps)

    # state
    def _extra_arrays(self) -> dict[str, np.ndarray]:
        return {"boost.lam_sc": self._lam_sc.copy(), "boost.lam_sw": self._lam_sw.copy()}

    def _load_extra(self, arrays: dict[str, np.ndarray]) -> None:
        self._float_state[0] = np.asarray(arrays["boost.lam_sc"], dtype=np.float64)
        self._float_state[1] = np.asarray(arrays["boost.lam_sw"], dtype=np.float64)

    def _describe_members(self) -> list[dict]:
        base = super()._describe_members()
        for m, (d, eps, vw) in enumerate(zip(base, self.epsilons, self.vote_weights, strict=True)):
            d.update(epsilon=eps, lambda_sc=float(self._lam_sc[m]),
                     lambda_sw=float(self._lam_sw[m]), vote_weight=float(vw))  # fmt: skip
        return base

    def prime(self, X: list[Features], y: list) -> OnlineBoosting:
        """Fit the members by batch AdaBoost (with resampling) on an initial block, then continue
        online (thesis §4.6.2).

        Member m learns N draws from the block under AdaBoost's current example weights D;
        ``e_m`` is its D-weighted error on the block; D is multiplied by 1/(2(1-e_m)) on correct
        and 1/(2 e_m) on wrong examples. The online counters start as ``lsc_m = N (1 - e_m)``,
        ``lsw_m = N e_m`` — the block's weight, so online updates continue AdaBoost's estimate.
        """
        X, y = list(X), list(y)
        N = len(X)
        if N == 0:
            return self
        enc = self._encode_block(X, y)
        D = np.full(N, 1.0 / N)
        for m in range(self.n_models):
            counts = resample_counts(D, N, self.seed, m, _PRIME_TAG + self.n_seen)
            self._member_fit(m, X, y, counts, enc)
            correct = self._member_correct(m, X, y, enc)
            eps = float(D[~correct].sum())
            self._lam_sc[m] += N * (1.0 - eps)
            self._lam_sw[m] += N * eps
            if 0.0 < eps < 0.5:
                D = np.where(correct, D / (2.0 * (1.0 - eps)), D / (2.0 * eps))
            elif eps >= 0.5 or math.isclose(eps, 0.0):
                D = np.full(N, 1.0 / N)  # AdaBoost would stop; restart the weights instead
        self._set_n_seen(self.n_seen + N)
        return self
