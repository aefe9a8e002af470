"""A row with exactly the schema's features, numbers of type float or int and known categories is
encoded by name (``Schema.row_readers``, ``TreeBank._encode_one``) without ``_encode_row``'s loop.
It must give the same doubles and codes, and every other row must still take the loop, with its
conversions and its errors. hypothesis drives rows of hostile values (NaN and infinities, ints
beyond a float, bools, numpy scalars, ``Fraction`` and ``Decimal``, numbers given as text, new and
non-text categories, missing, extra and non-text keys) through models whose schema reads every
row with the loop, and through the same models as they are: the answers, the errors and the
models must be the same.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ensembles
import learners
from tests.test_deferred_learn import _outcome, _same, _state

BIG = int(sys.float_info.max)  # the largest int a float holds; a little more still rounds to it


def _ht() -> learners.HoeffdingTree:
    return learners.HoeffdingTree(grace_period=4, delta=0.3, tau=0.2)


MODELS = {
    "ht": _ht,
    "nb": lambda: learners.NaiveBayes(),
    "bag_nb": lambda: ensembles.OnlineBagging(learners.NaiveBayes(), n_models=3, seed=5),
    "boost_ht": lambda: ensembles.OnlineBoosting(_ht(), n_models=3, seed=3),
}

NUMERIC = ("a", "b")
# two categorical features over the same texts, seen in another order: each text has a code per
# feature, so a row read with the other feature's codes would be told apart
CATEGORICAL = ("k", "m")
SEED_ROWS = [({"a": 0.5 * i, "b": i % 3, "k": "uvw"[i % 3], "m": "wuv"[i % 3]}, "pq"[i % 2])
             for i in range(12)]  # fmt: skip


def _schema(model: Any) -> Any:
    bank = model._tb if isinstance(model, learners.Learner) and hasattr(model, "_tb") else None
    if bank is None:
        bank = model._settled().bank
    return bank.schema


def _loop_only(model: Any) -> Any:
    """``model`` with a schema that never offers the by-name reading (every row takes the loop)."""
    _schema(model).row_readers = lambda: (-1, None, None, None)
    return model


def _pair(name: str) -> tuple[Any, Any]:
    a, b = MODELS[name](), _loop_only(MODELS[name]())
    for x, y in SEED_ROWS:
        a.learn_one(x, y)
        b.learn_one(x, y)
    return a, b


numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**1100), max_value=2**1100),
    st.sampled_from([BIG, BIG + 1, BIG + 2**969, 2**1024, -(2**1024), 2**53 + 1, -0.0]),
    st.booleans(),
    st.floats(width=32).map(np.float32),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.sampled_from([Fraction(1, 3), Decimal("1.5"), "1.5", "abc", "", None, "x" * 10_000]),
)


class _Text(str):
    """A str subclass: its code is its text's, by either path."""


class _LooksLikeU:
    """Not a str, yet equal to "u" and hashed as "u": a dict lookup finds "u"'s code, and the loop
    refuses it (FeatureTypeError), so the by-name path must not look it up."""

    def __eq__(self, other: object) -> bool:
        return other == "u"

    def __hash__(self) -> int:
        return hash("u")


categories = st.one_of(
    st.sampled_from(["u", "v", "w"]),
    st.text(max_size=8),
    st.sampled_from([1, 2.5, True, None, float("nan"), np.str_("u"), "y" * 10_000]),
    st.sampled_from([_Text("u"), _Text("new"), _LooksLikeU()]),
)


@st.composite
def rows(draw: Any) -> dict:
    x: dict[Any, Any] = {}
    for name in NUMERIC:
        x[name] = draw(st.one_of(st.floats(-1e6, 1e6), st.integers(-5, 5), numbers))
    for name in CATEGORICAL:
        x[name] = draw(st.one_of(st.sampled_from(["u", "v", "w"]), categories))
    change = draw(st.sampled_from(["none", "none", "none", "drop", "extra", "swap", "int_key"]))
    if change == "drop":
        del x[draw(st.sampled_from(sorted(x)))]
    elif change == "extra":
        x[draw(st.sampled_from(["c", "d"]))] = draw(st.one_of(numbers, categories))
    elif change == "swap":  # as many keys as the schema's, one of them not its
        del x["a"]
        x["z"] = 1.0
    elif change == "int_key":
        del x["b"]
        x[5] = 1.0
    return x


