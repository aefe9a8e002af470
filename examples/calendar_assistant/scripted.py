"""A scripted person with steady habits: the browser test's user and the model-choice benchmark's.

The day depends on the attendees' group; duration, start time and location on the kind of event,
with a lunch-time and a theory-group exception; role, department, attendees and "I asked for it" are
noise. ``scripted_meetings(n, seed)`` gives the descriptions (the dialog's fields), and
``preferences(meeting)`` what this person always chooses for it. The stream of ``n`` meetings is
a prefix of the stream of ``n + k`` (one random draw sequence per meeting).

Examples
--------
>>> first = scripted_meetings(3, seed=7)
>>> first == scripted_meetings(10, seed=7)[:3]
True
>>> sorted(preferences(first[0]))
['day_of_week', 'duration', 'location', 'start_time']
"""

from __future__ import annotations

import random

KINDS = ("meeting", "seminar", "class", "interview")
GROUPS = ("ai-group", "systems-group", "theory-group")
# people belong to groups, and groups to departments, as in a real calendar
MEMBERS = {
    "ai-group": ("ann", "bob", "carla"),
    "systems-group": ("dev", "eli", "fay"),
    "theory-group": ("gus", "hana", "ivo"),
}
DEPARTMENT = {"ai-group": "cs", "systems-group": "ece", "theory-group": "math"}


def preferences(meeting: dict) -> dict[str, str]:
    """What this user always wants: learnable from the form; role, department, attendees are noise."""
    kind, group = meeting["event_type"], meeting["group"]
    duration = {"meeting": "30", "seminar": "60", "class": "90", "interview": "45"}[kind]
    if kind == "meeting" and group == "theory-group":
        duration = "60"  # the theory group always overruns
    day = {"ai-group": "mon", "systems-group": "wed", "theory-group": "fri"}[group]
    start = {"meeting": "10:00", "seminar": "15:00", "class": "09:00", "interview": "14:00"}[kind]
    if meeting["lunchtime"]:
        start = "12:00"
    location = {
        "meeting": "office",
        "seminar": "wean-5409",
        "class": "doherty-286",
        "interview": "office",
    }[kind]
    return {"duration": duration, "day_of_week": day, "start_time": start, "location": location}


def scripted_meetings(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for group in (rng.choice(GROUPS) for _ in range(n)):
        kind = rng.choice(KINDS)
        people = rng.sample(MEMBERS[group], rng.randint(1, 3))
        out.append(
            {
                "title": f"{kind.capitalize()} with {people[0].capitalize()}",
                "event_type": kind,
                "attendees": ", ".join(people),
                "position": rng.choice(("faculty", "grad-student", "staff")),
                "department": DEPARTMENT[group],
                "group": group,
                "lunchtime": rng.random() < 0.25,
                "requested_by_user": rng.random() < 0.5,
            }
        )
    return out
