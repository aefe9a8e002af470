"""Prequential scores of served predictions: accuracy, Cohen's kappa and windowed accuracy.

The one metrics module of the service (the registry's per-model metrics and the replay
scoreboard both use :class:`Prequential`). It computes what ``river.metrics.Accuracy``,
``river.metrics.CohenKappa`` and ``river.utils.Rolling(Accuracy)`` compute, in O(1) per pair, without
importing river's metrics (which import scipy: about 0.7 s of the server's start).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import Any


class Prequential:
    """Accuracy, Cohen's kappa and accuracy over the last ``window`` (true, predicted) pairs.

    The state needed to rebuild the scores (the confusion cells and the last ``window`` pairs)
    round-trips through :meth:`to_json` / :meth:`from_json`.

    Parameters
    ----------
    window
        Size of the windowed accuracy.

    Examples
    --------
    >>> m = Prequential(window=2)
    >>> for t, p in [("a", "a"), ("a", "b"), ("b", "b"), ("b", "b")]:
    ...     m.update(t, p)
    >>> m.values()
    {'accuracy': 0.75, 'kappa': 0.5, 'window_accuracy': 1.0}
    >>> Prequential.from_json(m.to_json(), window=2).values() == m.values()
    True
    """

    def __init__(self, window: int = 1000) -> None:
        self.window = window
        self.cells: Counter = Counter()  # (true, predicted) -> count
        self.recent: deque = deque(maxlen=window)
        self.n_scored = 0
        self._correct = 0
        self._true: Counter = Counter()  # confusion-matrix row sums
        self._pred: Counter = Counter()  # column sums
        self._chance = 0  # sum over classes of row sum x column sum (kappa's chance agreement)
        self._recent_correct = 0

    def update(self, y_true: Any, y_pred: Any) -> None:
        """Score one prediction ``y_pred`` of ``y_true``."""
        self._count(y_true, y_pred, 1)
        self._push_recent(y_true, y_pred)

    def update_many(self, y_true: list, y_pred: list) -> None:
        """:meth:`update` of every pair in order (the same state), counting each distinct pair
        once: a batch of 1,000 costs about what 100 single updates do.

        Examples
        --------
        >>> a, b = Prequential(window=3), Prequential(window=3)
        >>> pairs = [("x", "x"), ("x", "y"), ("y", "y"), ("x", "x")]
        >>> for t, p in pairs:
        ...     a.update(t, p)
        >>> b.update_many([t for t, _ in pairs], [p for _, p in pairs])
        >>> a.values() == b.values() and a.to_json() == b.to_json()
        True
        """
        pairs = list(zip(y_true, y_pred, strict=True))
        for (t, p), n in Counter(pairs).items():
            self._count(t, p, n)
        if len(pairs) < self.window:
            for t, p in pairs:
                self._push_recent(t, p)
            return
        self.recent.clear()
        self.recent.extend(pairs[len(pairs) - self.window :])
        self._recent_correct = sum(t == p for t, p in self.recent)

    def _count(self, y_true: Any, y_pred: Any, n: int) -> None:
        self.cells[(y_true, y_pred)] += n
        self.n_scored += n
        self._correct += n * (y_true == y_pred)
        self._chance += n * self._pred[y_true]  # row y_true grows by n
        self._true[y_true] += n
        self._chance += n * self._true[y_pred]  # column y_pred grows by n
        self._pred[y_pred] += n

    def _push_recent(self, y_true: Any, y_pred: Any) -> None:
        if len(self.recent) == self.window:
            t, p = self.recent[0]
            self._recent_correct -= t == p
        self.recent.append((y_true, y_pred))
        self._recent_correct += y_true == y_pred

    def values(self) -> dict[str, float | None]:
        """``accuracy``, ``kappa`` and ``window_accuracy`` (``None`` before anything was scored)."""
        n = self.n_scored
        if not n:
            return {"accuracy": None, "kappa": None, "window_accuracy": None}
        p0 = self._correct / n
        pe = self._chance / (n * n)
        kappa = (p0 - pe) / (1 - pe) if pe != 1 else 0.0
        return {
            "accuracy": p0,
            "kappa": kappa if math.isfinite(kappa) else None,
            "window_accuracy": self._recent_correct / len(self.recent),
        }

    def to_json(self) -> dict[str, Any]:
        """JSON-able state (stored in snapshot headers)."""
        return {
            "cells": [[t, p, n] for (t, p), n in self.cells.items()],
            "recent": [list(pair) for pair in self.recent],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None, window: int = 1000) -> Prequential:
        """Rebuild from :meth:`to_json` output (``None``: empty)."""
        m = cls(window)
        if not data:
            return m
        for t, p, n in data.get("cells", []):
            m._count(t, p, n)
        for t, p in data.get("recent", [])[-window:]:
            m._push_recent(t, p)
        return m
