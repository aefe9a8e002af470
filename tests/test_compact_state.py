"""Saved states hold only what a model uses (issue 11): no freed rows, no dead class entries, no
capacity; rows renumbered canonically, integer arrays narrowed to int32. A loaded copy goes on
exactly as the model that was never saved."""

from __future__ import annotations

import numpy as np
import pytest
from streams import mixed_stream

from ensembles import OnlineBagging, OnlineBoosting, load_state
from learners import HoeffdingTree, NaiveBayes
from learners.native import STATE_VERSION


def _users(n: int, values: int, start: int = 0):
    """A categorical feature of ``values`` distinct values (each seen about n / values times),
    two numeric ones; the label depends on both, so trees split on either and leaves drop their
    rows (freed rows, dead class entries)."""
    for i in range(start, start + n):
        u = (i * 7919) % values
        a = ((i * 2654435761) % 1000) / 1000.0
        b = ((i * 40503) % 997) / 997.0
        label = ["x", "y", "z"][((a + b > 1.0) + (u % 5 == 0) + (i % 11 == 0)) % 3]
        yield {"user": f"u{u}", "a": a, "b": b}, label


def _garbage(bank) -> tuple[int, int]:
    """(dead class entries, freed rows) of a live bank."""
    T = bank.T
    freed = 0
    for nxt, head in ((T.v_next, T.v_freed), (T.f_next, T.f_freed), (T.o_next, T.o_freed)):
        for m in range(bank.M):
            i = int(head[m])
            while i >= 0:
                freed += 1
                i = int(nxt[m, i])
    return int(T.w_dead.sum() + T.g_dead.sum()), freed


def _same_arrays(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a
    )


@pytest.mark.parametrize("kind", ["bagging_ht", "boosting_ht", "bagging_nb"])
def test_high_cardinality_state_is_compact_and_goes_on_exactly(kind):
    learner = NaiveBayes() if kind.endswith("nb") else HoeffdingTree(grace_period=40)
    cls = OnlineBoosting if kind.startswith("boosting") else OnlineBagging
    model = cls(learner, n_models=3, seed=5)
    data = list(_users(6000, 1500))
    W = [1.0 if i % 9 else 2.5 for i in range(len(data))]
    X, Y = [x for x, _ in data], [y for _, y in data]
    model.predict_learn_many(X[:4000], Y[:4000], W[:4000])
    bank = model._settled().bank
    dead, freed = _garbage(bank)
    if kind != "bagging_nb":  # leaves split and blocks grew: the live pools carry garbage
        assert dead > 0
    state = model.to_state()
    assert state["header"]["version"] == STATE_VERSION
    arrays = state["arrays"]
    # nothing but live rows and entries: the pools are as wide as the largest member's live
    # entries, no member has garbage or freed rows, every integer array is int32
    T = bank.T
    assert arrays["tree.wc"].shape[1] == int((T.w_used - T.w_dead).max())
    assert arrays["tree.gc"].shape[1] == int((T.g_used - T.g_dead).max())
    assert (arrays["tree.w_dead"] == 0).all() and (arrays["tree.g_dead"] == 0).all()
    assert (arrays["tree.v_freed"] == -1).all() and (arrays["tree.n_free"] == 0).all()
    assert arrays["tree.v_code"].shape[1] == int(arrays["tree.n_v"].max())
    assert all(a.dtype in (np.int32, np.float64) for a in arrays.values())
    assert sum(a.nbytes for a in arrays.values()) < bank.live_bytes
    copy = load_state(state)
    # the copy predicts and learns exactly as the model (which keeps its garbage and layout)
    a = model.predict_learn_many(X[4000:], Y[4000:], W[4000:])
    b = copy.predict_learn_many(X[4000:], Y[4000:], W[4000:])
    assert a == b
    probes = X[:50] + [{}, {"user": "never"}, {"a": float("nan")}]
    assert copy.predict_proba_many(probes) == model.predict_proba_many(probes)
    # and a state is canonical: the same model gives the same arrays, however its own arrays
    # grew, were compacted or reloaded
    assert _same_arrays(copy.to_state()["arrays"], model.to_state()["arrays"])
    assert model.state_bytes == copy.state_bytes


def test_saving_changes_nothing_in_the_saved_model():
    """``to_state`` copies: the model's own arrays (and so its later states) are unchanged."""
    data = list(mixed_stream(800, 3, new_class_at=400))
    m1 = OnlineBagging(HoeffdingTree(grace_period=30), n_models=2, seed=2)
    m2 = OnlineBagging(HoeffdingTree(grace_period=30), n_models=2, seed=2)
    for i in range(0, 800, 100):
        block = data[i : i + 100]
        m1.learn_many([x for x, _ in block], [y for _, y in block])
        m2.learn_many([x for x, _ in block], [y for _, y in block])
        m1.to_state()
    for name in m1._settled().bank.T._fields:
        assert np.array_equal(
            getattr(m1._settled().bank.T, name), getattr(m2._settled().bank.T, name)
        )


