"""A synthetic calendar: a seeded stand-in for the CAP calendar data (Oza 2001, §3.5.4).

The CAP (Calendar APprentice) logs Oza used are not public. This generator follows the design in
``shared/datasets/raw/cap/CAP_SCHEMA.md``: one user's appointments in chronological order, each
described by 32 string-valued attributes (``"?"`` = unknown) and four targets. It is **synthetic**;
numbers measured on it are not the thesis' CAP numbers.

How an appointment is made
--------------------------
* The user meets people drawn from an open, growing population. Who is met follows a Zipf law over
  the people known so far, and a new person appears with a probability that decays slowly, so
  name-like attributes (attendee, requester, sponsor, project, ...) keep producing new values.
  Every person has a position, department, group, office and habits (favourite day, length of
  meeting, time of day); attributes derived from an unknown attendee are often ``"?"``.
* An event type (meeting, seminar, class, lunch, call, visitor talk, defense, review, trip, ...)
  is drawn; hidden rules turn it and the attendee's habits into the targets ``day_of_week``
  (six values, never Sunday), ``duration`` (13 values in minutes, about two thirds 30 or 60),
  ``start_time`` (half-hour slots 08:00-17:30) and ``location`` (open vocabulary).
* ``prev_*`` attributes repeat the targets of the previous appointment with the same attendee,
  the strongest cue in real calendars; many other attributes are weak or irrelevant.
* At drift points ("semester boundaries", by default after appointments 537, 1074 and 1521)
  part of the rules change: class days, group meeting days and some habits are re-drawn.
* With probability ``noise`` each target is replaced by a draw from its marginal distribution.
  The default 0.12 puts a single lossless tree (predict-then-learn) near the thesis' CAP
  accuracies: about 0.5 for the day and 0.63 for the duration.

API
---
``generate(n=1790, seed=0) -> list[dict]`` returns records with the 32 attributes (``FEATURES``)
plus the targets (``TARGETS``), all strings; ``meetings(seed=0)`` yields the same records lazily and
forever (a simulated user); ``example(record, target)`` splits a record into ``(x, y)`` for a
learner, turning ``"?"`` into a missing value.

Examples
--------
>>> from examples.calendar_assistant.synth import DURATIONS, FEATURES, example, generate
>>> rows = generate(n=5, seed=1)
>>> len(rows), len(FEATURES)
(5, 32)
>>> rows == generate(n=5, seed=1)
True
>>> x, y = example(rows[0], "duration")
>>> y in DURATIONS and "duration" not in x and len(x) <= 32
True
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Iterator
from typing import Any

__all__ = [
    "DAYS",
    "DRIFT_AT",
    "DURATIONS",
    "FEATURES",
    "TARGETS",
    "START_TIMES",
    "example",
    "generate",
    "meetings",
]

DAYS = ["mon", "tue", "wed", "thu", "fri", "sat"]
DURATIONS = ["15", "30", "45", "60", "75", "90", "105", "120", "150", "180", "240", "300", "480"]
START_TIMES = [f"{h:02d}:{m:02d}" for h in range(8, 18) for m in (0, 30)]
DRIFT_AT = (537, 1074, 1521)
TARGETS = ["day_of_week", "duration", "start_time", "location"]

FEATURES = [
    # low-cardinality flags / small enums (10)
    "lunchtime",
    "single_person",
    "attendees_known",
    "required",
    "cmu_attendee",
    "position_class",
    "recurring",
    "has_sponsor",
    "requested_by_user",
    "morning_person",
    # medium enums (15)
    "event_type",
    "department",
    "group",
    "position",
    "seniority",
    "n_attendees",
    "prev_day",
    "prev_duration",
    "prev_start_time",
    "prev_location_type",
    "building",
    "topic",
    "requester_position",
    "week_of_term",
    "lead_time",
    # high-cardinality, name-like, open vocabularies (7)
    "attendee",
    "second_attendee",
    "requester",
    "sponsor",
    "project",
    "prev_location",
    "attendee_office",
]
assert len(FEATURES) == 32

_POSITIONS = ["faculty", "grad-student", "undergrad", "staff", "visitor", "funding-agency", "admin"]
_POSITION_P = [0.28, 0.3, 0.08, 0.12, 0.1, 0.05, 0.07]
_DEPARTMENTS = [
    "cs", "robotics", "ece", "math", "psych", "philosophy", "stat", "business", "english",
    "physics", "external", "dean-office",
]  # fmt: skip
_BUILDINGS = ["wean", "doherty", "newell-simon", "hamerschlag", "baker", "porter", "cyert", "off"]
_TOPICS = [
    "ml", "planning", "vision", "speech", "systems", "theory", "hci", "nlp", "robots", "budget",
    "hiring", "teaching",
]  # fmt: skip
_EVENTS = [
    ("meeting", 0.46), ("seminar", 0.08), ("class", 0.08), ("lunch", 0.06), ("call", 0.07),
    ("visitor-talk", 0.05), ("defense", 0.02), ("review", 0.03), ("trip", 0.03),
    ("appointment", 0.05), ("committee", 0.05), ("interview", 0.02),
]  # fmt: skip
_DUR_MARGINAL = [0.03, 0.36, 0.06, 0.31, 0.03, 0.08, 0.01, 0.05, 0.02, 0.02, 0.01, 0.005, 0.015]
_SYLLABLES = [
    "ka", "ro", "mi", "tel", "san", "ber", "lo", "vin", "da", "shu", "ne", "gor", "pa", "li", "zen",
    "mar", "to", "ric", "hal", "wen", "co", "bri", "ya", "sto",
]  # fmt: skip


def _weighted(rng: random.Random, items: list, weights: list[float]) -> Any:
    return rng.choices(items, weights=weights, k=1)[0]


class _Person:
    __slots__ = (
        "name", "position", "department", "group", "office", "building", "known", "day",
        "duration", "slot", "sponsor", "project", "weight",
    )  # fmt: skip


class _Calendar:
    """The hidden state of one simulated user."""

    def __init__(self, seed: int, noise: float, drift_at: list[int]) -> None:
        self.rng = random.Random(seed)
        self.noise = noise
        self.drift_at = sorted(drift_at)
        self.people: list[_Person] = []
        self.cum_weights: list[float] = []
        self.names: set[str] = set()
        self.last: dict[str, dict[str, str]] = {}  # attendee -> targets of last meeting
        self.t = 0
        self.term = 0
        self.day_counter = 0
        rng = self.rng
        self.groups = [self._word(2) + "-group" for _ in range(22)]
        self.sponsors = [self._word(2).upper() for _ in range(6)]
        self.projects = [self._word(3) for _ in range(10)]
        self._redraw_rules(first=True)
        for _ in range(25):
            self._new_person()
        rng.random()

    # -- vocabulary -------------------------------------------------------
    def _word(self, k: int) -> str:
        return "".join(self.rng.choice(_SYLLABLES) for _ in range(k))

    def _new_person(self) -> _Person:
        rng = self.rng
        p = _Person()
        name = self._word(rng.choice([2, 3]))
        while name in self.names:
            name = self._word(3)
        self.names.add(name)
        p.name = name
        p.position = _weighted(rng, _POSITIONS, _POSITION_P)
        p.department = (
            rng.choice(_DEPARTMENTS[:4]) if rng.random() < 0.6 else rng.choice(_DEPARTMENTS)
        )
        p.group = rng.choice(self.groups[: 8 + len(self.people) // 20])
        p.building = _weighted(rng, _BUILDINGS, [5, 3, 2, 1, 1, 1, 1, 2])
        p.office = f"{p.building}-{rng.randint(1, 8)}{rng.randint(0, 99):02d}"
        p.known = rng.random() < 0.7
        p.day = self._habit_day(p)
        p.duration = self._habit_duration(p.position)
        p.slot = rng.choice([2, 4, 6, 8, 10, 12, 14, 16])
        p.sponsor = rng.choice(self.sponsors) if p.position == "funding-agency" else ""
        # new projects keep appearing
        if rng.random() < 0.15:
            self.projects.append(self._word(3))
        p.project = rng.choice(self.projects[-12:])
        p.weight = 1.0 / (len(self.people) + 1) ** 1.1  # Zipf by order of appearance
        self.people.append(p)
        self.cum_weights.append((self.cum_weights[-1] if self.cum_weights else 0.0) + p.weight)
        return p

    def _habit_day(self, p: _Person) -> int:
        if self.rng.random() < 0.75:
            return self.group_day[p.group]
        return self.rng.choice([0, 1, 2, 3, 4])

    def _habit_duration(self, position: str) -> str:
        table = {
            "faculty": ["60", "60", "30", "90"],
            "grad-student": ["30", "30", "60", "45"],
            "undergrad": ["30", "15", "30", "30"],
            "staff": ["30", "60", "15", "30"],
            "visitor": ["60", "45", "30", "60"],
            "funding-agency": ["120", "180", "240", "60"],
            "admin": ["30", "15", "60", "30"],
        }
        return self.rng.choice(table[position])

    def _redraw_rules(self, first: bool = False) -> None:
        """A semester boundary: some rules change (all are drawn at the start)."""
        rng = self.rng
        if first:
            self.group_day = {g: rng.choice([0, 1, 2, 3, 4]) for g in self.groups}
        else:
            for g in rng.sample(self.groups, k=len(self.groups) // 2):
                self.group_day[g] = rng.choice([0, 1, 2, 3, 4])
            for p in self.people:
                if rng.random() < 0.3:
                    p.day = self._habit_day(p)
                if rng.random() < 0.15:
                    p.duration = self._habit_duration(p.position)
        self.class_days = rng.choice([(1, 3), (0, 2), (0, 2, 4), (1, 3)])
        self.class_duration = rng.choice(["75", "90", "60"])
        self.class_slot = rng.choice([3, 6, 9, 12])
        self.class_room = (
            f"{rng.choice(_BUILDINGS[:4])}-{rng.randint(1, 5)}{rng.randint(0, 99):02d}"
        )
        self.seminar_day = rng.choice([1, 2, 3])
        self.committee_day = rng.choice([0, 2, 4])

    # -- one appointment --------------------------------------------------
    def _attendee(self) -> _Person:
        rng = self.rng
        p_new = 0.12 / (1.0 + self.t / 600.0) + 0.01
        if rng.random() < p_new:
            return self._new_person()
        r = rng.random() * self.cum_weights[-1]
        return self.people[bisect.bisect_left(self.cum_weights, r)]

    def next(self) -> dict[str, str]:
        rng = self.rng
        if self.term < len(self.drift_at) and self.t >= self.drift_at[self.term]:
            self.term += 1
            self._redraw_rules()
        self.t += 1
        event = _weighted(rng, [e for e, _ in _EVENTS], [w for _, w in _EVENTS])
        a = self._attendee()
        second = self._attendee() if rng.random() < 0.35 else None
        requester = a if rng.random() < 0.6 else self._attendee()
        n_att = 1 if second is None else rng.choice([2, 3, 4, 6, 10])
        if event in ("seminar", "visitor-talk", "class"):
            n_att = rng.choice([10, 20, 40])

        # ---- the hidden rules -------------------------------------------------
        slot = a.slot
        if event == "class":
            day = rng.choice(self.class_days)
            duration, slot, location = self.class_duration, self.class_slot, self.class_room
        elif event == "seminar":
            day, duration, slot, location = self.seminar_day, "60", 14, "wean-5409"
        elif event == "lunch":
            day = a.day if rng.random() < 0.5 else rng.choice([0, 1, 2, 3, 4])
            duration, slot, location = rng.choice(["60", "60", "90"]), 8, "faculty-club"
        elif event == "call":
            day, duration, location = a.day, rng.choice(["15", "30", "30"]), "office"
        elif event == "visitor-talk":
            day, duration, location = rng.choice([1, 2, 3]), "60", "newell-simon-1507"
            slot = 12
        elif event == "defense":
            day, duration, location = (
                rng.choice([0, 1, 2, 3, 4]),
                rng.choice(["120", "180"]),
                "wean-4623",
            )
        elif event == "review":
            day, duration = a.day, rng.choice(["240", "300", "480", "180"])
            location, slot = "dean-conference", 2
        elif event == "trip":
            day, duration, location = rng.choice([4, 4, 0, 5]), "480", "travel"
            slot = 0
        elif event == "appointment":
            day, duration, location = (
                rng.choice([0, 1, 2, 3, 4, 5]),
                rng.choice(["45", "60"]),
                "off-campus",
            )
        elif event == "committee":
            day, duration, location = self.committee_day, "90", "dean-conference"
        elif event == "interview":
            day, duration, location = a.day, "45", "office"
        else:  # meeting
            day, duration = a.day, a.duration
            if a.position in ("grad-student", "undergrad", "visitor", "funding-agency"):
                location = "office"
            else:
                location = a.office if rng.random() < 0.7 else "office"
            if second is not None and second.position == "faculty":
                duration = "60" if duration in ("30", "45") else duration
        if a.position == "funding-agency" and event == "meeting":
            duration = a.duration
        targets = {
            "day_of_week": DAYS[day],
            "duration": duration,
            "start_time": START_TIMES[min(slot + rng.choice([0, 0, 0, 1]), len(START_TIMES) - 1)],
            "location": location,
        }
        for key in TARGETS:  # label noise
            if rng.random() < self.noise:
                targets[key] = self._noisy(key)

        # ---- the observed attributes -------------------------------------------
        prev = self.last.get(a.name)
        unknown = not a.known and rng.random() < 0.6

        def hide(value: str, p: float = 0.05) -> str:
            return "?" if (unknown or rng.random() < p) else value

        early = a.slot < 8
        rec = {
            "lunchtime": "yes" if slot in (8, 9) else "no",
            "single_person": "yes" if second is None else "no",
            "attendees_known": "yes" if a.known else "no",
            "required": rng.choice(["yes", "no"]) if event != "class" else "yes",
            "cmu_attendee": "no"
            if a.department == "external" or a.position == "visitor"
            else "yes",
            "position_class": hide(
                "student"
                if "student" in a.position or a.position == "undergrad"
                else "faculty"
                if a.position == "faculty"
                else "other"
            ),
            "recurring": "yes"
            if event in ("class", "seminar", "committee") or rng.random() < 0.1
            else "no",
            "has_sponsor": "yes" if a.sponsor else "no",
            "requested_by_user": rng.choice(["yes", "no"]),
            "morning_person": hide("yes" if early else "no", 0.1),
            "event_type": event if rng.random() > 0.03 else "?",
            "department": hide(a.department),
            "group": hide(a.group, 0.08),
            "position": hide(a.position),
            "seniority": hide(rng.choice(["junior", "senior", "mid"]), 0.1),
            "n_attendees": str(n_att) if n_att < 6 else "many",
            "prev_day": prev["day_of_week"] if prev else "?",
            "prev_duration": prev["duration"] if prev else "?",
            "prev_start_time": prev["start_time"] if prev else "?",
            "prev_location_type": (
                "?" if not prev else "office" if prev["location"] == "office" else "room"
            ),
            "building": hide(a.building),
            "topic": rng.choice(_TOPICS) if rng.random() < 0.8 else "?",
            "requester_position": requester.position if requester.known else "?",
            "week_of_term": str(min(15, (self.t % 450) // 30)),
            "lead_time": rng.choice(["same-day", "1-day", "week", "month"]),
            "attendee": a.name,
            "second_attendee": second.name if second is not None else "?",
            "requester": requester.name,
            "sponsor": a.sponsor or "?",
            "project": hide(a.project, 0.15),
            "prev_location": prev["location"] if prev else "?",
            "attendee_office": hide(a.office, 0.1),
        }
        self.last[a.name] = dict(targets)
        rec.update(targets)
        return rec

    def _noisy(self, key: str) -> str:
        rng = self.rng
        if key == "day_of_week":
            return _weighted(rng, DAYS, [1, 1, 1, 1, 1, 0.1])
        if key == "duration":
            return _weighted(rng, DURATIONS, _DUR_MARGINAL)
        if key == "start_time":
            return rng.choice(START_TIMES)
        return rng.choice(["office", "wean-5409", "faculty-club", "dean-conference"])


def meetings(
    seed: int = 0,
    *,
    noise: float = 0.12,
    drift_at: list[int] | None = None,
) -> Iterator[dict[str, str]]:
    """Yield appointments forever (a simulated user), oldest first.

    Parameters
    ----------
    seed
        The stream is a pure function of ``seed`` and the other arguments.
    noise
        Probability that a target is replaced by a draw from its marginal distribution.
    drift_at
        Indices at which the hidden rules change; default ``DRIFT_AT`` (30%, 60% and 85% of
        1790 appointments, the size of the thesis' CAP log), whatever the length read.
    """
    if not 0.0 <= noise <= 1.0:
        raise ValueError("noise must be in [0, 1]")
    cal = _Calendar(seed, noise, list(DRIFT_AT if drift_at is None else drift_at))
    while True:
        yield cal.next()


def generate(
    n: int = 1790,
    seed: int = 0,
    *,
    noise: float = 0.12,
    drift_at: list[int] | None = None,
) -> list[dict[str, str]]:
    """``n`` appointments of one simulated user, in chronological order.

    Each record holds the 32 attributes of ``FEATURES`` and the 4 ``TARGETS``, all strings
    (``"?"`` = unknown). Same arguments, same list. See the module docstring for the model.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    return list(itertools.islice(meetings(seed, noise=noise, drift_at=drift_at), n))


def example(record: dict[str, str], target: str) -> tuple[dict[str, str | None], str]:
    """Split a record into ``(x, y)``: the 32 attributes (``"?"`` dropped) and the target."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    x = {k: record[k] for k in FEATURES if record.get(k, "?") != "?"}
    return x, record[target]
