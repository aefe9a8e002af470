"""Chorus calendar assistant: suggests a meeting's duration, day, start time and location.

Each target has its own Chorus model (online bagging of Hoeffding trees by default); the user's
accepted or corrected values go back to Chorus as delayed labels. Start it with
``python -m examples.calendar_assistant`` (Chorus on the embedded store + the assistant).
"""

from .server import AssistantSettings, create_app

__all__ = ["AssistantSettings", "create_app"]
