"""The simulated (demo) user: meetings from the synthetic calendar generator (``synth``).

``simulated_meetings(n, seed, drift)`` returns ``(features, labels)`` pairs the assistant feeds to
Chorus exactly like saved meetings. With ``drift=True`` the user changes habits half-way: from then on
every target's value is replaced by the next one in that target's sorted list of values (Monday
meetings move to Tuesday, 30-minute ones become 45-minute ones, ...), which the learning curve shows
as a drop followed by recovery.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .meetings import TARGETS


def split_record(record: Any) -> tuple[dict[str, str], dict[str, str]]:
    """One generated meeting -> (categorical features, target labels); ``"?"`` means missing."""
    if isinstance(record, tuple) and len(record) == 2:
        x, y = record
        merged = {**dict(x), **(dict(y) if isinstance(y, Mapping) else {})}
    else:
        merged = dict(record)
    labels = {t: " ".join(str(merged[t]).lower().split()) for t in TARGETS}
    features = {
        str(k): str(v).strip().lower()
        for k, v in merged.items()
        if k not in TARGETS and v is not None and str(v) not in ("", "?")
    }
    return features, labels


def simulated_meetings(
    n: int, *, seed: int = 0, drift: bool = False
) -> list[tuple[dict[str, str], dict[str, str]]]:
    """``n`` meetings from ``examples.calendar_assistant.synth.generate(n, seed)``, optionally with a habit change at n/2."""
    from .synth import generate

    meetings = [split_record(r) for r in generate(n, seed)]
    if not drift:
        return meetings
    drift_at = n // 2
    values = {t: sorted({y[t] for _, y in meetings}) for t in TARGETS}
    shifted = {t: {v: vs[(i + 1) % len(vs)] for i, v in enumerate(vs)} for t, vs in values.items()}
    return [
        (x, y if i < drift_at else {t: shifted[t][y[t]] for t in TARGETS})
        for i, (x, y) in enumerate(meetings)
    ]
