"""The ``vote`` option shared by online bagging, online boosting and the random forests."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from learners import Limits, NativeLearner
from learners.base import Features, Label

from . import _kernels, adaptive, stacking
from .base import OnlineEnsemble


class VotingEnsemble(OnlineEnsemble):
    """An online ensemble whose prediction combines members by ``vote``: ``"average"`` (their
    class probabilities, MOA's and river's rule), ``"majority"`` (their top classes, the
    thesis' rule) or ``"stacking"`` (a meta-learner trained on their class probabilities,
    ``ensembles.stacking``). Subclasses' kernels read the rule as ``ipar[VOTE]``
    (``_kernels.VOTE``); ``votes`` are the rules a subclass offers.

    The stacked vote's meta-learner is, with native members, arrays of the adaptive kernels'
    state (``_float_state``, an ``AdaptiveStruct``: the subclass runs the adaptive kernel), and
    with Python members a ``stacking.MetaLearner`` (``_meta``) that ``_stacked_vote`` and
    ``_stack_learn`` run: the subclass' ``_py_predict`` / ``_py_learn`` call them."""

    votes: tuple[str, ...] = ("average", "majority", "stacking")
    _meta: stacking.MetaLearner | None = None  # the slow path's meta-learner (vote="stacking")

    def __init__(self, learner: Any, *, n_models: int = 10, seed: int = 0, vote: str = "average",
                 limits: Limits | dict | None = None):  # fmt: skip
        _kernels.vote_code(vote, self.votes)  # ValueError naming the rules
        self.vote = vote
        if vote == "stacking" and not isinstance(learner, NativeLearner):
            self._meta = stacking.MetaLearner(n_models)
        super().__init__(learner, n_models=n_models, seed=seed, limits=limits)

    def _extra_params(self) -> dict:
        return {"vote": self.vote}

    def _ipar(self) -> np.ndarray:
        """``[seed, vote code]``, the kernels' integer parameters."""
        return np.array([self.seed, _kernels.vote_code(self.vote, self.votes)], dtype=np.int64)

    @property
    def adaptive(self) -> bool:
        """Whether the model runs the adaptive kernel (the subclass says when)."""
        return False

    # ---------------------------------------------------------------- the adaptive kernel's calls
    def _runner(self) -> Any:
        """An adaptive model's per-example calls reuse the members' predictions of ``x`` for
        the learn of ``x`` that follows them (``adaptive.PredictionReusingRunner``); decided once
        here, not on every call of the plain model's hot path."""
        return adaptive.PredictionReusingRunner if self.adaptive else None

    def _forget_predictions(self) -> None:
        """No member prediction of the last call is reused (the members change otherwise)."""
        if self.adaptive:
            cast(Any, self._be).runner.forget()

    def _run(self, X, ys, ws, *, predict: bool, learn: bool) -> list[dict]:
        self._forget_predictions()
        return super()._run(X, ys, ws, predict=predict, learn=learn)

    # ---------------------------------------------------------------- the stacked vote
    def _stacked_vote(self, x: Features) -> dict | None:
        """The slow path's stacked vote of ``x``: the meta-learner's class probabilities, or
        None (the ensemble's average vote stands) until it has learned an example."""
        meta = self._meta
        if meta is None or meta.learned == 0 or not self._classes:
            return None
        classes = self._classes
        p = meta.proba(meta.inputs([m.predict_proba_one(x) for m in self._members], classes))
        return dict(zip(classes, p.tolist(), strict=True))

    def _stack_learn(self, x: Features, y: Label, w: float) -> None:
        """The slow path's meta-learner learns (x, y) with weight ``w`` from the members'
        probabilities of x: call it before any member learns x (no leakage)."""
        meta = self._meta
        if meta is None:
            return
        classes = self._classes
        X = meta.inputs([m.predict_proba_one(x) for m in self._members], classes)
        meta.learn(X, classes.index(y), w)

    def _vote_meta(self) -> tuple[np.ndarray, int] | None:
        """The stacked vote's meta-learner as ``explain.VoteRule.meta`` (its weights at the
        classes known), once it has learned an example and so makes the vote; else None."""
        self._settled()
        parts = self._stack_parts()
        if parts is None or parts[1] == 0 or not self.classes:
            return None
        return stacking.resized(parts[0], self.n_models, len(self.classes)), parts[1]

    def _stack_parts(self) -> tuple[np.ndarray, int] | None:
        """The meta-learner's weights (at any capacity) and the examples it learned, as they
        are (readers call ``_settled()`` first); None without the stacked vote."""
        if self.vote != "stacking":
            return None
        if self._meta is not None:
            return self._meta.weights, self._meta.learned
        st = self._stack_state()
        return st.meta_w, int(st.meta_n[0])

    def _stack_state(self) -> Any:
        """What holds the compiled meta-learner's arrays (``meta_w``, ``meta_x``, ``meta_n``):
        the ``AdaptiveStruct`` that is ``_float_state`` (the forests': a field of theirs)."""
        return self._float_state

    def _stack_arrays(self) -> dict[str, np.ndarray]:
        """The stacked vote's saved arrays (``stacking.state_arrays``); {} without it."""
        parts = self._stack_parts()
        if parts is None:
            return {}
        return stacking.state_arrays(parts[0], self.n_models, len(self.classes), parts[1])

    def _load_stack(self, arrays: dict[str, np.ndarray]) -> None:
        """Load (and check) the stacked vote's saved arrays, if it has one."""
        if self.vote != "stacking":
            return
        weights, learned = stacking.load_arrays(arrays, self.n_models, len(self.classes),
                                                self.n_seen)  # fmt: skip
        if self._meta is not None:
            self._meta.weights, self._meta.learned = weights, learned
            return
        st = self._stack_state()
        st.meta_w = weights
        st.meta_x = np.zeros((self.n_models + 1, weights.shape[0]))
        st.meta_n[0] = learned

    def describe(self) -> dict:
        out = super().describe()  # (it settles the model)
        parts = self._stack_parts()
        if parts is not None:
            out["meta_learner"] = stacking.description(self.n_models, len(self.classes),
                                                       parts[1])  # fmt: skip
        return out
