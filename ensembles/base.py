"""Shared machinery of the online ensembles: the model API, specs and state.

How the members run is one backend object (:mod:`ensembles.backends`): native learners
(``learners.NativeLearner``) as one bank of M members inside a compiled kernel; any other learner
following ``learners.base.Learner`` (e.g. ``RiverLearner``) on the slow path, a Python object per
member driven by the same algorithm and the same Poisson draws.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from learners import HoeffdingTree, Limits, NativeLearner, argmax_label
from learners.base import Features, Label, ManyMixin, MemoryBytesMixin, RiverEstimator
from learners.compiled import READABLE_VERSIONS, STATE_FORMAT, STATE_VERSION, learner_limits
from learners.jit import kernel

from ._rng import uniform_block
from .backends import CompiledBackend, PythonBackend, check_threads, cold_start
from .explain import VoteRule, explain_one, feature_importance
from .members import build_learner, keywords, learner_spec

_MAX_SEED = 2**63 - 1
SPEC_KEYS = {"ensemble", "learner", "n_models", "seed", "params", "limits"}


def check_spec_keys(spec: dict) -> None:
    """``ValueError`` naming the keys a model spec does not have."""
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise ValueError(f"unknown spec key(s) {sorted(unknown)}; valid: {sorted(SPEC_KEYS)}")


def check_learner(learner: Any) -> None:
    for attr in ("learn_one", "predict_proba_one", "clone"):
        if not callable(getattr(learner, attr, None)):
            raise ValueError(
                f"learner must follow learners.base.Learner; {learner!r} has no {attr}()"
            )


def check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")


class OnlineEnsemble(ManyMixin, MemoryBytesMixin, RiverEstimator):
    """Base class: subclasses set ``_kernel`` (the compiled run kernel, native members) and
    implement ``_py_predict`` / ``_py_learn`` (the same algorithm over Python member objects);
    ``_int_params`` / ``_float_state`` are what the kernel gets as ``ipar`` / ``fstate``.

    Every ensemble is a ``river.base.MiniBatchClassifier`` (``learners.base.RiverEstimator``)."""

    kind = ""  # "bagging" | "boosting" | "single"

    def __init__(self, learner: Any, *, n_models: int = 10, seed: int = 0,
                 limits: Limits | dict | None = None):  # fmt: skip
        check_learner(learner)
        check_int("n_models", n_models, 1, 10_000)
        check_int("seed", seed, 0, _MAX_SEED)
        self.learner = learner
        self.n_models = int(n_models)
        self.seed = int(seed)
        self.limits = limits
        self._init_extra()
        # how the members run; a learn ``learn_one`` deferred may be kept in it (``_settled``)
        self._be: CompiledBackend | PythonBackend
        member = self._member_prototype()
        if isinstance(member, NativeLearner):
            self._be = CompiledBackend(member, self._bank_size(), self._limits(), self._kernel,
                                       self._int_params, self._float_state,
                                       self._runner())  # fmt: skip
        else:
            self._be = PythonBackend(self, learner, self.n_models, self._limits())
        cold_start(self)  # (on a cold numba cache: compiled elsewhere, the twins answer)

    def _settled(self) -> CompiledBackend | PythonBackend:
        """The backend with the learn that ``learn_one`` deferred done: the one place where the
        model runs a deferred learn for a reader.

        ``learn_one`` of native members checks, encodes and counts the example (``n_seen``, the
        schema: readable at once) and keeps its kernel call, which the next prediction runs
        with its own (``TreeBank.run_one``). Whatever reads or changes what learning changes
        (the members' arrays, ``_float_state``) or runs the members otherwise (batches,
        priming, ``declare``, ``to_state``, ``describe``) calls this first; the per-example
        calls use ``_be`` as it is."""
        be = self._be
        be.flush()
        return be

    def _limits(self) -> Limits:
        """The model's limits: ``limits`` if given, else a native learner's, else defaults."""
        if self.limits is None and isinstance(self.learner, NativeLearner):
            return learner_limits(self.learner)
        return Limits.coerce(self.limits)

    @classmethod
    def from_spec(cls, spec: dict) -> OnlineEnsemble:
        """An untrained ensemble of this kind from a model spec (``ensembles.build_model``)."""
        check_spec_keys(spec)
        params = dict(spec.get("params") or {})
        if not isinstance(params, dict):
            raise ValueError("params must be an object")
        ens_kw = {k: params.pop(k) for k in list(params)
                  if k in keywords(cls) - {"learner", "limits", "threads"}}  # fmt: skip
        learner = build_learner(spec.get("learner", "hoeffding_tree"), params)
        n_models = spec.get("n_models", 1 if cls.kind == "single" else 10)
        seed = spec.get("seed", 0)
        return cls(learner, n_models=n_models, seed=seed, limits=spec.get("limits"), **ens_kw)

    @classmethod
    def stored_spec(cls, spec: dict) -> dict:
        """``spec`` as saved by Chorus (``spec()``, in a state or a store) with the defaults it
        was written under made explicit, so that a model rebuilt from it behaves as the one
        that saved it when a default has moved since (``ensembles.stored_spec``); as it is
        here."""
        return spec

    def _init_extra(self) -> None:
        pass

    def _member_prototype(self) -> Any:
        """The learner the members are made from (the forests: the tree with their random
        subspaces); ``learner`` itself by default."""
        return self.learner

    def _bank_size(self) -> int:
        """Trees in a compiled model's bank: one per member by default (the forests: two, a
        foreground and a background tree)."""
        return self.n_models

    def _runner(self) -> Any:
        """What makes the compiled backend's per-example runner (``CompiledBackend``'s
        ``runner``), or None for the bank's own ``run_one``."""
        return None

    # ---------------------------------------------------------------- properties
    @property
    def n_seen(self) -> int:
        """Examples learned so far with ``w > 0`` (the sequence counter keying the Poisson
        draws)."""
        return self._be.n_seen  # (counted when learn_one checked the example)

    @property
    def classes(self) -> list:
        return self._be.classes

    @property
    def threads(self) -> int:
        """Threads a batch (``learn_many``, ``predict_learn_many``, ``predict_proba_many``) may
        run its members in: online bagging with a native learner runs groups of members in
        parallel, bit-identical to one thread; other ensembles run a batch in one thread. An
        execution setting, not part of the model (not in its spec or state)."""
        return self._be.threads

    @threads.setter
    def threads(self, threads: int) -> None:
        self._be.threads = check_threads(threads)

    def knows_feature(self, name: str) -> bool | None:
        """Whether the model has learned (or been declared) feature ``name``; ``None`` when it
        cannot tell (a non-native base learner). A feature it does not know is ignored by
        predictions."""
        return self._be.knows_feature(name)

    def feature_kind(self, name: str) -> str | None:
        """``"numeric"`` or ``"categorical"`` for a feature the model has learned or been
        declared, else ``None`` (also for a non-native base learner, which cannot tell)."""
        return self._be.feature_kind(name)

    def declare(self, features: dict[str, str] | None = None, classes: list | None = None) -> None:
        """Pre-seed feature kinds and class labels (see docs/engine-api.md)."""
        self._settled().declare(features, classes)

    def _set_n_seen(self, n: int) -> None:
        self._settled().n_seen = n

    # the slow path's members and classes (the algorithms' ``_py_predict`` / ``_py_learn`` read them)
    @property
    def _members(self) -> list:
        return self._be.members  # type: ignore[union-attr]

    @_members.setter
    def _members(self, members: list) -> None:
        self._be.members = members  # type: ignore[union-attr]

    @property
    def _classes(self) -> list:
        return self._be.class_list  # type: ignore[union-attr]

    def _top_class(self, p: dict[Label, float]) -> Label | None:
        """The class a member's prediction ``p`` votes for: ties broken in the ensemble's class
        order (first appearance), as the compiled kernels break them, where a member's own
        ``predict_one`` would break them in its own order (``None``: no prediction)."""
        if not p:
            return None
        best = max(p.values())
        for c in self._classes:
            if p.get(c) == best:
                return c
        return argmax_label(p)

    # ---------------------------------------------------------------- the model API
    _kernel: Any = None  # compiled run kernel (signature of learners.compiled.single_run)
    _int_params = np.zeros(1, np.int64)  # what the kernel gets as ``ipar``
    # what the kernel gets as ``fstate``: updated in place by learning (read it after _settled)
    _float_state: Any = np.zeros((1, 1))
    # learn_one defers its kernel call into the next prediction's (TreeBank.run_one); False on
    # an instance learns at once (the tests' reference)
    _defer_learns = True

    def _reads_frames(self) -> bool:
        return self._be.native  # the bank's run encodes through Schema.encode_rows

    def _run(self, X, ys, ws, *, predict: bool, learn: bool) -> list[dict]:
        return self._settled().run(X, ys, ws, predict=predict, learn=learn)

    def _py_predict(self, x: Features) -> dict:
        raise NotImplementedError

    def _py_learn(self, x: Features, y: Label, w: float, seq: int) -> None:
        raise NotImplementedError

    def learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> None:  # type: ignore[override]
        """Learn one example with sample weight ``w`` (``w = 0`` does nothing)."""
        self._be.run_one(x, y, w, predict=False, learn=True, defer=self._defer_learns)

    def predict_proba_one(self, x: Features) -> dict[Label, float]:  # type: ignore[override]
        """Class probabilities (``{}`` before any training)."""
        return self._be.run_one(x)

    def predict_one(self, x: Features) -> Label | None:  # type: ignore[override]
        """The most probable label (``None`` before any training)."""
        return self._be.run_one(x, label_only=True)

    def predict_learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> dict[Label, float]:
        """Predict, then learn (prequential). Returns the class *probabilities* the model gave
        before learning ``x`` (not a label: ``argmax_label`` of it is the prediction)."""
        return self._be.run_one(x, y, w, learn=True)

    def predict_explain_one(self, x: Features) -> dict:
        """The prediction of ``x`` (``prediction``, ``probabilities``: exactly
        ``predict_proba_one(x)``'s) and why: every member's probabilities, top class and vote
        weight, the vote rule (``vote``), for tree members the path from the root to the leaf
        and the leaf's class weights and predictor, the members that agree with the prediction
        (``agreeing``) and the ``margin`` (top probability minus the second).
        ``ensembles.explain.recompute`` gives the probabilities back from it (docs/engine-api.md,
        "Explanations and feature importance"). Opt-in: ``predict_proba_one`` does none of this
        work.

        Examples
        --------
        >>> from learners import HoeffdingTree
        >>> from ensembles import OnlineBagging
        >>> from ensembles.explain import recompute
        >>> model = OnlineBagging(HoeffdingTree(grace_period=10, leaf_prediction="mc"),
        ...                       n_models=3, seed=1)
        >>> for i in range(300):
        ...     model.learn_one({"x": float(i % 10), "c": "ab"[i % 2]}, i % 10 >= 5)
        >>> e = model.predict_explain_one({"x": 8.0, "c": "a"})
        >>> e["prediction"], e["agreeing"], recompute(e) == e["probabilities"]
        (True, [0, 1, 2], True)
        >>> step = e["members"][0]["tree"]["path"][0]
        >>> step["feature"], step["test"], step["value"], step["branch"]
        ('x', '<= 4.636363636363637', 8.0, 'no')
        >>> e["members"][0]["tree"]["leaf"]["class_weights"]
        {True: 124.0}
        >>> {f: d["splits"] for f, d in model.feature_importance()["features"].items()}
        {'x': 4}
        """
        return explain_one(self, x)

    def feature_importance(self, *, decay: float | None = None,
                           half_life: float | None = None) -> dict:  # fmt: skip
        """Per feature, the splits of the members' current trees on it: count, the weight
        they were made on, depth-weighted count (``decay``: per level of depth), share, the
        merit they had when made and its share, and with ``half_life`` (examples) the same
        weighted by recency (``ensembles.explain.feature_importance``)."""
        return feature_importance(self, decay=decay, half_life=half_life)

    def _vote_rule(self) -> VoteRule:
        """How the kernel combines the members' probabilities (``ensembles.explain``): here
        equally, the mean (a single learner: its own); ensembles with a ``vote`` say theirs."""
        return VoteRule("single" if self.kind == "single" else "average", [1.0] * self.n_models,
                        "equal: the mean of the members' probabilities")  # fmt: skip

    def _member_trees(self) -> list[int]:
        """The bank's tree of each member (member m's is tree m; the forests' foreground)."""
        return list(range(self.n_models))

    def predict_learn_batches(self, batches: Iterable[tuple]) -> Iterator[Any]:
        """``predict_learn_many`` over a stream of ``(X, y)`` or ``(X, y, w)`` batches: yields
        each batch's probabilities, exactly those of ``predict_learn_many`` called batch after
        batch (and the same model after). Online bagging with ``threads > 1`` learns batch i in
        its member threads while this thread encodes batch i+1 and builds the answers of batch
        i-1 (``ensembles.stream``), so until the generator is exhausted or closed the model
        belongs to it: a batch after the one just answered may be learning. Closing it early
        waits for that batch, which is learned (its answers are dropped). A refused batch (a
        bad row, a limit) raises as ``predict_learn_many`` would, after the earlier batches'
        answers, and leaves no trace; no later batch is read."""
        from .stream import run_batches

        return run_batches(self, batches, predict=True)

    def learn_batches(self, batches: Iterable[tuple]) -> None:
        """``learn_many`` over a stream of ``(X, y)`` or ``(X, y, w)`` batches (see
        ``predict_learn_batches``): returns when every batch is learned; a refused batch raises
        as ``learn_many`` would, with the batches before it learned."""
        from .stream import run_batches

        for _ in run_batches(self, batches, predict=False):
            pass

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        yield {"learner": HoeffdingTree(grace_period=50), "n_models": 3}

    def _unit_test_skips(self) -> set[str]:
        skips = getattr(self.learner, "_unit_test_skips", None)  # as river's Pipeline does
        return set(skips()) if callable(skips) else set()

    def _extra_params(self) -> dict:
        return {}

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self._extra_params().items())
        if self.limits is not None:
            extra += f", limits={self.limits!r}"
        return (f"{type(self).__name__}({self.learner!r}, n_models={self.n_models}, "
                f"seed={self.seed}{extra})")  # fmt: skip

    # ---------------------------------------------------------------- member access (batch, priming)
    def _encode_block(self, X, y):
        """The block encoded once for every member (``None`` on the slow path)."""
        return self._settled().encode_block(X, y)

    def _member_fit(self, m: int, X, y, weights: np.ndarray, enc=None) -> None:
        """Learn the block into member m with per-row weights (bootstrap counts)."""
        self._settled().member_fit(m, X, y, weights, enc)

    def _member_correct(self, m: int, X, y, enc=None) -> np.ndarray:
        """Boolean per row: does member m classify it correctly?"""
        return self._settled().member_correct(m, X, y, enc)

    # ---------------------------------------------------------------- specs and state
    def spec(self) -> dict:
        name, params = learner_spec(self.learner)
        params.update(self._extra_params())
        out = {"ensemble": self.kind, "learner": name, "n_models": self.n_models,
               "seed": self.seed, "params": params}  # fmt: skip
        if self.limits is not None:
            out["limits"] = Limits.coerce(self.limits).to_dict()
        return out

    def describe(self) -> dict:
        return {"spec": self.spec(), "n_seen": self.n_seen, "classes": self.classes,
                "state_bytes": self.state_bytes, "members": self._describe_members()}  # fmt: skip

    def _describe_members(self) -> list[dict]:
        return self._settled().describe_members()

    @property
    def state_bytes(self) -> int:
        """Bytes of the model's state: with compiled members, as ``max_state_bytes`` counts it
        (the members' rows in use and the schema's names, values and labels:
        ``TreeBank.used_bytes``) plus the ensemble's own arrays; with Python members, the
        saved state's size."""
        bank = getattr(self._settled(), "bank", None)
        if bank is not None:
            return bank.used_bytes + sum(a.nbytes for a in self._extra_arrays().values())
        st = self.to_state()
        return len(json.dumps(st["header"])) + sum(a.nbytes for a in st["arrays"].values())

    @property
    def memory_bytes(self) -> int:
        """Bytes the model holds in memory: compiled members' arrays as allocated (room to grow
        and the row index) and their schema (``TreeBank.memory_bytes``) plus the ensemble's own
        arrays; with Python members, twice the saved state (arrays grow by doubling)."""
        bank = getattr(self._settled(), "bank", None)
        if bank is None:
            return 2 * self.state_bytes
        return bank.memory_bytes + sum(a.nbytes for a in self._extra_arrays().values())

    def _extra_arrays(self) -> dict[str, np.ndarray]:
        return {}

    def _load_extra(self, arrays: dict[str, np.ndarray]) -> None:
        pass

    def to_state(self) -> dict:
        """``{"header": JSON-able dict, "arrays": {name: ndarray}}`` — no pickle of client data."""
        header: dict[str, Any] = {
            "format": STATE_FORMAT, "version": STATE_VERSION, "type": type(self).__name__,
            "spec": self.spec(), "n_seen": self.n_seen,
        }  # fmt: skip
        backend = self._settled()  # (before _extra_arrays: they read _float_state)
        arrays = dict(self._extra_arrays())
        backend.save(header, arrays)
        json.dumps(header)
        return {"header": header, "arrays": arrays}

    def _member_classes(self) -> int:
        """The class codes a member's state may hold before the model has seen that many
        classes (1; leveraging bagging's output codes: 2, its members learn bits)."""
        return 1

    @classmethod
    def from_state(cls, state: dict) -> OnlineEnsemble:
        h = state["header"]
        if h.get("format") != STATE_FORMAT or h.get("version") not in READABLE_VERSIONS:
            raise ValueError(f"not a chorus state v{STATE_VERSION}: {h.get('format')!r} "
                             f"v{h.get('version')!r}")  # fmt: skip
        if h.get("type") != cls.__name__:
            raise ValueError(f"state is for {h.get('type')!r}, not {cls.__name__}")
        obj = cls.from_spec(cls.stored_spec(h["spec"]))
        obj._set_n_seen(int(h["n_seen"]))
        obj._be.load(h, state["arrays"], min_classes=obj._member_classes())
        obj._load_extra(state["arrays"])
        return obj

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if isinstance(self._be, PythonBackend):  # its algorithm is this object's
            self._be.ensemble = self


def resample_counts(
    weights: np.ndarray, n_draws: int, seed: int, member: int, tag: int
) -> np.ndarray:
    """Counts of ``n_draws`` draws with replacement, P(row i) proportional to ``weights[i]``,
    from the counter-based generator (bootstrap when the weights are equal)."""
    cdf = np.cumsum(np.asarray(weights, dtype=np.float64))
    cdf /= cdf[-1]
    u = kernel(uniform_block)(
        seed, tag, n_draws, member, 7
    )  # draw j keyed by (seed, tag + j, member, 7)
    idx = np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)
    return np.bincount(idx, minlength=len(cdf)).astype(np.float64)
