"""Prequential scores of served predictions: accuracy, Cohen's kappa, windowed accuracy, and the
scores that do not flatter a model on imbalanced classes (balanced accuracy, G-mean, macro-F1,
per-class recall and precision, the confusion matrix), cumulative and over the window.

The one metrics module of the service (the registry's per-model metrics and the replay
scoreboard both use :class:`Prequential`). It computes what ``river.metrics.Accuracy``,
``CohenKappa``, ``BalancedAccuracy``, ``GeometricMean``, ``MacroF1`` and
``river.utils.Rolling(...)`` of them compute (``tests/test_metrics.py``), in O(1) per pair (the
class scores in O(classes) per read), without importing river's metrics (which import scipy:
about 0.7 s of the server's start).

On a stream with 6 % positives a model that never predicts them scores 0.94 accuracy; its
balanced accuracy is 0.5 and its G-mean 0. As river's, the class scores are over the classes
seen (as true or predicted labels): balanced accuracy averages the recall of the classes seen
as true labels; G-mean is the geometric mean of every class's recall (a class only ever
predicted, never true, counts as recall 0, so G-mean is 0 until every class predicted was
also seen true); macro-F1 averages each class's F1 (0 when its precision or recall is
undefined or 0).
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
    >>> {k: m.values()[k] for k in ("accuracy", "kappa", "window_accuracy")}
    {'accuracy': 0.75, 'kappa': 0.5, 'window_accuracy': 1.0}
    >>> Prequential.from_json(m.to_json(), window=2).values() == m.values()
    True

    The scores that do not flatter: a model that always says "no" on 1 positive in 10.

    >>> m = Prequential(window=5)
    >>> m.update_many(["yes"] + ["no"] * 9, ["no"] * 10)
    >>> v = m.values()
    >>> v["accuracy"], v["majority_rate"], v["balanced_accuracy"], v["g_mean"], v["macro_f1"]
    (0.9, 0.9, 0.5, 0.0, 0.4736842105263158)
    >>> m.per_class()["classes"][0]
    {'label': 'yes', 'support': 1, 'predicted': 0, 'recall': 0.0, 'precision': None}
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
        # the window's confusion cells, row and column sums (no zero entries)
        self._recent_cells: Counter = Counter()
        self._recent_true: Counter = Counter()
        self._recent_pred: Counter = Counter()

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
        self._recent_cells = Counter(self.recent)
        self._recent_true = Counter(t for t, _ in self.recent)
        self._recent_pred = Counter(p for _, p in self.recent)

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
            for counts, key in ((self._recent_cells, (t, p)), (self._recent_true, t),
                                (self._recent_pred, p)):  # fmt: skip
                counts[key] -= 1
                if not counts[key]:
                    del counts[key]
        self.recent.append((y_true, y_pred))
        self._recent_correct += y_true == y_pred
        self._recent_cells[(y_true, y_pred)] += 1
        self._recent_true[y_true] += 1
        self._recent_pred[y_pred] += 1

    def values(self) -> dict[str, float | None]:
        """``accuracy``, ``kappa``, ``window_accuracy``, ``majority_rate`` (the share of the most
        frequent true class: the accuracy of always predicting it), ``balanced_accuracy``,
        ``g_mean``, ``macro_f1`` and their ``window_`` twins over the last ``window`` pairs
        (every one ``None`` before anything was scored)."""
        n = self.n_scored
        if not n:
            return dict.fromkeys(SCORES)
        p0 = self._correct / n
        pe = self._chance / (n * n)
        kappa = (p0 - pe) / (1 - pe) if pe != 1 else 0.0
        ba, gm, f1 = class_scores(self.cells, self._true, self._pred)
        wba, wgm, wf1 = class_scores(self._recent_cells, self._recent_true, self._recent_pred)
        return {
            "accuracy": p0,
            "kappa": kappa if math.isfinite(kappa) else None,
            "window_accuracy": self._recent_correct / len(self.recent),
            "majority_rate": max(self._true.values()) / n,
            "balanced_accuracy": ba,
            "g_mean": gm,
            "macro_f1": f1,
            "window_balanced_accuracy": wba,
            "window_g_mean": wgm,
            "window_macro_f1": wf1,
        }

    def per_class(self) -> dict[str, list]:
        """Cumulative per-class figures, JSON-ready for labels of any type: ``classes``, one
        ``{"label", "support" (times true), "predicted" (times predicted), "recall",
        "precision"}`` per class seen, in the order first seen (a recall or precision whose
        count is 0 is ``None``), and ``confusion``, the confusion matrix's non-zero cells as
        ``[true, predicted, count]``."""
        out = []
        for c in _classes(self._true, self._pred):
            hit, t, p = self.cells.get((c, c), 0), self._true.get(c, 0), self._pred.get(c, 0)
            out.append({"label": c, "support": t, "predicted": p,
                        "recall": hit / t if t else None, "precision": hit / p if p else None})  # fmt: skip
        return {"classes": out, "confusion": [[t, p, n] for (t, p), n in self.cells.items()]}

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


SCORES = ("accuracy", "kappa", "window_accuracy", "majority_rate", "balanced_accuracy", "g_mean",
          "macro_f1", "window_balanced_accuracy", "window_g_mean", "window_macro_f1")  # fmt: skip


def _classes(true: Counter, pred: Counter) -> list:
    """The classes seen as true or predicted labels, in the order first seen as true, then
    those only predicted."""
    return list(true) + [c for c in pred if c not in true]


def class_scores(cells: Counter, true: Counter, pred: Counter) -> tuple[float, float, float]:
    """``(balanced accuracy, G-mean, macro-F1)`` of a confusion matrix (``cells``: (true,
    predicted) -> count, ``true`` / ``pred`` its row and column sums, no zero entries), as
    river's ``BalancedAccuracy``, ``GeometricMean`` and ``MacroF1`` (module doc)."""
    classes = _classes(true, pred)
    if not classes:
        return 0.0, 0.0, 0.0
    recall_sum = log_sum = f1_sum = 0.0
    zero_recall = False
    for c in classes:
        hit = cells.get((c, c), 0)
        t, p = true.get(c, 0), pred.get(c, 0)
        r = hit / t if t else 0.0
        if t:
            recall_sum += r
        if r > 0.0:
            log_sum += math.log(r)
        else:
            zero_recall = True
        pr = hit / p if p else 0.0
        if pr + r > 0.0:
            f1_sum += 2.0 * pr * r / (pr + r)
    g_mean = 0.0 if zero_recall else math.exp(log_sum / len(classes))
    return recall_sum / len(true), g_mean, f1_sum / len(classes)


def mcnemar(b: int, c: int) -> dict[str, Any]:
    """McNemar's paired test of two classifiers on the same examples: ``b`` examples only the
    first got right, ``c`` only the second. Two-sided p-value, exact binomial (``b + c`` < 25,
    where the chi-square approximation is poor) or chi-square with continuity correction.

    Examples
    --------
    >>> mcnemar(0, 0)["p_value"]
    1.0
    >>> r = mcnemar(1, 9)
    >>> r["method"], round(r["p_value"], 4)
    ('exact', 0.0215)
    >>> r = mcnemar(40, 70)
    >>> r["method"], round(r["p_value"], 4)
    ('chi2', 0.0057)
    """
    n = b + c
    if n == 0:
        return {"b": b, "c": c, "p_value": 1.0, "method": "exact"}
    if n < 25:
        k = min(b, c)
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
        return {"b": b, "c": c, "p_value": min(1.0, 2.0 * tail), "method": "exact"}
    chi2 = (abs(b - c) - 1.0) ** 2 / n
    return {"b": b, "c": c, "p_value": math.erfc(math.sqrt(chi2 / 2.0)), "method": "chi2"}
