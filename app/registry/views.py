"""What the HTTP API shows of a model, and how query-string values become features."""

from __future__ import annotations

from typing import Any

from app.errors import InvalidInput
from app.registry.handles import Handle


def describe(h: Handle) -> dict[str, Any]:
    """The model description of the HTTP API (``ModelDescription``)."""
    d = h.model.describe()
    return {
        "name": h.name,
        "spec": h.spec,
        "n_seen": int(d.get("n_seen", h.model.n_seen)),
        "seq": h.seq,
        "classes": list(d.get("classes", [])),
        "state_bytes": int(d.get("state_bytes", 0)),
        "metrics": h.metrics.report(),
        "members": list(d.get("members", [])),
        "n_drifts": d.get("n_drifts"),  # adaptive bagging and boosting only (issue 18)
        "diversity": d.get("diversity"),
        "status": "ok",
        "reason": None,
    }


def describe_broken(name: str, spec: dict[str, Any] | None, reason: str) -> dict[str, Any]:
    """What ``GET /models`` lists for a model that cannot be loaded."""
    return {
        "name": name,
        "spec": spec or {},
        "n_seen": None,
        "seq": None,
        "classes": [],
        "state_bytes": None,
        "metrics": None,
        "members": [],
        "n_drifts": None,
        "diversity": None,
        "status": "broken",
        "reason": reason,
    }


def typed_query(h: Handle, params: dict[str, str]) -> dict[str, Any]:
    """Type query-string values: declared or learned kinds first, then numeric-looking strings
    -> float, empty strings -> missing."""
    declared = h.spec.get("features") or {}
    x: dict[str, Any] = {}
    for k, v in params.items():
        kind = declared.get(k) or h.model.feature_kind(k)
        if kind == "categorical":  # a learned zip code "02139" stays that text
            x[k] = v
        elif kind == "numeric":
            try:
                x[k] = float(v)
            except ValueError:
                raise InvalidInput(f"{k}: declared numeric, got {v!r}") from None
        elif v == "":
            x[k] = None
        else:  # 'nan' is missing and 'inf' rejected, as JSON NaN / Infinity are
            try:
                x[k] = float(v)
            except ValueError:
                x[k] = v
    return x
