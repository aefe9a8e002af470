"""The per-example path (``TreeBank.run_one``) calls its kernel's compiled entry point, skipping
numba's per-call type dispatch, and encodes a row into the bank's per-example buffers.

Both are only sound if nothing a caller passes changes type between calls and if a kept encoding
never outlives the buffer contents it describes. ``ENTRY_CHECKS.on`` (set for the whole suite in
``conftest.py``) makes every entry call compare its argument types with the entry's, so the
hostile streams below fail loudly on a type change; their answers and final states are compared
with the batch path (``TreeBank.run``), which uses neither.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

import ensembles
import learners
from learners import jit
from learners.compiled import io_run_of, io_scratch
from learners.jit import ENTRY_CHECKS, entry_point
from learners.tree.run import label_code


def _models():
    return {
        "nb": lambda: learners.NaiveBayes(),
        "ht": lambda: learners.HoeffdingTree(grace_period=5, delta=0.2),
        "stump": lambda: learners.DecisionStump(),
        "bag_ht": lambda: ensembles.OnlineBagging(
            learners.HoeffdingTree(grace_period=5, delta=0.2), n_models=3, seed=2
        ),
        "boost_nb": lambda: ensembles.OnlineBoosting(learners.NaiveBayes(), n_models=3, seed=3),
        "bag_adwin": lambda: ensembles.OnlineBagging(
            learners.HoeffdingTree(grace_period=5, delta=0.2), n_models=3, seed=4, drift="adwin"
        ),
        "bag_stacking": lambda: ensembles.OnlineBagging(
            learners.HoeffdingTree(grace_period=5, delta=0.2),
            n_models=3,
            seed=5,
            vote="stacking",
        ),
    }


MODELS = _models()


def _bank(model):
    return model._bank if hasattr(model, "_bank") else model._settled().bank


def test_the_checks_are_on_for_the_suite() -> None:
    assert ENTRY_CHECKS.on


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_per_example_kernel_gets_its_entry_point(name) -> None:
    """If numba stops giving entry points (another version), per-example calls silently pay
    dispatch again: this fails instead."""
    model = MODELS[name]()
    for i in range(30):
        x = {"a": float(i % 7), "c": f"v{i % 3}"}
        model.predict_one(x)
        model.learn_one(x, i % 2)
    entries = _bank(model)._entries
    assert entries
    for kernel, (_, _, run, io) in entries.items():
        entry = run.__wrapped__  # (the checked wrapper's machine-code entry)
        assert entry is not kernel and type(entry).__name__ == "builtin_function_or_method"
        # every model's run kernel has an IO run kernel: its calls unbox one struct of buffers
        assert io_run_of(kernel) is not None and io is not None


@njit(cache=False)
def add(a, b):  # (at module level: numba's registries keep weak references to a kernel)
    return a[0] + b


def test_a_checked_entry_refuses_other_argument_types() -> None:
    a = np.zeros(2)
    add(a, 1)
    checked = entry_point(add, (a, 1))
    assert checked is not add and checked(a, 2) == 2.0
    with pytest.raises(AssertionError, match="entry point"):
        checked(np.zeros(2, np.int64), 1)  # unchecked, this would read the ints as floats
    assert entry_point(add, (a, 1.5)) is add  # not compiled for (array, float): the dispatcher


# a pool of rows: numeric features appear, categorical ones appear late, hostile values
_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=False, width=64),
    st.integers(-(2**62), 2**62),
    st.sampled_from(["r", "g", "b", "ünï", "x" * 300]),
)
_row = st.dictionaries(st.sampled_from(["n0", "n1", "n2", "c0", "c1"]), _value, max_size=5)
_op = st.tuples(
    st.sampled_from(["predict", "proba", "learn", "predict_learn", "mutate"]),
    st.integers(0, 5),  # which row of the pool
    st.sampled_from([0, 1, "two", 3.5, 4, 5, True]),  # a label (classes grow)
    _value,
)


@settings(max_examples=80, deadline=None)
@given(name=st.sampled_from(sorted(MODELS)), pool=st.lists(_row, min_size=6, max_size=6),
       ops=st.lists(_op, max_size=60))  # fmt: skip
def test_per_example_calls_equal_the_batch_path(name, pool, ops) -> None:
    """Interleaved predictions and learns on a pool of dicts, some mutated in place between a
    prediction and a learn (a kept encoding must not be reused), late categorical features,
    growing classes, refused labels and feature kinds: per-example answers, refusals and the
    final state equal one-row batch calls."""
    one, many = MODELS[name](), MODELS[name]()
    rows = [dict(r) for r in pool]
    for op, i, y, v in ops:
        x = rows[i]
        if op == "mutate":
            key = next(iter(x), None)
            if key is not None:
                x[key] = v
            continue
        if op == "predict":
            a, b = _outcome(one.predict_one, x), _outcome(lambda x: many.predict_many([x])[0], x)
        elif op == "proba":
            a = _outcome(one.predict_proba_one, x)
            b = _outcome(lambda x: many.predict_proba_many([x])[0], x)
        elif op == "learn":
            a = _outcome(one.learn_one, x, y)
            b = _outcome(lambda x, y: many.learn_many([x], [y]), x, y)
        else:
            a = _outcome(one.predict_learn_one, x, y)
            b = _outcome(lambda x, y: many.predict_learn_many([x], [y])[0], x, y)
        assert a == b, (name, pool, ops, op, i, y, a, b)
    a, b = one.to_state(), many.to_state()
    assert a["header"] == b["header"]
    assert a["arrays"].keys() == b["arrays"].keys()
    for key in a["arrays"]:
        assert np.array_equal(a["arrays"][key], b["arrays"][key], equal_nan=True), key


def _outcome(f, *args):
    """What a call gave (NaN probabilities made comparable), or the type of its refusal."""
    try:
        got = f(*args)
    except (ValueError, TypeError) as e:  # the engine's refusals (LabelError, FeatureTypeError)
        return ("refused", type(e).__name__)
    if isinstance(got, dict):
        return ("ok", {k: ("nan" if v != v else v) for k, v in got.items()})
    return ("ok", got)


def test_a_row_encoded_after_a_kept_one_is_not_mistaken_for_it() -> None:
    """predict(x1) keeps x1's encoding in the per-example buffers; learn(x2) overwrites them; a
    learn of x1 must encode x1 again, not reuse the buffers (which hold x2)."""
    x1, x2 = {"a": 1.0, "b": 5.0}, {"a": 9.0, "b": -3.0}
    one, many = learners.NaiveBayes(), learners.NaiveBayes()
    for m in (one, many):
        m.learn_many([x1, x2], ["p", "q"])
    one.predict_one(x1)
    one.learn_one(x2, "q")
    one.learn_one(x1, "p")
    many.learn_many([x2, x1], ["q", "p"])
    probe = {"a": 2.0, "b": 1.0}
    assert one.predict_proba_one(probe) == many.predict_proba_one(probe)


def test_interpreted_calls_take_no_entry(monkeypatch) -> None:
    """While kernels run as their Python twins, run_one neither uses nor records entries."""
    model = learners.NaiveBayes()
    monkeypatch.setattr(jit.MODE, "interpreted", True)
    jit.set_interpreted(True)
    try:
        model.learn_one({"a": 1.0}, "p")
        assert model.predict_one({"a": 1.0}) == "p"
    finally:
        jit.set_interpreted(False)
    assert _bank(model)._entries == {}


def test_a_label_read_from_nan_probabilities_is_the_answer_dicts() -> None:
    """``predict_one`` reads the label off the kernel's output row without building the answer
    dict; with a NaN in the row it must pick what ``argmax_label`` picks from that dict (the
    largest number, ``None`` if all are NaN), as ``predict_many`` does."""
    from learners.base import argmax_label

    nb = learners.NaiveBayes()
    nb.learn_many([{"a": 1.0}, {"a": 2.0}, {"a": 3.0}], ["p", "q", "r"])
    bank = _bank(nb)
    for row in ([math.nan, 0.3, 0.1], [0.2, math.nan, 0.5], [math.nan] * 3):

        def fake(B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls,
                 code_attr, need, hint, hinted, row=row):  # fmt: skip
            out[-1, :3] = row  # (the example is the last row: a run kernel's protocol)
            return xn.shape[0]

        args = (fake, np.zeros(1, np.int64), np.zeros((1, 1)), {"a": 1.0})
        label = bank.run_one(*args, label_only=True)
        assert label == argmax_label(bank.run_one(*args)) == {0: "q", 1: "r", 2: None}[
            [0.3 in row, 0.5 in row, True].index(True)]  # fmt: skip


TWO_CLASS_ROWS = [[0.3, 0.7], [0.7, 0.3], [0.5, 0.5], [0.0, 0.0], [math.nan, 0.4], [0.4, math.nan],
                  [math.nan, math.nan], [0.0, -0.0], [-0.0, 1e-300]]  # fmt: skip


@pytest.mark.parametrize("row", TWO_CLASS_ROWS)
def test_a_label_of_two_classes_is_the_answer_dicts(row: list) -> None:
    """Two classes take a shorter read of the output row (one larger than the other: its
    label); ties, zeros and NaNs must still give what ``argmax_label`` gives from the dict."""
    from learners.base import argmax_label

    nb = learners.NaiveBayes()
    nb.learn_many([{"a": 1.0}, {"a": 2.0}], ["p", "q"])
    bank = _bank(nb)

    def fake(B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls,
             code_attr, need, hint, hinted):  # fmt: skip
        out[-1, :2] = row
        return xn.shape[0]

    args = (fake, np.zeros(1, np.int64), np.zeros((1, 1)), {"a": 1.0})
    label = bank.run_one(*args, label_only=True)
    assert label == argmax_label(bank.run_one(*args))


def test_io_scratch_is_the_banks_own_until_a_call_needs_more_classes() -> None:
    """A ``RunIO`` call's ``pk``/``pv`` are the bank's buffers (no allocation per call) when they
    hold the classes the call needs, and new, longer ones when not (``io_scratch``)."""
    model = MODELS["bag_ht"]()
    for i in range(20):
        x = {"a": float(i % 7)}
        model.predict_one(x)
        model.learn_one(x, i % 3)
    model.predict_one({"a": 1.0})
    bank = _bank(model)
    ((_, _, _, io),) = bank._entries.values()
    ncls = bank._ncls1
    ncls[:] = 3
    pk, pv = io_scratch(io, 1, False)
    pk[0] = 12345
    pv[0] = 0.5
    assert bank._pk1[0] == 12345 and bank._pv1[0] == 0.5  # the same memory
    assert len(pk) == len(bank._pk1) >= 3 and len(pv) == 2 * len(pk)
    ncls[1] = len(bank._pk1) + 5  # more classes than the buffers hold
    pk, pv = io_scratch(io, 1, False)
    assert len(pk) == len(bank._pk1) + 5 and len(pv) == 2 * len(pk)
    pk[0] = -7
    assert bank._pk1[0] == 12345  # new buffers
    ncls[1] = 2
    bank._y1[1] = len(bank._pk1) + 1  # a learned label beyond them counts too (learning)
    assert len(io_scratch(io, 1, True)[0]) == len(bank._pk1) + 2
    assert len(io_scratch(io, 1, False)[0]) == len(bank._pk1)


@settings(max_examples=300, deadline=None)
@given(
    vals=st.lists(
        st.one_of(
            st.sampled_from([0.0, -0.0, 0.25, 0.5, 1.0, math.nan, math.inf, -math.inf]),
            st.floats(allow_nan=True, allow_infinity=True, width=64),
        ),
        max_size=8,
    ),
    extra=st.integers(0, 3),
)
def test_the_kernels_label_is_the_lists_argmax(vals, extra) -> None:
    """``io_label``'s rule (``label_code``) over a predicted row, with zeros, negative zero,
    ties, NaN and infinities: the first index of ``max`` of the first ``n`` values as a list,
    -1 when none is nonzero (``predict_one`` answers None), -2 when one is not finite (Python
    decides from the answer's dict). Values past ``n`` are not read."""
    row = np.array(vals + [9.0] * extra)
    if any(not math.isfinite(v) for v in vals):
        want = -2
    elif not any(vals):
        want = -1
    else:
        want = vals.index(max(vals))
    assert label_code(row, len(vals)) == want
