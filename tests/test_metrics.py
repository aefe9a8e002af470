"""app.metrics.Prequential computes what river's Accuracy, CohenKappa, BalancedAccuracy,
GeometricMean, MacroF1, ConfusionMatrix and Rolling(...) of them do."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from river import metrics, utils

from app.metrics import Prequential

LABELS = st.one_of(st.integers(0, 4), st.sampled_from(["a", "b", "ç", ""]))


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(LABELS, LABELS), min_size=1, max_size=300),
       window=st.integers(1, 50))  # fmt: skip
def test_scores_equal_rivers_and_survive_a_round_trip(pairs, window):
    ours = Prequential(window)
    acc, kappa = metrics.Accuracy(), metrics.CohenKappa()
    rolling = utils.Rolling(metrics.Accuracy, window_size=window)
    for t, p in pairs:
        ours.update(t, p)
        for m in (acc, kappa, rolling):
            m.update(t, p)
    got = ours.values()
    assert math.isclose(got["accuracy"], acc.get(), abs_tol=1e-12)
    assert math.isclose(got["window_accuracy"], rolling.get(), abs_tol=1e-12)
    assert math.isclose(got["kappa"], kappa.get(), rel_tol=1e-9, abs_tol=1e-9)
    again = Prequential.from_json(ours.to_json(), window)
    assert again.values() == got and again.n_scored == len(pairs)
    t, p = pairs[0]
    again.update(t, p)
    ours.update(t, p)
    assert again.values() == ours.values()


def test_nothing_scored_gives_none():
    values = Prequential().values()
    assert set(values) >= {"accuracy", "kappa", "window_accuracy", "balanced_accuracy", "g_mean",
                           "macro_f1", "majority_rate"}  # fmt: skip
    assert set(values.values()) == {None}
    assert Prequential().per_class() == {"classes": [], "confusion": []}


def _rivers(pairs):
    """river's class scores and confusion matrix over ``pairs``."""
    cm = metrics.ConfusionMatrix()
    scores = {"balanced_accuracy": metrics.BalancedAccuracy(cm=cm),
              "g_mean": metrics.GeometricMean(cm=cm), "macro_f1": metrics.MacroF1(cm=cm)}  # fmt: skip
    for t, p in pairs:
        cm.update(t, p)
    return {k: m.get() for k, m in scores.items()}, cm


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(LABELS, LABELS), min_size=1, max_size=300),
       window=st.integers(1, 50), skew=st.floats(0.0, 1.0), batched=st.booleans())  # fmt: skip
def test_class_scores_equal_rivers(pairs, window, skew, batched):
    """Balanced accuracy, G-mean, macro-F1 (cumulative and over the window), per-class recall and
    precision and the confusion matrix equal river's, on random label / prediction streams
    (``skew``: the share of pairs made (0, 0), an imbalanced stream with a majority class)."""
    pairs = [(0, 0) if i < skew * len(pairs) else pair for i, pair in enumerate(pairs)]
    ours = Prequential(window)
    if batched:
        ours.update_many([t for t, _ in pairs[:-1]], [p for _, p in pairs[:-1]])
        ours.update(*pairs[-1])
    else:
        for t, p in pairs:
            ours.update(t, p)
    got = ours.values()
    cumulative, cm = _rivers(pairs)
    windowed, _ = _rivers(pairs[-window:])
    for k, v in cumulative.items():
        assert math.isclose(got[k], v, rel_tol=1e-9, abs_tol=1e-12), k
        assert math.isclose(got[f"window_{k}"], windowed[k], rel_tol=1e-9, abs_tol=1e-12), k
    trues = [t for t, _ in pairs]
    assert got["majority_rate"] == max(trues.count(t) for t in set(trues)) / len(pairs)
    per = ours.per_class()
    assert {(t, p): n for t, p, n in per["confusion"]} == {
        (t, p): cm[t][p] for t in cm.classes for p in cm.classes if cm[t][p]
    }
    assert sorted(map(repr, (c["label"] for c in per["classes"]))) == sorted(map(repr, cm.classes))
    for c in per["classes"]:
        label = c["label"]
        recall = metrics.Recall(pos_val=label, cm=cm).get()
        precision = metrics.Precision(pos_val=label, cm=cm).get()
        assert c["support"] == cm.sum_row[label] and c["predicted"] == cm.sum_col[label]
        assert (c["recall"] is None) == (cm.sum_row[label] == 0)
        assert (c["precision"] is None) == (cm.sum_col[label] == 0)
        assert math.isclose(c["recall"] or 0.0, recall, abs_tol=1e-12)
        assert math.isclose(c["precision"] or 0.0, precision, abs_tol=1e-12)
    assert Prequential.from_json(ours.to_json(), window).values() == got


def test_a_majority_guesser_is_not_flattered():
    """94 % accuracy from never predicting the minority: balanced accuracy 0.5, G-mean 0."""
    m = Prequential(window=50)
    m.update_many([1] * 6 + [0] * 94, [0] * 100)
    v = m.values()
    assert v["accuracy"] == v["majority_rate"] == 0.94
    assert v["balanced_accuracy"] == 0.5 and v["g_mean"] == 0.0
    assert v["window_balanced_accuracy"] == 1.0  # (the last 50 are all class 0, all right)
    assert m.per_class()["classes"][0] == {"label": 1, "support": 6, "predicted": 0,
                                           "recall": 0.0, "precision": None}  # fmt: skip
