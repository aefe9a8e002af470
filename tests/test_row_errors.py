"""A refused ``*_many`` call says which row: ``exc.row`` is the index of the first refused row
(``learners.base.at_row``), on every kind of model, for every kind of refusal a row can cause; a
refusal of the whole call (``max_state_bytes``, a wrong number of weights) has no ``row``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streams import Proxy

from ensembles import OnlineBagging, OnlineBoosting
from learners import (
    MLP,
    DecisionStump,
    ExactTree,
    FeatureTypeError,
    HoeffdingTree,
    LabelError,
    LimitError,
    Limits,
    NaiveBayes,
    WeightError,
)

LIMITS = Limits(max_values=4)
MODELS = {
    "nb": lambda: NaiveBayes(limits=LIMITS),
    "ht": lambda: HoeffdingTree(grace_period=5, limits=LIMITS),
    "stump": lambda: DecisionStump(limits=LIMITS),
    "bag_ht": lambda: OnlineBagging(
        HoeffdingTree(grace_period=5), n_models=3, seed=1, limits=LIMITS
    ),  # fmt: skip
    "boost_nb": lambda: OnlineBoosting(NaiveBayes(), n_models=3, seed=2, limits=LIMITS),
    "bag_adwin": lambda: OnlineBagging(
        NaiveBayes(), n_models=3, seed=3, drift="adwin", limits=LIMITS
    ),  # fmt: skip
    "mlp": lambda: MLP(n_hidden=3, limits=LIMITS),
    "bag_mlp": lambda: OnlineBagging(MLP(n_hidden=3), n_models=2, seed=4, limits=LIMITS),
    "bag_proxy": lambda: OnlineBagging(Proxy(NaiveBayes()), n_models=2, seed=5, limits=LIMITS),
    "exact": lambda: ExactTree(),
}
# a good row, and what makes row k bad: (its features, its label, its weight, the error)
BAD = {
    "string_for_numeric": (({"x": "oops", "c": "v0"}, "p", 1.0), FeatureTypeError),
    "int_label": (({"x": 1.0, "c": "v0"}, 7, 1.0), LabelError),
    "float_label": (({"x": 1.0, "c": "v0"}, 2.5, 1.0), LabelError),
    "negative_weight": (({"x": 1.0, "c": "v0"}, "q", -1.0), WeightError),
    "nan_weight": (({"x": 1.0, "c": "v0"}, "q", math.nan), WeightError),
    "inf_weight": (({"x": 1.0, "c": "v0"}, "q", math.inf), WeightError),
    "huge_weight": (({"x": 1.0, "c": "v0"}, "q", 1e13), WeightError),
    "not_a_dict": ((["x", 1.0], "p", 1.0), FeatureTypeError),
    "fifth_category": (({"x": 1.0, "c": "v4"}, "p", 1.0), LimitError),
    "infinite_value": (({"x": math.inf, "c": "v0"}, "p", 1.0), FeatureTypeError),
    "huge_int": (({"x": 10**400, "c": "v0"}, "p", 1.0), FeatureTypeError),
    "huge_int_category": (({"x": 1.0, "c": 10**5000}, "p", 1.0), FeatureTypeError),
}
# the models that take no Limits refuse no fifth category
NO_LIMITS = {"exact"}


def _batch(n: int, k: int, bad: str) -> tuple[list, list, list]:
    rows = [({"x": float(i % 5), "c": f"v{i % 2}"}, "pq"[i % 2], 1.0) for i in range(n)]
    rows[k] = BAD[bad][0]
    X, y, w = (list(t) for t in zip(*rows, strict=True))
    return X, y, w


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(MODELS)), bad=st.sampled_from(sorted(BAD)),
       n=st.integers(1, 40), data=st.data(), call=st.sampled_from(["learn", "predict_learn"]))  # fmt: skip
def test_a_refused_batch_names_its_first_bad_row(name, bad, n, data, call) -> None:
    if name in NO_LIMITS and bad == "fifth_category":
        return
    k = data.draw(st.integers(0, n - 1))
    model = MODELS[name]()
    known = [{"x": float(i), "c": f"v{i}"} for i in range(4)]  # kinds known, 4 values of c
    model.learn_many(known, ["p", "q", "p", "q"])
    X, y, w = _batch(n, k, bad)
    with pytest.raises(BAD[bad][1]) as info:
        if call == "learn":
            model.learn_many(X, y, w)
        else:
            model.predict_learn_many(X, y, w)
    assert info.value.row == k, (name, bad, n, k)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_refused_prediction_batch_names_its_row(name) -> None:
    model = MODELS[name]()
    model.learn_many([{"x": 0.0}, {"x": 1.0}], ["p", "q"])
    X = [{"x": 0.5}, {"x": 2.0}, {"x": "oops"}, {"x": 1.0}]
    with pytest.raises(FeatureTypeError) as info:
        model.predict_proba_many(X)
    assert info.value.row == 2


def test_whole_call_refusals_name_no_row() -> None:
    nb = NaiveBayes()
    with pytest.raises(WeightError) as info:
        nb.learn_many([{"x": 1.0}, {"x": 2.0}], ["p", "q"], [1.0])  # one weight for two rows
    assert getattr(info.value, "row", None) is None
    tiny = MLP(limits=Limits(max_state_bytes=2_000))
    with pytest.raises(LimitError) as limit:
        tiny.learn_many([{f"f{i}": float(i) for i in range(40)}] * 3, ["p"] * 3)
    assert limit.value.field == "model" and getattr(limit.value, "row", None) is None


def test_the_row_of_an_inner_call_is_kept() -> None:
    """at_row keeps the first index set: a generic ensemble validates its whole batch first
    (Schema.encode_rows), so the row is the batch's, not a member's re-count."""
    from learners import at_row

    exc = ValueError("x")
    at_row(exc, 3)
    at_row(exc, 0)
    assert exc.row == 3  # type: ignore[attr-defined]


def test_weights_message_names_the_value() -> None:
    nb = NaiveBayes()
    with pytest.raises(WeightError, match=r"got -2\.0 \(row 1\)"):
        nb.learn_many([{"x": 1.0}, {"x": 2.0}], ["p", "q"], np.array([1.0, -2.0]))


def test_the_service_and_the_engine_agree_on_the_largest_weight() -> None:
    from app.validate import MAX_WEIGHT as SERVICE
    from learners import MAX_WEIGHT

    assert SERVICE == MAX_WEIGHT


LABEL_SHAPES = {
    "fewer": lambda y: y[:-1],  # raised an IndexError
    "more": lambda y: y + ["p"],  # lost the extra label silently
    "none": lambda y: None,
    "a_string": lambda y: "pq" * len(y),
    "a_scalar": lambda y: np.array("p"),
    "fewer_array": lambda y: np.array(y[:-1]),
}


@pytest.mark.parametrize("shape", sorted(LABEL_SHAPES))
@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("call", ["learn_many", "predict_learn_many", "learn_batches"])
def test_labels_not_one_per_row_are_refused_and_change_nothing(name, shape, call) -> None:
    """Every batch call refuses labels that are not one per row with a LabelError naming the
    counts (it raised an IndexError for fewer, and learned a longer y's first labels silently),
    before it learns anything."""
    model = MODELS[name]()
    model.learn_many([{"x": 0.0, "c": "v0"}, {"x": 1.0, "c": "v1"}], ["p", "q"])
    X = [{"x": float(i % 3), "c": f"v{i % 2}"} for i in range(6)]
    y = LABEL_SHAPES[shape](["pq"[i % 2] for i in range(6)])
    before = model.predict_proba_many(X)
    with pytest.raises(LabelError, match=r"^y: ") as info:
        if call == "learn_batches":
            model.learn_batches([(X, y)])
        else:
            getattr(model, call)(X, y)
    assert getattr(info.value, "row", None) is None
    assert model.predict_proba_many(X) == before  # nothing learned
    model.learn_many(X, ["pq"[i % 2] for i in range(6)])  # and the model goes on


def test_a_series_of_labels_of_another_length_is_refused() -> None:
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame({"x": [0.0, 1.0, 2.0]})
    with pytest.raises(LabelError, match="2 labels for 3 rows"):
        HoeffdingTree().learn_many(X, pd.Series(["p", "q"]))


def test_the_client_refuses_fewer_ids_than_examples() -> None:
    from app.client import _Core

    examples = [({"x": 1.0}, "p"), ({"x": 2.0}, "q")]
    with pytest.raises(ValueError, match="1 ids for more examples"):
        _Core.learn_many("m", examples, ids=["a"])  # was an IndexError
    with pytest.raises(ValueError, match="3 ids for 2 examples"):
        _Core.learn_many("m", examples, ids=["a", "b", "c"])


NOT_NUMBERS = ["1", None, b"1", [1.0], 1j, {"w": 1}, np.array([1.0, 2.0])]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_weight_that_is_not_a_number_is_a_weight_error(name) -> None:
    """A string, None, a list, a complex number: a WeightError naming it, one example at a time
    (a bare TypeError from a comparison before; MLP took "1" as 1.0) and in a batch (with the
    row), and nothing is learned."""
    model = MODELS[name]()
    model.learn_many([{"x": 0.0, "c": "v0"}, {"x": 1.0, "c": "v1"}], ["p", "q"])
    X = [{"x": 0.5, "c": "v0"}, {"x": 2.0, "c": "v1"}]
    before = model.predict_proba_many(X)
    for w in NOT_NUMBERS:
        with pytest.raises(WeightError, match="got "):
            model.learn_one(X[0], "p", w=w)
        with pytest.raises(WeightError) as info:
            model.learn_many(X, ["p", "q"], [1.0, w])
        assert info.value.row == 1, (name, w)
    assert model.predict_proba_many(X) == before
    model.learn_many(X, ["p", "q"], (w for w in [1, 2.5]))  # a generator of numbers is fine


@pytest.mark.parametrize("X", [5, {"x": 1.0}, "x", None, 2.5])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_rows_that_are_not_a_list_are_a_feature_error(name, X) -> None:
    """``X`` must be a list (any iterable) of dicts or a DataFrame: a dict (whose keys were taken
    for rows), a string or a number is refused as such."""
    model = MODELS[name]()
    for call in (lambda: model.learn_many(X, ["p"]), lambda: model.predict_proba_many(X),
                 lambda: model.predict_learn_many(X, ["p"])):  # fmt: skip
        with pytest.raises(FeatureTypeError, match="expected a list of dicts or a DataFrame"):
            call()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_an_untrained_model_refuses_rows_that_are_not_dicts(name) -> None:
    """As a trained one does (ExactTree answered {} to any row before its first example)."""
    model = MODELS[name]()
    with pytest.raises(FeatureTypeError):
        model.predict_proba_one(None)
    with pytest.raises(FeatureTypeError) as info:
        model.predict_proba_many([{"x": 1.0}, [1.0, 2.0]])
    assert info.value.row == 1


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize(
    "call", ["learn_many", "predict_learn_many", "predict_proba_many", "predict_many",
             "learn_batches", "predict_learn_batches"],
)  # fmt: skip
def test_a_dataframe_with_a_repeated_column_name_is_refused(name, call) -> None:
    """Its rows as dicts (``to_dict``) keep one of the columns of that name and drop the others
    without a word: every batch call refuses it instead, naming the column, and learns nothing
    of it."""
    pd = pytest.importorskip("pandas")
    model = MODELS[name]()
    X = [{"x": float(i % 3), "c": f"v{i % 2}"} for i in range(6)]
    y = ["pq"[i % 2] for i in range(6)]
    model.learn_many(X, y)
    before = model.predict_proba_many(X)
    frame = pd.DataFrame([[r["x"], r["c"], r["x"] + 1.0] for r in X], columns=["x", "c", "x"])
    with pytest.raises(FeatureTypeError, match="column names must be unique") as info:
        if call in ("learn_batches", "predict_learn_batches"):
            list(getattr(model, call)([(frame, y)]) or [])
        elif call.startswith("predict_") and "learn" not in call:
            getattr(model, call)(frame)
        else:
            getattr(model, call)(frame, y)
    assert info.value.feature == "x"
    assert model.predict_proba_many(X) == before  # nothing learned
    frame.columns = ["x", "c", "x2"]  # (named apart, it is an ordinary batch)
    model.learn_many(frame, y)


@pytest.mark.parametrize("name", ["nb", "ht", "bag_ht", "boost_nb", "bag_adwin", "mlp", "exact"])
def test_a_boolean_weight_is_the_number_it_is(name) -> None:
    """The engine takes Python's ``True`` / ``False`` as 1 and 0 (as river does; HTTP refuses
    them): the same answers as weights 1.0 and 0.0, per example and in a batch."""
    X = [{"x": float(i % 3), "c": f"v{i % 2}"} for i in range(8)]
    y = ["pq"[i % 2] for i in range(8)]
    flags = [True, False, True, True, False, True, False, True]
    a, b, c = MODELS[name](), MODELS[name](), MODELS[name]()
    for x, yy, f in zip(X, y, flags, strict=True):
        a.learn_one(x, yy, w=f)
        b.learn_one(x, yy, w=float(f))
    c.learn_many(X, y, flags)
    assert a.predict_proba_many(X) == b.predict_proba_many(X) == c.predict_proba_many(X)
