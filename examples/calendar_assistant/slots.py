"""Where a suggested meeting goes: the models' preferred slot, unless it is past or taken.

The day, start and duration models each suggest a value; together, in the week the person looks
at, they make the *preferred* slot. The assistant never suggests a slot in the past nor one that
double-books the person:

1. **past** (an earlier day of this week, or today at an hour gone by): the same weekday and time
   a week later (the learned day and time are kept);
2. **taken** (it overlaps a saved meeting): the next free slot after it -- right after the meetings
   in the way, within the week view's hours (07:00-20:00), on the next days if this one is full.

Both are reported, so the page can say why the suggestion is not the model's.

Examples
--------
>>> import datetime as dt
>>> busy = {dt.date(2026, 11, 26): [Busy(600, 630, "Sync"), Busy(630, 690, "Talk")]}
>>> now = dt.datetime(2026, 11, 25, 14, 0)  # a Wednesday afternoon
>>> slot = place(dt.date(2026, 11, 26), "10:00", 30, busy=lambda d: busy.get(d, []), now=now)
>>> slot.date, slot.start_time, [b.title for b in slot.taken_by]
(datetime.date(2026, 11, 26), '11:30', ['Sync'])
>>> slot = place(dt.date(2026, 11, 23), "10:00", 30, busy=lambda d: [], now=now)  # a Monday
>>> slot.date, slot.start_time, slot.past
(datetime.date(2026, 11, 30), '10:00', True)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: The hours the week view shows, in minutes after midnight: a moved meeting fits in them.
DAY_START, DAY_END = 7 * 60, 20 * 60
#: How far ahead a free slot is looked for.
HORIZON_DAYS = 14


def minutes(hhmm: str) -> int:
    hours, mins = hhmm.split(":")
    return 60 * int(hours) + int(mins)


def hhmm(total: int) -> str:
    return f"{total // 60:02d}:{total % 60:02d}"


@dataclass(frozen=True)
class Busy:
    """A saved meeting as time taken on its day: ``start`` and ``end`` in minutes after midnight."""

    start: int
    end: int
    title: str = ""

    def public(self) -> dict[str, str]:
        return {"title": self.title, "start_time": hhmm(self.start), "end_time": hhmm(self.end)}


@dataclass(frozen=True)
class Slot:
    """The slot suggested, the models' preferred one, and why they differ (if they do)."""

    date: dt.date
    start_time: str
    preferred_date: dt.date
    preferred_start: str
    past: bool = False
    taken_by: tuple[Busy, ...] = field(default=())
    free: bool = True  # False: nothing free within HORIZON_DAYS (the preferred slot is kept)

    @property
    def moved(self) -> bool:
        return (self.date, self.start_time) != (self.preferred_date, self.preferred_start)

    def public(self) -> dict[str, Any]:
        return {
            "date": self.date.isoformat(),
            "start_time": self.start_time,
            "moved": self.moved,
            "preferred": {
                "date": self.preferred_date.isoformat(),
                "start_time": self.preferred_start,
            },
            "past": self.past,
            "taken_by": [b.public() for b in self.taken_by],
            "free": self.free,
        }


def place(
    date: dt.date,
    start_time: str,
    duration: int,
    *,
    busy: Callable[[dt.date], list[Busy]],
    now: dt.datetime,
) -> Slot:
    """The slot to suggest for a meeting the models put on ``date`` at ``start_time``.

    Parameters
    ----------
    date, start_time
        The models' preferred day (a date of the week shown) and start (``HH:MM``).
    duration
        Minutes.
    busy
        The meetings already on a given date.
    now
        The person's local time: nothing before it is suggested.
    """
    when = dt.datetime.combine(date, dt.time.fromisoformat(start_time))
    past = when < now
    while when < now:  # the same weekday and time, a week later
        when += dt.timedelta(weeks=1)
    day, start = when.date(), minutes(start_time)
    in_way = _overlapping(busy(day), start, start + duration)
    if not in_way and start + duration <= 24 * 60:
        return Slot(day, start_time, date, start_time, past=past)
    for _ in range(HORIZON_DAYS * 24 * 2):  # each step passes a meeting or a day: bounded
        blocking = _overlapping(busy(day), start, start + duration)
        if blocking:
            start = max(b.end for b in blocking)
        elif start < DAY_START:
            start = DAY_START
        elif start + duration > DAY_END:
            day, start = day + dt.timedelta(days=1), DAY_START
            if day > when.date() + dt.timedelta(days=HORIZON_DAYS):
                break
        else:
            return Slot(day, hhmm(start), date, start_time, past=past, taken_by=tuple(in_way))
    return Slot(
        when.date(), start_time, date, start_time, past=past, taken_by=tuple(in_way), free=False
    )


def _overlapping(meetings: list[Busy], start: int, end: int) -> list[Busy]:
    return [b for b in meetings if b.start < end and start < b.end]
