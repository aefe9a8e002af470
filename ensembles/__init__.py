"""Oza's online ensembles (bagging, boosting), their batch counterparts, the random forests of
Hoeffding trees (Adaptive Random Forest, Streaming Random Patches), specs and state.

``ensembles`` knows learners only through their protocol (and, for native learners, their
compiled kernels); it does no I/O (ARCHITECTURE §1).
"""

from .backends import compiling_on_purpose
from .bagging import OnlineBagging
from .base import OnlineEnsemble
from .batch import AdaBoost, BatchBagging
from .boosting import OnlineBoosting
from .forest import AdaptiveRandomForest, StreamingRandomPatches
from .single import Single
from .spec import build_model, kernels_cached, learner_from_state, load_state, stored_spec

__all__ = [
    "AdaBoost",
    "AdaptiveRandomForest",
    "BatchBagging",
    "OnlineBagging",
    "OnlineBoosting",
    "OnlineEnsemble",
    "Single",
    "StreamingRandomPatches",
    "build_model",
    "compiling_on_purpose",
    "kernels_cached",
    "learner_from_state",
    "load_state",
    "stored_spec",
]
