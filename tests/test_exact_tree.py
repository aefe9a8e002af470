"""ExactTree: the incremental tree equals the batch tree after every prefix of a stream."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from learners import FeatureTypeError, HoeffdingTree
from learners.exact_tree import ExactTree


def _stream(n: int, seed: int, *, weights: bool = False, drift: bool = False):
    """Mixed categorical/numeric stream with missing values, new categories and new classes."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        colour = rng.choice(["red", "green", "blue"] + (["violet"] if i > n // 2 else []))
        size = rng.choice([1.0, 2.0, 2.5, 3.0, 4.0, 7.5])
        shape = rng.choice(["round", "square", None])
        x = {"colour": colour, "size": size, "shape": shape}
        if rng.random() < 0.1:
            del x["colour"]
        if rng.random() < 0.1:
            x["size"] = float("nan")
        if i > n // 3:
            x["late"] = rng.choice(["a", "b"])  # a feature that appears mid-stream
        y = "big" if size > 2.2 else "small"
        if colour == "blue" and shape == "round":
            y = "odd"
        if drift and i > 2 * n // 3 and x.get("late") == "a":
            y = "new"  # a class that appears mid-stream
        if rng.random() < 0.1:
            y = rng.choice(["big", "small"])
        w = rng.choice([0.0, 0.5, 1.0, 1.0, 2.0, 3.7]) if weights else 1.0
        out.append((x, y, w))
    return out


SPLITS = ["multiway", "binary"]


def _batch(stream, **params) -> ExactTree:
    tree = ExactTree(**params)
    for x, y, w in stream:
        tree.learn_one(x, y, w=w)
    tree.rebuild()
    return tree


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_online_equals_batch_after_every_prefix(seed, weights, split):
    stream = _stream(120, seed, weights=weights, drift=True)
    online = ExactTree(split=split)
    for t, (x, y, w) in enumerate(stream):
        online.learn_one(x, y, w=w)
        online.predict_one(x)  # forces the incremental update, one example at a time
        batch = _batch(stream[: t + 1], split=split)
        assert online.structure() == batch.structure(), f"differs after {t + 1} examples"


def test_online_equals_batch_with_max_depth():
    stream = _stream(80, 3)
    online = ExactTree(max_depth=2)
    for t, (x, y, w) in enumerate(stream):
        online.learn_one(x, y, w=w)
        online.predict_proba_one(x)
        assert online.structure() == _batch(stream[: t + 1], max_depth=2).structure()
    assert online.depth <= 2


@pytest.mark.parametrize("split", SPLITS)
def test_tree_does_not_depend_on_example_order(split):
    stream = _stream(150, 4)
    shuffled = stream[:]
    random.Random(9).shuffle(shuffled)
    a, b = _batch(stream, split=split), _batch(shuffled, split=split)
    assert (a.n_nodes, a.depth) == (b.n_nodes, b.depth)
    probe = [x for x, _, _ in _stream(50, 11)]
    for x in probe:
        pa, pb = a.predict_proba_one(x), b.predict_proba_one(x)
        assert pa.keys() == pb.keys()
        for k in pa:
            assert pa[k] == pytest.approx(pb[k])


def _entropy(counts):
    tot = sum(counts.values())
    return -sum(c / tot * math.log2(c / tot) for c in counts.values() if c > 0)


def test_root_matches_hand_computed_information_gain():
    # PlayTennis (Quinlan 1986): outlook has the highest gain (0.246 bits) and is the root.
    rows = """sunny hot high weak no|sunny hot high strong no|overcast hot high weak yes|
    rain mild high weak yes|rain cool normal weak yes|rain cool normal strong no|
    overcast cool normal strong yes|sunny mild high weak no|sunny cool normal weak yes|
    rain mild normal weak yes|sunny mild normal strong yes|overcast mild high strong yes|
    overcast hot normal weak yes|rain mild high strong no"""
    names = ["outlook", "temperature", "humidity", "wind"]
    data = []
    for r in rows.split("|"):
        *vals, y = r.split()
        data.append((dict(zip(names, vals, strict=True)), y))
    tree = ExactTree()
    for x, y in data:
        tree.learn_one(x, y)
    s = tree.structure()
    assert s[0] == "outlook"
    parent = {"yes": 9, "no": 5}
    gain = _entropy(parent)
    for v in ("sunny", "overcast", "rain"):
        sub = [y for x, y in data if x["outlook"] == v]
        gain -= len(sub) / 14 * _entropy({c: sub.count(c) for c in set(sub)})
    assert gain == pytest.approx(0.2467, abs=1e-4)
    # The classic ID3 tree classifies the training set perfectly with 8 nodes.
    assert all(tree.predict_one(x) == y for x, y in data)
    assert tree.n_nodes == 8


def test_numeric_threshold_is_midpoint_between_distinct_values():
    tree = ExactTree()
    for v, y in [(1.0, "a"), (2.0, "a"), (2.0, "a"), (4.0, "b"), (6.0, "b")]:
        tree.learn_one({"v": v}, y)
    assert tree.structure()[:2] == ("v", 3.0)
    assert tree.predict_one({"v": 2.9}) == "a"
    assert tree.predict_one({"v": 3.1}) == "b"


