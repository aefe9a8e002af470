"""The route hint kept from a prediction for the deferred learn of the same example
(``TreeBank.run_one``): in river's loop, ``predict_one(x)`` then ``learn_one(x, y)``, the learn
runs in the next prediction's kernel call (row ``_KEPT``) and reuses the route and answers that
``predict_one(x)`` left in the bank's hint (``_hint1``), as a learn in the same call would. It may
only when nothing ran on the bank in between and the learn's row is the predicted one: these
tests check that it is reused in river's loop (by the work the kernels do, counted in their
interpreted twins), and that it is not after another call, a state change or a different row,
where the model must still hold exactly what a model learning at once holds."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np
import pytest
from streams import same

import ensembles
import learners
from learners import jit


def _ht() -> learners.HoeffdingTree:
    return learners.HoeffdingTree(grace_period=4, delta=0.3, tau=0.2)


MODELS: dict[str, Callable[[], Any]] = {
    "ht": _ht,
    "bag_ht": lambda: ensembles.OnlineBagging(_ht(), n_models=3, seed=2),
    "boost_ht": lambda: ensembles.OnlineBoosting(_ht(), n_models=3, seed=3),
    "boost_nb": lambda: ensembles.OnlineBoosting(learners.NaiveBayes(), n_models=3, seed=4),
    "bag_adwin": lambda: ensembles.OnlineBagging(_ht(), n_models=3, seed=5, drift="adwin"),
    "lev_codes": lambda: ensembles.OnlineBagging(
        _ht(), n_models=3, seed=6, drift="adwin", poisson_lambda=6.0, output_codes=True
    ),
    "boost_adwin": lambda: ensembles.OnlineBoosting(_ht(), n_models=3, seed=7, drift="adwin"),
    "arf": lambda: ensembles.AdaptiveRandomForest(_ht(), n_models=3, seed=8),
    "srp_stacking": lambda: ensembles.StreamingRandomPatches(
        _ht(), n_models=3, seed=9, subspace=2, vote="stacking"
    ),
    "bag_stacking": lambda: ensembles.OnlineBagging(_ht(), n_models=3, seed=8, vote="stacking"),
    "bag_uob": lambda: ensembles.OnlineBagging(_ht(), n_models=3, seed=9, imbalance="uob"),
}


def _bank(model) -> Any:
    """The model's bank, without running a kept learn (the per-example calls' reference)."""
    return model._tb if isinstance(model, learners.NativeLearner) else model._be.bank


def _kept_hinted(model) -> bool:
    """Whether the learn ``learn_one`` just kept will run with its prediction's hint."""
    kept = _bank(model)._pending
    assert kept is not None, "the learn was not kept: checks nothing"
    return bool(kept[-1])


def _row(rnd: random.Random) -> tuple[dict, str]:
    y = rnd.randrange(2)
    x = {"a": rnd.gauss(y, 1.0), "b": rnd.uniform(0, 4) + y, "c": "uvw"[rnd.randrange(3)]}
    if rnd.random() < 0.1:
        del x["a"]  # (a missing value: its route depends on the classes)
    return x, "pq"[y]


def _river(models, n: int, seed: int) -> list:
    """River's loop on each model; the answers."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        x, y = _row(rnd)
        for model in models:
            out.append(model.predict_proba_one(x))
            model.learn_one(x, y)
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_river_loop_keeps_the_prediction_hint_for_the_learn(name) -> None:
    model = MODELS[name]()
    _river([model], 20, seed=1)  # (every feature and category known from here on)
    rnd = random.Random(2)
    for _ in range(100):
        x, y = _row(rnd)
        model.predict_one(x)
        model.learn_one(x, y)
        assert _kept_hinted(model)


@contextmanager
def counted_routes() -> Iterator[list]:
    """Run the kernels interpreted, counting the routes from the root (``sort_to_leaf``)."""
    calls = [0]
    jit.set_interpreted(True)
    inner = jit.twin("learners.tree.routing").sort_to_leaf
    # every twin that calls it holds it (its callers are in other kernel modules)
    mods = [m for m in map(jit.twin, jit.KERNEL_MODULES) if m.__dict__.get("sort_to_leaf") is inner]

    def counting(*args):
        calls[0] += 1
        return inner(*args)

    for mod in mods:
        mod.sort_to_leaf = counting
    try:
        with np.errstate(all="ignore"):
            yield calls
    finally:
        for mod in mods:
            mod.sort_to_leaf = inner
        jit.set_interpreted(False)


def _forgetting(model) -> None:
    """Make ``model``'s bank forget the hint after every prediction (the rule before)."""
    bank = _bank(model)
    run_one = bank.run_one

    def forget(*args, **kwargs):
        out = run_one(*args, **kwargs)
        bank._hint_for = None
        return out

    bank.run_one = forget
    if not isinstance(model, learners.NativeLearner):
        be = model._be
        be.run_one = partial(forget, be.kernel, be.ipar, be.fstate)


def _routes(models: list) -> list[int]:
    """River's loop over 150 examples on each model, in the interpreted twins: the routes each
    made; the models must answer and end alike."""
    counts, answers = [], []
    for model in models:
        with counted_routes() as calls:
            answers.append(_river([model], 150, seed=3))
        counts.append(calls[0])
    assert same(answers[0], answers[1])
    assert same(models[0].to_state(), models[1].to_state())
    return counts


@pytest.mark.parametrize("name", ["bag_adwin", "boost_adwin", "lev_codes"])
def test_drift_adaptive_kept_learns_route_less_than_eager_learns(name) -> None:
    """The adaptive kernels use the hint too: in river's loop a model whose learns are kept
    routes fewer examples than one learning at once (each learn its own kernel call, which
    routes again), with the same answers and state."""
    models = [MODELS[name](), MODELS[name]()]
    models[1]._defer_learns = False
    counts = _routes(models)
    assert counts[0] < 0.8 * counts[1], counts


