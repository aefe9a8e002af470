"""Online bagging (Oza 2001, Fig. 3.3)."""

from __future__ import annotations

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

_PRIME_TAG = 1 << 62


class OnlineBagging(adaptive.DriftReport, VotingEnsemble):
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
        ``"average"`` (default: mean of the members' probabilities, as MOA and river),
        ``"majority"`` (the thesis: one vote per member for its top class), ``"weighted"``
        (members' probabilities weighted by their accuracy over the last ``window`` examples,
        smoothed as (correct + 1) / (counted + 2)) or ``"stacking"`` (a meta-learner, softmax
        regression over the members' probabilities, learns each example from what the
        members said *before* learning it; the average vote until it has learned one:
        ``ensembles.stacking``; not with ``output_codes``).
    poisson_lambda
        Rate of the Poisson weights: 1 (default) is Oza's bagging; 6 with ``drift="adwin"`` is
        leveraging bagging (Bifet, Holmes & Pfahringer 2010).
    output_codes
        ``False`` (default) or ``True``: leveraging bagging's random output codes (MOA's
        ``LeveragingBag -o``). Member m learns a binary problem: each class c is mapped to a bit
        ``output_code(seed, m, c)``, random per pair of classes (2j, 2j + 1) with the pair's two
        classes on opposite sides (so a member splits the classes in two halves; with two
        classes it learns y or its negation). The vote decodes: class c gets each member's
        probability of c's bit (``vote="majority"``: a vote when it is the member's top bit, as
        MOA), normalised to sum 1; each member's detector and window count it right or wrong
        on its own bit. Needs a native learner; ``prime`` is not available with it.
    drift
        ``None`` (default: never forget, the thesis' algorithm) or ``"adwin"``: one ADWIN
        detector per member on its 0/1 error (on the example after learning it, as MOA); when one detects that
        its member's error went up, the member with the highest estimated error is reset to a
        fresh learner (ADWIN bagging, Bifet et al. 2009); or ``"ddm"``: one DDM detector (Gama
        et al. 2004) per member on the same error, and a member is reset when its own detector
        signals a drift (its warning level is in ``describe()``). ``describe()`` counts the
        resets.
    drift_delta
        ADWIN's confidence (0.002, as MOA and river).
    window
        Examples over which each member's accuracy and the members' diversity (``describe()``)
        are kept; 0 keeps none. ``None`` (default): 1000 with ``drift`` or the weighted vote,
        else 0. Needs a native learner, as do ``drift`` and ``poisson_lambda != 1``.
    imbalance
        ``None`` (default: Oza's bagging) or class-imbalance online bagging (Wang, Minku & Yao
        2015): every learned example first updates the classes' time-decayed sizes, then its
        Poisson rate is ``poisson_lambda`` times a rate from them::

            w_k <- decay * w_k + (1 - decay) * [y = k]      for every class k
            "oob":  lambda = w_max / w_y    (oversampling: >= 1, larger for rarer classes)
            "uob":  lambda = w_min / w_y    (undersampling: <= 1, smaller for commoner classes)

        with max and min over the classes seen so far (w_k > 0); each member then learns the
        example with weight ``k ~ Poisson(lambda)`` as in Oza's bagging. The sizes are part
        of the saved state (``describe()["imbalance"]`` shows them). Works with any learner
        (native ones run it compiled); ``prime`` is not available with it. A Hoeffding tree
        left at ``nb_zero_variance="auto"`` gets ``"skip"`` here (river's naive-Bayes rule
        for a class of zero variance: under oversampling a leaf often knows the rare class
        from one heavily weighted value, and MOA's point mass then rules it out anywhere
        else); the spec names the rule. ``"oob"`` suits a class of 1-2 % and concepts a few
        rare examples must teach, ``"uob"`` a class of a few percent where the classes
        overlap (docs/engine-api.md, "Class-imbalance online bagging", has the measurements).
    imbalance_decay
        The sizes' time decay (``decay`` above): 0.9999 (default). Wang, Minku & Yao's papers
        use 0.9, which caps OOB's rate near ``1 / (1 - decay)`` = 10 however rare the class
        (right after a minority example its size is about ``1 - decay``); at 0.99 a class of
        1 % gets about half its ratio (the example's own ``1 - decay`` counts). On the
        streams of ``benchmarks/imbalance.py`` OOB's G-mean rose with the decay from 0.9 to
        0.9999 on every one and UOB's did not move. A smaller decay follows a change in the
        class ratio faster (after about ``1 / (1 - decay)`` examples). The spec always names
        it, so a saved model keeps its own.
    threads
        Threads a batch (``learn_many``, ``predict_learn_many``, ``predict_proba_many``) runs
        the members in (1, default: the calling thread only). Members are independent work: with
        a native learner and Oza's bagging (no ``drift``, ``window``, weighted or stacked vote,
        whose members share detectors and votes) groups of members run in parallel, with results
        bit-identical to one thread. Not part of the model (neither its spec nor its state);
        settable later as ``model.threads``.

    Examples
    --------
    >>> from learners import NaiveBayes
    >>> from ensembles import OnlineBagging
    >>> model = OnlineBagging(NaiveBayes(), n_models=5, seed=1)
    >>> for i in range(100):
    ...     model.learn_one({"x": float(i % 10), "c": "ab"[i % 2]}, i % 10 >= 5)
    >>> model.predict_one({"x": 8.0, "c": "a"})
    True

    ADWIN bagging over a stream whose concept flips (``describe()["n_drifts"]`` counts the
    members reset):

    >>> from learners import HoeffdingTree
    >>> model = OnlineBagging(HoeffdingTree(), n_models=3, seed=1, drift="adwin")
    >>> for i in range(3000):
    ...     x = {"x": float(i % 10)}
    ...     model.learn_one(x, (i % 10 >= 5) != (i >= 1500))
    >>> model.predict_one({"x": 8.0}), model.describe()["n_drifts"] > 0
    (False, True)

    Oversampling online bagging on a stream with 5% positives (``describe()["imbalance"]``
    has the classes' time-decayed sizes):

    >>> model = OnlineBagging(NaiveBayes(), n_models=5, seed=1, imbalance="oob")
    >>> for i in range(200):
    ...     model.learn_one({"x": float(i % 20)}, i % 20 == 0)
    >>> model.predict_one({"x": 0.0}), model.describe()["imbalance"]["mode"]
    (True, 'oob')

    The stacked vote, a meta-learner trained on what the members say before learning each
    example (``describe()["meta_learner"]`` gives its size):

    >>> model = OnlineBagging(NaiveBayes(), n_models=5, seed=1, vote="stacking")
    >>> for i in range(100):
    ...     model.learn_one({"x": float(i % 10)}, i % 10 >= 5)
    >>> model.predict_one({"x": 8.0}), model.describe()["meta_learner"]["learned"]
    (True, 100)

    References
    ----------
    Oza, N. C. (2001). Online Ensemble Learning. PhD thesis, UC Berkeley, ch. 3.
    Oza, N. C. & Russell, S. (2001). Online bagging and boosting. AISTATS.
    Bifet, A., Holmes, G., Pfahringer, B., Kirkby, R. & Gavaldà, R. (2009). New ensemble
    methods for evolving data streams. KDD.
    Bifet, A., Holmes, G. & Pfahringer, B. (2010). Leveraging bagging for evolving data
    streams. ECML PKDD.
    Wang, S., Minku, L. L. & Yao, X. (2015). Resampling-based ensemble methods for online
    class imbalance learning. IEEE TKDE 27(5), 1356-1368.
    """

    kind = "bagging"
    votes = ("average", "majority", "weighted", "stacking")

    _kernel = staticmethod(_kernels.bagging_run)

    def __init__(self, learner: Any, *, n_models: int = 10, seed: int = 0, vote: str = "average",
                 poisson_lambda: float = 1.0, drift: str | None = None, drift_delta: float = 0.002,
                 window: int | None = None, output_codes: bool = False,
                 imbalance: str | None = None,
                 imbalance_decay: float = adaptive.IMBALANCE_DECAY,
                 limits: Limits | dict | None = None, threads: int = 1):  # fmt: skip
        adaptive.check_options(poisson_lambda=poisson_lambda, drift=drift,
                               drift_delta=drift_delta, window=window,
                               output_codes=output_codes)  # fmt: skip
        adaptive.check_imbalance(imbalance, imbalance_decay)
        if imbalance is not None:
            learner = adaptive.imbalance_learner(learner)
        if output_codes and vote == "stacking":
            raise ValueError("vote='stacking' is not available with output_codes (members give "
                             "bits, not class probabilities)")  # fmt: skip
        self.poisson_lambda = poisson_lambda
        self.output_codes = output_codes
        self.drift = drift
        self.drift_delta = drift_delta
        self.window = window
        self.imbalance = imbalance
        self.imbalance_decay = imbalance_decay
        # the slow path's time-decayed class sizes (``_imbalance_rate``; native: the kernel's)
        self._class_sizes: dict[Label, float] = {}
        super().__init__(learner, n_models=n_models, seed=seed, vote=vote, limits=limits)
        self.threads = threads
        backend = cast(Any, self._be)
        if backend.native and not self.adaptive:  # Oza's bagging: a batch may run groups of
            backend.independent_members = True  # members in parallel

    @property
    def _window(self) -> int:
        if self.window is not None:
            return int(self.window)
        return adaptive.DEFAULT_WINDOW if self.drift or self.vote == "weighted" else 0

    @property
    def adaptive(self) -> bool:
        """Whether the model runs the adaptive kernel (any option beyond Oza's bagging; the
        stacked vote with a native learner: with Python members it is ``_meta``'s)."""
        return (self.drift is not None or self.poisson_lambda != 1.0 or self.vote == "weighted"
                or self._window > 0 or self.output_codes
                or (self.vote == "stacking" and self._meta is None)
                or (self.imbalance is not None and isinstance(self.learner, NativeLearner)))  # fmt: skip

    def _init_extra(self) -> None:
        self._int_params = self._ipar()
        if not self.adaptive:
            return
        if not isinstance(self.learner, NativeLearner):
            raise ValueError("drift, poisson_lambda, window, output_codes and vote='weighted' "
                             "need a native learner (hoeffding_tree, naive_bayes, stump)")  # fmt: skip
        self._kernel = cast(Any, _adaptive.adaptive_run)
        self._int_params = adaptive.int_params(self.seed, _kernels.VOTES[self.vote], self.drift,
                                               self._window, codes=self.output_codes,
                                               imbalance=self.imbalance)  # fmt: skip
        self._float_state = adaptive.new_state(self.n_models, self._window, self.poisson_lambda,
                                               self.drift_delta, self.imbalance_decay)  # fmt: skip

    def _member_classes(self) -> int:
        return 2 if self.output_codes else 1

    def _extra_params(self) -> dict:
        out = super()._extra_params()
        defaults = {"poisson_lambda": 1.0, "drift": None, "drift_delta": 0.002, "window": None,
                    "output_codes": False, "imbalance": None,
                    "imbalance_decay": adaptive.IMBALANCE_DECAY}  # fmt: skip
        out.update({k: getattr(self, k) for k, v in defaults.items() if getattr(self, k) != v})
        if self.imbalance is not None:  # (explicit: the spec keeps its meaning if a default moves)
            out["imbalance_decay"] = self.imbalance_decay
            out.update(adaptive.zero_variance_param(self.learner))
        return out

    @classmethod
    def stored_spec(cls, spec: dict) -> dict:
        """``spec`` as saved by Chorus (``spec()``, in a state or a store) with the defaults it
        was written under: one with ``imbalance`` that does not name the trees'
        ``nb_zero_variance`` predates its ``"auto"`` rule, so its trees keep ``"point"``."""
        return adaptive.legacy_imbalance_spec(spec)

    def _extra_arrays(self) -> dict[str, np.ndarray]:
        out = adaptive.state_arrays(self._float_state) if self.adaptive else {}
        out.update(self._stack_arrays())
        if self.imbalance is not None:
            out.update(adaptive.class_sizes_array(self._sizes(), len(self.classes)))
        return out

    def _load_extra(self, arrays: dict[str, np.ndarray]) -> None:
        sizes = None
        if self.imbalance is not None:  # (checked before anything is loaded)
            sizes = adaptive.load_class_sizes(arrays, len(self.classes))
        if self.adaptive:
            adaptive.load_state_arrays(self._float_state, arrays)
        self._load_stack(arrays)
        if sizes is None:
            return
        if self.adaptive:
            self._float_state.cls_w = sizes
        else:
            self._class_sizes = {c: float(v) for c, v in zip(self.classes, sizes, strict=True)
                                 if v > 0.0}  # fmt: skip

    def _sizes(self) -> np.ndarray:
        """The classes' time-decayed sizes in class order (at any capacity; readers call
        ``_settled()`` first)."""
        if self.adaptive:
            return self._float_state.cls_w
        return np.array([self._class_sizes.get(c, 0.0) for c in self.classes])

    def describe(self) -> dict:
        out = super().describe()  # (it settles the model)
        if self.imbalance is not None:
            sizes = adaptive.class_sizes_array(self._sizes(), len(self.classes))
            out["imbalance"] = {"mode": self.imbalance, "decay": self.imbalance_decay,
                                "class_sizes": dict(zip(map(str, self.classes),
                                                        sizes["imbalance.class_sizes"].tolist(),
                                                        strict=True))}  # fmt: skip
        return out

    def _vote_rule(self) -> VoteRule:
        """The vote as ``_kernels.bagging_predict`` / ``_adaptive.adaptive_predict`` make it
        (``ensembles.explain``)."""
        M = self.n_models
        if self.output_codes:
            self._settled()
            code = kernel(_adaptive.output_code)
            codes = [[int(code(self.seed, m, c)) for c in range(len(self.classes))]
                     for m in range(M)]  # fmt: skip
            return VoteRule("output_codes", self._accuracy_weights() if self.vote == "weighted"
                            else [1.0] * M, "each member learns a bit per class (`codes`); "
                            "class c gets each member's weight times its probability of c's "
                            "bit", majority=self.vote == "majority", codes=codes)  # fmt: skip
        if self.vote == "weighted":
            return VoteRule("weighted", self._accuracy_weights(),
                            "each member's accuracy over the last `window` examples, "
                            "(correct + 1) / (counted + 2)")  # fmt: skip
        if self.vote == "majority":
            return VoteRule("majority", [1.0] * M,
                            "equal: one vote per member for its top class", majority=True)  # fmt: skip
        return VoteRule("average", [1.0] * M, "equal: the mean of the members' probabilities",
                        meta=self._vote_meta())  # fmt: skip

    def _accuracy_weights(self) -> list[float]:
        """``_adaptive.member_weight`` of the weighted vote, per member."""
        self._settled()
        st: Any = self._float_state
        ok, n = st.win_ok.tolist(), st.win_n.tolist()
        return [(ok[m] + 1.0) / (n[m] + 2.0) for m in range(self.n_models)]

    # slow path: the same algorithm over Python member objects
    def _py_predict(self, x: Features) -> dict:
        stacked = self._stacked_vote(x)  # (vote="stacking", once its meta-learner has learned)
        if stacked is not None:
            return stacked
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
        self._stack_learn(x, y, w)  # (vote="stacking": before any member learns x)
        lam = float(self.poisson_lambda) * self._imbalance_rate(y)
        for m, member in enumerate(self._members):
            k = poisson(lam, self.seed, seq, m)
            if k > 0:
                member.learn_one(x, y, w=k * w)

    def _imbalance_rate(self, y: Label) -> float:
        """OOB / UOB's factor of the Poisson rate for an example of class ``y`` (Wang, Minku &
        Yao 2015; the reference of ``_adaptive.imbalance_rate``): every class size decays, y's
        grows by 1 - decay, then ``w_max / w_y`` (OOB) or ``w_min / w_y`` (UOB) over the
        classes seen; 1 without ``imbalance``."""
        if self.imbalance is None:
            return 1.0
        decay = float(self.imbalance_decay)
        sizes = self._class_sizes
        for c in sizes:
            sizes[c] *= decay
        sizes[y] = sizes.get(y, 0.0) + (1.0 - decay)
        seen = [v for v in sizes.values() if v > 0.0]
        ref = max(seen) if self.imbalance == "oob" else min(seen)
        return ref / sizes[y]

    def prime(self, X: list[Features], y: list) -> OnlineBagging:
        """Fit the members by batch bagging on an initial block, then continue online.

        Member m learns a bootstrap sample (N draws with replacement) of the block, as
        ``BatchBagging`` does (thesis §4.6.2 primes boosting the same way). The sequence counter
        advances by N so later Poisson draws are fresh.
        """
        if self.output_codes:
            raise ValueError("prime() is not available with output_codes (members learn bits)")
        if self.imbalance is not None:
            raise ValueError("prime() is not available with imbalance (its class sizes are "
                             "counted online)")  # fmt: skip
        X, y = list(X), list(y)
        if not X:
            return self
        self._forget_predictions()  # the members change: no prediction of theirs is reused
        enc = self._encode_block(X, y)
        for m in range(self.n_models):
            counts = resample_counts(
                np.ones(len(X)), len(X), self.seed, m, _PRIME_TAG + self.n_seen
            )
            self._member_fit(m, X, y, counts, enc)
        self._set_n_seen(self.n_seen + len(X))
        return self
