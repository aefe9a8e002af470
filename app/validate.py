"""What the engine and the stores can represent: the one place for range checks on client values.

Log records, kept predictions and specs are JSON (orjson), which refuses integers outside 64 bits
and strings with lone surrogates; the engine keeps integer labels in 64-bit arrays. A value
outside that is refused with :class:`~app.errors.InvalidInput` naming the field *before* anything
is learned or logged. Label *types* (1 vs "1") are not decided here.
"""

from __future__ import annotations

from typing import Any

from app.errors import InvalidInput

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# learners.MAX_WEIGHT, the largest sample weight a model takes (the service does not import the
# engine to read it; tests/test_row_errors.py checks they agree)
MAX_WEIGHT = 1e12
_MAX_DEPTH = 32


def problem(value: Any, field: str, depth: int = 0) -> str | None:
    """The first unrepresentable value inside ``value`` as ``"field.path: reason"``, else ``None``.

    Parameters
    ----------
    value
        A JSON-like value (dicts, lists, scalars).
    field
        Its name in the request (``"features"``, ``"label"``, ``"classes"``...).
    depth
        Nesting depth so far (deeper than 32 levels is refused).

    Examples
    --------
    >>> problem({"x": 2**70}, "features")
    'features.x: integer 1180591620717411303424 is outside the 64-bit range; send a float or a string'
    >>> problem(["a", 3], "classes") is None
    True
    """
    if type(value) is int:
        if not INT64_MIN <= value <= INT64_MAX:
            shown = str(value) if value.bit_length() < 200 else f"of {value.bit_length()} bits"
            return f"{field}: integer {shown} is outside the 64-bit range; send a float or a string"
        return None
    if isinstance(value, str):
        return None if _utf8(value) else f"{field}: invalid unicode (lone surrogate)"
    if depth > _MAX_DEPTH and isinstance(value, dict | list):
        return f"{field}: nested deeper than {_MAX_DEPTH} levels"
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and not _utf8(k):
                return f"{field}: a key has invalid unicode (lone surrogate)"
            found = problem(v, f"{field}.{k}", depth + 1)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = problem(v, f"{field}.{i}", depth + 1)
            if found:
                return found
    return None


def check(value: Any, field: str) -> None:
    """Raise :class:`InvalidInput` naming the field when ``value`` holds something unrepresentable."""
    found = problem(value, field)
    if found:
        raise InvalidInput(found)


def check_label(label: Any, field: str = "label") -> None:
    """The cheap per-example check of a label (hot path: one type test for the common case)."""
    if type(label) is int and not INT64_MIN <= label <= INT64_MAX:
        check(label, field)
    elif type(label) is str and not _utf8(label):
        check(label, field)


def _utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