@pytest.mark.parametrize("name", ["ht", "bag_ht", "boost_ht"])
def test_a_kept_learn_routes_no_example_its_prediction_routed(name) -> None:
    """The kernels use the hint: river's loop routes each example once per member (to predict
    it) where forgetting the hint routes it twice (to predict it, then to learn it), with the
    same answers and state."""
    models = [MODELS[name](), MODELS[name]()]
    _forgetting(models[1])
    counts = _routes(models)
    members = getattr(models[0], "n_models", 1)
    # with the hint: ~1 route per member and example (+ splits); without: ~2 (boosting: k = 0
    # members answer h_m(x) from the hint or route again too)
    assert counts[0] < 1.2 * 150 * members < counts[1], counts


def _other() -> dict:
    return {"a": 0.5, "b": 2.0, "c": "w"}


# what may run between predict_one(x) and learn_one(x, y): each leaves the hint invalid (or
# the row a different one), so the kept learn must route the example again
BETWEEN: dict[str, Callable[[Any, dict], Any]] = {
    "predict other": lambda m, x: m.predict_proba_one(_other()),
    "predict_learn other": lambda m, x: m.predict_learn_one(_other(), "q"),
    "learn_many of x": lambda m, x: m.learn_many([dict(x) for _ in range(12)], ["q"] * 12),
    "predict_learn_many": lambda m, x: m.predict_learn_many([dict(x)] * 12, ["q"] * 12),
    "predict_many": lambda m, x: m.predict_many([x]),
    "learn other": lambda m, x: m.learn_one(_other(), "q"),
    "to_state": lambda m, x: m.to_state(),
    "x changed": lambda m, x: x.update(a=x.get("a", 0.0) + 3.0),
    "x is a copy": None,  # learn_one(dict(x), y): another dict, so another row (conservative)
}


@pytest.mark.parametrize("between", sorted(BETWEEN))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_hint_is_not_kept_across_other_calls(name, between) -> None:
    """After anything between the prediction and the learn (another call on the model, a
    reader, a change of ``x``), the kept learn routes its example anew, and the model holds and
    answers what a model learning at once does."""
    lazy, eager = MODELS[name](), MODELS[name]()
    eager._defer_learns = False
    answers = [_river([lazy], 40, seed=5), _river([eager], 40, seed=5)]
    rnd = random.Random(6)
    hinted = []
    for _ in range(15):
        x, y = _row(rnd)
        for model, out in zip((lazy, eager), answers, strict=True):
            mine = dict(x)
            out.append(model.predict_proba_one(mine))
            if BETWEEN[between] is not None:
                out.append(BETWEEN[between](model, mine))
            else:
                mine = dict(mine)
            model.learn_one(mine, y)
            if model is lazy and _bank(model)._pending is not None:  # (learned at once after
                hinted.append(_kept_hinted(model))  # a learn: "learn other")
            out.append(model.predict_proba_one(_other()))
    assert hinted or between == "learn other"
    assert not any(hinted)
    assert same(answers[0], answers[1])
    assert same(lazy.to_state(), eager.to_state())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_hint_for_fewer_classes_is_not_used(name) -> None:
    """The learn's label is new (or classes were declared in between): the prediction's hint
    is for fewer classes. The kept learn is hinted, and the kernels' class-count check
    (``tree_learn``, ``tree_best``) routes it again: the model learns what one learning at once
    learns. (Here the check is not what keeps it exact: a class new to the model has no weight
    anywhere, so it moves no route and no argmax; dropping the check passes this test too.)"""
    lazy, eager = MODELS[name](), MODELS[name]()
    eager._defer_learns = False
    answers = [_river([lazy], 40, seed=7), _river([eager], 40, seed=7)]
    rnd = random.Random(8)
    for k in range(6):
        x, _ = _row(rnd)
        x.pop("a", None)  # missing: routed to the heaviest child, which the classes decide
        for model, out in zip((lazy, eager), answers, strict=True):
            out.append(model.predict_proba_one(x))
            if k % 2:
                model.declare(classes=[f"d{k}"])
                model.learn_one(x, "p")
            else:
                model.learn_one(x, f"n{k}")
            if model is lazy:
                assert _kept_hinted(model)  # (the kernels decline it)
            out.append(model.predict_proba_one(_other()))
    assert same(answers[0], answers[1])
    assert same(lazy.to_state(), eager.to_state())


def test_a_hint_reused_by_a_flush_and_by_the_twins() -> None:
    """A kept learn run by a reader (``TreeBank.flush``) uses the hint too, and the interpreted
    twins keep it alike (a model switched between the modes)."""
    models = [MODELS["boost_ht"]() for _ in range(3)]
    models[2]._defer_learns = False
    rnd = random.Random(9)
    answers: list[list] = [[], [], []]
    try:
        for i in range(120):
            x, y = _row(rnd)
            for k, model in enumerate(models):
                jit.set_interpreted(k == 1 and i % 3 == 0)
                answers[k].append(model.predict_proba_one(x))
                model.learn_one(x, y)
                if k == 0 and i >= 20:
                    assert _kept_hinted(model)
                if i % 5 == 0:
                    answers[k].append(model.n_seen)  # (a reader: the kept learn runs now)
    finally:
        jit.set_interpreted(False)
    assert same(answers[0], answers[2]) and same(answers[1], answers[2])
    state = models[2].to_state()
    assert same(models[0].to_state(), state) and same(models[1].to_state(), state)
