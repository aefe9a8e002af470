"""``learn_one`` defers its kernel call into the next prediction's (``TreeBank.run_one``): river's
loop, ``predict_one(x)`` then ``learn_one(x, y)``, makes one compiled call per example instead of
two. ``learn_one`` still checks, encodes and counts the example itself (every error raised there,
a refused example leaving no trace), and everything that reads the model first runs the kept
learn. So a model must answer and hold exactly what a model that learns at once holds, whatever
the calls, in whatever order: hypothesis drives random interleavings of predictions, learns
(refused ones, new classes and features, ``w = 0`` and extreme weights) and every reader of the
model against a twin whose ``learn_one`` runs at once (``_defer_learns = False``), and the same
calls as one-row batches on a third model: the batch path shares neither the kept encoding nor
the kept learn, so a fault in what both per-example models share (the check that a dict is
unchanged since its prediction, a label equal to a class of another type, the byte limit's
cheap test) shows there.
"""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ensembles
import learners


def _ht() -> learners.HoeffdingTree:
    return learners.HoeffdingTree(grace_period=4, delta=0.3, tau=0.2)


MODELS = {
    "nb": lambda: learners.NaiveBayes(),
    "ht": _ht,
    "stump": lambda: learners.DecisionStump(),
    "bag_ht": lambda: ensembles.OnlineBagging(_ht(), n_models=3, seed=2),
    "bag_nb": lambda: ensembles.OnlineBagging(learners.NaiveBayes(), n_models=3, seed=5),
    "boost_ht": lambda: ensembles.OnlineBoosting(_ht(), n_models=3, seed=3),
    "boost_moa": lambda: ensembles.OnlineBoosting(
        learners.NaiveBayes(), n_models=3, seed=3, lambda_rule="moa"
    ),
    "bag_adwin": lambda: ensembles.OnlineBagging(_ht(), n_models=3, seed=4, drift="adwin"),
    "arf": lambda: ensembles.AdaptiveRandomForest(_ht(), n_models=3, seed=8),
    "srp": lambda: ensembles.StreamingRandomPatches(_ht(), n_models=3, seed=9, subspace=2),
    "arf_stacking": lambda: ensembles.AdaptiveRandomForest(
        _ht(), n_models=3, seed=8, vote="stacking"
    ),
    "bag_ddm_weighted": lambda: ensembles.OnlineBagging(
        learners.NaiveBayes(), n_models=3, seed=6, drift="ddm", vote="weighted", window=20
    ),
    "leveraging_codes": lambda: ensembles.OnlineBagging(
        _ht(), n_models=3, seed=7, drift="adwin", poisson_lambda=6.0, output_codes=True
    ),
    "boost_adwin": lambda: ensembles.OnlineBoosting(
        _ht(), n_models=3, seed=8, drift="adwin", window=10
    ),
    "bag_stacking": lambda: ensembles.OnlineBagging(_ht(), n_models=3, seed=9, vote="stacking"),
    "bag_oob": lambda: ensembles.OnlineBagging(_ht(), n_models=3, seed=11, imbalance="oob"),
    "boost_stacking": lambda: ensembles.OnlineBoosting(
        learners.NaiveBayes(), n_models=3, seed=10, vote="stacking"
    ),
}


def _outcome(fn, *args, **kwargs) -> Any:
    """What a call gives: its value, or its error's type and message (and nothing else)."""
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the error is the outcome compared
        return ("error", type(exc).__name__, str(exc))


def _state(model) -> tuple:
    st_ = model.to_state()
    return st_["header"], {k: (v.dtype.str, v.shape, v.tobytes()) for k, v in st_["arrays"].items()}


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN (a probability or a diversity figure may be NaN)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    return a == b


def _describe(model) -> Any:
    out = model.describe() if hasattr(model, "describe") else None
    if isinstance(out, dict):
        out.pop("state_bytes", None)  # (to_state is compared whole)
    return out


