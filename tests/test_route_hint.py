"""The route hint (``learners.tree.predict.tree_proba`` / ``learn.tree_learn``): an example is routed to its
leaf once for predicting and learning it in a member, and once more after learning only if the
leaf split. Results must be exactly those of routing it from the root for every call (the rule
before the hint): the compiled kernels are compared with their interpreted twins run with every
hint cleared before each call, on streams built to move the route between calls: splits, missing
values (the heaviest child), categories new to a split, full trees (the shared branch), classes
that appear late, Poisson weights > 1, boosting's prediction after learning, drift resets and
batch priming."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import same

from ensembles import OnlineBagging, OnlineBoosting
from learners import HoeffdingTree, NaiveBayes, jit
from learners.tree.layout import LEAF, OTHER_BRANCH
from learners.tree.structs import interpreted_bank


def _twins() -> SimpleNamespace:
    """The interpreted tree kernels these tests call, by name (from the modules defining them)."""
    where = {"has_room": "rows", "sort_to_leaf": "routing", "tree_proba": "predict",
             "tree_best": "predict", "tree_learn": "learn"}  # fmt: skip
    return SimpleNamespace(
        **{f: getattr(jit.twin(f"learners.tree.{m}"), f) for f, m in where.items()}
    )


@contextmanager
def routed_from_the_root() -> Iterator[None]:
    """Run kernels interpreted, with ``tree_proba`` and ``tree_learn`` given no hint: every
    call routes the example from the root and computes naive Bayes anew."""
    jit.set_interpreted(True)
    patched = []
    for name in list(jit.KERNEL_MODULES):
        mod = jit.twin(name)
        for fn in ("tree_proba", "tree_learn"):
            if fn in mod.__dict__:
                patched.append((mod, fn, mod.__dict__[fn]))
    originals = {fn: getattr(_twins(), fn) for fn in ("tree_proba", "tree_learn")}

    def unhinted(fn):
        inner = originals[fn]

        def call(T, P, m, *args):
            hint = args[-1]
            hint[m, 0] = -1
            return inner(T, P, m, *args)

        return call

    try:
        for mod, fn, _ in patched:
            mod.__dict__[fn] = unhinted(fn)
        with np.errstate(all="ignore"):  # (numpy warns of what compiled code does silently)
            yield
    finally:
        for mod, fn, f in patched:
            mod.__dict__[fn] = f
        jit.set_interpreted(False)


def _run(make, blocks, prime=None) -> tuple[list, dict]:
    model = make()
    if prime is not None:
        model.prime([x for x, _, _ in prime], [y for _, y, _ in prime])
    preds = []
    for block in blocks:
        X = [x for x, _, _ in block]
        preds += model.predict_learn_many(X, [y for _, y, _ in block],
                                          [w for _, _, w in block])  # fmt: skip
    return preds, model.to_state()


def _check(make, blocks, prime=None) -> None:
    fast = _run(make, blocks, prime)
    with routed_from_the_root():
        slow = _run(make, blocks, prime)
    for i, (p, q) in enumerate(zip(fast[0], slow[0], strict=True)):
        assert same(p, q), f"row {i}: {p} != {q}"
    assert same(fast[1], slow[1]), "states differ"


def _rows(n: int, seed: int) -> list:
    """Numbers and categories with missing values, categories that keep coming (a full tree
    shares a branch between them), a class arriving late, weights other than 1."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        y = rnd.randrange(2 if i < n // 2 else 3)
        c = rnd.randrange(1 + i // 40)  # the label's, mostly
        x: dict = {"a": rnd.gauss(y, 2.0), "b": rnd.uniform(0, 8) + y,
                   "c": f"v{3 * c + (y if rnd.random() < 0.9 else 2)}",
                   "d": rnd.choice("pqr" if y else "pq")}  # fmt: skip
        for k in list(x):
            if rnd.random() < 0.06:
                del x[k]
            elif rnd.random() < 0.06:
                x[k] = None
        rows.append((x, y, rnd.choice([1.0, 1.0, 1.0, 2.0, 0.5])))
    return rows


def _blocks(rows, size=50):
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def _tree(g: int = 20, **kw) -> HoeffdingTree:
    return HoeffdingTree(grace_period=g, delta=0.2, tau=0.2, **kw)


MODELS = {  # name: (grace period -> model)
    "tree": lambda g: _tree(g),
    "full tree": lambda g: _tree(g, max_nodes=7),
    "bagging": lambda g: OnlineBagging(_tree(g), n_models=3, seed=4),
    "bagging nb": lambda g: OnlineBagging(NaiveBayes(), n_models=3, seed=4),
    "boosting": lambda g: OnlineBoosting(_tree(g), n_models=3, seed=4),
    "boosting full": lambda g: OnlineBoosting(_tree(g, max_nodes=9), n_models=3, seed=5),
    "adwin bagging": lambda g: OnlineBagging(
        _tree(g), n_models=3, seed=4, drift="adwin", poisson_lambda=6.0
    ),  # fmt: skip
    "ddm bagging": lambda g: OnlineBagging(_tree(g), n_models=3, seed=4, drift="ddm"),
    "output codes": lambda g: OnlineBagging(
        _tree(g), n_models=3, seed=4, output_codes=True, poisson_lambda=6.0, drift="adwin"
    ),  # fmt: skip
    "adwin boosting": lambda g: OnlineBoosting(_tree(g), n_models=3, seed=4, drift="adwin"),
}


@pytest.mark.parametrize("name", MODELS)
def test_one_route_per_example_equals_routing_every_call(name) -> None:
    _check(lambda: MODELS[name](20), _blocks(_rows(400, seed=1)))


def test_primed_boosting_equals_routing_every_call() -> None:
    """Batch priming (``member_learn`` / ``member_predict``: one member over many rows)."""
    rows = _rows(500, seed=2)
    _check(lambda: OnlineBoosting(_tree(), n_models=3, seed=4), _blocks(rows[300:]), rows[:300])
    _check(lambda: OnlineBagging(_tree(), n_models=3, seed=4), _blocks(rows[300:]), rows[:300])


def test_the_shared_branch_is_not_a_learning_route() -> None:
    """A tree holding a shared branch (made full) whose limit is raised: a category without a
    branch goes to the shared leaf when predicting, and gets a branch of its own when learning;
    the hint of the first must not stand for the second."""
    tree = _tree(max_nodes=5)
    rows = _rows(300, seed=3)
    for x, y, w in rows:
        tree.learn_one(x, y, w=w)
    bank = tree._bank
    for _ in range(3):
        bank.grow_nodes(64)  # room to learn the rows below without growing
    T = bank.T
    assert (T.branch[0, : T.n_nodes[0]] == OTHER_BRANCH).any(), "no shared branch: checks nothing"
    learners_tree = _twins()
    states = []
    for hinted in (True, False):
        B = interpreted_bank(bank.T._replace(**{k: v.copy() for k, v in bank.T._asdict().items()}),
                             bank.params._replace(max_nodes=1000))  # fmt: skip
        pk, pv, hint = np.empty(8, np.int64), np.empty(8), np.full((1, 4), -1, np.int64)
        codes = set(T.branch[0, : T.n_nodes[0]].tolist())
        fresh = next(c for c in range(1, 10**6) if c not in codes)
        taken = 0
        for x, y, w in rows:
            if not learners_tree.has_room(B, B, 16):
                break
            xn, xc, _, _ = bank.schema.encode_rows([x], grow=False)
            xc = xc[0].copy()
            xc[xc >= 0] = fresh  # a category no split has a branch for
            hint[0, 0] = -1
            learners_tree.tree_proba(B, B, 0, xn[0], xc, 4, bank.schema.code_attr_array, pk, pv,
                                     hint)  # fmt: skip
            if not hinted:
                hint[0, 0] = -1
            node = learners_tree.sort_to_leaf(B, B, 0, xn[0], xc, 4, False)[0]
            taken += int(B.kind[0, node] == LEAF and B.branch[0, node] == OTHER_BRANCH)
            learners_tree.tree_learn(B, B, 0, xn[0], xc, y, w, bank.n_seen, 4,
                                     bank.schema.code_attr_array, pk, pv, hint)  # fmt: skip
        states.append((B.kind.copy(), B.branch.copy(), B.n_nodes.copy(), B.wv.copy()))
        assert taken > 0, "the shared branch was never predicted from: checks nothing"
    assert all(same(a, b) for a, b in zip(*states, strict=True))


_value = st.one_of(
    st.none(), st.floats(allow_infinity=False, width=64), st.sampled_from([0.0, 1.0])
)
_cat = st.one_of(st.none(), st.sampled_from(["u", "v", "w", "x", "y", "z"]))


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.fixed_dictionaries({}, optional={"a": _value, "b": _value, "c": _cat, "d": _cat}),
            st.integers(0, 3),
            st.sampled_from([1.0, 2.0, 0.5, 1e-3, 40.0]),  # (boosting: lambda < 1e300)
        ),
        min_size=1,
        max_size=120,
    ),
    st.sampled_from(["tree", "full tree", "bagging", "boosting", "adwin boosting"]),
)
def test_any_stream_equals_routing_every_call(rows, name) -> None:
    _check(lambda: MODELS[name](5), _blocks(rows, 40))


