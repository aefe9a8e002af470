"""The schema's code -> feature array grows by doubling (issue 43): a feature that takes a new
value on most examples (user ids) made the per-example path quadratic, as ``code_attr_array``
rebuilt an array of every code each time a code was added (57% of the time in ``numpy.asarray``).
The array must stay what the old construction gave, through additions, rollbacks and state round
trips, and the number of arrays built over n new values must grow as log n, not n."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ensembles import OnlineBagging
from learners import LimitError, Limits, NaiveBayes
from learners.schema import Schema


def _old_array(s: Schema) -> np.ndarray:
    """What ``code_attr_array`` was before: the list as an int64 array."""
    return np.asarray(s.code_attr, dtype=np.int64)


def _same_as_old(s: Schema) -> None:
    arr = s.code_attr_array
    assert arr.dtype == np.int64 and arr.ndim == 1 and arr.flags.c_contiguous
    np.testing.assert_array_equal(arr, _old_array(s))


def _buffers(arrays: list[np.ndarray]) -> int:
    """Distinct memory blocks behind ``arrays`` (a view counts as its base; the list keeps them
    alive, so no two can share an id)."""
    return len({id(a if a.base is None else a.base) for a in arrays})


ops = st.lists(
    st.one_of(
        st.tuples(st.just("row"), st.sampled_from("abc"), st.integers(0, 60)),
        st.tuples(st.just("mark"), st.just(""), st.just(0)),
        st.tuples(st.just("rollback"), st.just(""), st.integers(0, 10)),
    ),
    max_size=120,
)


@settings(max_examples=60, deadline=None)
@given(ops=ops, max_values=st.integers(1, 40), over=st.sampled_from(["reject", "other"]))
def test_code_attr_array_equals_the_old_construction(ops, max_values, over):
    s = Schema(Limits(max_values=max_values, over_limit=over))
    marks: list[tuple] = []
    for op, feature, v in ops:
        if op == "row":
            try:
                s.encode_rows([{feature: f"v{v}", "n": 1.0}], grow=True)
            except LimitError:
                pass
        elif op == "mark":
            marks.append(s.mark())
        elif marks:  # back to one of the marks taken (the later ones go with it)
            i = v % len(marks)
            s.rollback(marks[i])
            del marks[i:]
        _same_as_old(s)
        _same_as_old(Schema.from_header(s.to_header(), s.limits))


def test_new_values_build_log_n_arrays_not_n():
    """20,000 new values, the array taken after each (as the per-example path does): the old
    construction built 20,000 arrays, doubling builds about log2(20,000 / 16) ~ 11."""
    s = Schema()
    seen = []
    for i in range(20_000):
        s.encode_rows([{"user": f"u{i}", "a": 0.5}], grow=True)
        seen.append(s.code_attr_array)
    _same_as_old(s)
    assert _buffers(seen) <= 2 * math.ceil(math.log2(20_000))


def test_the_per_example_path_of_a_user_id_stream_does_not_rebuild_per_value():
    """The issue's loop (predict_one + learn_one, a new user id per example) on an ensemble: the
    arrays its kernel calls were given come from O(log n) buffers, and the model equals one
    that learned the same stream as a batch."""
    model = OnlineBagging(NaiveBayes(), n_models=2, seed=1)
    batch = OnlineBagging(NaiveBayes(), n_models=2, seed=1)
    schema = model._settled().bank.schema
    seen = []
    xs, ys = [], []
    for i in range(20_000):
        x, y = {"a": (i * 7919 % 1000) / 1000, "user": f"u{i}"}, i % 3 == 0
        model.predict_one(x)
        model.learn_one(x, y)
        seen.append(schema.code_attr_array)
        xs.append(x)
        ys.append(y)
    assert _buffers(seen) <= 2 * math.ceil(math.log2(20_000))
    batch.learn_many(xs, ys)
    probe = {"a": 0.3, "user": "u17"}
    assert model.predict_proba_one(probe) == batch.predict_proba_one(probe)


def test_a_new_value_per_example_stops_at_max_values():
    """Growth is bounded: past ``max_values`` a new user id is refused with a clear error, the
    model unchanged and still predicting (or, with ``over_limit="other"``, one shared value)."""
    model = OnlineBagging(NaiveBayes(), n_models=2, seed=1, limits={"max_values": 500})
    for i in range(500):
        model.learn_one({"a": 0.5, "user": f"u{i}"}, i % 2 == 0)
    state = model.to_state()["header"]
    with pytest.raises(LimitError, match="'user' has 500 values, no room for 'u500'"):
        model.learn_one({"a": 0.5, "user": "u500"}, True)
    assert model.to_state()["header"] == state
    assert model.predict_one({"a": 0.5, "user": "u501"}) in (True, False)
    other = OnlineBagging(NaiveBayes(), n_models=2, seed=1,
                          limits={"max_values": 500, "over_limit": "other"})  # fmt: skip
    for i in range(2_000):
        other.learn_one({"a": 0.5, "user": f"u{i}"}, i % 2 == 0)
    assert len(other._settled().bank.schema.code_attr) == 501  # 500 values + "other"
