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


MAX_MEMBERS = 100  # diversity is measured over the first 100 members (4,950 pairs)


def window_diversity(preds: np.ndarray, y: np.ndarray, valid: np.ndarray) -> dict[str, Any]:
    """Diversity of members over a window: ``preds [N, M]`` their labels, ``y [N]`` the truth,
    ``valid [N, M]`` which entries count (a member reset since does not).

    Returns the pairwise means (``disagreement``, ``q_statistic``, ``kappa``; ``None`` when no
    pair defines one) over the first ``MAX_MEMBERS`` members, the number of examples ``n`` and
    ``accuracy`` per member (``None`` for a member with no counted example). Every pair's counts
    come from matrix products (``pair_stats`` is the same for one pair, written out)."""
    N, M = preds.shape
    V = valid.astype(np.float64)
    C = ((preds == y[:, None]) & valid).astype(np.float64)  # right and counted
    counted = V.sum(axis=0)
    acc = [float(C[:, m].sum() / counted[m]) if counted[m] else None for m in range(M)]
    K = min(M, MAX_MEMBERS)
    V, C, P = V[:, :K], C[:, :K], preds[:, :K]
    W = V - C  # wrong and counted
    n = V.T @ V  # examples both counted
    n11, n00, n10 = C.T @ C, W.T @ W, C.T @ W
    n01 = n10.T
    agree = np.zeros((K, K))
    chance = np.zeros((K, K))
    for c in np.unique(P[valid[:, :K]]):
        L = (P == c) * V  # member predicts c, counted
        agree += L.T @ L
        A = L.T @ V  # A[i, k]: examples both counted where i predicts c
        chance += A * A.T
    iu = np.triu_indices(K, 1)
    pair_n = n[iu]
    has = pair_n > 0
    dis = ((n01 + n10)[iu] / np.where(has, pair_n, 1.0))[has]
    den = (n11 * n00 + n01 * n10)[iu]
    q_ok = has & (den > 0)
    q = ((n11 * n00 - n01 * n10)[iu] / np.where(q_ok, den, 1.0))[q_ok]
    theta1 = agree[iu] / np.where(has, pair_n, 1.0)
    theta2 = chance[iu] / np.where(has, pair_n, 1.0) ** 2
    k_ok = has & (theta2 < 1.0 - 1e-12)
    kappa = ((theta1 - theta2) / np.where(k_ok, 1.0 - theta2, 1.0))[k_ok]

    def mean(vals: np.ndarray) -> float | None:
        return float(vals.mean()) if vals.size else None

    return {"n": int(N), "disagreement": mean(dis), "q_statistic": mean(q),
            "kappa": mean(kappa), "member_accuracy": acc}  # fmt: skip
