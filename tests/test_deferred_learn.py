"""``learn_one`` defers its kernel call into the next prediction's (``TreeBank.run_one``): river's
loop, ``predict_one(x)`` then ``learn_one(x, y)``, makes one compiled call per example instead of
two. ``learn_one`` still checks, encodes and counts the example itself (every error raised there,
a refused example leaving no trace), and everything that reads the model first runs the kept
learn. So a model must answer and hold exactly what a model that learns at once holds, whatever
the calls, in whatever order: hypothesis drives random interleavings of predictions, learns
(refused ones, new classes and features, ``w = 0`` and extreme weights) and every reader of the
model against a twin whose ``learn_one`` runs at once (``_defer_learns = False``).
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
    "bag_ddm_weighted": lambda: ensembles.OnlineBagging(
        learners.NaiveBayes(), n_models=3, seed=6, drift="ddm", vote="weighted", window=20
    ),
    "leveraging_codes": lambda: ensembles.OnlineBagging(
        _ht(), n_models=3, seed=7, drift="adwin", poisson_lambda=6.0, output_codes=True
    ),
    "boost_adwin": lambda: ensembles.OnlineBoosting(
        _ht(), n_models=3, seed=8, drift="adwin", window=10
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


def _run(name: str, ops: list) -> None:
    lazy, eager = MODELS[name](), MODELS[name]()
    eager._defer_learns = False  # learns at once: the reference
    last: dict = {}
    for op in ops:
        kind = op[0]
        if kind == "mutate_last":
            last["a"] = op[1]
            continue
        if kind == "read":
            a, b = _outcome(READERS[op[1]], lazy), _outcome(READERS[op[1]], eager)
            assert _same(a, b), (op, a, b)
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
    assert _same(_state(lazy), _state(eager))
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


def test_learn_one_keeps_its_kernel_call_for_the_next_prediction() -> None:
    """The point of it: in river's loop one compiled call per example, none from ``learn_one``;
    the kept learn is run by the prediction, not before it and not twice."""
    model = ensembles.OnlineBagging(_ht(), n_models=3, seed=1)
    bank = model._backend.bank
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
    assert model.n_seen == 51 and bank._pending is None  # a reader learned it
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