def _trained_bank():
    """A tree made full (so it has shared branches), with room to grow."""
    tree = _tree(5, max_nodes=5)
    for x, y, w in _rows(300, seed=3):
        tree.learn_one(x, y, w=w)
    bank = tree._bank
    for _ in range(3):
        bank.grow_nodes(64)  # room to learn the rows below without growing
    return bank


_BANK: list = []


@np.errstate(all="ignore")
def _replay(examples, hinted: bool) -> tuple[list, tuple]:
    """Calls of ``tree_proba`` / ``tree_learn`` / ``tree_best`` on one example after another
    (``hinted``: with the hint kept between the calls on one example, else cleared before
    each)."""
    if not _BANK:
        _BANK.append(_trained_bank())
    bank = _BANK[0]
    lt = _twins()
    B = interpreted_bank(bank.T._replace(**{k: v.copy() for k, v in bank.T._asdict().items()}),
                         bank.params._replace(max_nodes=1000))  # fmt: skip
    code_attr = bank.schema.code_attr_array
    fresh = max(bank.schema.code_attr_array.shape[0], 10**3)  # a category without a branch
    pk, pv, hint = np.empty(8, np.int64), np.empty(8), np.full((1, 4), -1, np.int64)
    rows = _rows(60, seed=7)
    out = []
    for i, new_value, calls in examples:
        xn, xc, _, _ = bank.schema.encode_rows([rows[i][0]], grow=False)
        if new_value:
            xc[xc >= 0] = fresh
        hint[0, 0] = -1  # a new example
        for call, y, n in calls:
            if not hinted:
                hint[0, 0] = -1
            if call == "learn" and lt.has_room(B, B, 16):
                lt.tree_learn(B, B, 0, xn[0], xc[0], y, 1.0, i, max(n, y + 1), code_attr, pk, pv,
                              hint)  # fmt: skip
            elif call == "proba":
                k = lt.tree_proba(B, B, 0, xn[0], xc[0], n, code_attr, pk, pv, hint)
                out.append((pk[:k].tolist(), pv[:k].tolist()))
            elif call == "best":
                out.append(lt.tree_best(B, B, 0, xn[0], xc[0], n, code_attr, pk, pv, hint))
    return out, (B.kind.copy(), B.n_nodes.copy(), B.wv.copy(), B.gv.copy(), B.mc_ok.copy(),
                 B.nb_ok.copy())  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 59),
            st.booleans(),
            st.lists(
                st.tuples(
                    st.sampled_from(["proba", "learn", "best"]),
                    st.integers(0, 3),
                    st.integers(1, 4),
                ),
                max_size=6,
            ),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_any_calls_on_an_example_equal_routing_every_call(examples) -> None:
    """Learning an example twice, predicting it (or its best class: ``tree_best``) after
    learning it, with fewer or more classes than before (a missing value's route changes), with
    categories a full tree's shared branch takes until learning gives them one, in any order:
    the hint is always what routing from the root would find."""
    fast, slow = _replay(examples, True), _replay(examples, False)
    # (NaN equal to NaN: forcing one code on every feature makes value rows that two features
    # share, a state no schema makes, where a quotient can be 1/0 — in both, at 1e8f014 too)
    assert same(fast[0], slow[0]), (fast[0], slow[0])
    assert all(same(a, b) for a, b in zip(fast[1], slow[1], strict=True))