steps = st.lists(st.tuples(rows(), st.sampled_from(["p", "q", "r"]), st.booleans()),
                 min_size=1, max_size=12)  # fmt: skip


@pytest.mark.parametrize("name", sorted(MODELS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seq=steps)
def test_by_name_and_by_loop_give_the_same_models(name: str, seq: list) -> None:
    fast, loop = _pair(name)
    for x, y, probas in seq:
        if probas:
            assert _same(_outcome(fast.predict_proba_one, x), _outcome(loop.predict_proba_one, x))
        else:
            assert _same(_outcome(fast.predict_one, x), _outcome(loop.predict_one, x))
        assert _same(_outcome(fast.learn_one, x, y), _outcome(loop.learn_one, x, y))
    assert _same(_outcome(fast.predict_proba_one, SEED_ROWS[0][0]),
                 _outcome(loop.predict_proba_one, SEED_ROWS[0][0]))  # fmt: skip
    assert _state(fast) == _state(loop)


def _loop_calls(model: Any, xs: list[dict], learn: bool) -> int:
    """How many of ``xs`` (predicted, or predicted then learned) took ``_encode_row``."""
    schema = _schema(model)
    encode_row = schema._encode_row
    calls = []

    def counted(x: dict, grow: bool) -> Any:
        calls.append(x)
        return encode_row(x, grow)

    schema._encode_row = counted
    try:
        for x in xs:
            _outcome(model.predict_one, x)  # (an error is fine: the loop raised it)
            if learn:
                _outcome(model.learn_one, x, "p")
    finally:
        del schema._encode_row
    return len(calls)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_usual_rows_are_read_by_name(name: str) -> None:
    fast, _ = _pair(name)
    usual = [
        {"b": i, "m": "uv"[i % 2], "k": "vw"[i % 2], "a": i / 7} for i in range(20)
    ]  # any key order
    assert _loop_calls(fast, usual, learn=True) == 0
    numbers_only = learners.NaiveBayes()
    numbers_only.learn_one({"a": 1.0, "b": 2}, "p")
    assert _loop_calls(numbers_only, [{"a": 0.5, "b": 3}], learn=True) == 0
    texts_only = learners.NaiveBayes()
    texts_only.learn_one({"k": "u"}, "p")
    assert _loop_calls(texts_only, [{"k": "u"}], learn=True) == 0


@pytest.mark.parametrize(
    "x",
    [
        {"a": float("nan"), "b": 1, "k": "u", "m": "w"},  # missing
        {"a": float("inf"), "b": 1, "k": "u", "m": "w"},  # refused
        {"a": 1e308, "b": 1e308, "k": "u", "m": "w"},  # finite, with an infinite sum
        {"a": 2**1024, "b": 1, "k": "u", "m": "w"},  # beyond a float
        {"a": True, "b": 1, "k": "u", "m": "w"},
        {"a": np.float64(1.5), "b": 1, "k": "u", "m": "w"},
        {"a": Fraction(1, 2), "b": 1.0, "k": "u", "m": "w"},
        {"a": 1.0, "b": 1, "k": "new", "m": "w"},
        {"a": 1.0, "b": 1, "k": 3, "m": "w"},
        {"a": 1.0, "k": "u", "m": "w"},
        {"a": 1.0, "b": 1, "c": 2.0, "m": "w"},
    ],
)
def test_unusual_rows_take_the_loop(x: dict) -> None:
    fast, _ = _pair("nb")
    assert _loop_calls(fast, [x], learn=False) == 1


def test_readers_follow_the_features_added_and_rolled_back() -> None:
    schema = learners.schema.Schema()
    schema.declare({"a": "numeric", "k": "categorical"})
    assert schema.row_readers()[0] == 2
    mark = schema.mark()
    schema.declare({"b": "numeric"})
    n, numbers_of, categories_of, codes = schema.row_readers()
    assert n == 3 and numbers_of({"a": 1.0, "b": 2.0, "k": "u"}) == (1.0, 2.0)
    schema.rollback(mark)
    n, numbers_of, categories_of, codes = schema.row_readers()
    assert n == 2 and numbers_of({"a": 1.0, "k": "u"}) == (1.0,)
    assert categories_of({"a": 1.0, "k": "u"}) == ("u",) and len(codes) == 1
    schema.rollback((0, 0, 0, 0))
    assert schema.row_readers()[:3:2] == (0, None) and schema.row_readers()[1]({}) == ()
