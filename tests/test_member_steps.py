"""The member steps: each ensemble algorithm's per-member update written once as a compiled
function (``ensembles._kernels.bagging_step``, ``boosting_step``), equal to its readable Python
reference (``OnlineBagging._py_learn``, ``OnlineBoosting._py_learn``) on hand-made and random
examples, called alone and through every loop that uses it (serial, batch, member threads,
adaptive)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streams import Proxy

from ensembles import OnlineBagging, OnlineBoosting
from ensembles._kernels import Example, Scratch, bagging_step, boosting_start, boosting_step
from ensembles._rng import poisson
from learners import NaiveBayes
from learners.jit import kernel

KINDS = {"x": "numeric", "c": "categorical"}
CLASSES = ["p", "q", "r"]


def _pair(cls, n_models: int, seed: int, **options):
    """A compiled model and its reference (the same algorithm over Python members: ``Proxy``),
    with the features and classes declared so that both code them alike."""
    fast = cls(NaiveBayes(), n_models=n_models, seed=seed, **options)
    fast.declare(features=KINDS, classes=CLASSES)
    proto = NaiveBayes()
    proto.declare(features=KINDS, classes=CLASSES)
    slow = cls(Proxy(proto), n_models=n_models, seed=seed)
    for member in slow._members:
        member.inner.declare(features=KINDS, classes=CLASSES)
    slow.declare(classes=CLASSES)
    return fast, slow


def _encoded(model, x: dict, y: str, w: float, seq: int) -> tuple:
    """The bank of compiled ``model`` (with room for one more example), and ``x`` as a member
    step gets it: an ``Example`` and a ``Scratch``."""
    bank = model._be.bank
    xn, xc, yc, _ = bank.schema.encode_rows([x], grow=True, ys=[y])
    bank.fit_schema()
    need = bank.need()
    bank.grow_nodes(need)  # (room for one learned example: doubling more than enough)
    n = bank.schema.n_classes
    ex = Example(xn[0], xc[0], int(yc[0]), float(w), int(seq), n)
    C = max(n, 2)  # (learners.compiled.sparse_buffers: pv twice as long as pk)
    scratch = Scratch(bank.schema.code_attr_array, np.zeros(C, np.int64), np.zeros(2 * C),
                      np.full((model.n_models, 4), -1, np.int64))  # fmt: skip
    return bank, ex, scratch


def _same_answers(fast, slow, probes) -> None:
    for x in probes:
        pf, ps = fast.predict_proba_one(x), slow.predict_proba_one(x)
        assert set(pf) == set(ps) or not ps
        for c, v in ps.items():
            assert pf.get(c, 0.0) == pytest.approx(v, abs=1e-12)


PROBES = [{"x": 0.5, "c": "a"}, {"x": -3.0, "c": "b"}, {"x": 9.0}, {"c": "c"}]


def _bagging_steps(fast, x, y, w, seq) -> list[int]:
    """Every member of ``fast`` takes one bagging step on (x, y, w) as example number ``seq``."""
    bank, ex, scratch = _encoded(fast, x, y, w, seq)
    step = kernel(bagging_step)
    ks = [step(bank.view(), m, 1.0, fast.seed, ex, scratch) for m in range(fast.n_models)]
    bank.sync()  # (a step may have grown the class-entry pools)
    return ks


def test_bagging_step_on_hand_made_examples() -> None:
    """Seeds and example numbers chosen so that members draw k = 0, 1 and 2 or more: the step
    returns the reference's draw and the member learns with weight k * w, as the reference's
    member learns it."""
    seed, seq = 3, 5
    ks = [poisson(1.0, seed, seq, m) for m in range(6)]
    assert 0 in ks and 1 in ks and max(ks) >= 2  # (the cases this example covers)
    fast, slow = _pair(OnlineBagging, 6, seed)
    first = [({"x": 1.0, "c": "a"}, "p", 1.0), ({"x": 4.0, "c": "b"}, "q", 2.5),
             ({"x": 2.0}, "r", 0.5), ({"x": 1.5, "c": "a"}, "p", 1.0)]  # fmt: skip
    for i, (x, y, w) in enumerate(first):
        assert _bagging_steps(fast, x, y, w, seq + i) == [
            poisson(1.0, seed, seq + i, m) for m in range(6)
        ]
        slow._py_learn(x, y, w, seq + i)
    _same_answers(fast, slow, PROBES)


ROWS = st.lists(
    st.tuples(
        st.fixed_dictionaries({}, optional={"x": st.floats(-5, 5), "c": st.sampled_from("abc")}),
        st.sampled_from(CLASSES),
        st.sampled_from([1.0, 0.5, 2.0, 3.25]),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=ROWS, seed=st.integers(0, 2**40), seq0=st.integers(0, 2**40),
       n_models=st.integers(1, 5))  # fmt: skip
def test_bagging_step_equals_the_reference(rows, seed, seq0, n_models) -> None:
    fast, slow = _pair(OnlineBagging, n_models, seed)
    for i, (x, y, w) in enumerate(rows):
        ks = _bagging_steps(fast, x, y, w, seq0 + i)
        assert ks == [poisson(1.0, seed, seq0 + i, m) for m in range(n_models)]
        slow._py_learn(x, y, w, seq0 + i)
    _same_answers(fast, slow, PROBES + [x for x, _, _ in rows[:5]])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=ROWS, seed=st.integers(0, 2**40), seq0=st.integers(0, 2**40),
       n_models=st.integers(1, 5), moa=st.booleans())  # fmt: skip
def test_boosting_step_equals_the_reference(rows, seed, seq0, n_models, moa) -> None:
    """Per example ``boosting_start``, then ``boosting_step`` member after member, against
    ``_py_learn``: the same lambdas passed on, the same lambda_sc / lambda_sw, the same
    answers."""
    rule = {"lambda_rule": "moa"} if moa else {}
    fast, slow = _pair(OnlineBoosting, n_models, seed, **rule)
    slow.lambda_rule = fast.lambda_rule
    step, start = kernel(boosting_step), kernel(boosting_start)
    code = 1 if moa else 0
    for i, (x, y, w) in enumerate(rows):
        bank, ex, scratch = _encoded(fast, x, y, w, seq0 + i)
        lams = fast._lam
        lam = start(lams, w, code)
        for m in range(n_models):
            lam, correct = step(bank.view(), m, lams, lam, code, fast.seed, ex, scratch)
            assert correct in (True, False)
        bank.sync()
        slow._py_learn(x, y, w, seq0 + i)
        assert fast._lam.tolist() == slow._lam.tolist()  # (the same arithmetic: exact)
    _same_answers(fast, slow, PROBES)


def _stream(rows, repeat: int) -> tuple[list, list, list]:
    data = [r for _ in range(repeat) for r in rows]
    return [x for x, _, _ in data], [y for _, y, _ in data], [w for _, _, w in data]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=ROWS, seed=st.integers(0, 2**40), n_models=st.integers(2, 4))
def test_every_bagging_loop_takes_the_reference_step(rows, seed, n_models) -> None:
    """The serial loop (per example and a batch), the member threads and the adaptive loop
    (lambda 1, a window, no detector: the same learning) all learn what the reference learns."""
    X, Y, W = _stream(rows, max(1, 70 // len(rows)))  # (>= 64 rows: the threads run)
    _, slow = _pair(OnlineBagging, n_models, seed)
    for x, y, w in zip(X, Y, W, strict=True):
        slow.learn_one(x, y, w=w)  # (the reference: _py_learn with example numbers 0, 1, ...)
    want = [slow.predict_proba_one(x) for x in PROBES]
    for how in ("one", "batch", "threads", "adaptive"):
        options = {"window": 5} if how == "adaptive" else {}
        fast, _ = _pair(OnlineBagging, n_models, seed, **options)
        if how == "threads":
            fast.threads = 2
        if how == "one":
            for x, y, w in zip(X, Y, W, strict=True):
                fast.predict_learn_one(x, y, w=w)
        else:
            fast.predict_learn_many(X, Y, W)
        got = [fast.predict_proba_one(x) for x in PROBES]
        for pf, ps in zip(got, want, strict=True):
            for c, v in ps.items():
                assert pf.get(c, 0.0) == pytest.approx(v, abs=1e-12), how
