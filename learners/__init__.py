"""Incremental base learners (array state, compiled kernels) and adapters.

``learners`` imports nothing from ``ensembles`` or ``app`` (ARCHITECTURE §1).
"""

from .base import MAX_WEIGHT, FrameRows, Learner, WeightError, argmax_label, at_row
from .encoded import EncodedRows
from .exact_tree import ExactTree
from .limits import LimitError, Limits, ParamError
from .mlp import MLP
from .native import DecisionStump, HoeffdingTree, NaiveBayes, NativeLearner
from .river_adapter import RiverLearner
from .schema import FeatureTypeError, LabelError, Schema

__all__ = [
    "MAX_WEIGHT",
    "DecisionStump",
    "EncodedRows",
    "ExactTree",
    "FeatureTypeError",
    "FrameRows",
    "HoeffdingTree",
    "LabelError",
    "LimitError",
    "ParamError",
    "Limits",
    "MLP",
    "Learner",
    "NaiveBayes",
    "NativeLearner",
    "RiverLearner",
    "Schema",
    "WeightError",
    "argmax_label",
    "at_row",
]
