"""What a meeting looks like to the assistant: its fields, their limits, and the features.

A meeting has a **description** (title, kind, attendees and a few optional details: the main
attendee's group, role and department, topic, flags) and four **choices** that Chorus suggests and
the user accepts or edits: the *duration*, the *day* (the meeting's date, whose weekday is the label),
the *start time* and the *location*. Each choice is predicted by its own Chorus model from the
description's categorical features (all values are strings).

Both are validated here, once, for the server (a 422 naming the field) and described for the page
(``LIMITS``), which checks the same bounds before sending. Feature names and values follow the
synthetic calendar generator (``examples.calendar_assistant.synth``), so the simulated demo user
warms exactly the features the page fills in.

Examples
--------
>>> details = Details(event_type="Seminar", attendees="Ann, bob", lunchtime=True)
>>> details.features()["attendee"], details.features()["n_attendees"]
('ann', '2')
>>> choice = Choice(date="2026-11-23", start_time="9:30", duration="45", location=" Wean 5409 ")
>>> choice.labels()
{'duration': '45', 'day_of_week': 'mon', 'start_time': '09:30', 'location': 'wean 5409'}
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: The four things the assistant suggests, in display order (one Chorus model each, per user).
TARGETS: tuple[str, ...] = ("duration", "day_of_week", "start_time", "location")

TARGET_LABELS: dict[str, str] = {
    "duration": "Duration",
    "day_of_week": "Day",
    "start_time": "Start",
    "location": "Location",
}

DAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

EVENT_KINDS: tuple[str, ...] = (
    "meeting",
    "seminar",
    "class",
    "lunch",
    "call",
    "visitor-talk",
    "defense",
    "review",
    "trip",
    "appointment",
    "committee",
    "interview",
)
POSITIONS: tuple[str, ...] = (
    "faculty",
    "grad-student",
    "undergrad",
    "staff",
    "visitor",
    "funding-agency",
    "admin",
)
DEPARTMENTS: tuple[str, ...] = (
    "cs",
    "robotics",
    "ece",
    "math",
    "psych",
    "philosophy",
    "stat",
    "business",
    "english",
    "physics",
    "external",
    "dean-office",
)
TOPICS: tuple[str, ...] = (
    "ml",
    "planning",
    "vision",
    "speech",
    "systems",
    "theory",
    "hci",
    "nlp",
    "robots",
    "budget",
    "hiring",
    "teaching",
)

#: Bounds shared by the server's validation and the page's (served in ``/api/config``).
LIMITS: dict[str, int] = {
    "title_chars": 120,
    "name_chars": 40,  # one attendee, a group
    "attendees": 20,
    "location_chars": 60,
    "duration_min": 5,
    "duration_max": 720,
}

#: Values offered in the page's pick lists (the user may type others within the limits).
SUGGESTED_VALUES: dict[str, list[str]] = {
    "duration": ["15", "30", "45", "60", "90", "120", "180", "240"],
    "start_time": [f"{h:02d}:{m:02d}" for h in range(7, 20) for m in (0, 30)],
    "location": ["office", "wean-5409", "doherty-286", "newell-simon-1507", "off-campus"],
}

HHMM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
NAME = re.compile(r"^[\w .'&/-]+$")  # a person's or group's name: letters, digits, a few marks
PRINTABLE = re.compile(r"^[^\x00-\x1f\x7f]+$")


def _opt(choices: tuple[str, ...]) -> Any:
    return Literal[("", *choices)]  # type: ignore[valid-type]


class Details(BaseModel):
    """The description of a meeting: what the four models predict from.

    Unknown keys are refused (a typo must not silently become a missing feature).
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    title: str = Field("", max_length=LIMITS["title_chars"])
    event_type: Literal[EVENT_KINDS]  # type: ignore[valid-type]
    attendees: str = Field("", max_length=LIMITS["attendees"] * (LIMITS["name_chars"] + 2))
    group: str = Field("", max_length=LIMITS["name_chars"])
    position: _opt(POSITIONS) = ""  # type: ignore[valid-type]
    department: _opt(DEPARTMENTS) = ""  # type: ignore[valid-type]
    topic: _opt(TOPICS) = ""  # type: ignore[valid-type]
    lunchtime: bool = False
    requested_by_user: bool = False
    recurring: bool = False

    @field_validator("event_type", "position", "department", "topic", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("title")
    @classmethod
    def _printable(cls, value: str) -> str:
        if value and not PRINTABLE.match(value):
            raise ValueError("control characters are not allowed")
        return value

    @field_validator("group")
    @classmethod
    def _group(cls, value: str) -> str:
        if value and not NAME.match(value):
            raise ValueError("letters, digits, spaces and . ' & / - only")
        return value.lower()

    @field_validator("attendees")
    @classmethod
    def _attendees(cls, value: str) -> str:
        people = [p.strip().lower() for p in value.split(",") if p.strip()]
        if len(people) > LIMITS["attendees"]:
            raise ValueError(f"at most {LIMITS['attendees']} attendees")
        for person in people:
            if len(person) > LIMITS["name_chars"] or not NAME.match(person):
                raise ValueError(
                    f"{person[:50]!r}: a name is 1-{LIMITS['name_chars']} letters, digits, "
                    "spaces and . ' & / -"
                )
        return ", ".join(people)

    def people(self) -> list[str]:
        return [p for p in self.attendees.split(", ") if p]

    def features(self) -> dict[str, str]:
        """The feature dict sent to every model of the user; empty fields are left out (missing).

        The attendee list becomes ``attendee`` and ``second_attendee`` (the first two names),
        ``n_attendees`` ("1"... "5", then "many") and ``single_person``. The title is not a
        feature: it is free text for the person, not a category.
        """
        features: dict[str, str] = {"event_type": self.event_type}
        people = self.people()
        if people:
            features["attendee"] = people[0]
            if len(people) > 1:
                features["second_attendee"] = people[1]
            features["n_attendees"] = str(len(people)) if len(people) < 6 else "many"
            features["single_person"] = "yes" if len(people) == 1 else "no"
        for name in ("group", "position", "department", "topic"):
            if value := getattr(self, name):
                features[name] = value
        for name in ("lunchtime", "requested_by_user", "recurring"):
            features[name] = "yes" if getattr(self, name) else "no"
        return features


class Choice(BaseModel):
    """The four values the user finally chose: each becomes its model's (delayed) label.

    ``day_of_week`` is optional: the day is the ``date``'s weekday; when given it must be a week
    day (``mon`` ... ``sun``) and agree with the date.
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    date: dt.date
    start_time: str
    duration: int = Field(ge=LIMITS["duration_min"], le=LIMITS["duration_max"])
    location: str = Field(min_length=1, max_length=LIMITS["location_chars"])
    day_of_week: str | None = None

    @field_validator("duration", mode="before")
    @classmethod
    def _minutes(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("a number of minutes")
        if isinstance(value, str) and value.strip().isdigit():
            return int(value.strip())
        if isinstance(value, str):
            raise ValueError(f"{value[:30]!r} is not a whole number of minutes")
        return value

    @field_validator("start_time")
    @classmethod
    def _hhmm(cls, value: str) -> str:
        match = HHMM.match(value)
        if not match:
            raise ValueError(f"{value[:30]!r} is not a time HH:MM (00:00-23:59)")
        return f"{int(match.group(1)):02d}:{match.group(2)}"

    @field_validator("location")
    @classmethod
    def _location(cls, value: str) -> str:
        if not PRINTABLE.match(value):
            raise ValueError("control characters are not allowed")
        return " ".join(value.lower().split())

    @field_validator("day_of_week")
    @classmethod
    def _day(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.strip().lower()
        if text in _DAY_NAMES:
            return DAYS[_DAY_NAMES.index(text)]
        if text not in DAYS:
            raise ValueError(f"{value[:30]!r} is not a week day ({', '.join(DAYS)})")
        return text

    @model_validator(mode="after")
    def _consistent(self) -> Choice:
        weekday = DAYS[self.date.weekday()]
        if self.day_of_week is not None and self.day_of_week != weekday:
            raise ValueError(f"day_of_week: {self.day_of_week} but {self.date} is a {weekday}")
        hours, minutes = map(int, self.start_time.split(":"))
        if hours * 60 + minutes + self.duration > 24 * 60:
            raise ValueError(
                f"duration: a {self.duration} min meeting at {self.start_time} ends after midnight"
            )
        return self

    def labels(self) -> dict[str, str]:
        """Each model's label as a string: ``{"duration": "45", "day_of_week": "mon", ...}``."""
        return {
            "duration": str(self.duration),
            "day_of_week": DAYS[self.date.weekday()],
            "start_time": self.start_time,
            "location": self.location,
        }


_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def page_config() -> dict[str, Any]:
    """What the page builds its form from (choices, limits, labels)."""
    return {
        "targets": list(TARGETS),
        "labels": TARGET_LABELS,
        "days": list(DAYS),
        "kinds": list(EVENT_KINDS),
        "positions": list(POSITIONS),
        "departments": list(DEPARTMENTS),
        "topics": list(TOPICS),
        "limits": LIMITS,
        "suggested_values": SUGGESTED_VALUES,
    }
