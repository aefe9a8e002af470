"""Chorus calendar assistant: suggests a meeting's duration, day, start time and location.

Each user has their own four Chorus models (one per suggested field, online bagging of Hoeffding
trees by default); the user's accepted or corrected values go back to Chorus as delayed labels.
Start it with ``python -m examples.calendar_assistant`` (Chorus on the embedded store + the
assistant). ``synth`` (the synthetic calendar generator) imports nothing of the web app, so the
benchmarks can use it without FastAPI being loaded.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AssistantSettings", "create_app"]


def __getattr__(name: str) -> Any:
    # The web app is imported on first use only: ``from examples.calendar_assistant import synth``
    # (benchmarks/thesis.py) must not pull in FastAPI and the HTTP client.
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