def _version_3(model) -> dict:
    """``model``'s state as the code before version 4 wrote it: int64 arrays, the live arrays
    trimmed to their high-water marks, garbage included (freed rows and slots on their free
    lists, stale marks and heads on freed rows, dead class entries)."""
    from learners.tree.alloc import AXES, VALUES_PER_ENTRY  # the saved axes, as version 3 cut them

    bank = model._settled().bank
    bank.flush()
    T = bank.T
    hw = {"N": T.n_nodes, "L": T.n_slots, "F": T.n_f, "E": T.n_v, "O": T.n_o, "P": T.w_used,
          "Q": T.g_used}  # fmt: skip
    arrays = {}
    for name in bank.state_arrays(prefix=""):
        a = getattr(T, name)
        ax = AXES.get(name)
        if ax is not None:
            a = a[:, : int(hw[ax].max()) * VALUES_PER_ENTRY.get(name, 1)]
        arrays["tree." + name] = np.array(a)
    state = model.to_state()
    state["header"]["version"] = 3
    state["arrays"].update(arrays)
    assert all(a.dtype != np.int32 for a in arrays.values())
    return state


def test_version_3_state_still_loads():
    """A version-3 state loads and goes on exactly."""
    model = OnlineBagging(HoeffdingTree(grace_period=40), n_models=2, seed=3)
    data = list(_users(3000, 800))
    X, Y = [x for x, _ in data], [y for _, y in data]
    model.learn_many(X[:2000], Y[:2000])
    copy = load_state(_version_3(model))
    assert copy.predict_learn_many(X[2000:], Y[2000:]) == model.predict_learn_many(
        X[2000:], Y[2000:]
    )
    assert _same_arrays(copy.to_state()["arrays"], model.to_state()["arrays"])


@pytest.mark.parametrize("make", [
    lambda: OnlineBagging(HoeffdingTree(grace_period=40), n_models=2, seed=3),
    lambda: OnlineBagging(HoeffdingTree(grace_period=20, leaf_prediction="nba"), n_models=3,
                          seed=4, drift="adwin"),
    lambda: OnlineBoosting(HoeffdingTree(grace_period=20), n_models=3, seed=5),
], ids=["bagging", "adwin_nba", "boosting"])  # fmt: skip
def test_version_3_states_with_garbage_load_and_go_on(make):
    """Right after a split a version-3 state holds freed feature rows, value rows, observers and
    a freed slot, whose stale freshness marks and list heads a load must take (the load checks
    refused a freed observer's mark before session 15). Every such state of 1,500 examples,
    one example at a time, loads, and goes on exactly for the next 20."""
    model = make()
    data = list(_users(1500, 800))
    seen = dict.fromkeys(("feature rows", "value rows", "observers", "slots", "marks"), 0)
    for i, (x, y) in enumerate(data[:-20]):
        model.learn_one(x, y)
        T = model._settled().bank.T
        found = {"feature rows": (T.f_freed >= 0).any(), "value rows": (T.v_freed >= 0).any(),
                 "observers": (T.o_freed >= 0).any(), "slots": (T.n_free > 0).any(),
                 "marks": (T.o_fresh > 2).any()}  # fmt: skip
        if not (found["feature rows"] or found["observers"] or found["slots"]):
            continue
        for k, v in found.items():
            seen[k] += bool(v)
        copy = load_state(_version_3(model))
        if seen["slots"] <= 3:  # (the first few: exactly, against a copy of the model)
            again = load_state(model.to_state())
            rest = data[i + 1 : i + 21]
            X, Y = [x for x, _ in rest], [y for _, y in rest]
            assert copy.predict_learn_many(X, Y) == again.predict_learn_many(X, Y)
    assert all(seen.values()), seen


@pytest.mark.parametrize("drift", ["adwin", "ddm"])
def test_version_3_states_after_member_resets_load_and_go_on(drift):
    """A member reset by its drift detector starts a new tree in the same arrays: in a version-3
    state its rows past the new counts keep the old tree's pointers, which may point past the
    arrays the state keeps (trimmed to the largest member's counts). Those rows are never read
    (a row is written in full when taken), and the load checks only the rows below the counts:
    before session 15 they refused 522 of 744 such states. Here the concept flips every 700
    examples; every 97th state loads and goes on exactly for the next 30 examples."""
    import random

    model = OnlineBagging(HoeffdingTree(grace_period=20), n_models=4, seed=3, drift=drift)
    rng = random.Random(3)
    data = []
    for i in range(4000):
        x = {"a": rng.random(), "b": rng.random(), "c": str(rng.randrange(20))}
        flip = (i // 700) % 2
        data.append((x, str(int((x["a"] > 0.5) != flip) + 2 * (int(x["c"]) % 2) * flip)))
    loaded = 0
    for i, (x, y) in enumerate(data[:-30]):
        model.learn_one(x, y)
        if i % 97 or not model.n_drifts:
            continue
        copy = load_state(_version_3(model))
        again = load_state(model.to_state())
        rest = data[i + 1 : i + 31]
        X, Y = [x for x, _ in rest], [y for _, y in rest]
        assert copy.predict_learn_many(X, Y) == again.predict_learn_many(X, Y), i
        loaded += 1
    assert model.n_drifts >= 2 and loaded >= 10, (model.n_drifts, loaded)
