"""Per-model limits (ARCHITECTURE §3): what one model may hold, checked before anything is learned.

A model refuses input beyond a limit with :class:`LimitError` (a ``ValueError``) naming the limit
and the feature or label, and learns nothing of the call that hit it (the schema rolls back).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

OVER_LIMIT_POLICIES = ("reject", "other")


class ParamError(ValueError):
    """A learner parameter outside what the engine accepts; ``param`` names it.

    Examples
    --------
    >>> from learners import HoeffdingTree
    >>> HoeffdingTree(max_nodes=10**12)
    Traceback (most recent call last):
    ...
    learners.limits.ParamError: max_nodes must be a number > 0 and <= 1e+06, got 1000000000000
    """

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param


class LimitError(ValueError):
    """Input beyond one of a model's :class:`Limits`.

    Attributes
    ----------
    limit
        The limit's name (``"max_values"``, ...).
    field
        What hit it: ``"features.<name>"``, ``"features"``, ``"label"`` or ``"model"``.
    feature
        The feature's name, or ``None``.
    """

    def __init__(self, limit: str, value: int, field: str, message: str,
                 feature: str | None = None):  # fmt: skip
        super().__init__(f"{message} (limit {limit} = {value:,}; raise it in the model's limits)")
        self.limit = limit
        self.field = field
        self.feature = feature


@dataclass(frozen=True)
class Limits:
    """What one model may hold. Every field has a default; pass the ones to change.

    Parameters
    ----------
    max_features
        Distinct feature names (numeric and categorical together).
    max_values
        Distinct values of one categorical feature.
    max_classes
        Distinct class labels.
    max_nodes
        Nodes of one tree (caps a Hoeffding tree's own ``max_nodes``).
    max_state_bytes
        Bytes of the model's arrays as allocated plus the text of its schema (names, values,
        labels). A model over it refuses further learning (predictions go on); an ``MLP`` (and an
        ensemble of them) refuses a call that would take it over, whole, and goes on learning
        what it knows.
    over_limit
        A categorical value beyond ``max_values``: ``"reject"`` (``LimitError``) or ``"other"``
        (the feature's values from then on share one "other" value).

    Examples
    --------
    >>> from learners import HoeffdingTree, Limits
    >>> tree = HoeffdingTree(limits=Limits(max_values=2))
    >>> tree.learn_one({"city": "Oslo"}, True)
    >>> tree.learn_one({"city": "Rome"}, False)
    >>> tree.learn_one({"city": "Bern"}, True)
    Traceback (most recent call last):
    ...
    learners.limits.LimitError: categorical feature 'city' has 2 values, no room for 'Bern' \
(limit max_values = 2; raise it in the model's limits)
    """

    max_features: int = 1_000
    max_values: int = 100_000
    max_classes: int = 1_000
    max_nodes: int = 100_000
    max_state_bytes: int = 256 << 20
    over_limit: str = "reject"

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "over_limit":
                if v not in OVER_LIMIT_POLICIES:
                    raise ValueError(f"over_limit must be one of {OVER_LIMIT_POLICIES}, got {v!r}")
            elif not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"limits.{f.name} must be an integer >= 1, got {v!r}")

    @classmethod
    def coerce(cls, limits: Limits | dict[str, Any] | None) -> Limits:
        """``Limits`` from a ``Limits``, a dict of some of its fields, or ``None`` (defaults)."""
        if limits is None:
            return cls()
        if isinstance(limits, cls):
            return limits
        if not isinstance(limits, dict):
            raise ValueError(f"limits must be a dict or Limits, got {type(limits).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = set(limits) - names
        if unknown:
            raise ValueError(f"unknown limit(s) {sorted(unknown)}; valid: {sorted(names)}")
        return cls(**limits)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