# every way to read (or change outside the per-example calls) a model; each returns what is
# compared between the two models
READERS = {
    "n_seen": lambda m: m.n_seen,
    "classes": lambda m: m.classes,
    "knows_feature": lambda m: m.knows_feature("b"),
    "to_state": _state,
    "state_bytes": lambda m: m.state_bytes,
    "memory_bytes": lambda m: m.memory_bytes > 0,  # (capacities may differ: they change nothing)
    "describe": _describe,
    "describe_tree": lambda m: m.describe_tree() if hasattr(m, "describe_tree") else None,
    "predict_many": lambda m: m.predict_many([{"a": 1.0, "b": "u"}, {"a": -2.0}, {}]),
    "predict_proba_many": lambda m: m.predict_proba_many([{"a": 0.5, "b": "v", "c": 3}]),
    "learn_many": lambda m: m.learn_many([{"a": 0.25, "b": "u"}, {"a": 3.0}], ["p", "q"]),
    "predict_learn_many": lambda m: m.predict_learn_many([{"a": 2.0, "b": "w"}], ["r"], [2.0]),
    "pickle": lambda m: _state(pickle.loads(pickle.dumps(m))),
    "deepcopy": lambda m: _state(copy.deepcopy(m)),
    "clone_attrs": lambda m: _state(m.clone(include_attributes=True)),
    "declare": lambda m: m.declare(features={"d": "numeric"}, classes=["s"]),
    "n_drifts": lambda m: getattr(m, "n_drifts", None),
    "diversity": lambda m: m.diversity() if hasattr(m, "diversity") else None,
    "vote_weights": lambda m: list(m.vote_weights) if hasattr(m, "vote_weights") else None,
    "epsilons": lambda m: m.epsilons if hasattr(m, "epsilons") else None,
    "threads": lambda m: setattr(m, "threads", 2) if hasattr(m, "n_models") else None,
}

VALUES = st.one_of(
    st.sampled_from([0.0, 1.0, -1.5, 2.25, 7.0, 1e300, -0.0]),
    st.floats(-5, 5, allow_nan=False),
    st.integers(-3, 10),
    st.sampled_from([math.nan, math.inf, None, True]),  # missing, refused, missing, a number
    st.sampled_from(["u", "v", "w", "x"]),  # a category (refused for a numeric feature)
)
ROWS = st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), VALUES, max_size=4)
LABELS = st.one_of(st.sampled_from(["p", "q", "r", "s", "t"]), st.just(1), st.just(""))
WEIGHTS = st.sampled_from([1.0, 1.0, 1.0, 0.0, 2.5, 1e12, 1e-300, -1.0, math.nan, 1e13, 3])

OPS = st.one_of(
    st.tuples(st.just("predict"), ROWS),
    st.tuples(st.just("proba"), ROWS),
    st.tuples(st.just("predict_last")),  # predict the last dict again (same object)
    st.tuples(st.just("learn"), ROWS, LABELS, WEIGHTS),
    st.tuples(st.just("learn_last"), LABELS, WEIGHTS),  # river's loop: learn the dict predicted
    st.tuples(st.just("predict_learn"), ROWS, LABELS, WEIGHTS),
    st.tuples(st.just("mutate_last"), VALUES),  # the dict changed between predict and learn
    st.tuples(st.just("read"), st.sampled_from(sorted(READERS))),
)


def _river_block(n: int, seed: int) -> list:
    """A stream in river's loop: ``predict_one(x)`` then ``learn_one(x, y)`` of the same dict."""
    rng = np.random.default_rng(seed)
    ops: list = []
    for _ in range(n):
        a = float(rng.normal())
        ops.append(("predict", {"a": a, "b": "uvw"[int(rng.integers(3))]}))
        ops.append(("learn_last", "pq"[int(a > 0)], 1.0))
    return ops


def _batch_call(model: Any, op: tuple, x: dict) -> Any:
    """The call of ``op`` as a batch of one row, with a copy of ``x``: another code path than
    the per-example calls' (``Schema.encode_rows``, no kept encoding or learn)."""
    x = dict(x)
    kind = op[0]
    if kind in ("predict", "predict_last"):
        return model.predict_many([x])[0]
    if kind == "proba":
        return model.predict_proba_many([x])[0]
    y, w = op[-2], op[-1]
    if kind in ("learn", "learn_last"):
        return model.learn_many([x], [y], [w])
    return model.predict_learn_many([x], [y], [w])[0]


def _agree(a: Any, b: Any) -> bool:
    """Per-example against batch outcomes: the same values, or errors of the same type (a
    batch's message may name the row)."""
    if a[0] == "error" or b[0] == "error":
        return a[0] == b[0] and a[1] == b[1]
    return _same(a[1], b[1]) or (a[1] is None and b[1] is None)


