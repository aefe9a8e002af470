"""Diversity of an ensemble's members over a window of their predictions (Kuncheva & Whitaker
2003), and each member's accuracy on it.

For members ``i`` and ``k`` on the ``N`` examples both predicted, with ``N11`` both right, ``N00``
both wrong, ``N10`` only ``i`` right and ``N01`` only ``k`` right:

* disagreement ``(N01 + N10) / N`` — the share of examples on which exactly one is right;
* Q-statistic ``(N11 N00 - N01 N10) / (N11 N00 + N01 N10)`` — from -1 (they err on different
  examples) to 1 (on the same ones); undefined (``None``) when the denominator is 0;
* κ — Cohen's kappa of their *predicted labels*: ``(θ1 - θ2) / (1 - θ2)`` with ``θ1`` the share
  of examples they label alike and ``θ2 = Σ_c P_i(c) P_k(c)`` the agreement expected by chance
  from each one's label frequencies (the κ of Margineantu & Dietterich's κ-error diagrams);
  ``None`` when ``θ2 = 1``.

The ensemble's figure for each is the mean over the pairs where it is defined. Lower Q and κ
and higher disagreement mean more diverse members.

References
----------
Kuncheva, L. I. & Whitaker, C. J. (2003). Measures of diversity in classifier ensembles and
their relationship with the ensemble accuracy. Machine Learning 51, 181–207.
Margineantu, D. D. & Dietterich, T. G. (1997). Pruning adaptive boosting. ICML.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def pair_stats(pred_i: np.ndarray, pred_k: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Disagreement, Q and κ of two members from their predicted labels (class codes; a
    negative code is no prediction, counted as wrong) on the same examples with labels ``y``."""
    n = len(y)
    if n == 0:
        return {"n": 0, "disagreement": None, "q": None, "kappa": None}
    ok_i = pred_i == y
    ok_k = pred_k == y
    n11 = int(np.sum(ok_i & ok_k))
    n00 = int(np.sum(~ok_i & ~ok_k))
    n10 = int(np.sum(ok_i & ~ok_k))
    n01 = int(np.sum(~ok_i & ok_k))
    den = n11 * n00 + n01 * n10
    q = (n11 * n00 - n01 * n10) / den if den else None
    theta1 = float(np.mean(pred_i == pred_k))
    labels = np.union1d(pred_i, pred_k)
    theta2 = sum(float(np.mean(pred_i == c)) * float(np.mean(pred_k == c)) for c in labels)
    kappa = (theta1 - theta2) / (1.0 - theta2) if theta2 < 1.0 else None
    return {"n": n, "disagreement": (n01 + n10) / n, "q": q, "kappa": kappa}


def window_diversity(preds: np.ndarray, y: np.ndarray, valid: np.ndarray) -> dict[str, Any]:
    """Diversity of members over a window: ``preds [N, M]`` their labels, ``y [N]`` the truth,
    ``valid [N, M]`` which entries count (a member reset since does not).

    Returns the pairwise means (``disagreement``, ``q_statistic``, ``kappa``; ``None`` when no
    pair defines one), the number of examples ``n`` and ``accuracy`` per member (``None`` for a
    member with no counted example)."""
    N, M = preds.shape
    acc: list[float | None] = []
    for m in range(M):
        v = valid[:, m]
        acc.append(float(np.mean(preds[v, m] == y[v])) if v.any() else None)
    sums: dict[str, list[float]] = {"disagreement": [], "q": [], "kappa": []}
    for i in range(M):
        for k in range(i + 1, M):
            both = valid[:, i] & valid[:, k]
            st = pair_stats(preds[both, i], preds[both, k], y[both])
            for key, vals in sums.items():
                if st[key] is not None:
                    vals.append(st[key])

    def mean(vals: list[float]) -> float | None:
        return float(np.mean(vals)) if vals else None

    return {"n": int(N), "disagreement": mean(sums["disagreement"]),
            "q_statistic": mean(sums["q"]), "kappa": mean(sums["kappa"]),
            "member_accuracy": acc}  # fmt: skip
