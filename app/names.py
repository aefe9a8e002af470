"""The model-name rule, defined once (routes, registry, CLI, replay and the OpenAPI schema use it).

A name is 1-64 characters from ``A-Z a-z 0-9 _ . -`` (URL-unreserved, so it travels in a path
segment or a query string unescaped) that does not start with ``.``: ``.`` and ``..`` are path
segments a URL cannot carry as names (clients and proxies resolve them), and a leading dot hides a
file.
"""

from __future__ import annotations

import re

NAME_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$"
NAME_RE = re.compile(NAME_PATTERN)
NAME_RULE = "1-64 characters from A-Z a-z 0-9 _ . - not starting with '.'"


def name_from(text: str) -> str:
    """A valid model name made from ``text`` (e.g. a file's stem): other characters become
    ``-``, leading dots are dropped; ``"replay"`` if nothing is left."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", text).lstrip(".")[:64]
    return name or "replay"
