"""Native (array + compiled kernel) learners: HoeffdingTree, NaiveBayes, DecisionStump."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from . import jit
from .base import Features, Label, ManyMixin, MemoryBytesMixin, RiverEstimator, check_weights
from .encoded import EncodedRows
from .limits import Limits, ParamError
from .schema import Schema
from .tree import layout, subspace
from .tree.bank import TreeBank
from .tree.layout import TreeParams
from .tree.rows import new_leaf
from .tree.run import single_run, single_run_io
from .tree.structs import _make_bank, make_run_io

STATE_FORMAT = "chorus-state"
# 2: sparse leaf statistics; 3: and sparse over the classes; 4: live rows only, in canonical
# order, integer arrays int32 where their values fit
STATE_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)  # versions 1 (dense leaf blocks) and 2 are converted on load

_CRITERIA = {"info_gain": layout.CRIT_INFO_GAIN, "gini": layout.CRIT_GINI}
_LEAF_PRED = {"mc": layout.PRED_MC, "nb": layout.PRED_NB, "nba": layout.PRED_NBA}
_NB_ZERO_VARIANCE = {"point": layout.NB_ZERO_POINT, "skip": layout.NB_ZERO_SKIP}
_UNLIMITED = 1 << 40
_NO_INT_PARAMS = np.zeros(1, np.int64)  # what single_run takes as ipar / fstate (unused)
_NO_FLOAT_STATE = np.zeros((1, 1))


# what every bank runs when it is made (its struct, its trees' roots), and what a native learner
# on its own runs besides (its run kernel)
BANK_KERNELS = (_make_bank, new_leaf)
LEARNER_KERNELS = (*BANK_KERNELS, make_run_io, single_run_io)
LEARNER_JOB = "learners.warm"  # its compile job's key (and module)


def cold_start() -> None:
    """Ask for a native learner's kernels (``LEARNER_KERNELS``) to be compiled elsewhere
    (``python -m learners.warm``) when numba's cache does not hold them
    (``learners.jit.compile_elsewhere``; nothing with ``CHORUS_COMPILE=block``). Called before
    a learner's bank is made: that runs kernels. An ensemble made from the learner drops the
    job (``ensembles.backends.cold_start``): its own compiles what it runs."""
    if all(jit.ready(k) for k in LEARNER_KERNELS):
        return
    jit.compile_elsewhere(jit.CompileJob(key=LEARNER_JOB, what="native learners",
                                         module=LEARNER_JOB, args=(),
                                         kernels=LEARNER_KERNELS))  # fmt: skip


# upper bounds of the size parameters: what a model spec may make the engine count or allocate
# (a tree's node count is capped again by ``Limits.max_nodes``)
PARAM_BOUNDS: dict[str, float] = {
    "grace_period": 1e9,
    "nb_threshold": 1e12,
    "max_depth": 1e4,
    "max_nodes": 1e6,
    "n_split_points": 1e4,
}


_SCOPES = {"leaf": subspace.SCOPE_LEAF, "tree": subspace.SCOPE_TREE}


def subspace_rule(max_features: Any, name: str = "max_features") -> tuple[int, float]:
    """``(subspace_mode, subspace_size)`` of ``TreeParams`` for a ``max_features`` value;
    ``ParamError`` naming ``name`` for anything else."""
    if max_features is None:
        return subspace.MODE_ALL, 0.0
    if max_features == "sqrt":
        return subspace.MODE_SQRT, 0.0
    if max_features == "log2":
        return subspace.MODE_LOG2, 0.0
    if isinstance(max_features, int | np.integer) and not isinstance(max_features, bool):
        if 1 <= max_features <= 1_000_000:
            return subspace.MODE_COUNT, float(max_features)
    elif isinstance(max_features, float) and 0.0 < max_features <= 1.0:
        return subspace.MODE_FRACTION, float(max_features)
    raise ParamError(name, f"{name} must be None, 'sqrt', 'log2', an integer in [1, 1000000] "
                           f"or a fraction in (0, 1], got {max_features!r}")  # fmt: skip


def _check_choice(name: str, value: Any, choices: dict | tuple) -> None:
    if value not in choices:
        raise ParamError(name, f"{name} must be one of {sorted(choices)}, got {value!r}")


def _check_positive(name: str, value: Any, *, allow_zero: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    hi = PARAM_BOUNDS.get(name, math.inf)
    if not ok or not value >= 0 or (value == 0 and not allow_zero) or value > hi:
        bound = (">= 0" if allow_zero else "> 0") + ("" if hi == math.inf else f" and <= {hi:g}")
        raise ParamError(name, f"{name} must be a number {bound}, got {value!r}")


class NativeLearner(ManyMixin, MemoryBytesMixin, RiverEstimator):
    """Shared machinery of the array-backed learners (one member of a ``TreeBank``).

    Subclasses define ``_param_names`` and ``_tree_params()``. Every native learner is a
    ``river.base.MiniBatchClassifier`` (see ``learners.base.RiverEstimator``).
    """

    _param_names: tuple[str, ...] = ("limits",)
    limits: Limits | dict | None = None
    # learn_one defers its kernel call into the next prediction's (TreeBank.run_one); False on
    # an instance learns at once (the tests' reference)
    _defer_learns = True

    def __init__(self) -> None:
        cold_start()  # (on a cold numba cache: kernels compile elsewhere, twins answer)
        self._tb = TreeBank(self._tree_params(), 1, limits=self._limits())

    @property
    def _bank(self) -> TreeBank:
        """The learner's bank, with the learn that ``learn_one`` deferred done: every reader of
        the model goes through here (``learn_one`` and the predictions use ``_tb``, which fuse
        that learn into the next prediction's kernel call; ``TreeBank.run_one``)."""
        bank = self._tb
        if bank._pending is not None:
            bank.flush()
        return bank

    def _limits(self) -> Limits:
        """The learner's limits (``limits`` as given: ``None``, a dict or ``Limits``)."""
        return Limits.coerce(self.limits)

    # ---------------------------------------------------------------- configuration
    def _tree_params(self) -> TreeParams:
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        """Constructor arguments, as given (``limits`` as a dict, left out when ``None``)."""
        out = {name: getattr(self, name) for name in self._param_names}
        if out.get("limits") is None:
            out.pop("limits", None)
        elif isinstance(out["limits"], Limits):
            out["limits"] = out["limits"].to_dict()
        return out

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    # ---------------------------------------------------------------- schema
    def declare(self, features: dict[str, str] | None = None, classes: list | None = None) -> None:
        """Pre-seed feature kinds and class labels (see docs/engine-api.md)."""
        self._bank.schema.declare(features, classes)
        self._bank.fit_schema()

    @property
    def classes(self) -> list:
        return list(self._bank.schema.classes)

    @property
    def n_seen(self) -> int:
        """Examples learned so far with ``w > 0``."""
        return self._bank.n_seen

    # ---------------------------------------------------------------- the model API
    def learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> None:  # type: ignore[override]
        """Learn one example with sample weight ``w`` (``w = 0`` does nothing)."""
        self._tb.run_one(single_run, _NO_INT_PARAMS, _NO_FLOAT_STATE, x, y, w, predict=False,
                         learn=True, defer=self._defer_learns)  # fmt: skip

    def predict_proba_one(self, x: Features) -> dict[Label, float]:  # type: ignore[override]
        """Class probabilities (``{}`` before any training)."""
        return self._tb.run_one(single_run, _NO_INT_PARAMS, _NO_FLOAT_STATE, x)

    def predict_one(self, x: Features) -> Label | None:  # type: ignore[override]
        """The most probable label (``None`` before any training)."""
        return self._tb.run_one(single_run, _NO_INT_PARAMS, _NO_FLOAT_STATE, x,
                                label_only=True)  # fmt: skip

    def predict_learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> dict[Label, float]:
        """Predict, then learn (prequential). Returns the class *probabilities* the model gave
        before learning ``x`` (not a label: ``argmax_label`` of it is the prediction)."""
        return self._tb.run_one(single_run, _NO_INT_PARAMS, _NO_FLOAT_STATE, x, y, w,
                                learn=True)  # fmt: skip

    def _reads_frames(self) -> bool:
        return True

    def _run(self, X, ys, ws, *, predict: bool, learn: bool) -> list[dict]:
        return self._bank.run(single_run, _NO_INT_PARAMS, _NO_FLOAT_STATE, X, ys, ws,
                              predict=predict, learn=learn)  # fmt: skip

    # ---------------------------------------------------------------- pre-encoded rows
    def learn_encoded(self, rows: EncodedRows, w: Any) -> None:
        """Learn row i of ``rows`` with sample weight ``w[i]``, skipping the rows with ``w[i] = 0``:
        the model ``learn_many`` builds from the dicts of the rows with ``w[i] > 0``, without
        reading the dicts again. The learner must be untrained (fresh from ``clone()``): it takes
        the schema those rows give it."""
        bank = self._bank
        if bank.n_seen or bank.schema.mark() != (0, 0, 0, 0) or bank.schema.declared:
            raise ValueError("learn_encoded needs an untrained learner without declarations")
        w = check_weights(w, len(rows))
        keep = np.flatnonzero(w > 0.0)
        schema, (xn, xc, yc, n_cls) = rows.learn_arrays(keep)
        bank.adopt_schema(schema)
        bank.run_encoded(
            single_run,
            _NO_INT_PARAMS,
            _NO_FLOAT_STATE,
            xn,
            xc,
            yc,
            w[keep],
            n_cls,
            predict=False,
            learn=True,
        )

    def predict_encoded(self, rows: EncodedRows) -> np.ndarray:
        """For every row, the index in ``classes`` of the label ``predict_many`` gives (-1 for
        ``None``), from the encoded rows when they cover everything this learner knows."""
        s = self._bank.schema
        arrays = rows.predict_arrays(s)
        if arrays is None:  # the learner knows more than the encoding: read the dicts
            xn, xc, _, _ = s.encode_rows(rows.X, grow=False)
        else:
            xn, xc = arrays
        R = len(rows)
        n_cls = np.full(R, s.n_classes, dtype=np.int64)
        out = self._bank.run_encoded(single_run, _NO_INT_PARAMS, _NO_FLOAT_STATE, xn, xc,
                                     np.zeros(R, np.int64), np.ones(R), n_cls)  # fmt: skip
        return s.best_classes(out)

    # ---------------------------------------------------------------- state
    def to_state(self) -> dict:
        """``{"header": JSON-able dict, "arrays": {name: ndarray}}`` — no pickle."""
        header = {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "type": type(self).__name__,
            "params": self.params(),
            "schema": self._bank.schema.to_header(),
            "n_seen": self._bank.n_seen,
        }
        json.dumps(header)  # fail early if a label is not JSON-able
        return {"header": header, "arrays": self._bank.state_arrays()}

    @classmethod
    def from_state(cls, state: dict) -> NativeLearner:
        h = state["header"]
        if h.get("type") != cls.__name__:
            raise ValueError(f"state is for {h.get('type')!r}, not {cls.__name__}")
        obj = cls(**h["params"])
        obj._bank.schema = Schema.from_header(h["schema"], obj._bank.limits)
        obj._bank.load_arrays(state["arrays"])
        obj._bank.fit_schema()
        obj._bank.n_seen = int(h.get("n_seen", 0))
        return obj

    @property
    def state_bytes(self) -> int:
        """Bytes of the state as ``max_state_bytes`` counts it (``TreeBank.used_bytes``: the
        rows in use and the schema's names, values and labels)."""
        return self._bank.used_bytes

    @property
    def memory_bytes(self) -> int:
        """Bytes the learner holds in memory (its arrays as allocated, index included, and its
        schema)."""
        return self._bank.memory_bytes


class HoeffdingTree(NativeLearner):
    """Hoeffding tree (VFDT; Domingos & Hulten 2000), as MOA's ``HoeffdingTree``.

    Leaves keep class-conditional statistics (counts per category, Gaussian estimators per numeric
    feature). Every ``grace_period`` weight a leaf compares its two best split merits; it splits
    when their difference exceeds the Hoeffding bound ``sqrt(R² ln(1/delta) / 2n)`` or the bound
    falls below ``tau``. Categorical splits are multiway (a branch per value; values first seen
    later get a new branch), numeric splits binary at one of ``n_split_points`` candidate
    thresholds estimated from the Gaussians. Missing values follow the heaviest branch.

    Parameters
    ----------
    grace_period
        Weight a leaf accumulates between split attempts.
    delta
        One minus the confidence of the Hoeffding bound.
    tau
        Tie threshold: split anyway once the bound is below it.
    split_criterion
        ``"info_gain"`` or ``"gini"``.
    leaf_prediction
        ``"mc"`` (majority class), ``"nb"`` (naive Bayes) or ``"nba"`` (naive Bayes adaptive:
        whichever of the two has been more accurate at the leaf).
    nb_threshold
        Leaf weight below which naive Bayes is not used.
    nb_zero_variance
        Naive Bayes' (``"nb"``, ``"nba"``) rule for a numeric feature whose Gaussian has zero
        variance for a class (one value so far, however heavily weighted): ``"point"`` (MOA's
        GaussianEstimator) a point mass, density 1 at that value and 0 elsewhere, so the class
        is ruled out anywhere else; ``"skip"`` (river's ``HoeffdingTreeClassifier``) no term for
        that feature and class, as if the value were unknown; ``"auto"`` (default) ``"point"``,
        except in ``OnlineBagging(imbalance="oob" | "uob")``, whose trees get ``"skip"``. Under
        heavy oversampling a leaf often knows the rare class from one example learned with a
        large weight: ``"point"`` then never predicts it away from that exact value, ``"skip"``
        lets the prior and the other features decide (docs/engine-api.md, "Class-imbalance
        online bagging").
    max_depth
        Leaves at this depth stop splitting (``None`` for no limit).
    max_nodes
        Size cap: once a tree has this many nodes its leaves stop splitting and it grows no new
        branches (values without a branch share one "other" branch per split).
    n_split_points
        Candidate thresholds per numeric feature.
    max_features
        Random feature subspaces (``None``, default: every feature): each leaf learns, predicts
        with and splits on ``k`` of the ``F`` features of the first example it learns, drawn at
        random: ``"sqrt"`` (round(sqrt(F)) + 1, MOA's default for Adaptive Random Forest),
        ``"log2"`` (round(log2(F)) + 1), an integer count, or a fraction of F in (0, 1]
        (rounded half up). The draw is a pure function of ``subspace_seed``, the member, the
        leaf and those features (``learners.tree.subspace``).
    subspace
        ``"leaf"`` (default: a draw per leaf, as the trees of ``AdaptiveRandomForest``) or
        ``"tree"`` (one draw at the root that every leaf inherits: a random subspace of the
        whole tree, as the members of ``StreamingRandomPatches``).
    subspace_seed
        The key of the draws (an ensemble passes its own seed).
    limits
        The model's :class:`~learners.limits.Limits` (a dict of some of its fields, or ``None``
        for the defaults); ``limits["max_nodes"]`` caps ``max_nodes``.

    Examples
    --------
    >>> from learners import HoeffdingTree
    >>> tree = HoeffdingTree(grace_period=10)
    >>> for i in range(200):
    ...     tree.learn_one({"x": i % 10, "c": "a" if i % 3 else "b"}, i % 10 >= 5)
    >>> tree.predict_one({"x": 8, "c": "a"}), tree.predict_one({"x": 1, "c": "b"})
    (True, False)

    References
    ----------
    Domingos, P. & Hulten, G. (2000). Mining high-speed data streams. KDD.
    Bifet, A. et al. (2010). MOA: Massive Online Analysis. JMLR 11.
    """

    _param_names = ("grace_period", "delta", "tau", "split_criterion", "leaf_prediction",
                    "nb_threshold", "nb_zero_variance", "max_depth", "max_nodes",
                    "n_split_points", "max_features", "subspace", "subspace_seed",
                    "limits")  # fmt: skip
    # shown by ``params()`` only when set: specs and states of trees without subspaces stay as
    # they were
    _quiet_defaults = {"max_features": None, "subspace": "leaf", "subspace_seed": 0,
                       "nb_zero_variance": "auto"}  # fmt: skip

    def __init__(
        self,
        grace_period: float = 200,
        *,
        delta: float = 1e-7,
        tau: float = 0.05,
        split_criterion: str = "info_gain",
        leaf_prediction: str = "nba",
        nb_threshold: float = 0,
        nb_zero_variance: str = "auto",
        max_depth: int | None = None,
        max_nodes: int = 5000,
        n_split_points: int = 10,
        max_features: str | int | float | None = None,
        subspace: str = "leaf",
        subspace_seed: int = 0,
        limits: Limits | dict | None = None,
    ):
        _check_positive("grace_period", grace_period)
        subspace_rule(max_features)  # (ParamError naming the field)
        _check_choice("subspace", subspace, _SCOPES)
        if (not isinstance(subspace_seed, int | np.integer) or isinstance(subspace_seed, bool)
                or not 0 <= subspace_seed < 2**63):  # fmt: skip
            raise ParamError("subspace_seed", f"subspace_seed must be an integer in [0, 2**63), "
                             f"got {subspace_seed!r}")  # fmt: skip
        if not (isinstance(delta, int | float) and 0 < delta < 1):
            raise ParamError("delta", f"delta must be in (0, 1), got {delta!r}")
        _check_positive("tau", tau, allow_zero=True)
        _check_choice("split_criterion", split_criterion, _CRITERIA)
        _check_choice("leaf_prediction", leaf_prediction, _LEAF_PRED)
        _check_positive("nb_threshold", nb_threshold, allow_zero=True)
        _check_choice("nb_zero_variance", nb_zero_variance, (*_NB_ZERO_VARIANCE, "auto"))
        if max_depth is not None:
            _check_positive("max_depth", max_depth, allow_zero=True)
        _check_positive("max_nodes", max_nodes)
        _check_positive("n_split_points", n_split_points)
        self.grace_period = grace_period
        self.delta = delta
        self.tau = tau
        self.split_criterion = split_criterion
        self.leaf_prediction = leaf_prediction
        self.nb_threshold = nb_threshold
        self.nb_zero_variance = nb_zero_variance
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.n_split_points = n_split_points
        self.max_features = max_features
        self.subspace = subspace
        self.subspace_seed = int(subspace_seed)
        self.limits = limits
        super().__init__()

    def params(self) -> dict[str, Any]:
        out = super().params()
        for name, default in self._quiet_defaults.items():
            if out.get(name) == default:
                del out[name]
        # ("point" is what "auto" is in a plain tree: its specs and states stay as they were)
        if out.get("nb_zero_variance") == "point":
            del out["nb_zero_variance"]
        return out

    def _tree_params(self) -> TreeParams:
        mode, size = subspace_rule(self.max_features)
        return TreeParams(
            grace_period=float(self.grace_period),
            delta=float(self.delta),
            tau=float(self.tau),
            criterion=_CRITERIA[self.split_criterion],
            leaf_prediction=_LEAF_PRED[self.leaf_prediction],
            nb_threshold=float(self.nb_threshold),
            max_depth=_UNLIMITED if self.max_depth is None else int(self.max_depth),
            max_nodes=int(self.max_nodes),
            n_split_points=int(self.n_split_points),
            min_branch_frac=0.01,
            subspace_mode=mode,
            subspace_size=size,
            subspace_scope=_SCOPES[self.subspace],
            subspace_seed=self.subspace_seed,
            nb_zero_variance=_NB_ZERO_VARIANCE.get(self.nb_zero_variance, layout.NB_ZERO_POINT),
        )

    def reset_tree(self, key: int = 0, *, deal: bool = False) -> None:
        """Forget everything learned: a fresh tree (the schema stays), whose random feature
        subspaces (``max_features``) are drawn with ``key`` (``learners.tree.subspace``): the
        way ``AdaptiveRandomForest`` replaces a member's tree. ``deal``: the tree is member
        ``key``'s first tree in a forest whose members are dealt distinct subspaces
        (``StreamingRandomPatches``)."""
        self._bank.reset_tree(0, key, deal=deal)

    def describe_tree(self) -> dict:
        T = self._bank.T
        n = int(T.n_nodes[0])
        kinds = T.kind[0, :n]
        return {"n_nodes": n, "n_leaves": int((kinds == layout.LEAF).sum()),
                "depth": int(T.depth[0, :n].max()) if n else 0}  # fmt: skip


def _leaf_only_params(leaf_prediction: int, criterion: int = layout.CRIT_INFO_GAIN) -> TreeParams:
    return TreeParams(
        grace_period=float("inf"), delta=0.5, tau=0.0, criterion=criterion,
        leaf_prediction=leaf_prediction, nb_threshold=0.0, max_depth=0, max_nodes=1,
        n_split_points=10, min_branch_frac=0.0,
    )  # fmt: skip


class NaiveBayes(NativeLearner):
    """Naive Bayes for mixed data, exactly incremental.

    Class priors are the weighted class frequencies; a categorical feature contributes the
    Laplace-smoothed frequency ``(n(a=v, c) + 1) / (n(a observed, c) + V_a)`` where ``V_a`` is the
    number of values of ``a`` seen in training; a numeric feature a Gaussian density with the
    class's weighted mean and unbiased weighted variance; a class whose variance is zero (one
    value so far) has density 1 at that value and 0 elsewhere, as MOA's ``GaussianEstimator``
    (a tiny variance instead would make a constant feature, e.g. a pixel always 0 for one class,
    outvote every other feature). A numeric feature with a single value over all classes is
    uninformative and skipped; if every class has density 0 the prediction is the class
    distribution. Missing and unseen values are skipped. After any stream the
    model equals batch naive Bayes fitted on the same weighted examples.

    Examples
    --------
    >>> from learners import NaiveBayes
    >>> nb = NaiveBayes()
    >>> nb.predict_proba_one({"colour": "red"})
    {}
    >>> for colour, size, fruit in [("red", 1.0, "cherry"), ("red", 7.0, "apple"),
    ...                             ("green", 7.5, "apple"), ("red", 1.2, "cherry")]:
    ...     nb.learn_one({"colour": colour, "size": size}, fruit)
    >>> nb.predict_one({"colour": "red", "size": 1.1})
    'cherry'

    Parameters
    ----------
    limits
        The model's :class:`~learners.limits.Limits` (dict, ``Limits`` or ``None``: defaults).

    References
    ----------
    Oza, N. C. (2001). Online Ensemble Learning, §3.3 (lossless online naive Bayes).
    """

    def __init__(self, *, limits: Limits | dict | None = None):
        self.limits = limits
        super().__init__()

    def _tree_params(self) -> TreeParams:
        return _leaf_only_params(layout.PRED_NB)


class DecisionStump(NativeLearner):
    """Decision stump: the single best split by information gain, from sufficient statistics.

    Multiway on a categorical attribute (a branch per value), binary threshold on a numeric one
    (thresholds estimated from per-class Gaussians, as in ``HoeffdingTree``). The split is chosen
    at prediction time from the statistics of everything learned so far, so on categorical data
    the stump always equals the batch stump on the data so far. A branch with no data, a missing
    value on the split attribute, or no informative split predicts the overall class distribution.

    Parameters
    ----------
    split_criterion
        ``"info_gain"`` or ``"gini"``.
    limits
        The model's :class:`~learners.limits.Limits` (dict, ``Limits`` or ``None``: defaults).

    Examples
    --------
    >>> from learners import DecisionStump
    >>> stump = DecisionStump()
    >>> for outlook, play in [("sunny", "no"), ("sunny", "no"), ("rain", "yes"),
    ...                       ("overcast", "yes"), ("rain", "yes")]:
    ...     stump.learn_one({"outlook": outlook, "windy": "no"}, play)
    >>> stump.predict_one({"outlook": "sunny", "windy": "no"})
    'no'
    """

    _param_names = ("split_criterion", "limits")

    def __init__(self, split_criterion: str = "info_gain", *, limits: Limits | dict | None = None):
        _check_choice("split_criterion", split_criterion, _CRITERIA)
        self.split_criterion = split_criterion
        self.limits = limits
        super().__init__()

    def _tree_params(self) -> TreeParams:
        return _leaf_only_params(layout.PRED_STUMP, _CRITERIA[self.split_criterion])
