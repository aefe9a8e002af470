"""Base learners by spec name: build one from ``(name, params)``, name one, restore one from state.

Used by :mod:`ensembles.spec` (model specs) and by :class:`~ensembles.base.OnlineEnsemble` (its own
spec and state); knows only :mod:`learners`.
"""

from __future__ import annotations

import inspect
from typing import Any

from learners import MLP, DecisionStump, HoeffdingTree, NaiveBayes, RiverLearner
from learners.river_adapter import resolve_river_class

LEARNERS: dict[str, type] = {
    "hoeffding_tree": HoeffdingTree,
    "naive_bayes": NaiveBayes,
    "stump": DecisionStump,
    "mlp": MLP,
}


def extra_learners() -> dict[str, type]:
    """Spec names of the optional learners that are installed."""
    try:  # the thesis' lossless tree, when present
        from learners.exact_tree import ExactTree
    except ImportError:
        return {}
    return {"exact_tree": ExactTree}


def keywords(cls: type) -> set[str]:
    """The keyword arguments ``cls(...)`` takes."""
    sig = inspect.signature(cls)
    return {n for n, p in sig.parameters.items() if n != "self" and p.kind != p.VAR_KEYWORD}


def build_learner(name: Any, params: dict) -> Any:
    """A base learner from its spec name and params; ``ValueError`` names the bad one."""
    if not isinstance(name, str):
        raise ValueError(f"learner must be a string, got {name!r}")
    if name.startswith("river:"):
        cls = resolve_river_class(name[len("river:") :])
        try:
            return RiverLearner(cls(**params))
        except TypeError as e:
            raise ValueError(f"params for {name}: {e}") from None
    table = {**LEARNERS, **extra_learners()}
    if name not in table:
        raise ValueError(f"learner must be one of {sorted(table)} or 'river:<module.Class>', "
                         f"got {name!r}")  # fmt: skip
    cls = table[name]
    bad = set(params) - keywords(cls)
    if bad:
        raise ValueError(f"unknown param(s) {sorted(bad)} for learner {name}; "
                         f"valid: {sorted(keywords(cls))}")  # fmt: skip
    return cls(**params)


def member_clone(learner: Any, m: int) -> Any:
    """A fresh copy of ``learner`` to be member ``m`` of an ensemble: the learner's own
    ``member_clone(m)`` when it has one (an ``MLP`` gives each member its own initial weights),
    else ``clone()``."""
    own = getattr(learner, "member_clone", None)
    return own(m) if callable(own) else learner.clone()


def learner_spec(learner: Any) -> tuple[str, dict]:
    """(name, params) of a learner, the inverse of ``build_learner``."""
    if isinstance(learner, RiverLearner):
        est = learner.estimator
        mod = type(est).__module__
        path = f"{mod.removeprefix('river.').split('.')[0]}.{type(est).__name__}"
        raw = est._get_params() if hasattr(est, "_get_params") else {}
        scalar = (type(None), bool, int, float, str)
        return f"river:{path}", {k: v for k, v in raw.items() if isinstance(v, scalar)}
    for name, cls in {**LEARNERS, **extra_learners()}.items():
        if type(learner) is cls:
            params = learner.params() if hasattr(learner, "params") else {}
            return name, dict(params)
    raise ValueError(f"no spec name for learner {type(learner).__name__}")


def learner_from_state(state: dict) -> Any:
    """Rebuild a base learner (slow-path member) from its state."""
    kind = state["header"].get("type")
    table: dict[str, Any] = {"RiverLearner": RiverLearner}
    table.update({c.__name__: c for c in LEARNERS.values()})
    table.update({c.__name__: c for c in extra_learners().values()})
    if kind not in table:
        raise ValueError(f"unknown learner type in state: {kind!r}")
    return table[kind].from_state(state)
