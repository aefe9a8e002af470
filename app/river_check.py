"""Check the parameters of a ``river:`` learner at model creation (never a 500 at learn time).

The estimator is instantiated with the given parameters, numeric parameters are checked against
the sign of river's own default, and a fresh copy learns and predicts two trial examples: what
fails here is refused with a 422 naming the parameter instead of failing every later ``/learn``.
"""

from __future__ import annotations

import inspect
from typing import Any

from app.errors import InvalidInput

_TRIAL = [({"a": 1.0, "b": 0.5}, "c0"), ({"a": 2.0, "b": 0.25}, "c1")]


def check_river_params(learner: str, params: dict[str, Any]) -> None:
    """Raise :class:`InvalidInput` when ``params`` do not make a working river estimator.

    Parameters
    ----------
    learner
        ``"river:<module.Class>"``.
    params
        The learner's parameters from the spec (ensemble keywords already removed or ignored).
    """
    from learners.river_adapter import resolve_river_class

    try:
        cls = resolve_river_class(learner.removeprefix("river:"))
    except ValueError as exc:
        raise InvalidInput(f"learner: {exc}") from None
    sig = inspect.signature(cls)
    mine = {k: v for k, v in params.items() if k in sig.parameters}
    for name, value in mine.items():
        default = sig.parameters[name].default
        if isinstance(default, bool) or not isinstance(default, int | float):
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInput(f"params.{name}: expected a number like river's default {default!r}")
        if default > 0 and not value > 0:
            raise InvalidInput(f"params.{name}: must be > 0 (river's default is {default!r})")
        if default >= 0 and value < 0:
            raise InvalidInput(f"params.{name}: must be >= 0 (river's default is {default!r})")
    try:
        est = cls(**mine)
        for x, y in _TRIAL * 2:
            est.learn_one(x, y)
        est.predict_proba_one(_TRIAL[0][0])
    except Exception as exc:  # noqa: BLE001 - whatever river raises, the params are to blame
        raise InvalidInput(
            f"params: {learner} fails with these parameters: {exc!r}"[:500]
        ) from None
