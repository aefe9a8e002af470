"""Random forests of Hoeffding trees for drifting streams: ``AdaptiveRandomForest`` (Gomes et al.
2017) and ``StreamingRandomPatches`` (Gomes, Read & Bifet 2019). The algorithm is in
``_forest.py`` (its module doc); ``ForestReference`` is its readable form over Python trees,
which the tests hold the kernels to."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from learners import HoeffdingTree, Limits
from learners.base import Features, Label
from learners.jit import kernel

from . import _forest as fk
from . import adaptive, adwin, stacking
from ._rng import poisson
from ._voting import VotingEnsemble
from .explain import VoteRule

# the trees of MOA's ARF and SRP (``ARFHoeffdingTree -e 2000000 -g 50 -c 0.01``; tau 0.05 and
# naive-Bayes-adaptive leaves are MOA's defaults too)
FOREST_TREE = {"grace_period": 50, "delta": 0.01, "tau": 0.05, "leaf_prediction": "nba"}
TRAININGS = {"patches": fk.TRAIN_POISSON, "subspaces": fk.TRAIN_ONCE,
             "resampling": fk.TRAIN_POISSON}  # fmt: skip


def _check_delta(name: str, value: Any) -> None:
    if (not isinstance(value, int | float) or isinstance(value, bool)
            or not 0.0 < value < 1.0):  # fmt: skip
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")


class RandomForest(VotingEnsemble):
    """What ``AdaptiveRandomForest`` and ``StreamingRandomPatches`` share: ``2 n_models`` trees
    in one bank (a foreground and a background tree per member), ADWIN warning and drift
    detectors per member, the accuracy-weighted vote, Poisson(lambda) weights; a subclass says
    which subspaces its trees draw (``_subspace``) and how members are trained
    (``_training``). With ``vote="stacking"`` the meta-learner of bagging's and boosting's
    stacked vote (``ensembles.stacking``; its arrays in ``_float_state.meta``) replaces the
    accuracy weighting (``_forest``'s module doc)."""

    votes = ("weighted", "average", "stacking")
    trees_only = True  # (its members are Hoeffding trees: no MLP kernel to warm)
    drift = "adwin"  # its members' drift detectors (as adaptive bagging's ``drift``: n_drifts)
    _kernel = staticmethod(fk.forest_run)

    def __init__(self, learner: Any = None, *, n_models: int = 10, seed: int = 0,
                 vote: str = "weighted", poisson_lambda: float = 6.0,
                 warning_delta: float = 1e-4, drift_delta: float = 1e-5,
                 window: int = adaptive.DEFAULT_WINDOW,
                 limits: Limits | dict | None = None):  # fmt: skip
        if learner is None:
            learner = HoeffdingTree(**FOREST_TREE)  # type: ignore[arg-type]
        if type(learner) is not HoeffdingTree:
            raise ValueError(f"{type(self).__name__} grows Hoeffding trees: learner must be a "
                             f"HoeffdingTree (hoeffding_tree), got {learner!r}")  # fmt: skip
        if learner.max_features is not None:
            raise ValueError("the forest draws its trees' subspaces itself: give the learner "
                             "without max_features")  # fmt: skip
        if window is None:
            raise ValueError("window must be an integer in [0, 100000], got None")
        adaptive.check_options(poisson_lambda=poisson_lambda, drift=None, drift_delta=drift_delta,
                               window=window)  # fmt: skip
        _check_delta("warning_delta", warning_delta)
        self.poisson_lambda = poisson_lambda
        self.warning_delta = warning_delta
        self.drift_delta = drift_delta
        self.window = int(window)
        super().__init__(learner, n_models=n_models, seed=seed, vote=vote, limits=limits)
        for m in range(self.n_models):  # the first trees' subspaces, one key per member
            key, deal = self._first_tree(m)
            self._bank.reset_tree(m, key, deal=deal)

    @classmethod
    def from_spec(cls, spec: dict) -> Any:
        """As ``OnlineEnsemble.from_spec``; a ``hoeffding_tree`` learner takes the forests' tree
        defaults (``FOREST_TREE``: MOA's) for the parameters the spec does not set."""
        params = spec.get("params") or {}
        if isinstance(spec, dict) and isinstance(params, dict):
            if spec.get("learner", "hoeffding_tree") == "hoeffding_tree":
                spec = {**spec, "params": {**FOREST_TREE, **params}}
        return super().from_spec(spec)

    # ------------------------------------------------------------------ what subclasses set
    def _subspace(self) -> dict:
        """The trees' subspace parameters (``HoeffdingTree``'s ``max_features``, ``subspace``)."""
        raise NotImplementedError

    _training = fk.TRAIN_POISSON

    # ------------------------------------------------------------------ the engine's hooks
    def _member_prototype(self) -> HoeffdingTree:
        """The members' tree: the learner with the forest's subspaces, keyed by its seed."""
        return self.learner.clone({**self._subspace(), "subspace_seed": self.seed})

    def _bank_size(self) -> int:
        return 2 * self.n_models

    def _first_tree(self, m: int) -> tuple[int, bool]:
        """(key, deal) of member m's first tree (``TreeBank.reset_tree``): a key of its own
        (ARF: each leaf draws from it); ``StreamingRandomPatches`` deals."""
        return int(kernel(fk.tree_key)(self.seed, fk.NEW_FOREST, m, 1)), False

    @property
    def _bank(self) -> Any:
        return cast(Any, self._settled()).bank

    def _init_extra(self) -> None:
        M = self.n_models
        self._int_params = np.zeros(fk.N_IPAR, np.int64)
        self._int_params[[fk.SEED, fk.WEIGHTED, fk.TRAIN, fk.STACK]] = (
            self.seed, int(self.vote == "weighted"), self._training,
            int(self.vote == "stacking"))  # fmt: skip
        self._int_params[[adaptive.ak.WINDOW, adaptive.ak.CLOCK, adaptive.ak.MIN_LEN]] = (
            self.window, adaptive.ADWIN_CLOCK, adaptive.ADWIN_MIN_LEN)  # fmt: skip
        slots = np.empty((2, M), np.int64)
        slots[fk.FG] = np.arange(M)
        slots[fk.BG] = -1
        self._float_state = fk.ForestState(
            fpar=np.array(
                [float(self.poisson_lambda), float(self.warning_delta), float(self.drift_delta)]
            ),  # fmt: skip
            adwin=adwin.adwin_state(2 * M),
            slots=slots,
            acc=np.zeros((2, M)),
            events=np.zeros((3, M), np.int64),
            mpred=np.full(M, -1, np.int64),
            win_pred=np.full((self.window, M), adaptive.ak.RESET, np.int32),
            win_y=np.zeros(self.window, np.int64),
            win_ok=np.zeros(M, np.int64),
            win_n=np.zeros(M, np.int64),
            counters=np.zeros(3, np.int64),
            meta=adaptive.meta_state(M),
        )

    @property
    def adaptive(self) -> bool:
        """A forest runs an adaptive kernel: its per-example calls reuse the members'
        predictions of ``x`` for the learn of ``x`` that follows (``VotingEnsemble._runner``)."""
        return True

    _default_deltas = (1e-4, 1e-5)  # (warning, drift): the class's defaults

    def _extra_params(self) -> dict:
        out = super()._extra_params()
        warning, drift = self._default_deltas
        defaults = {"poisson_lambda": 6.0, "warning_delta": warning, "drift_delta": drift,
                    "window": adaptive.DEFAULT_WINDOW}  # fmt: skip
        out.update({k: getattr(self, k) for k, v in defaults.items() if getattr(self, k) != v})
        return out

    # ------------------------------------------------------------------ state
    def _extra_arrays(self) -> dict[str, np.ndarray]:
        st = self._float_state
        out = adwin.adwin_arrays(st.adwin, "forest.adwin.")
        out.update({"forest.slots": st.slots.copy(), "forest.acc": st.acc.copy(),
                    "forest.events": st.events.copy()})  # fmt: skip
        out.update(adaptive.window_arrays(st, "forest.window."))
        out.update(self._stack_arrays())
        return out

    def _stack_state(self) -> Any:
        return self._float_state.meta

    def _load_extra(self, arrays: dict[str, np.ndarray]) -> None:
        st = self._float_state
        M = self.n_models
        loaded = {}
        for name, dst in (("slots", st.slots), ("acc", st.acc), ("events", st.events)):
            src = np.asarray(arrays[f"forest.{name}"])
            if src.shape != dst.shape or src.dtype != dst.dtype:
                raise ValueError(f"state array forest.{name} has shape {src.shape} / "
                                 f"{src.dtype}, want {dst.shape} / {dst.dtype}")  # fmt: skip
            loaded[name] = src
        m = np.arange(M)
        fg, bg = loaded["slots"]
        other = np.where(fg == m, m + M, m)
        if not (((fg == m) | (fg == m + M)).all() and ((bg == -1) | (bg == other)).all()):
            raise ValueError("state array forest.slots: a member's tree outside its two slots "
                             "(a forged or damaged state)")  # fmt: skip
        acc = loaded["acc"]
        if not (np.isfinite(acc).all() and (acc >= 0).all() and (acc[0] <= acc[1]).all()):
            raise ValueError("state array forest.acc: counts that are not finite, negative, or "
                             "more right than seen (a forged or damaged state)")  # fmt: skip
        if (loaded["events"] < 0).any():
            raise ValueError("state array forest.events: a negative count (a forged or damaged "
                             "state)")  # fmt: skip
        window = adaptive.checked_window(st, arrays, "forest.window.")
        adwin.load_adwin_arrays(st.adwin, arrays, "forest.adwin.")
        self._load_stack(arrays)
        for name, src in {**loaded, **window}.items():
            getattr(st, name)[...] = src

    # ------------------------------------------------------------------ reading it
    @property
    def n_drifts(self) -> int:
        """Trees replaced after a detected drift so far (all members)."""
        self._settled()
        return int(self._float_state.events[fk.DRIFTS].sum())

    def _describe_members(self) -> list[dict]:
        T = self._bank.T
        st = self._float_state
        out = []
        for m in range(self.n_models):
            fg, bg = (int(s) for s in st.slots[:, m])
            n = int(T.n_nodes[fg])
            seen = float(st.acc[fk.SEEN, m])
            out.append({
                "n_nodes": n, "n_leaves": int((T.kind[fg, :n] == 0).sum()),
                "background_nodes": int(T.n_nodes[bg]) if bg >= 0 else None,
                "accuracy": float(st.acc[fk.CORRECT, m]) / seen if seen > 0 else None,
                "warnings": int(st.events[fk.WARNINGS, m]),
                "drifts": int(st.events[fk.DRIFTS, m]),
                "promoted": int(st.events[fk.PROMOTED, m]),
            })  # fmt: skip
        return out

    def _vote_rule(self) -> VoteRule:
        """The vote as ``_forest.forest_predict`` makes it (``_forest.member_weight``;
        ``ensembles.explain``)."""
        self._settled()
        st = self._float_state
        right, seen = st.acc[fk.CORRECT].tolist(), st.acc[fk.SEEN].tolist()
        weights = []
        for m in range(self.n_models):
            a = 1.0
            if self.vote == "weighted" and seen[m] > 0.0:
                a = 100.0 * right[m] / seen[m]
                a = a if a > 0.0 else 1.0
            weights.append(a)
        what = ("each member's accuracy in percent since its tree started (1 while it is 0)"
                if self.vote == "weighted" else "equal")  # fmt: skip
        return VoteRule("forest", weights, what + "; each member's probabilities divided by "
                        "their sum", by_mass=True, meta=self._vote_meta())  # fmt: skip

    def _member_trees(self) -> list[int]:
        """Each member's foreground tree in the bank (``_forest``: slot m or M + m)."""
        self._settled()
        return [int(t) for t in self._float_state.slots[fk.FG]]

    def diversity(self) -> dict | None:
        """Diversity of the members over the window (``describe()["diversity"]``; ``None``
        without a window)."""
        if self.window == 0:
            return None
        self._settled()
        return adaptive.describe(self._float_state, self.window, None)["diversity"]

    def describe(self) -> dict:
        out = super().describe()
        if self.window > 0:  # per member window_accuracy, and diversity
            adaptive.add_description(out, self._float_state, self.window, None)
        out["n_drifts"] = self.n_drifts
        return out

    # the slow path: the forests need native trees (``ForestReference`` is their reference)
    def _py_predict(self, x: Features) -> dict:
        raise NotImplementedError("a forest runs compiled trees only")

    def _py_learn(self, x: Features, y: Label, w: float, seq: int) -> None:
        raise NotImplementedError("a forest runs compiled trees only")


class AdaptiveRandomForest(RandomForest):
    """Adaptive Random Forest (Gomes et al. 2017), as MOA's ``AdaptiveRandomForest``.

    Online bagging with Poisson(6) weights over Hoeffding trees whose leaves each learn a random
    subset of ``max_features`` features (drawn when the leaf first learns), with per tree an
    ADWIN warning detector that starts a background tree and an ADWIN drift detector that
    replaces the tree by it; the vote weights each tree's probabilities by its accuracy since
    it started. The algorithm step by step: ``ensembles/_forest.py``.

    Parameters
    ----------
    learner
        The tree (a ``HoeffdingTree``); ``None`` (default): MOA's ARF tree, grace period 50,
        delta 0.01, tau 0.05, naive-Bayes-adaptive leaves.
    n_models
        Number of trees (10).
    seed
        Key of every draw (weights, subspaces): same seed + same stream = the same forest.
    max_features
        Features a leaf draws of the F of its first example: ``"sqrt"`` (default,
        round(sqrt(F)) + 1, MOA's default), ``"log2"``, a count, a fraction of F in (0, 1], or
        ``None`` (all: no random subspaces).
    vote
        ``"weighted"`` (default: each tree's probabilities times its accuracy since it started,
        in percent, 1 while that is 0, as MOA), ``"average"`` (MOA's ``disableWeightedVote``)
        or ``"stacking"`` (a meta-learner over the foreground trees' probabilities, taken
        before they learn each example, in place of the weighting: ``ensembles.stacking``;
        ``describe()["meta_learner"]``).
    poisson_lambda
        Rate of the Poisson weights (6, MOA's and river's).
    window
        Examples over which ``describe()`` reports each member's accuracy and the members'
        diversity (disagreement, Q statistic, kappa), as adaptive bagging (1000; 0: none).
    warning_delta, drift_delta
        The ADWIN detectors' confidences (0.01 and 0.001, MOA's and river's; MOA's before 2019
        and the paper's "moderate" ARF: 1e-4 and 1e-5).

    Examples
    --------
    >>> from ensembles import AdaptiveRandomForest
    >>> model = AdaptiveRandomForest(n_models=3, seed=1)
    >>> for i in range(600):
    ...     x = {"a": float(i % 10), "b": float(i % 7), "c": float(i % 3)}
    ...     model.learn_one(x, (i % 10 >= 5) != (i >= 300))
    >>> model.predict_one({"a": 8.0, "b": 1.0, "c": 0.0})
    False

    References
    ----------
    Gomes, H. M., Bifet, A., Read, J., Barddal, J. P., Enembreck, F., Pfahringer, B., Holmes, G.
    & Abdessalem, T. (2017). Adaptive random forests for evolving data stream classification.
    Machine Learning 106.
    """

    kind = "arf"

    _default_deltas = (0.01, 0.001)

    def __init__(self, learner: Any = None, *, n_models: int = 10, seed: int = 0,
                 max_features: str | int | float | None = "sqrt", vote: str = "weighted",
                 poisson_lambda: float = 6.0, warning_delta: float = 0.01,
                 drift_delta: float = 0.001, window: int = adaptive.DEFAULT_WINDOW,
                 limits: Limits | dict | None = None):  # fmt: skip
        from learners.native import subspace_rule

        try:
            subspace_rule(max_features)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        self.max_features = max_features
        super().__init__(learner, n_models=n_models, seed=seed, vote=vote,
                         poisson_lambda=poisson_lambda, warning_delta=warning_delta,
                         drift_delta=drift_delta, window=window, limits=limits)  # fmt: skip

    def _subspace(self) -> dict:
        return {"max_features": self.max_features, "subspace": "leaf"}

    def _extra_params(self) -> dict:
        out = super()._extra_params()
        if self.max_features != "sqrt":
            out["max_features"] = self.max_features
        return out


class StreamingRandomPatches(RandomForest):
    """Streaming Random Patches (Gomes, Read & Bifet 2019), as MOA's
    ``StreamingRandomPatches``.

    Each member is a Hoeffding tree over a random subspace of ``subspace`` features drawn for the
    whole tree (the members' first trees are dealt distinct subspaces while there are enough, as
    MOA deals them; a new draw for each later tree), trained with Poisson(6) weights (``training=
    "patches"``, default), on every example once (``"subspaces"``) or on every feature
    (``"resampling"``: leveraging-bagging-like); warning and drift detectors, background trees
    and the accuracy-weighted vote as ``AdaptiveRandomForest``.

    Parameters
    ----------
    subspace
        Features per tree of the F of its first example: a fraction in (0, 1] (0.6, default, as
        MOA's 60%), a count, ``"sqrt"`` or ``"log2"``.
    training
        ``"patches"``, ``"subspaces"`` or ``"resampling"`` (MOA's training methods).
    warning_delta, drift_delta
        The ADWIN detectors' confidences (1e-4 and 1e-5, MOA's and river's for SRP).
    learner, n_models, seed, vote, poisson_lambda, window
        As ``AdaptiveRandomForest``.

    Examples
    --------
    >>> from ensembles import StreamingRandomPatches
    >>> model = StreamingRandomPatches(n_models=3, seed=1)
    >>> for i in range(600):
    ...     x = {"a": float(i % 10), "b": float(i % 7), "c": float(i % 3)}
    ...     model.learn_one(x, i % 10 >= 5)
    >>> model.predict_one({"a": 8.0, "b": 1.0, "c": 0.0})
    True

    References
    ----------
    Gomes, H. M., Read, J. & Bifet, A. (2019). Streaming random patches for evolving data stream
    classification. ICDM.
    """

    kind = "srp"

    def _first_tree(self, m: int) -> tuple[int, bool]:
        """Member m's first tree is dealt its subspace: distinct from members 0..m-1's while
        C(F, k) allows, as MOA's SRP (``learners.tree.subspace``, "Dealt roots";
        ``"resampling"`` has no subspace)."""
        if self.training == "resampling":
            return super()._first_tree(m)
        return m, True

    def __init__(self, learner: Any = None, *, n_models: int = 10, seed: int = 0,
                 subspace: str | int | float = 0.6, training: str = "patches",
                 vote: str = "weighted", poisson_lambda: float = 6.0,
                 warning_delta: float = 1e-4, drift_delta: float = 1e-5,
                 window: int = adaptive.DEFAULT_WINDOW,
                 limits: Limits | dict | None = None):  # fmt: skip
        from learners.native import subspace_rule

        if subspace is None:
            raise ValueError("subspace must be 'sqrt', 'log2', a count or a fraction in (0, 1] "
                             "(training='resampling' uses every feature)")  # fmt: skip
        try:
            subspace_rule(subspace, "subspace")
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        if training not in TRAININGS:
            raise ValueError(f"training must be one of {sorted(TRAININGS)}, got {training!r}")
        self.subspace = subspace
        self.training = training
        self._training = TRAININGS[training]
        super().__init__(learner, n_models=n_models, seed=seed, vote=vote,
                         poisson_lambda=poisson_lambda, warning_delta=warning_delta,
                         drift_delta=drift_delta, window=window, limits=limits)  # fmt: skip

    def _subspace(self) -> dict:
        features = None if self.training == "resampling" else self.subspace
        return {"max_features": features, "subspace": "tree"}

    def _extra_params(self) -> dict:
        out = super()._extra_params()
        if self.subspace != 0.6:
            out["subspace"] = self.subspace
        if self.training != "patches":
            out["training"] = self.training
        return out


class ForestReference:
    """A forest's algorithm over Python trees (``HoeffdingTree`` objects, one per foreground and
    background tree): the readable form of ``_forest.py`` that the tests hold the kernels to.
    Built from a forest (its options; the forest itself is not touched). With
    ``vote="stacking"`` its meta-learner is ``stacking.MetaLearner``, the stacked vote's
    reference."""

    def __init__(self, forest: RandomForest) -> None:
        self.forest = forest
        M = forest.n_models
        proto = forest._member_prototype()
        self.fg = [proto.clone() for _ in range(M)]
        for m, tree in enumerate(self.fg):
            key, deal = forest._first_tree(m)
            tree.reset_tree(key, deal=deal)
        self.bg: list[Any] = [None] * M
        self.detectors = adwin.adwin_state(2 * M)
        self.acc = np.zeros((2, M))
        self.events = np.zeros((3, M), np.int64)
        self.classes: list = []  # in order of first appearance (the kernels' class codes)
        self.seq = 0
        self.meta = stacking.MetaLearner(M) if forest.vote == "stacking" else None

    def declare(self, features: dict[str, str], classes: list) -> None:
        """Declare the stream's features and classes on every tree (and the forest's order)."""
        for tree in self.fg:
            tree.declare(features, classes)
        self.classes = list(classes)

    def _top(self, p: dict) -> Any:
        if not p:
            return None
        best = max(p.values())
        return next(c for c in self.classes if p.get(c) == best)

    def _weight(self, m: int) -> float:
        seen = self.acc[fk.SEEN, m]
        if self.forest.vote != "weighted" or seen <= 0:
            return 1.0
        a = 100.0 * self.acc[fk.CORRECT, m] / seen
        return a if a > 0 else 1.0

    def _stacked_inputs(self, x: Features) -> np.ndarray:
        """The meta-learner's inputs: each member's foreground-tree probabilities of ``x``
        over the classes known (background trees do not vote)."""
        assert self.meta is not None
        return self.meta.inputs([tree.predict_proba_one(x) for tree in self.fg], self.classes)

    def predict_proba_one(self, x: Features) -> dict:
        if self.meta is not None and self.meta.learned > 0 and self.classes:
            p = self.meta.proba(self._stacked_inputs(x))  # (replaces the weighting below)
            return dict(zip(self.classes, p.tolist(), strict=True))
        votes: dict = {}
        total = 0.0
        for m, tree in enumerate(self.fg):
            p = tree.predict_proba_one(x)
            mass = sum(p.values())
            if not p or mass <= 0:
                continue
            wt = self._weight(m) / mass
            for c, v in p.items():
                votes[c] = votes.get(c, 0.0) + wt * v
            total += wt * mass
        return {c: v / total for c, v in votes.items()} if total > 0 else {}

    def learn_one(self, x: Features, y: Label, w: float = 1.0) -> None:
        f = self.forest
        M = f.n_models
        update = kernel(adwin.adwin_update)
        estimate = kernel(adwin.adwin_estimate)
        if y not in self.classes:
            self.classes.append(y)
        tops = [self._top(tree.predict_proba_one(x)) for tree in self.fg]
        if self.meta is not None and w > 0:  # before any tree learns x: no leakage
            self.meta.learn(self._stacked_inputs(x), self.classes.index(y), w)
        for m in range(M):
            self.acc[fk.SEEN, m] += w
            self.acc[fk.CORRECT, m] += w if tops[m] == y else 0.0
            once = f._training == fk.TRAIN_ONCE
            k = 1 if once else kernel(poisson)(float(f.poisson_lambda), f.seed, self.seq, m)
            if k <= 0:
                continue
            self.fg[m].learn_one(x, y, w=k * w)
            if self.bg[m] is not None:
                self.bg[m].learn_one(x, y, w=k * w)
            err = 0.0 if self._top(self.fg[m].predict_proba_one(x)) == y else 1.0
            for d, delta in ((m, f.warning_delta), (M + m, f.drift_delta)):
                before = estimate(self.detectors, d)
                change = update(self.detectors, d, err, float(delta), adaptive.ADWIN_CLOCK,
                                adaptive.ADWIN_MIN_LEN) and estimate(self.detectors, d) > before  # fmt: skip
                if change and d == m:  # warning: a fresh background tree
                    self.bg[m] = f._member_prototype()
                    self.bg[m].reset_tree(int(kernel(fk.tree_key)(f.seed, self.seq, m, 0)))
                    self._declare_like(self.bg[m])
                    kernel(adwin.adwin_reset)(self.detectors, m)
                    self.events[fk.WARNINGS, m] += 1
                elif change:  # drift: the background tree takes over, or a fresh tree
                    if self.bg[m] is not None:
                        self.fg[m], self.bg[m] = self.bg[m], None
                        kernel(adwin.adwin_reset)(self.detectors, m)
                        self.events[fk.PROMOTED, m] += 1
                    else:
                        self.fg[m].reset_tree(int(kernel(fk.tree_key)(f.seed, self.seq, m, 1)))
                    kernel(adwin.adwin_reset)(self.detectors, M + m)
                    self.acc[:, m] = 0.0
                    self.events[fk.DRIFTS, m] += 1
        self.seq += 1

    def _declare_like(self, tree: HoeffdingTree) -> None:
        """A new tree knows the features and classes the others know (the bank shares them)."""
        ref = self.fg[0]
        names = ref._bank.schema
        tree.declare({n: cast(str, names.kind_of(n)) for n in names.num_names + names.cat_names},
                     list(ref.classes))  # fmt: skip


__all__ = ["AdaptiveRandomForest", "ForestReference", "StreamingRandomPatches"]