def test_weights_equal_repeated_examples():
    stream = _stream(100, 5)
    rng = random.Random(2)
    weighted, repeated = ExactTree(), ExactTree()
    for x, y, _ in stream:
        k = rng.randint(0, 3)
        weighted.learn_one(x, y, w=float(k))
        for _ in range(k):
            repeated.learn_one(x, y)
    assert weighted.structure() == repeated.structure()
    assert weighted.n_examples < repeated.n_examples


def test_zero_weight_does_nothing_and_negative_raises():
    tree = ExactTree()
    tree.learn_one({"a": "x"}, "p", w=0.0)
    assert tree.predict_proba_one({"a": "x"}) == {}
    assert tree.n_examples == 0
    with pytest.raises(ValueError):
        tree.learn_one({"a": "x"}, "p", w=-1.0)


def test_edge_cases_missing_unseen_and_new_classes():
    tree = ExactTree()
    assert tree.predict_one({}) is None
    tree.learn_one({"c": "u"}, 1)
    assert tree.predict_proba_one({"c": "zzz", "other": 3.0}) == {1: 1.0}
    tree.learn_one({"c": "v"}, 2)
    tree.learn_one({"c": None}, 3)  # missing value -> its own branch
    assert tree.predict_one({"c": "v"}) == 2
    assert tree.predict_one({}) == 3
    proba = tree.predict_proba_one({"c": "never-seen"})  # no branch: node distribution
    assert proba == pytest.approx({1: 1 / 3, 2: 1 / 3, 3: 1 / 3})
    x = {"c": "u", "n": float("nan")}
    tree.predict_one(x)
    assert math.isnan(x["n"]) and set(x) == {"c", "n"}  # input not mutated


def test_probabilities_sum_to_one_and_leaf_frequencies():
    tree = ExactTree()
    for x, y, w in _stream(200, 6, weights=True, drift=True):
        tree.learn_one(x, y, w=w)
    for x, _, _ in _stream(30, 7):
        p = tree.predict_proba_one(x)
        assert sum(p.values()) == pytest.approx(1.0)
        assert all(0.0 <= v <= 1.0 for v in p.values())


def test_state_round_trip_and_continue():
    stream = _stream(150, 8, weights=True, drift=True)
    a = ExactTree(max_depth=5)
    for x, y, w in stream[:100]:
        a.learn_one(x, y, w=w)
    state = a.to_state()
    assert set(state["arrays"]) == {"X", "y", "w"}
    assert all(isinstance(v, np.ndarray) for v in state["arrays"].values())
    import json

    json.dumps(state["header"])
    b = ExactTree.from_state(state)
    assert b.structure() == a.structure()
    for x, y, w in stream[100:]:
        a.learn_one(x, y, w=w)
        b.learn_one(x, y, w=w)
        assert a.predict_proba_one(x) == b.predict_proba_one(x)


def test_clone_is_fresh_with_same_params():
    a = ExactTree(max_depth=3, min_gain=0.01, split="binary")
    a.learn_one({"a": 1.0}, "x")
    b = a.clone()
    assert b.predict_proba_one({"a": 1.0}) == {}
    assert (b.max_depth, b.min_gain, b.split) == (3, 0.01, "binary")


def test_binary_split_tests_one_category_against_the_rest():
    tree = ExactTree(split="binary")
    for colour, y in [("red", "a"), ("red", "a"), ("blue", "b"), ("green", "b"), ("pink", "b")]:
        tree.learn_one({"colour": colour}, y)
    s = tree.structure()
    assert s[:2] == ("colour", "red")
    assert [k for k, _ in s[3]] == ["!=", "== red"]
    assert tree.predict_one({"colour": "never-seen"}) == "b"  # unseen goes to the "!=" branch
    assert tree.n_nodes == 3


def test_invalid_params():
    with pytest.raises(ValueError):
        ExactTree(max_depth=-1)
    with pytest.raises(ValueError):
        ExactTree(min_gain=-0.5)
    with pytest.raises(ValueError, match="multiway"):
        ExactTree(split="ternary")


def test_learns_a_noiseless_concept_exactly():
    rng = random.Random(0)
    data = []
    for _ in range(300):
        x = {"a": rng.choice("pqr"), "b": rng.uniform(0, 10), "c": rng.choice("st")}
        y = (x["a"] == "p") != (x["b"] > 5.0)
        data.append((x, y))
    tree = ExactTree()
    for x, y in data:
        tree.learn_one(x, y)
    assert all(tree.predict_one(x) == y for x, y in data)


@pytest.mark.parametrize("make", [HoeffdingTree, ExactTree], ids=["native", "exact"])
def test_the_shared_schema_rules(make):
    """ExactTree types features, labels and weights as the native learners' schema does: a
    boolean is a number, a number given for a categorical feature is its text, labels are
    normalised (numpy scalars, integral floats), an infinite weight is refused."""
    model = make()
    model.learn_one({"flag": True, "c": "2"}, np.int64(1))
    model.learn_one({"flag": False, "c": 2}, 1.0)
    assert model.classes == [1] and model.n_seen == 2
    with pytest.raises(FeatureTypeError, match="flag"):
        model.learn_one({"flag": "yes"}, 1)
    with pytest.raises(ValueError, match="from 0 to"):
        model.learn_one({"flag": True}, 1, w=math.inf)
    assert model.n_seen == 2
