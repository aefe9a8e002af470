"""Online boosting (Oza 2001, Fig. 4.3)."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from learners import Limits, NativeLearner
from learners.base import Features, Label
from learners.jit import kernel

from . import _adaptive, _kernels, adaptive
from ._rng import poisson
from ._voting import VotingEnsemble
from .base import resample_counts
from .explain import VoteRule

_PRIME_TAG = 1 << 61


class OnlineBoosting(adaptive.DriftReport, VotingEnsemble):
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

    ``lambda_rule="moa"`` replaces the two lambda updates by MOA's (``OzaBoost``,
    ``OzaBoostAdwin``)::

            if h_m(x) == y:  lsc_m += lambda;  lambda *= N / (2 lsc_m)
            else:            lsw_m += lambda;  lambda *= N / (2 lsw_m)

    with ``N`` the total weight of the examples the ensemble has learned (this one included).
    For member 1, ``lsc_1 + lsw_1 = N`` and the rules agree; a later member's sums are those of
    the lambdas it got, so they differ, most after an ADWIN reset zeroes a member's sums: MOA's
    rule then gives the members after it lambdas up to ``N / 2``.

    Parameters
    ----------
    learner
        The base learner prototype.
    n_models
        Number of members M.
    seed
        Key of the counter-based Poisson draws.
    vote
        ``"average"`` (default: vote-weighted member probabilities, as MOA and river),
        ``"majority"`` (the thesis: each member's vote weight goes to its top class) or
        ``"stacking"`` (a meta-learner, softmax regression over the members' probabilities,
        learns each example from what the members said *before* any of them learned it, then
        the members learn as above; the average vote until it has learned one:
        ``ensembles.stacking``).
    drift
        ``None`` (default: never forget, the thesis' algorithm) or ``"adwin"``: one ADWIN
        detector per member on its 0/1 error on the example after learning it (the same
        ``h_m(x) = y`` that updates ``lsc_m`` / ``lsw_m``); when one detects that its member's
        error went up, the member with the highest estimated error is reset to a fresh learner
        with ``lsc_m = lsw_m = 0`` (so it does not vote until it has weight again) and an empty
        detector (ADWIN boosting, MOA's ``OzaBoostAdwin``; Bifet et al. 2009).
        ``describe()["n_drifts"]`` counts the resets.
    drift_delta
        ADWIN's confidence (0.002, as MOA).
    lambda_rule
        ``"thesis"`` (default: Oza 2001, Fig. 4.3) or ``"moa"`` (MOA's update, above; measured
        better after an abrupt drift with ``drift="adwin"``, worse under a gradual one:
        benchmarks/results/drift.md).
    window
        Examples over which each member's accuracy (before learning each example) and the
        members' diversity (``describe()``) are kept; 0 keeps none. ``None`` (default): 1000
        with ``drift``, else 0. Needs a native learner, as does ``drift``.

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

    ADWIN boosting over a stream whose concept flips:

    >>> from learners import HoeffdingTree
    >>> model = OnlineBoosting(HoeffdingTree(), n_models=3, seed=1, drift="adwin")
    >>> for i in range(3000):
    ...     model.learn_one({"x": float(i % 10)}, (i % 10 >= 5) != (i >= 1500))
    >>> model.predict_one({"x": 8.0}), model.describe()["n_drifts"] > 0
    (False, True)

    References
    ----------
    Oza, N. C. (2001). Online Ensemble Learning. PhD thesis, UC Berkeley, ch. 4.
    Bifet, A., Holmes, G., Pfahringer, B., Kirkby, R. & Gavaldà, R. (2009). New ensemble
    methods for evolving data streams. KDD.
    """

    kind = "boosting"
    drifts = (None, "adwin")

    def __init__(self, learner: Any, *, n_models: int = 10, seed: int = 0, vote: str = "average",
                 drift: str | None = None, drift_delta: float = 0.002, window: int | None = None,
                 lambda_rule: str = "thesis", limits: Limits | dict | None = None):  # fmt: skip
        if drift not in self.drifts:
            raise ValueError(
                f"drift must be one of {list(self.drifts)} for boosting, got {drift!r}"
            )
        adaptive.check_options(poisson_lambda=1.0, drift=drift, drift_delta=drift_delta,
                               window=window)  # fmt: skip
        if lambda_rule not in _kernels.LAMBDA_RULES:
            raise ValueError(
                f"lambda_rule must be one of {list(_kernels.LAMBDA_RULES)}, got {lambda_rule!r}"
            )
        self.lambda_rule = lambda_rule
        self.drift = drift
        self.drift_delta = drift_delta
        self.window = window
        super().__init__(learner, n_models=n_models, seed=seed, vote=vote, limits=limits)

    @property
    def _window(self) -> int:
        if self.window is not None:
            return int(self.window)
        return adaptive.DEFAULT_WINDOW if self.drift else 0

    @property
    def adaptive(self) -> bool:
        """Whether the model runs the adaptive kernel (a detector, a window, or the stacked vote
        with a native learner: with Python members it is ``_meta``'s)."""
        return (self.drift is not None or self._window > 0
                or (self.vote == "stacking" and self._meta is None))  # fmt: skip

    def _init_extra(self) -> None:
        rule = _kernels.LAMBDA_RULES[self.lambda_rule]
        self._int_params = np.append(self._ipar(), rule)  # [seed, vote, lambda rule]
        if not self.adaptive:
            # rows: lambda_sc, lambda_sw, and [total weight seen, 0, ...] (MOA's rule)
            self._float_state = np.zeros((3, self.n_models))
            return
        if not isinstance(self.learner, NativeLearner):
            raise ValueError("drift and window need a native learner (hoeffding_tree, "
                             "naive_bayes, stump)")  # fmt: skip
        self._kernel = cast(Any, _adaptive.boosting_adaptive_run)
        vote = int(self._int_params[_kernels.VOTE])
        self._int_params = adaptive.int_params(self.seed, vote, self.drift,
                                               self._window, lambda_rule=rule)  # fmt: skip
        self._float_state = adaptive.new_state(self.n_models, self._window, 1.0,
                                                self.drift_delta)  # fmt: skip

    @property
    def _lam(self) -> np.ndarray:
        """``[lambda_sc, lambda_sw, seen]``, one column per member (updated in place by the
        kernel; ``seen[0]`` is the total weight learned, kept for MOA's rule). As it is: a
        deferred learn is done by ``_settled()``, which its public readers call."""
        st: Any = self._float_state
        return st.lam if self.adaptive else st

    @property
    def _lam_sc(self) -> np.ndarray:
        """lambda_sc per member, learned: after ``_settled()``."""
        self._settled()
        return self._lam[_kernels.SC]

    @property
    def _lam_sw(self) -> np.ndarray:
        """lambda_sw per member, learned: after ``_settled()``."""
        self._settled()
        return self._lam[_kernels.SW]

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

    def _vote_rule(self) -> VoteRule:
        """The vote as ``_kernels.boosting_predict`` makes it (``ensembles.explain``)."""
        return VoteRule("boosting", self.vote_weights.tolist(),
                        "log((1 - e_m) / e_m), e_m = lambda_sw / (lambda_sc + lambda_sw) (e_m "
                        "below 1e-10 counts as 1e-10); 0, no vote, when e_m >= 1/2 or the member "
                        "has no weight yet; member 1 alone when nobody votes",
                        majority=self.vote == "majority", skip_unweighted=True,
                        first_alone=True, meta=self._vote_meta())  # fmt: skip

    # slow path
    def _py_predict(self, x: Features) -> dict:
        stacked = self._stacked_vote(x)  # (vote="stacking", once its meta-learner has learned)
        if stacked is not None:
            return stacked
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
        self._stack_learn(x, y, w)  # (vote="stacking": before any member learns x)
        lam = kernel(_kernels.capped_lambda)(w)
        rule = _kernels.LAMBDA_RULES[self.lambda_rule]
        kernel(_kernels.boost_seen)(self._lam, w, rule)
        for m, member in enumerate(self._members):
            k = poisson(lam, self.seed, seq, m)
            if k > 0:
                member.learn_one(x, y, w=float(k))
            correct = self._top_class(member.predict_proba_one(x)) == y
            lam = kernel(_kernels.boost_step)(self._lam, m, lam, correct, rule)

    # state
    def _extra_params(self) -> dict:
        out = super()._extra_params()
        defaults = {"drift": None, "drift_delta": 0.002, "window": None, "lambda_rule": "thesis"}
        out.update({k: getattr(self, k) for k, v in defaults.items() if getattr(self, k) != v})
        return out

    def _extra_arrays(self) -> dict[str, np.ndarray]:
        out = {"boost.lam_sc": self._lam_sc.copy(), "boost.lam_sw": self._lam_sw.copy()}
        if self.lambda_rule == "moa":
            out["boost.seen"] = self._lam[_kernels.SEEN, :1].copy()
        if self.adaptive:
            out.update(adaptive.state_arrays(self._float_state))
        out.update(self._stack_arrays())
        return out

    def _load_extra(self, arrays: dict[str, np.ndarray]) -> None:
        names = ("boost.lam_sc", "boost.lam_sw") + (("boost.seen",) if self.lambda_rule == "moa"
                                                      else ())  # fmt: skip
        for row, name in enumerate(names):
            src = np.asarray(arrays[name], dtype=np.float64)
            # sums of weights, finite (a sum of ~1e308 would take absurd weights; a forged inf
            # or NaN made describe() unserialisable, a negative one could divide by 0)
            if not (np.isfinite(src) & (src >= 0)).all():
                raise ValueError(f"state array {name}: a sum that is negative or not finite (a "
                                 "forged or damaged state)")  # fmt: skip
            self._lam[row, : 1 if name == "boost.seen" else None] = src
        if self.adaptive:
            adaptive.load_state_arrays(self._float_state, arrays)
        self._load_stack(arrays)

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
        self._forget_predictions()  # the members change: no prediction of theirs is reused
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
        if self.lambda_rule == "moa":
            self._lam[_kernels.SEEN, 0] += N  # the block's weight, in MOA's total N
        self._set_n_seen(self.n_seen + N)
        return self
