"""Batch ensembles over native learners encode the training set once (``learners.EncodedRows``):
the members, their vote weights and every prediction must be exactly those of the generic path,
where each member reads the dicts itself (``learn_many`` on its resample, ``predict_many``)."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from fractions import Fraction
from types import MappingProxyType

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import Proxy, categorical_stream, mixed_stream

from ensembles import AdaBoost, BatchBagging, OnlineBagging
from learners import (
    DecisionStump,
    EncodedRows,
    FeatureTypeError,
    HoeffdingTree,
    NaiveBayes,
    Schema,
    argmax_label,
)


def _data(n: int = 1200, seed: int = 7):
    """Numeric + categorical features, missing values, features and categories that appear late,
    dict key order varying by row, and a class and a category that each occur in one row only
    (row 0: resamples that miss it number everything else differently)."""
    rng = random.Random(seed)
    X, y = [], []
    for i, (x, t) in enumerate(mixed_stream(n, seed, new_class_at=n // 2, missing=0.2)):
        if rng.random() < 0.3:
            x = dict(reversed(list(x.items())))
        if i % 50 == 3:
            x["count"] = rng.randint(0, 4)  # an int-valued numeric feature, now and then
        x["x2"] = math.nan if rng.random() < 0.1 else x.get("x2")
        X.append(x)
        y.append(t)
    X[0] = {"shape": "star", "x1": 0.0, **X[0]}  # a feature and a category seen once
    y[0] = "singleton"
    return X, y


LEARNERS = {
    "nb": NaiveBayes(),
    "stump": DecisionStump(),
    "stump_gini": DecisionStump(split_criterion="gini"),
    "ht": HoeffdingTree(grace_period=20, tau=0.2),
    "ht_nb": HoeffdingTree(grace_period=30, leaf_prediction="nb"),
}


def _snapshot(model) -> tuple:
    """Everything observable: member states, vote weights, probabilities (with key order)."""
    states = []
    for member in model._members:
        state = member.to_state() if not isinstance(member, Proxy) else member.inner.to_state()
        states.append((state["header"], {k: a.tolist() for k, a in state["arrays"].items()}))
    return states, model._weights


@pytest.mark.parametrize("cls", [BatchBagging, AdaBoost])
@pytest.mark.parametrize("name", list(LEARNERS))
def test_fast_path_equals_generic_path(cls, name):
    X, y = _data()
    test = X[::3] + [{"colour": "teal", "shape": "circle"}, {"unknown": 1.0}, {}]
    fast = cls(LEARNERS[name], n_models=8, seed=3).fit(X, y)
    slow = cls(Proxy(LEARNERS[name]), n_models=8, seed=3).fit(X, y)
    assert fast._schema is not None and slow._schema is None  # the paths under test
    assert _snapshot(fast) == _snapshot(slow)
    pf, ps = fast.predict_proba_many(test), slow.predict_proba_many(test)
    assert [list(p.items()) for p in pf] == [list(p.items()) for p in ps]
    assert fast.predict_many(test) == slow.predict_many(test)
    assert fast.predict_one(test[0]) == slow.predict_one(test[0])
    if cls is BatchBagging:  # the stream exercises members that miss the singleton class
        has = ["singleton" in m.classes for m in fast._members]
        assert any(has) and not all(has)


def _kept_rows(w):
    return [i for i, wi in enumerate(w) if wi > 0]


@pytest.mark.parametrize("name", list(LEARNERS))
def test_learn_and_predict_encoded_equal_the_dict_forms(name):
    X, y = _data(600)
    rng = np.random.default_rng(1)
    w = rng.poisson(1.0, len(X)).astype(float)
    w[0] = 0.0  # the singleton row is skipped: its class, feature and category stay unknown
    enc = EncodedRows.for_learning(X, y)
    fast, slow = LEARNERS[name].clone(), LEARNERS[name].clone()
    fast.learn_encoded(enc, w)
    keep = _kept_rows(w)
    slow.learn_many([X[i] for i in keep], [y[i] for i in keep], [w[i] for i in keep])
    assert fast.to_state()["header"] == slow.to_state()["header"]
    assert "singleton" not in fast.classes and fast.classes != enc.schema.classes
    for k, a in slow.to_state()["arrays"].items():
        np.testing.assert_array_equal(fast.to_state()["arrays"][k], a, err_msg=k)
    labels = [fast.classes[i] if i >= 0 else None for i in fast.predict_encoded(enc)]
    assert labels == slow.predict_many(X)
    # a learner that knows more than the encoding (learned on afterwards) reads the dicts
    fast.learn_one({"colour": "ultraviolet", "brand_new": 2.0}, "novel")
    slow.learn_one({"colour": "ultraviolet", "brand_new": 2.0}, "novel")
    test = [{"colour": "ultraviolet", "brand_new": 2.5}, *X[:50]]
    labels = [fast.classes[i] if i >= 0 else None for i in fast.predict_encoded(enc)]
    assert labels == slow.predict_many(X)
    pred = EncodedRows.for_prediction(test, enc.schema)
    assert [fast.classes[i] for i in fast.predict_encoded(pred)] == slow.predict_many(test)


def test_learn_encoded_needs_an_untrained_learner():
    X, y = _data(50)
    enc = EncodedRows.for_learning(X, y)
    nb = NaiveBayes()
    nb.learn_one(X[0], y[0])
    with pytest.raises(ValueError, match="untrained"):
        nb.learn_encoded(enc, np.ones(len(X)))
    with pytest.raises(ValueError, match="one per row"):
        NaiveBayes().learn_encoded(enc, np.ones(3))


def test_best_classes_breaks_ties_like_argmax_label():
    s = Schema()
    s.declare(classes=["a", "b", "c"])
    out = np.array(
        [
            [0.4, 0.4, 0.2],  # tie: first class
            [0.0, 0.0, 0.0],  # nothing: None
            [0.2, 0.5, 0.3],
            [0.0, 3.0, 3.0],  # not normalized: proba_dict renormalizes (exact path)
            [0.1, 0.45, 0.45],
        ]
    )
    want = [argmax_label(s.proba_dict(row)) for row in out]
    assert [s.classes[i] if i >= 0 else None for i in s.best_classes(out)] == want
    assert want == ["a", None, "b", "b", "b"]


def test_inputs_the_encoding_rejects_behave_as_on_the_generic_path():
    X, y = _data(200)
    X[150] = {**X[150], "size": [3.0]}  # no kind takes a list: members that draw this row fail
    for learner in (NaiveBayes(), Proxy(NaiveBayes())):
        with pytest.raises(FeatureTypeError, match="size"):
            BatchBagging(learner, n_models=4, seed=1).fit(X, y)
    X, y = _data(200)
    fast = BatchBagging(NaiveBayes(), n_models=4, seed=1).fit(X, y)
    slow = BatchBagging(Proxy(NaiveBayes()), n_models=4, seed=1).fit(X, y)
    for model in (fast, slow):
        with pytest.raises(FeatureTypeError, match="x1"):
            model.predict_many([{"x1": "high"}])


@pytest.mark.parametrize("criterion", ["info_gain", "gini"])
@pytest.mark.parametrize("data", ["mixed", "categorical"])
def test_stump_predict_only_runs_equal_per_row_predictions(data, criterion):
    """A predict-only run searches the stump's split once; every row must get what the per-row
    path (``tree_proba``, taken when learning: here with ``w = 0``, which learns nothing) gives."""
    if data == "mixed":
        X, y = _data(600)
    else:
        X, y = map(list, zip(*categorical_stream(600, seed=2)))
    stump = DecisionStump(split_criterion=criterion)
    stump.learn_many(X, y)
    per_row = stump.predict_learn_many(X, y, [0.0] * len(X))
    assert stump.predict_proba_many(X) == per_row
    assert [stump.predict_one(x) for x in X[:20]] == [argmax_label(p) for p in per_row[:20]]
    assert DecisionStump().predict_proba_many(X[:3]) == [{}, {}, {}]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.integers(-5, 5), st.text(max_size=3), st.booleans()),
        max_size=6,
        unique_by=lambda c: (type(c) is bool, c),
    ),  # fmt: skip
    st.data(),
)
def test_batch_answers_equal_the_per_row_dicts(classes, data) -> None:
    """``Schema.proba_dicts`` (one conversion for the batch, literal dicts for two classes) gives
    ``proba_dict`` row by row: empty rows, unnormalised rows, fewer classes known at a row."""
    s = Schema()
    for y in classes:
        try:
            s.class_code(y, grow=True)
        except Exception:  # e.g. True after 1: refused, as in a model
            pass
    C = len(s.classes)
    R = data.draw(st.integers(0, 8))
    width = max(C, 1)
    cell = st.one_of(st.just(0.0), st.floats(0.0, 1e300), st.floats(0.0, 1.0))
    out = np.array(data.draw(st.lists(st.lists(cell, min_size=width, max_size=width),
                                      min_size=R, max_size=R)), dtype=float).reshape(R, width)  # fmt: skip
    n_cls = np.array(data.draw(st.lists(st.integers(0, C), min_size=R, max_size=R)), dtype=np.int64)
    got = s.proba_dicts(out, n_cls)
    want = [s.proba_dict(out[r], int(n_cls[r])) for r in range(R)]
    assert got == want
    assert [list(d) for d in got] == [list(d) for d in want]  # same key order


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 6), st.data())
def test_normalized_batch_answers_equal_the_per_row_dicts(C, data) -> None:
    """The usual batch (every row over the same classes, normalized or empty, as the kernels
    answer) takes ``proba_dicts``' vectorised check: still ``proba_dict`` row by row, also with
    rows the check must hand to the row loop (sums off by more than 1e-12, NaN, fewer classes
    known at a row)."""
    s = Schema()
    for y in range(C):
        s.class_code(f"c{y}", grow=True)
    R = data.draw(st.integers(1, 12))
    width = C + data.draw(st.integers(0, 2))
    rows = []
    for _ in range(R):
        kind = data.draw(st.sampled_from(["normal", "normal", "empty", "off", "near", "first",
                                          "nan"]))  # fmt: skip
        raw = data.draw(st.lists(st.floats(0.0, 1e300), min_size=width, max_size=width))
        row = np.array(raw, dtype=float)
        tot = row[:C].sum()
        if kind == "empty" or tot == 0.0 or not np.isfinite(tot):
            row[:C] = 0.0
        elif kind in ("normal", "near"):
            row[:C] /= tot
            if kind == "near":  # a sum off by more than 1e-12, less than 1e-6
                row[:C] *= 1.0 + data.draw(st.floats(2e-12, 1e-7))
        elif kind == "first":  # certain of the first class (0 for classes known later)
            row[:C] = 0.0
            row[0] = 1.0
        elif kind == "nan":
            row[data.draw(st.integers(0, C - 1))] = math.nan
        rows.append(row)
    out = np.array(rows).reshape(R, width)
    n_cls = np.full(R, C, dtype=np.int64)
    if data.draw(st.booleans()):
        n_cls[: data.draw(st.integers(0, R))] = data.draw(st.integers(0, C))
    got = s.proba_dicts(out, n_cls)
    want = [s.proba_dict(out[r], int(n_cls[r])) for r in range(R)]
    assert repr(got) == repr(want)  # (NaN-aware, and the same key order)
    assert all(type(v) is float for d in got for v in d.values())


_cell = st.one_of(
    st.sampled_from(
        [
            math.inf,
            -math.inf,
            math.nan,
            -0.0,
            2**70,
            -(2**63),
            True,
            False,
            None,
            "1.5",
            "a",
            "b",
            "c",
            "",
            "é",
            5,
            np.float32(0.5),
            np.int64(3),
            np.str_("a"),
            np.nan,
        ]
    ),  # fmt: skip
    st.floats(width=64),
    st.integers(-(2**70), 2**70),  # beyond float64's range too
)


def _encode(schema: Schema, X: list, grow: bool, ys: list | None, columns: bool):
    """``encode_rows``' arrays (or the error raised) and the schema after, by the column path
    when it takes the batch, or by the row loop alone."""
    import learners.schema as schema_module

    keep = schema_module._COLUMNS_FROM
    schema_module._COLUMNS_FROM = 8 if columns else 10**9
    try:
        got: object = tuple(a.tolist() for a in schema.encode_rows(X, grow, ys))
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        got = (type(exc), str(exc))
    finally:
        schema_module._COLUMNS_FROM = keep
    return repr(got), schema.to_header(), schema.text_bytes


def _assert_columns_as_loop(base: Schema, X: list, grow: bool, ys: list | None) -> None:
    """``_encode`` of ``X`` by the column path and by the row loop, each on a copy of ``base``:
    the same arrays, labels, errors and schema."""
    import copy

    one, two = copy.deepcopy(base), copy.deepcopy(base)
    assert _encode(one, X, grow, ys, columns=True) == _encode(two, X, grow, ys, columns=False)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["x", "y", "z", "c", "d"]),
            st.sampled_from(["numeric", "categorical"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
        unique_by=lambda t: t[0],
    ),  # fmt: skip
    st.integers(8, 20),
    st.sampled_from(["same", "shuffled", "ragged", "extra", "not a dict"]),
    st.booleans(),
    st.data(),
)
def test_the_column_path_encodes_as_the_row_loop(features, R, shape, grow, data) -> None:
    """Any batch, hostile cells included: ``encode_rows`` gives the row loop's arrays, labels,
    errors and schema (the column path takes only the batches it encodes exactly). Features are
    declared or learned from a first row (a string is a number only in a declared one)."""
    base = Schema()
    base.declare({name: kind for name, kind, declared in features if declared})
    kinds = {name: kind for name, kind, _ in features}
    warm = [{name: (v if kind == "categorical" else 1.0) for name, kind in kinds.items()}
            for v in "ab"]  # fmt: skip
    base.encode_rows(warm, True, ["p", "q"])
    keys = data.draw(st.permutations(list(kinds)))
    X = []
    for r in range(R):
        row_keys = list(keys)
        if shape == "shuffled":
            row_keys = data.draw(st.permutations(list(kinds)))
        elif shape == "ragged" and r == R - 1:
            row_keys = row_keys[:-1]
        elif shape == "extra" and r == R - 1:
            row_keys = [*row_keys, "new"]  # every key of the others, and one unknown
        X.append({k: ("ab"[(r + len(k)) % 2] if kinds.get(k) == "categorical" else r * 0.5 - 3)
                  for k in row_keys})  # fmt: skip
    for _ in range(data.draw(st.integers(0, 3))):  # a few hostile cells in a plain batch
        row = X[data.draw(st.integers(0, R - 1))]
        if row:
            row[data.draw(st.sampled_from(sorted(row)))] = data.draw(_cell)
    if shape == "not a dict":
        X[-1] = MappingProxyType(X[-1])  # a mapping the row loop refuses
    labels = st.sampled_from(["p", "q", "p", "q", "r", 1, True, np.str_("p")])  # ("r": new)
    ys = data.draw(st.one_of(st.none(), st.lists(labels, min_size=R, max_size=R)))
    _assert_columns_as_loop(base, X, grow, ys)


@pytest.mark.parametrize(
    "cell", ["1.5", "", b"1", np.float32(0.5), np.int64(3), np.str_("2"), True, None, 2**70,
             Fraction(1, 3), Decimal("1.5")],
)  # fmt: skip
@pytest.mark.parametrize("declared", [False, True])
@pytest.mark.parametrize("grow", [False, True])
def test_a_numeric_column_with_a_cell_of_another_type(cell, declared, grow) -> None:
    """One cell of a numeric column that is not a float or an int: the batch is what the row
    loop makes of it (text is a number only in a declared feature, else an error naming it),
    not what numpy's conversion of the column would make of it ("1.5" read as 1.5)."""
    base = Schema()
    if declared:
        base.declare({"x": "numeric"})
    base.encode_rows([{"x": 1.0, "c": "a"}, {"x": 2.0, "c": "b"}], True, ["p", "q"])
    X = [{"x": float(r), "c": "ab"[r % 2]} for r in range(12)]
    X[5]["x"] = cell
    _assert_columns_as_loop(base, X, grow, ["pq"[r % 2] for r in range(12)])


