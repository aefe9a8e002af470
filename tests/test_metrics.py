"""app.metrics.Prequential computes what river's Accuracy, CohenKappa and Rolling(Accuracy) do."""

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
    assert Prequential().values() == {"accuracy": None, "kappa": None, "window_accuracy": None}
