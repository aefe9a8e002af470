"""Profiles: who uses the assistant, and each one's saved meetings (the calendar and the curve).

A profile is a short id (``ann``, ``demo``); every profile has its own four Chorus models and its
own ``<data_dir>/users/<id>/meetings.jsonl``, one JSON line per saved meeting. The ``demo`` profile
is the simulated user's: the simulator writes there and nowhere else.

Examples
--------
>>> import tempfile, pathlib
>>> book = Profiles(pathlib.Path(tempfile.mkdtemp()))
>>> book.create("Ann").user, book.ids()
('ann', ['ann', 'demo'])
>>> Profiles.check_id("no way")
Traceback (most recent call last):
...
ValueError: a profile id is 1-24 characters from a-z 0-9 - (starting with a letter or digit); got 'no way'
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from .meetings import TARGETS
from .slots import Busy, minutes

DEMO = "demo"
PROFILE_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,23}$")

#: Moving-average window of the learning curve AND the "last N" column: defined once, here.
WINDOW = 10


class Calendar:
    """One profile's saved meetings, in the order they were saved (append-only JSON lines).

    Parameters
    ----------
    user
        The profile's id.
    path
        Its ``meetings.jsonl``; read back when it exists (the calendar survives restarts).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "meetings.jsonl"
    >>> cal = Calendar("ann", path=path)
    >>> final = {"duration": "30", "day_of_week": "mon", "start_time": "10:00", "location": "x"}
    >>> correct = {"duration": True, "day_of_week": False, "start_time": True, "location": True}
    >>> cal.add({"date": "2026-11-23", "final": final, "correct": correct})["i"]
    1
    >>> cal.accuracy("day_of_week"), len(Calendar("ann", path=path).records)
    (0.0, 1)
    """

    def __init__(self, user: str, *, path: Path) -> None:
        self.user = user
        self.path = path
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    self.records.append(json.loads(line))

    def add(self, record: dict[str, Any]) -> dict[str, Any]:
        return self.add_many([record])[0]

    def add_many(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self._lock:
            out = []
            for record in records:
                out.append({"i": len(self.records) + len(out) + 1, "at": time.time(), **record})
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in out)
            self.records.extend(out)
            return out

    def clear(self) -> None:
        with self._lock:
            self.records = []
            self.path.unlink(missing_ok=True)

    def between(self, first: dt.date, days: int) -> list[dict[str, Any]]:
        """Meetings dated ``first`` ... ``first + days - 1`` (what a week view shows)."""
        last = first + dt.timedelta(days=days - 1)
        return [r for r in self.records if first.isoformat() <= r["date"] <= last.isoformat()]

    def busy(self, day: dt.date) -> list[Busy]:
        """The time the meetings saved on ``day`` take (what a suggestion must not double-book)."""
        out = []
        for r in self.between(day, 1):
            start = minutes(r["final"]["start_time"])
            out.append(Busy(start, start + int(r["final"]["duration"]), r.get("title") or ""))
        return out

    def find(self, meeting_id: str) -> dict[str, Any] | None:
        """The saved meeting with this id (a save's idempotency key), if any."""
        return next((r for r in self.records if r.get("meeting_id") == meeting_id), None)

    def value_count(self, target: str, value: Any) -> int:
        """How many saved meetings chose ``value`` for ``target``."""
        return sum(1 for r in self.records if r["final"][target] == value)

    def accuracy(self, target: str, last: int | None = None) -> float | None:
        """Share of meetings whose suggestion for ``target`` was kept (None: no meetings)."""
        records = self.records[-last:] if last else self.records
        if not records:
            return None
        return sum(1 for r in records if r["correct"].get(target)) / len(records)

    def curve(self, max_points: int = 120) -> dict[str, list[list[float]]]:
        """Per target, the share of suggestions kept over the last ``WINDOW`` meetings."""
        n = len(self.records)
        step = max(1, -(-n // max_points))
        curves: dict[str, list[list[float]]] = {}
        for target in TARGETS:
            hits = [1.0 if r["correct"].get(target) else 0.0 for r in self.records]
            points = []
            for end in range(1, n + 1):
                if end % step and end != n:
                    continue
                chunk = hits[max(0, end - WINDOW) : end]
                points.append([end, round(sum(chunk) / len(chunk), 4)])
            curves[target] = points
        return curves


class Profiles:
    """All profiles under ``<data_dir>/users``; the demo profile always exists."""

    def __init__(self, data_dir: Path) -> None:
        self.root = Path(data_dir) / "users"
        self._calendars: dict[str, Calendar] = {}
        self._lock = threading.Lock()
        self.create(DEMO)

    @staticmethod
    def check_id(user: str) -> str:
        if not PROFILE_ID.match(user):
            raise ValueError(
                "a profile id is 1-24 characters from a-z 0-9 - (starting with a letter or "
                f"digit); got {user[:40]!r}"
            )
        return user

    def ids(self) -> list[str]:
        if not self.root.exists():
            return []
        return sorted(
            p.name for p in self.root.iterdir() if p.is_dir() and PROFILE_ID.match(p.name)
        )

    def exists(self, user: str) -> bool:
        return bool(PROFILE_ID.match(user)) and (self.root / user).is_dir()

    def create(self, user: str) -> Calendar:
        user = self.check_id(user.strip().lower())
        (self.root / user).mkdir(parents=True, exist_ok=True)
        return self.calendar(user)

    def calendar(self, user: str) -> Calendar:
        with self._lock:
            if user not in self._calendars:
                self._calendars[user] = Calendar(user, path=self.root / user / "meetings.jsonl")
            return self._calendars[user]

    def remove(self, user: str) -> None:
        with self._lock:
            self._calendars.pop(user, None)
            shutil.rmtree(self.root / user, ignore_errors=True)
