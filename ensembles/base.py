"""Shared machinery of the online ensembles: encoding, kernel calls with growth, state, specs.

Native learners (``learners.NativeLearner``) run as one ``TreeBank`` of M members inside a compiled
kernel. Any other learner following ``learners.base.Learner`` (e.g. ``RiverLearner``) runs on the
slow path: a Python object per member, driven by the same algorithm and the same Poisson draws.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from learners import HoeffdingTree, Limits, NativeLearner, argmax_label
from learners._bank import TreeBank
from learners.base import Features, Label, ManyMixin, RiverEstimator, check_weights
from learners.jit import kernel
from learners.native import READABLE_VERSIONS, STATE_FORMAT, STATE_VERSION
from learners.schema import Schema, normalize_label

from ._rng import uniform_block

_MAX_SEED = 2**63 - 1


def check_learner(learner: Any) -> None:
    for attr in ("learn_one", "predict_proba_one", "clone"):
        if not callable(getattr(learner, attr, None)):
            raise ValueError(
                f"learner must follow learners.base.Learner; {learner!r} has no {attr}()"
            )


def check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")


class OnlineEnsemble(ManyMixin, RiverEstimator):
    """Base class: subclasses set ``_kernel`` (native path) and implement ``_py_predict`` /
    ``_py_learn`` (slow path: the same algorithm over Python member objects).

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
        self._n_seen = 0
        self._native = isinstance(learner, NativeLearner)
        if self._native:
            self._bank = TreeBank(learner._tree_params(), self.n_models, limits=self._limits())
        else:
            self._members = [learner.clone() for _ in range(self.n_models)]
            self._classes: list = []
            self._schema = Schema(self._limits())  # validates input as the native path does
        self._init_extra()

    def _limits(self) -> Limits:
        """The model's limits: ``limits`` if given, else a native learner's, else defaults."""
        if self.limits is None and isinstance(self.learner, NativeLearner):
            return self.learner._limits()
        return Limits.coerce(self.limits)

    def _init_extra(self) -> None:
        pass

    # ---------------------------------------------------------------- properties
    @property
    def n_seen(self) -> int:
        """Examples learned so far with ``w > 0`` (the sequence counter keying the Poisson
        draws)."""
        return self._bank.n_seen if self._native else self._n_seen

    @property
    def classes(self) -> list:
        return list(self._bank.schema.classes) if self._native else list(self._classes)

    def knows_feature(self, name: str) -> bool | None:
        """Whether the model has learned (or been declared) feature ``name``; ``None`` when it
        cannot tell (a non-native base learner). A feature it does not know is ignored by
        predictions."""
        return self.feature_kind(name) is not None if self._native else None

    def feature_kind(self, name: str) -> str | None:
        """``"numeric"`` or ``"categorical"`` for a feature the model has learned or been
        declared, else ``None`` (also for a non-native base learner, which cannot tell)."""
        return self._bank.schema.kind_of(name) if self._native else None

    def declare(self, features: dict[str, str] | None = None, classes: list | None = None) -> None:
        """Pre-seed feature kinds and class labels (see docs/engine-api.md)."""
        if self._native:
            self._bank.schema.declare(features, classes)
            self._bank.fit_schema()
        else:
            self._schema.declare(features, classes)
            for y in classes or []:
                self._add_class(y)

    def _set_n_seen(self, n: int) -> None:
        if self._native:
            self._bank.n_seen = n
        else:
            self._n_seen = n

    def _add_class(self, y: Any) -> None:
        y = normalize_label(y)
        if y not in self._classes:
            self._classes.append(y)

    def _argmax(self, p: dict[Label, float]) -> Label | None:
        """The most probable label of a member's prediction ``p``, ties broken in the ensemble's
        class order (first appearance), as the compiled kernels break them; a member's own
        ``predict_one`` would break them in its own order (``None``: no prediction)."""
        if not p:
            return None
        best = max(p.values())
        for c in self._classes:
            if p.get(c) == best:
                return c
        return argmax_label(p)

    # ---------------------------------------------------------------- the model API
    _kernel: Any = None  # compiled run kernel (signature of learners._tree.single_run)
    _I = np.zeros(1, np.int64)  # integer parameters handed to the kernel
    _F = np.zeros((1, 1))  # float state handed to the kernel

    def _run(self, X, ys, ws, do_predict: bool, do_learn: bool) -> list[dict]:
        if self._native:
            return self._bank.run(self._kernel, self._I, self._F, X, ys, ws, do_predict, do_learn)
        if ws is not None:
            ws = check_weights(ws, len(X)).tolist()
        # the whole batch is checked (and rolled back on error) before any member sees it
        self._schema.encode_rows(X, grow=do_learn, ys=ys if do_learn else None)
        return self._py_run(X, ys, ws, do_predict, do_learn)

    def _one(self, x, y, w, do_predict: bool, do_learn: bool):
        if self._native:
            return self._bank.run_one(self._kernel, self._I, self._F, x, y, w, do_predict, do_learn)
        out = self._run([x], None if y is None else [y], [w], do_predict, do_learn)
        return out[0] if do_predict else None

    def _py_run(self, X, ys, ws, do_predict, do_learn) -> list[dict]:
        results = []
        for r, x in enumerate(X):
            if do_predict:
                results.append(self._py_predict(x))
            if do_learn:
                y = normalize_label(ys[r])
                self._add_class(y)
                w = 1.0 if ws is None else ws[r]
                if w > 0.0:
                    self._py_learn(x, y, w, self._n_seen)
                    self._n_seen += 1
        return results

    def _py_predict(self, x: Features) -> dict:
        raise NotImplementedError

    def _py_learn(self, x: Features, y: Label, w: float, seq: int) -> None:
        raise NotImplementedError

    def learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> None:  # type: ignore[override]
        """Learn one example with sample weight ``w`` (``w = 0`` does nothing)."""
        self._one(x, y, w, False, True)

    def predict_proba_one(self, x: Features) -> dict[Label, float]:  # type: ignore[override]
        """Class probabilities (``{}`` before any training)."""
        return self._one(x, None, 0.0, True, False)

    def predict_one(self, x: Features) -> Label | None:  # type: ignore[override]
        """The most probable label (``None`` before any training)."""
        if self._native:
            return self._bank.run_one(self._kernel, self._I, self._F, x, None, 0.0, True, False,
                                      True)  # fmt: skip
        return argmax_label(self.predict_proba_one(x))

    def predict_learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> dict[Label, float]:
        """Predict, then learn (prequential). Returns the class *probabilities* the model gave
        before learning ``x`` (not a label: ``argmax_label`` of it is the prediction)."""
        return self._one(x, y, w, True, True)

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
        schema = self._bank.schema
        xn, xc, yc, _ = schema.encode_rows(list(X), grow=True, ys=list(y))
        self._bank.fit_schema()
        return xn, xc, yc

    def _member_fit(self, m: int, X, y, weights: np.ndarray, enc=None) -> None:
        """Learn the block into member m with per-row weights (bootstrap counts)."""
        if not self._native:
            self._schema.encode_rows(list(X), grow=True, ys=list(y))
            member = self._members[m]
            for x, yy, w in zip(X, y, weights, strict=True):
                yy = normalize_label(yy)
                self._add_class(yy)
                if w > 0:
                    member.learn_one(x, yy, w=float(w))
            return
        from ._kernels import member_learn

        xn, xc, yc = enc if enc is not None else self._encode_block(X, y)
        bank = self._bank
        need = bank.need()
        start = 0
        w = np.asarray(weights, dtype=np.float64)
        while True:
            start = kernel(member_learn)(bank.view(), m, xn, xc, yc, w, start, bank.schema.n_classes,
                                 bank.schema.code_attr_array, need)  # fmt: skip
            if start >= len(w):
                break
            bank.grow_nodes(need)
        bank.sync()  # the kernel may have grown the class-entry pools

    def _member_correct(self, m: int, X, y, enc=None) -> np.ndarray:
        """Boolean per row: does member m classify it correctly?"""
        if not self._native:
            member = self._members[m]
            return np.array([self._argmax(member.predict_proba_one(x)) == normalize_label(yy)
                             for x, yy in zip(X, y, strict=True)])  # fmt: skip
        from ._kernels import member_predict

        xn, xc, yc = enc if enc is not None else self._encode_block(X, y)
        out = np.empty(len(yc), dtype=np.int64)
        kernel(member_predict)(self._bank.view(), m, xn, xc, self._bank.schema.n_classes,
                       self._bank.schema.code_attr_array, out)  # fmt: skip
        return out == yc

    # ---------------------------------------------------------------- specs and state
    def spec(self) -> dict:
        from .spec import learner_spec

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
        if not self._native:
            return [{} for _ in range(self.n_models)]
        T = self._bank.T
        out = []
        for m in range(self.n_models):
            n = int(T.n_nodes[m])
            out.append({"n_nodes": n, "n_leaves": int((T.kind[m, :n] == 0).sum())})
        return out

    @property
    def state_bytes(self) -> int:
        st = self.to_state()
        return len(json.dumps(st["header"])) + sum(a.nbytes for a in st["arrays"].values())

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
        arrays = dict(self._extra_arrays())
        if self._native:
            header["schema"] = self._bank.schema.to_header()
            arrays.update(self._bank.state_arrays())
        else:
            header["classes"] = list(self._classes)
            header["schema"] = self._schema.to_header()
            header["members"] = []
            for m, member in enumerate(self._members):
                st = member.to_state()
                header["members"].append(st["header"])
                arrays.update({f"m{m}.{k}": v for k, v in st["arrays"].items()})
        json.dumps(header)
        return {"header": header, "arrays": arrays}

    @classmethod
    def from_state(cls, state: dict) -> OnlineEnsemble:
        from learners.schema import Schema

        from .spec import build_model, learner_from_state

        h = state["header"]
        if h.get("format") != STATE_FORMAT or h.get("version") not in READABLE_VERSIONS:
            raise ValueError(f"not a chorus state v{STATE_VERSION}: {h.get('format')!r} "
                             f"v{h.get('version')!r}")  # fmt: skip
        if h.get("type") != cls.__name__:
            raise ValueError(f"state is for {h.get('type')!r}, not {cls.__name__}")
        obj = build_model(h["spec"])
        obj._set_n_seen(int(h["n_seen"]))
        arrays = state["arrays"]
        if obj._native:
            obj._bank.schema = Schema.from_header(h["schema"], obj._bank.limits)
            obj._bank.load_arrays(arrays)
            obj._bank.fit_schema()
        else:
            obj._classes = list(h["classes"])
            obj._schema = Schema.from_header(h["schema"], obj._schema.limits)
            for m, mh in enumerate(h["members"]):
                prefix = f"m{m}."
                sub = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
                obj._members[m] = learner_from_state({"header": mh, "arrays": sub})
        obj._load_extra(arrays)
        return obj


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