def _run(name: str, ops: list, make: Any = None) -> None:
    """``ops`` on a model whose ``learn_one`` defers and on one that learns at once (the same
    answers, errors and state), and as batches of one row on a third model: the per-example
    path is checked against code that shares neither its kept encoding nor its kept learn."""
    make = make or MODELS[name]
    lazy, eager, batch = make(), make(), make()
    eager._defer_learns = False  # learns at once: the reference
    last: dict = {}
    for op in ops:
        kind = op[0]
        if kind == "mutate_last":
            last["a"] = op[1]
            continue
        if kind == "set_last":  # any key, any value (added when new)
            last[op[1]] = op[2]
            continue
        if kind == "drop_last":
            last.pop(op[1], None)
            continue
        if kind == "read":
            a, b = _outcome(READERS[op[1]], lazy), _outcome(READERS[op[1]], eager)
            assert _same(a, b), (op, a, b)
            _outcome(READERS[op[1]], batch)
            continue
        if kind in ("predict", "proba", "learn", "predict_learn"):
            last = dict(op[1])
        if kind in ("predict", "predict_last"):
            calls = [(m.predict_one, (last,), {}) for m in (lazy, eager)]
        elif kind == "proba":
            calls = [(m.predict_proba_one, (last,), {}) for m in (lazy, eager)]
        elif kind == "learn":
            calls = [(m.learn_one, (last, op[2]), {"w": op[3]}) for m in (lazy, eager)]
        elif kind == "learn_last":
            calls = [(m.learn_one, (last, op[1]), {"w": op[2]}) for m in (lazy, eager)]
        else:
            calls = [(m.predict_learn_one, (last, op[2]), {"w": op[3]}) for m in (lazy, eager)]
        a, b = (_outcome(fn, *args, **kw) for fn, args, kw in calls)
        assert _same(a, b), (op, a, b)
        c = _outcome(_batch_call, batch, op, last)
        assert _agree(a, c), (op, a, c)
    assert _same(_state(lazy), _state(eager))
    assert _same(_state(lazy), _state(batch))
    probe = [{"a": 0.3, "b": "u"}, {"a": -1.0, "b": "w", "c": 2}]
    a, b = (_outcome(m.predict_proba_many, probe) for m in (lazy, eager))
    assert _same(a, b), (a, b)


@pytest.mark.parametrize("name", sorted(MODELS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, max_size=40), block=st.integers(0, 40), seed=st.integers(0, 3))
def test_deferred_learns_give_what_learning_at_once_gives(name, ops, block, seed) -> None:
    """Random calls, with a block of river's loop first (trees split, detectors fire)."""
    _run(name, _river_block(block, seed) + ops)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_sees_the_kept_learn(name, reader) -> None:
    """Each reader, right after a ``learn_one`` whose kernel call is kept, on a trained model."""
    _run(name, [*_river_block(60, 1), ("learn", {"a": 9.0, "b": "x"}, "q", 3.0),
                ("read", reader), *_river_block(5, 2)])  # fmt: skip


# river's loop with what ``TreeBank.learn_one``'s shortcut must notice between ``predict_one(x)``
# and ``learn_one(x, y)`` (a changed dict, a label of another type, a schema grown by another
# call, a learn already kept or just made): each must give what learning at once gives
_X = {"a": 0.5, "b": "u"}
BETWEEN = {
    "a_value_changed": [("predict", _X), ("mutate_last", 4.0), ("learn_last", "p", 1.0)],
    "a_category_changed": [("predict", _X), ("set_last", "b", "w"), ("learn_last", "q", 1.0)],
    "a_new_category": [("predict", _X), ("set_last", "b", "new"), ("learn_last", "q", 1.0)],
    "a_key_added": [("predict", _X), ("set_last", "c", 2.0), ("learn_last", "p", 1.0)],
    "a_key_dropped": [("predict", _X), ("drop_last", "b"), ("learn_last", "p", 1.0)],
    "a_new_class": [("predict", _X), ("learn_last", "r", 1.0)],
    "an_int_weight": [("predict", _X), ("learn_last", "p", 3)],
    "a_zero_weight_then_one": [("predict", _X), ("learn_last", "p", 0.0), ("learn_last", "q", 1.0)],
    "learned_twice": [("predict", _X), ("learn_last", "p", 1.0), ("learn_last", "q", 2.0)],
    "a_batch_between": [("predict", _X), ("read", "learn_many"), ("learn_last", "q", 1.0)],
    "features_declared_between": [("predict", _X), ("read", "declare"), ("learn_last", "p", 1.0)],
    "a_read_between": [("predict", _X), ("read", "n_seen"), ("learn_last", "p", 1.0)],
    "predicted_twice": [("predict", _X), ("predict_last",), ("learn_last", "q", 1.0)],
    "a_probability_then_a_learn": [("proba", _X), ("learn_last", "p", 1.0)],
}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("case", sorted(BETWEEN))
def test_what_happens_between_the_prediction_and_the_learn(name, case) -> None:
    _run(name, [*_river_block(30, 2), *BETWEEN[case], *_river_block(5, 3)])


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("label", [True, 1.0, np.int64(1), "1", 1])
def test_a_label_equal_to_a_class_of_another_type(name, label) -> None:
    """A model of int classes: ``True``, ``1.0``, a numpy int or ``"1"`` learned after the
    prediction of the same dict is what learning it at once makes of it (an error or the
    class), not class 1 read from the class index (``True == 1`` and ``hash(True) == 1``)."""
    rows = [({"a": float(i % 4), "b": "uv"[i % 2]}, i % 2) for i in range(20)]
    ops = [op for x, y in rows for op in (("predict", x), ("learn_last", y, 1.0))]
    _run(name, [*ops, ("predict", _X), ("learn_last", label, 1.0), ("predict", _X)])