def test_the_column_path_takes_plain_batches() -> None:
    """The usual batch goes by columns (else the test above compares the loop with itself)."""
    s = Schema()
    X = [{"a": float(i), "b": i, "c": "uv"[i % 2], "d": i % 3 == 0} for i in range(20)]
    s.encode_rows(X, True, ["p"] * 20)
    assert s._encode_columns(X, grow=True) is not None
    assert s._encode_columns(X, grow=False) is not None
    X[5]["c"] = "new"
    assert s._encode_columns(X, grow=True) is None  # a new category: the loop's order
    assert s._encode_columns(X, grow=False) is not None  # unseen: no new code


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(["nb", "ht", "bag"]))
def test_a_dataframe_learns_as_its_rows(data, kind) -> None:
    """A DataFrame's batch (``FrameRows``: read by columns when it can) gives what its rows as
    dicts give: the probabilities, and the model after (NaN and None cells, int, bool, str
    and mixed columns, non-string column names). A frame whose column names repeat is
    refused, naming the name, and the model is left as it was: its rows as dicts would keep
    one of those columns."""
    import pandas as pd

    from ensembles import OnlineBagging

    make = {
        "nb": NaiveBayes,
        "ht": lambda: HoeffdingTree(grace_period=20),
        "bag": lambda: OnlineBagging(NaiveBayes(), n_models=3, seed=2),
    }[kind]
    n_cols = data.draw(st.integers(1, 4))
    names = data.draw(st.lists(st.sampled_from(["a", "b", "c", "d", 7]), min_size=n_cols,
                               max_size=n_cols))  # fmt: skip
    kinds = [data.draw(st.sampled_from(["float", "int", "bool", "str", "mixed"])) for _ in names]
    cell = {
        "float": st.one_of(st.floats(-1e6, 1e6), st.just(math.nan)),
        "int": st.integers(-5, 5),
        "bool": st.booleans(),
        "str": st.sampled_from(["u", "v", "w"]),
        "mixed": st.one_of(
            st.sampled_from(["u", "1.5", None, math.nan, math.inf]), st.integers(-3, 3)
        ),  # fmt: skip
    }
    a, b = make(), make()
    for _ in range(3):
        R = data.draw(st.integers(1, 30))
        cols = [data.draw(st.lists(cell[k], min_size=R, max_size=R)) for k in kinds]
        frame = pd.DataFrame(dict(enumerate(cols)))
        frame.columns = names
        y = pd.Series(data.draw(st.lists(st.sampled_from(["p", "q", "r"]), min_size=R,
                                         max_size=R)), index=frame.index)  # fmt: skip
        rows = frame.to_dict(orient="records")
        if len(set(names)) < len(names):
            with pytest.raises(FeatureTypeError) as refused:
                a.predict_learn_many(frame, y)
            first = next(n for i, n in enumerate(names) if n in names[:i])
            assert refused.value.feature == str(first)
            continue
        try:
            got = a.predict_learn_many(frame, y)
        except Exception as exc:  # noqa: BLE001 - the same error is expected
            with pytest.raises(type(exc)):
                b.predict_learn_many(rows, y.tolist())
            continue
        want = b.predict_learn_many(rows, y.tolist())
        pd.testing.assert_frame_equal(got, _frame_of(want, frame.index), check_column_type=False)
    assert a.classes == b.classes
    probe = pd.DataFrame({n: [0.5, 1.0] for n in ["a", "b"]})
    pd.testing.assert_frame_equal(a.predict_proba_many(probe), b.predict_proba_many(probe))


