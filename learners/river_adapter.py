"""Any river classifier as a Chorus base learner (the slow path: a Python object per member)."""

from __future__ import annotations

import copy
import importlib
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np

from .base import BatchMixin, Features, Label, RiverEstimator, argmax_label, check_weight
from .native import STATE_FORMAT, STATE_VERSION


def resolve_river_class(path: str) -> type:
    """``"tree.HoeffdingTreeClassifier"`` or ``"river.tree.HoeffdingTreeClassifier"`` -> class.

    Only classes inside the ``river`` package are accepted (a spec never imports arbitrary code).
    """
    dotted = path if path.startswith("river.") else f"river.{path}"
    module_name, _, cls_name = dotted.rpartition(".")
    if not module_name or not cls_name.isidentifier():
        raise ValueError(
            f"river learner {path!r}: expected 'module.Class', e.g. 'tree.HoeffdingTreeClassifier'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise ValueError(f"river learner {path!r}: no module {module_name!r}") from None
    cls = getattr(module, cls_name, None)
    if not isinstance(cls, type) or not hasattr(cls, "learn_one"):
        raise ValueError(f"river learner {path!r}: {cls_name!r} is not a river estimator class")
    return cls


class RiverLearner(BatchMixin, RiverEstimator):
    """Wrap a river classifier so ensembles can use it as a base learner.

    This is the slow path: ensembles loop over members in Python and every update goes through
    river's object graph (about 100x slower than the native learners). Weights are passed as
    river's ``w`` when the estimator accepts it, else as repeated ``learn_one`` calls.

    Its state is the estimator pickled by Chorus itself (never bytes from a client); the service
    only loads it from a snapshot whose checksum verified.

    Examples
    --------
    >>> from river import naive_bayes
    >>> from learners import RiverLearner
    >>> model = RiverLearner(naive_bayes.GaussianNB())
    >>> for i in range(20):
    ...     model.learn_one({"x": float(i)}, i >= 10)
    >>> model.predict_one({"x": 15.0})
    True
    """

    def __init__(self, estimator: Any):
        if not hasattr(estimator, "learn_one") or not hasattr(estimator, "predict_proba_one"):
            raise ValueError(
                "estimator must be a river classifier with learn_one/predict_proba_one"
            )
        self.estimator = estimator
        try:
            import inspect

            self._takes_w = "w" in inspect.signature(estimator.learn_one).parameters
        except (TypeError, ValueError):
            self._takes_w = False

    @staticmethod
    def _present(x: Features) -> Features:
        """river's convention for missing values is an absent key."""
        return {k: v for k, v in x.items() if v is not None and v == v}

    def learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> None:  # type: ignore[override]
        check_weight(w)
        if w == 0:
            return
        if isinstance(y, np.generic):  # np.bool_, np.str_, ...: the plain Python label
            y = y.item()
        x = self._present(x)
        if self._takes_w:
            self.estimator.learn_one(x, y, w=w)
        else:
            for _ in range(int(round(w))):
                self.estimator.learn_one(x, y)

    def predict_proba_one(self, x: Features) -> dict[Label, float]:  # type: ignore[override]
        p = self.estimator.predict_proba_one(self._present(x)) or {}
        total = sum(p.values())
        return {k: v / total for k, v in p.items()} if total > 0 else {}

    def predict_one(self, x: Features) -> Label | None:  # type: ignore[override]
        return argmax_label(self.predict_proba_one(x))

    def __repr__(self) -> str:
        return f"RiverLearner({self.estimator!r})"

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        from river import tree

        yield {"estimator": tree.HoeffdingTreeClassifier(grace_period=50)}

    def params(self) -> dict:
        return {"estimator": f"{type(self.estimator).__module__}.{type(self.estimator).__name__}"}

    def to_state(self) -> dict:
        blob = np.frombuffer(pickle.dumps(copy.deepcopy(self.estimator)), dtype=np.uint8)
        header = {"format": STATE_FORMAT, "version": STATE_VERSION, "type": "RiverLearner",
                  "params": self.params()}  # fmt: skip
        return {"header": header, "arrays": {"pickle": blob.copy()}}

    @classmethod
    def from_state(cls, state: dict) -> RiverLearner:
        """Rebuild from Chorus' own snapshot. Callers must have verified its integrity."""
        est = pickle.loads(np.asarray(state["arrays"]["pickle"], dtype=np.uint8).tobytes())  # noqa: S301
        return cls(est)