@pytest.mark.parametrize("name", ["nb", "ht", "bag_ht", "bag_adwin", "boost_adwin"])
def test_a_model_at_its_byte_limit_refuses_the_learn_of_what_it_predicted(name) -> None:
    """``max_state_bytes``: the learn after a prediction is refused as a learn at once is (and
    the model goes on predicting), with every category new so that the state keeps growing."""

    def make() -> Any:
        return MODELS[name]().clone({"limits": learners.Limits(max_state_bytes=10_000)})

    ops = []
    for i in range(400):  # a new category learned, then river's loop on a known row
        ops += [("learn", {"a": 1.0, "b": f"v{i}"}, "pqr"[i % 3], 1.0),
                ("predict", {"a": float(i % 7), "b": "v0"}), ("learn_last", "pqr"[i % 2], 1.0)]  # fmt: skip
    _run(name, ops, make)
    model, refused = make(), 0  # (the limit is reached within the stream, after some learns)
    for op in ops:
        if op[0] == "predict":
            model.predict_one(op[1])
            x = op[1]
        elif op[0] == "learn_last" and _outcome(model.learn_one, x, op[1], w=op[2])[0] == "error":
            refused += 1
        elif op[0] == "learn":
            _outcome(model.learn_one, op[1], op[2], w=op[3])
    assert 0 < refused < 400


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_first_numeric_feature_declared_between(name) -> None:
    """A model of categorical features only: a numeric feature declared between the prediction
    and the learn changes the schema's sizes, not the width of the kept encoding (one column
    of "missing" either way)."""
    ops = [op for i in range(30) for op in (("predict", {"b": "uvw"[i % 3]}),
                                            ("learn_last", "pq"[i % 2], 1.0))]  # fmt: skip
    _run(name, [*ops, ("predict", {"b": "u"}), ("read", "declare"), ("learn_last", "q", 1.0),
                ("predict", {"b": "v", "d": 2.0})])  # fmt: skip


def test_learn_one_keeps_its_kernel_call_for_the_next_prediction() -> None:
    """The point of it: in river's loop one compiled call per example, none from ``learn_one``;
    the kept learn is run by the prediction, not before it and not twice."""
    model = ensembles.OnlineBagging(_ht(), n_models=3, seed=1)
    bank = model._settled().bank
    calls = []
    for i in range(50):
        x = {"a": float(i % 7), "b": "uv"[i % 2]}
        model.predict_one(x)
        model.learn_one(x, "pq"[i % 3 == 0])
        calls.append(bank._pending is not None)
    assert all(calls)  # every learn kept its call
    assert bank.n_seen == 50  # counted at once
    model.predict_one({"a": 1.0})
    assert bank._pending is None  # the prediction learned it
    model.learn_one({"a": 1.0}, "p")
    assert bank._pending is not None
    assert model.n_seen == 51 and bank._pending is not None  # counted: reading it runs nothing
    model.describe()
    assert bank._pending is None  # a reader of what learning changes learned it (_settled)
    tree = _ht()
    tree.learn_one({"a": 1.0}, "p")
    assert tree._tb._pending is not None
    assert tree.n_seen == 1 and tree._tb._pending is None


