"""What a meeting looks like to the assistant: the form's fields, the targets, and the features.

The form collects a handful of descriptive attributes; each becomes one categorical feature (all
values are strings, so Chorus treats them as categories). Each target -- duration, day of week,
start time, location -- is predicted by its own Chorus model from the same features.

Feature names and values follow the synthetic calendar generator (``examples.calendar_assistant.synth``, modelled on the
CAP data of the thesis), so the "simulated user" warms exactly the features the form fills in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The four things the assistant suggests, in display order.
TARGETS: tuple[str, ...] = ("duration", "day_of_week", "start_time", "location")

TARGET_LABELS: dict[str, str] = {
    "duration": "Duration (min)",
    "day_of_week": "Day of week",
    "start_time": "Start time",
    "location": "Location",
}

#: Values offered in the page's pick lists (the user may type any other value).
TARGET_CHOICES: dict[str, list[str]] = {
    "duration": ["15", "30", "45", "60", "75", "90", "120", "180", "240", "480"],
    "day_of_week": ["mon", "tue", "wed", "thu", "fri", "sat"],
    "start_time": [f"{h:02d}:{m:02d}" for h in range(8, 18) for m in (0, 30)],
    "location": [
        "office",
        "wean-5409",
        "dean-conference",
        "faculty-club",
        "doherty-286",
        "newell-simon-1507",
        "off-campus",
        "travel",
    ],
}

#: The form: name (= feature name), label, kind ("select", "text", "checkbox"), choices.
FORM_FIELDS: list[dict[str, Any]] = [
    {
        "name": "event_type",
        "label": "Kind of event",
        "kind": "select",
        "choices": [
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
        ],
    },
    {
        "name": "attendees",
        "label": "Attendees (comma separated)",
        "kind": "text",
        "choices": [],
        "placeholder": "ann, bob",
    },
    {
        "name": "position",
        "label": "Main attendee's role",
        "kind": "select",
        "choices": [
            "faculty",
            "grad-student",
            "undergrad",
            "staff",
            "visitor",
            "funding-agency",
            "admin",
        ],
    },
    {
        "name": "department",
        "label": "Their department",
        "kind": "select",
        "choices": [
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
        ],
    },
    {
        "name": "group",
        "label": "Their group",
        "kind": "text",
        "choices": [],
        "placeholder": "vision-group",
    },
    {
        "name": "topic",
        "label": "Topic",
        "kind": "select",
        "choices": [
            "",
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
        ],
    },
    {"name": "lunchtime", "label": "Near lunch time", "kind": "checkbox", "choices": []},
    {"name": "requested_by_user", "label": "I asked for it", "kind": "checkbox", "choices": []},
    {"name": "recurring", "label": "Recurring", "kind": "checkbox", "choices": []},
]


def attendee_count(n: int) -> str:
    """Head count as the generator writes it: "1" ... "5", then "many"."""
    return str(n) if n < 6 else "many"


def form_to_features(form: Mapping[str, Any]) -> dict[str, str]:
    """Turn the page's form values into the feature dict sent to every Chorus model.

    Empty fields are left out (missing values). The attendee list becomes ``attendee`` and
    ``second_attendee`` (the first two names), ``n_attendees`` and ``single_person``.

    >>> form_to_features({"event_type": "Seminar", "attendees": "Ann, bob", "lunchtime": True})
    {'event_type': 'seminar', 'attendee': 'ann', 'second_attendee': 'bob', 'n_attendees': '2', 'single_person': 'no', 'lunchtime': 'yes'}
    """
    features: dict[str, str] = {}
    for spec in FORM_FIELDS:
        name = spec["name"]
        value = form.get(name)
        if spec["kind"] == "checkbox":
            if value is not None:
                features[name] = "yes" if _truthy(value) else "no"
        elif name == "attendees":
            people = [p.strip().lower() for p in str(value or "").split(",") if p.strip()]
            if people:
                features["attendee"] = people[0]
                if len(people) > 1:
                    features["second_attendee"] = people[1]
                features["n_attendees"] = attendee_count(len(people))
                features["single_person"] = "yes" if len(people) == 1 else "no"
        elif value not in (None, ""):
            features[name] = str(value).strip().lower()
    return features


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def normalise_label(target: str, value: Any) -> str:
    """Canonical string form of a target value as typed by the user (" Mon" -> "mon")."""
    text = str(value).strip()
    if target in ("day_of_week", "location"):
        text = text.lower()
    return text