def test_plain_dataframes_are_read_by_columns() -> None:
    """(else the test above compares the dict path with itself)"""
    import pandas as pd

    s = Schema()
    frame = pd.DataFrame(
        {"a": [float(i) for i in range(20)], "c": ["uv"[i % 2] for i in range(20)]}
    )
    s.encode_rows(frame.to_dict(orient="records"), True, ["p"] * 20)
    assert s._encode_frame(frame, grow=True) is not None
    frame.columns = ["a", "a"]
    assert s._encode_frame(frame, grow=True) is None


def test_batch_answers_with_classes_learned_within_the_batch() -> None:
    """Rows before a class arrives answer over the classes known then: a batch whose counts
    differ is not read as a batch over its first row's classes, even where that row's sums
    would pass."""
    s = Schema()
    for y in "abc":
        s.class_code(y, grow=True)
    out = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    for counts in ([1, 3, 3, 3], [2, 3, 3, 2], [3, 3, 3, 1]):
        got = s.proba_dicts(out, np.array(counts, dtype=np.int64))
        assert got == [s.proba_dict(out[r], c) for r, c in enumerate(counts)]
        assert [len(d) for d in got] == [c if out[r].any() else 0 for r, c in enumerate(counts)]


@pytest.mark.parametrize(
    "labels",
    [[1, 0, True], [True], [False, True], [1.0, 0, 1], [np.int64(1), 0, 1], [0, 1, 2], [1, 0]],
)
def test_batch_labels_of_another_type_are_the_loops(labels: list) -> None:
    """The column path reads a batch's labels at once when each is a known class of its class'
    type; ``True`` in a model of ``1``, ``1.0`` or a numpy int must still be what the loop
    makes of them (an error, or the normalised class)."""
    X = [{"a": float(i)} for i in range(9)]
    fast, loop = Schema(), Schema()
    for s in (fast, loop):
        s.encode_rows(X[:2], True, [0, 1])
    ys = (labels * 9)[:9]
    assert _encode(fast, X, True, ys, columns=True) == _encode(loop, X, True, ys, columns=False)