def test_a_refused_example_leaves_the_kept_learn_alone() -> None:
    """A learn refused after one was kept: the kept one is learned, the refused one is not."""
    lazy, eager = MODELS["bag_adwin"](), MODELS["bag_adwin"]()
    eager._defer_learns = False
    for m in (lazy, eager):
        m.learn_one({"a": 1.0, "b": "u"}, "p")
        with pytest.raises(learners.FeatureTypeError, match="a"):
            m.learn_one({"a": "zz", "b": "v"}, "q")  # a is numeric
        with pytest.raises(learners.WeightError, match="w must be"):
            m.learn_one({"a": 2.0}, "q", w=-1.0)
        with pytest.raises(learners.LabelError):
            m.learn_one({"a": 2.0}, 7)
    assert lazy.classes == eager.classes == ["p"]
    assert _same(_state(lazy), _state(eager))


BANK_READERS = {
    "run": lambda b, k: b.run(
        *k, [{"a": 0.5, "b": "u"}, {"a": 2.0}], ["p", "q"], [1.0, 2.0], learn=True
    ),
    "run_encoded": lambda b, k: b.run_encoded(
        *k,
        np.array([[0.5, 1.0]]),
        np.array([[0]]),
        np.array([0]),
        np.ones(1),
        np.array([len(b.schema.classes)]),
    ).tolist(),
    "state_arrays": lambda b, k: {n: a.tobytes() for n, a in b.state_arrays().items()},
    "nbytes": lambda b, k: b.nbytes,
    "live_bytes": lambda b, k: b.live_bytes,
    "memory_bytes": lambda b, k: b.memory_bytes > 0,
    "load_arrays": lambda b, k: b.load_arrays(b.state_arrays()),
    "flush": lambda b, k: b.flush(),
}


@pytest.mark.parametrize("reader", sorted(BANK_READERS))
def test_the_bank_runs_a_kept_learn_before_its_own_reads(reader) -> None:
    """``TreeBank`` itself: whoever holds a bank and defers (``run_one(..., defer=True)``) may
    call its other methods; each learns the kept example first."""
    from learners.compiled import NO_FLOAT_STATE, NO_INT_PARAMS, TreeBank, bank_params, single_run

    banks = [TreeBank(bank_params(_ht()), 1) for _ in range(2)]
    k = (single_run, NO_INT_PARAMS, NO_FLOAT_STATE)
    for bank, defer in zip(banks, (True, False), strict=True):
        for i in range(40):
            x = {"a": float(i % 5), "b": "uv"[i % 2]}
            bank.run_one(*k, x)
            bank.run_one(*k, x, "pq"[i % 5 > 2], 1.0, predict=False, learn=True, defer=defer)
    assert banks[0]._pending is not None and banks[1]._pending is None
    a, b = (_outcome(BANK_READERS[reader], bank, k) for bank in banks)
    assert _same(a, b), (a, b)
    assert banks[0]._pending is None
    probe = {"a": 3.0, "b": "u"}
    assert banks[0].run_one(*k, probe) == banks[1].run_one(*k, probe)
    assert _same(_state_of(banks[0]), _state_of(banks[1]))


def _state_of(bank) -> dict:
    return {n: a.tobytes() for n, a in bank.state_arrays().items()}


@pytest.mark.parametrize("name", ["ht", "bag_adwin", "boost_adwin", "bag_nb"])
def test_the_interpreted_twins_defer_alike(name) -> None:
    """Kept learns run by the kernels' Python twins (a cold numba cache) give the compiled
    kernels' answers and states; a model switched between the modes with a learn kept too."""
    from learners import jit

    ops = _river_block(60, 3)
    models = [MODELS[name]() for _ in range(3)]
    models[2]._defer_learns = False
    answers: list[list] = [[], [], []]
    try:
        for i, op in enumerate(ops):
            for k, model in enumerate(models):
                jit.set_interpreted(k == 0 or (k == 1 and i % 2 == 0))
                if op[0] == "predict":
                    last = op[1]
                    answers[k].append(model.predict_proba_one(last))
                else:
                    model.learn_one(last, op[1], w=op[2])
    finally:
        jit.set_interpreted(False)
    assert answers[0] == answers[1] == answers[2]
    assert _same(_state(models[0]), _state(models[2])) and _same(
        _state(models[1]), _state(models[2])
    )
