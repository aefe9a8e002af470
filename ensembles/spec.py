"""Model specs: the declarative form the service, the CLI and state headers use."""

from __future__ import annotations

from typing import Any

from learners import NativeLearner
from learners.compiled import make_run_io
from learners.jit import is_cached
from learners.mlp import mlp_run

from . import _adaptive, _kernels
from .backends import io_kernel_of
from .bagging import OnlineBagging
from .base import OnlineEnsemble, check_spec_keys
from .boosting import OnlineBoosting
from .forest import AdaptiveRandomForest, StreamingRandomPatches
from .members import LEARNERS, extra_learners, learner_from_state, learner_spec
from .single import Single

ENSEMBLES: dict[str, type[OnlineEnsemble]] = {
    "bagging": OnlineBagging,
    "boosting": OnlineBoosting,
    "single": Single,
    "arf": AdaptiveRandomForest,
    "srp": StreamingRandomPatches,
}


def run_kernels(ensemble: str) -> tuple:
    """The compiled run kernels a model of ensemble kind ``ensemble`` (``build_model`` names) may
    call: the kind's own and the adaptive one of its drift options (each as its IO run kernel,
    ``ensembles.backends.IO_RUN_KERNELS``, through which the bank calls it), bagging's
    member-parallel ones, and the MLP learner's (an MLP member runs its own kernel; the native
    learners share the ensemble's) unless the kind grows Hoeffding trees only (the forests)."""
    own = ENSEMBLES[ensemble]._kernel
    adaptive = {"bagging": (_adaptive.adaptive_run,),
                "boosting": (_adaptive.boosting_adaptive_run,)}.get(ensemble, ())  # fmt: skip
    # a run kernel with an IO run kernel runs through it (TreeBank.run_one and its batches): the
    # IO run kernel is what compiles, with the constructor of its buffers' struct
    runs = tuple(io_kernel_of(k) or k for k in (own, *adaptive))
    # bagging's member-parallel batches (CHORUS_THREADS > 1; app.warmup compiles them too)
    parallel = (
        (_kernels.bagging_members, _kernels.make_room, _kernels.bagging_votes)
        if ensemble == "bagging"
        else ()
    )
    mlp = () if getattr(ENSEMBLES[ensemble], "trees_only", False) else (mlp_run,)
    return (*runs, make_run_io, *parallel, *mlp)


def kernels_cached(ensemble: str) -> bool:
    """Whether every run kernel of ensemble kind ``ensemble`` (``run_kernels``) is in numba's
    on-disk cache, so that its first model starts in well under a second."""
    return all(is_cached(k) for k in run_kernels(ensemble))


def build_model(spec: dict) -> OnlineEnsemble:
    """Build an (untrained) model from a spec; ``ValueError`` names the bad key or value.

    >>> model = build_model({"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3,
    ...                      "seed": 1, "params": {"grace_period": 50}})
    >>> model
    OnlineBagging(HoeffdingTree(grace_period=50, ...), n_models=3, seed=1, vote='average')
    """
    if not isinstance(spec, dict):
        raise ValueError("spec must be an object")
    check_spec_keys(spec)
    ens_name = spec.get("ensemble", "bagging")
    if ens_name not in ENSEMBLES:
        raise ValueError(f"ensemble must be one of {sorted(ENSEMBLES)}, got {ens_name!r}")
    return ENSEMBLES[ens_name].from_spec(spec)


def stored_spec(spec: dict) -> dict:
    """A spec Chorus saved (``model.spec()`` in a store: the service rebuilds models and
    challengers from it) with the defaults it was written under made explicit: build the
    model from this, not from the saved spec itself, so that it behaves as the one that saved
    it (``OnlineEnsemble.stored_spec``; states do it themselves). A spec given by a user is
    built as it is."""
    kind = spec.get("ensemble", "bagging") if isinstance(spec, dict) else None
    cls = ENSEMBLES.get(kind) if isinstance(kind, str) else None
    return spec if cls is None else cls.stored_spec(spec)


def load_state(state: dict) -> Any:
    """Rebuild any ensemble or learner from ``to_state()`` output."""
    kind = state.get("header", {}).get("type")
    for cls in ENSEMBLES.values():
        if cls.__name__ == kind:
            return cls.from_state(state)
    if kind in {c.__name__ for c in LEARNERS.values()} | {"RiverLearner"} | {
        c.__name__ for c in extra_learners().values()
    }:
        return learner_from_state(state)
    raise ValueError(f"unknown state type {kind!r}")


__all__ = [
    "build_model",
    "learner_from_state",
    "learner_spec",
    "load_state",
    "NativeLearner",
    "stored_spec",
]
