"""Model specs: the declarative form the service, the CLI and state headers use."""

from __future__ import annotations

import inspect
from typing import Any

from learners import MLP, DecisionStump, HoeffdingTree, NaiveBayes, NativeLearner, RiverLearner
from learners.jit import is_cached
from learners.river_adapter import resolve_river_class

from .bagging import OnlineBagging
from .base import OnlineEnsemble
from .boosting import OnlineBoosting
from .single import Single

LEARNERS: dict[str, type] = {
    "hoeffding_tree": HoeffdingTree,
    "naive_bayes": NaiveBayes,
    "stump": DecisionStump,
    "mlp": MLP,
}
ENSEMBLES: dict[str, type[OnlineEnsemble]] = {
    "bagging": OnlineBagging,
    "boosting": OnlineBoosting,
    "single": Single,
}
SPEC_KEYS = {"ensemble", "learner", "n_models", "seed", "params", "limits"}


def kernels_cached(ensemble: str) -> bool:
    """Whether the compiled run kernel of ensemble kind ``ensemble`` (``build_model`` names) is in
    numba's on-disk cache, so that its first model starts in well under a second."""
    return is_cached(ENSEMBLES[ensemble]._kernel)


def _extra_learners() -> dict[str, type]:
    try:  # the thesis' lossless tree, when present
        from learners.exact_tree import ExactTree
    except ImportError:
        return {}
    return {"exact_tree": ExactTree}


def _keywords(cls: type) -> set[str]:
    sig = inspect.signature(cls)
    return {n for n, p in sig.parameters.items() if n != "self" and p.kind != p.VAR_KEYWORD}


def build_model(spec: dict) -> OnlineEnsemble:
    """Build an (untrained) model from a spec; ``ValueError`` names the bad key or value.

    >>> model = build_model({"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3,
    ...                      "seed": 1, "params": {"grace_period": 50}})
    >>> model
    OnlineBagging(HoeffdingTree(grace_period=50, ...), n_models=3, seed=1, vote='average')
    """
    if not isinstance(spec, dict):
        raise ValueError("spec must be an object")
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise ValueError(f"unknown spec key(s) {sorted(unknown)}; valid: {sorted(SPEC_KEYS)}")
    ens_name = spec.get("ensemble", "bagging")
    if ens_name not in ENSEMBLES:
        raise ValueError(f"ensemble must be one of {sorted(ENSEMBLES)}, got {ens_name!r}")
    ens_cls = ENSEMBLES[ens_name]
    params = dict(spec.get("params") or {})
    if not isinstance(params, dict):
        raise ValueError("params must be an object")
    ens_kw = {k: params.pop(k) for k in list(params)
              if k in _keywords(ens_cls) - {"learner", "limits"}}  # fmt: skip
    learner = _build_learner(spec.get("learner", "hoeffding_tree"), params)
    n_models = spec.get("n_models", 1 if ens_name == "single" else 10)
    seed = spec.get("seed", 0)
    return ens_cls(learner, n_models=n_models, seed=seed, limits=spec.get("limits"), **ens_kw)


def _build_learner(name: Any, params: dict) -> Any:
    if not isinstance(name, str):
        raise ValueError(f"learner must be a string, got {name!r}")
    if name.startswith("river:"):
        cls = resolve_river_class(name[len("river:") :])
        try:
            return RiverLearner(cls(**params))
        except TypeError as e:
            raise ValueError(f"params for {name}: {e}") from None
    table = {**LEARNERS, **_extra_learners()}
    if name not in table:
        raise ValueError(f"learner must be one of {sorted(table)} or 'river:<module.Class>', "
                         f"got {name!r}")  # fmt: skip
    cls = table[name]
    bad = set(params) - _keywords(cls)
    if bad:
        raise ValueError(f"unknown param(s) {sorted(bad)} for learner {name}; "
                         f"valid: {sorted(_keywords(cls))}")  # fmt: skip
    return cls(**params)


def learner_spec(learner: Any) -> tuple[str, dict]:
    """(name, params) of a learner, the inverse of ``_build_learner``."""
    if isinstance(learner, RiverLearner):
        est = learner.estimator
        mod = type(est).__module__
        path = f"{mod.removeprefix('river.').split('.')[0]}.{type(est).__name__}"
        raw = est._get_params() if hasattr(est, "_get_params") else {}
        scalar = (type(None), bool, int, float, str)
        return f"river:{path}", {k: v for k, v in raw.items() if isinstance(v, scalar)}
    for name, cls in {**LEARNERS, **_extra_learners()}.items():
        if type(learner) is cls:
            params = learner.params() if hasattr(learner, "params") else {}
            return name, dict(params)
    raise ValueError(f"no spec name for learner {type(learner).__name__}")


def learner_from_state(state: dict) -> Any:
    """Rebuild a base learner (slow-path member) from its state."""
    kind = state["header"].get("type")
    table: dict[str, Any] = {"RiverLearner": RiverLearner}
    table.update({c.__name__: c for c in LEARNERS.values()})
    table.update({c.__name__: c for c in _extra_learners().values()})
    if kind not in table:
        raise ValueError(f"unknown learner type in state: {kind!r}")
    return table[kind].from_state(state)


def load_state(state: dict) -> Any:
    """Rebuild any ensemble or learner from ``to_state()`` output."""
    kind = state.get("header", {}).get("type")
    for cls in ENSEMBLES.values():
        if cls.__name__ == kind:
            return cls.from_state(state)
    if kind in {c.__name__ for c in LEARNERS.values()} | {"RiverLearner"} | {
        c.__name__ for c in _extra_learners().values()
    }:
        return learner_from_state(state)
    raise ValueError(f"unknown state type {kind!r}")


__all__ = ["build_model", "learner_from_state", "learner_spec", "load_state", "NativeLearner"]