def _frame_of(probas: list[dict], index) -> pd.DataFrame:
    """What a DataFrame's probabilities must be: a column per class (in order of appearance),
    0 where a row has no probability for it (or NaN), indexed like the input."""
    cols = list(dict.fromkeys(k for p in probas for k in p))
    cells = [[p.get(c, 0.0) for c in cols] for p in probas]
    return pd.DataFrame(cells, columns=cols, index=index, dtype=float).fillna(0.0)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([[0, 1], [1, 0], [True, False], ["p", "q"], [0, 1, 2], [3]]),
    st.integers(1, 5),
    st.sampled_from(["range", "offset", "labels", "strings"]),
    st.sampled_from(["nb", "ht", "bag"]),
)
def test_dataframe_probabilities_for_any_index_and_labels(classes, R, index_kind, kind) -> None:
    """A DataFrame's probabilities are a DataFrame indexed like it, whatever its index and the
    labels: with ``from_records(..., index=index)`` a 2-row batch of a model of classes 0 and 1
    came back empty (the index labels, 0 and 1, were taken for columns to index by)."""
    learner = {"nb": NaiveBayes, "ht": lambda: HoeffdingTree(grace_period=5),
               "bag": lambda: OnlineBagging(NaiveBayes(), n_models=3, seed=1)}[kind]()  # fmt: skip
    train = [{"a": float(i % 4), "b": "uv"[i % 2]} for i in range(12)]
    learner.learn_many(train, [classes[i % len(classes)] for i in range(12)])
    rows = [{"a": float(r), "b": "uvw"[r % 3]} for r in range(R)]
    index = {"range": pd.RangeIndex(R), "offset": pd.RangeIndex(1, R + 1),
             "labels": pd.Index(list(classes[:1]) * R), "strings": pd.Index(list("xyzwv")[:R])}[
        index_kind]  # fmt: skip
    frame = pd.DataFrame(rows, index=index)
    got = learner.predict_proba_many(frame)
    pd.testing.assert_frame_equal(got, _frame_of(learner.predict_proba_many(rows), index),
                                  check_column_type=False)  # fmt: skip
