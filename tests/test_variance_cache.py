"""The naive-Bayes variance cache (``learners.tree.statistics.gaussian_cache``): after a learn only the
learned class' variance is recomputed, when the pooled variance is settled positive. Results must
be exactly those of recomputing every variance of every observer before each prediction (the
rule before the cache was partial), on streams built to break the shortcut: point masses, values
from 1e-300 to 1e300, tiny and huge weights (1e-300; 1e12, the largest a model takes), missing
values, classes that appear late."""

from __future__ import annotations

import math
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ensembles import OnlineBagging
from learners import HoeffdingTree, NaiveBayes
from learners.tree.layout import SETTLED


def _banks(model):
    return [model._settled().bank] if hasattr(model, "_settled") else [model._bank]


def _stale_all(model) -> None:
    """Mark every variance of every observer stale: the next prediction recomputes them all."""
    for bank in _banks(model):
        bank.T.o_fresh[:] = 0


def _same(p: dict, q: dict) -> bool:
    return p.keys() == q.keys() and all(
        p[k] == q[k] or (math.isnan(p[k]) and math.isnan(q[k])) for k in p
    )


def _run_pair(make, rows) -> int:
    """Prequential run of a model and of its twin whose caches are cleared before every
    prediction; returns how many times the partial path was pending (o_fresh > SETTLED)."""
    fast, full = make(), make()
    partial = 0
    for i, (x, y, w) in enumerate(rows):
        _stale_all(full)
        p, q = fast.predict_proba_one(x), full.predict_proba_one(x)
        assert _same(p, q), f"row {i}: {p} != {q} (x={x}, y={y}, w={w})"
        fast.learn_one(x, y, w=w)
        full.learn_one(x, y, w=w)
        partial += sum(int((b.T.o_fresh > SETTLED).sum()) for b in _banks(fast))
    return partial


def _hostile_rows(n: int, seed: int) -> list:
    rnd = random.Random(seed)
    scales = [1e-300, 1e-8, 1.0, 1e6, 1e150, 1e300]
    rows = []
    for i in range(n):
        n_cls = 2 if i < n // 2 else 5  # three classes arrive half-way
        y = rnd.randrange(n_cls)
        x: dict = {}
        for j in range(4):
            r = rnd.random()
            if r < 0.1:
                continue  # missing
            if r < 0.3:
                x[f"f{j}"] = float(y + j)  # a point mass per class
            elif r < 0.35:
                x[f"f{j}"] = math.nan
            else:
                x[f"f{j}"] = rnd.gauss(y, 1.0) * rnd.choice(scales)
        w = rnd.choice([1.0, 1.0, 1.0, 0.5, 3.0, 1e-300, 1e12])
        rows.append((x, y, w))
    return rows


def test_naive_bayes_equals_recomputing_every_variance() -> None:
    partial = _run_pair(NaiveBayes, _hostile_rows(1_500, seed=1))
    assert partial > 0, "the one-entry path was never taken: the test checks nothing"


def test_hoeffding_tree_and_bagging_equal_recomputing_every_variance() -> None:
    rows = _hostile_rows(1_200, seed=2)
    assert _run_pair(lambda: HoeffdingTree(grace_period=50), rows) > 0
    assert _run_pair(lambda: OnlineBagging(NaiveBayes(), n_models=3, seed=4), rows) > 0


def test_a_plain_stream_takes_the_one_entry_path() -> None:
    rnd = np.random.default_rng(3)
    rows = [({"a": float(rnd.normal(y)), "b": float(rnd.normal(-y))}, y, 1.0)
            for y in rnd.integers(0, 3, 600).tolist()]  # fmt: skip
    assert _run_pair(NaiveBayes, rows) > 500


_value = st.one_of(
    st.floats(allow_infinity=False, width=64),  # NaN is a missing value
    st.sampled_from([0.0, 1.0, -1.0, 1e300, -1e300, 5e-324]),
    st.integers(-(2**53), 2**53),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from(["a", "b", "c"]), _value, max_size=3),
            st.integers(0, 3),
            st.sampled_from([1.0, 2.0, 0.25, 1e-300, 1e12]),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_any_stream_equals_recomputing_every_variance(rows) -> None:
    _run_pair(NaiveBayes, rows)


def test_saved_states_hold_only_stale_or_fresh_and_go_on_exactly() -> None:
    """A saved state says 0 (stale) or 1 (fresh) for every observer, as code before the one-entry
    cache wrote and reads it; a model loaded from it goes on exactly as the original."""
    rnd = np.random.default_rng(5)
    plain = [({"a": float(rnd.normal(y)), "b": float(rnd.normal(-y))}, y, 1.0)
             for y in rnd.integers(0, 3, 800).tolist()]  # fmt: skip
    rows = plain + _hostile_rows(400, seed=5)
    model = NaiveBayes()
    for x, y, w in rows[:800]:
        model.predict_proba_one(x)
        model.learn_one(x, y, w=w)
    assert (model._bank.T.o_fresh > SETTLED).any(), "no one-entry stale cache to save"
    state = model.to_state()
    saved = [a for k, a in state["arrays"].items() if k.endswith("o_fresh")]
    assert saved and all(set(np.unique(a).tolist()) <= {0, 1} for a in saved)
    twin = NaiveBayes.from_state(state)
    for i, (x, y, w) in enumerate(rows[800:]):
        p, q = model.predict_proba_one(x), twin.predict_proba_one(x)
        assert _same(p, q), f"row {800 + i}: {p} != {q}"
        model.learn_one(x, y, w=w)
        twin.learn_one(x, y, w=w)
