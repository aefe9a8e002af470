"""Hoeffding tree specifics: splitting, caps, criteria, multiway branches, missing values."""

from __future__ import annotations

import random

import pytest

from learners import HoeffdingTree


def concept(n, seed=0):
    """y depends on a numeric threshold and a categorical attribute (learnable, no noise)."""
    rng = random.Random(seed)
    for _ in range(n):
        x = {"x": rng.uniform(0, 10), "c": rng.choice("abc"), "noise": rng.random()}
        yield x, (x["x"] > 5) == (x["c"] == "a")


def accuracy(model, data):
    return sum(model.predict_one(x) == y for x, y in data) / len(data)


@pytest.mark.parametrize("criterion", ["info_gain", "gini"])
def test_tree_splits_and_learns(criterion):
    tree = HoeffdingTree(grace_period=50, split_criterion=criterion, leaf_prediction="mc")
    tree.learn_many(*zip(*concept(4000)))
    info = tree.describe_tree()
    assert info["n_nodes"] > 3 and info["depth"] >= 2
    assert accuracy(tree, list(concept(500, seed=1))) > 0.9  # chance: 0.5


def test_max_depth_and_max_nodes_cap_growth():
    data = list(concept(4000))
    shallow = HoeffdingTree(grace_period=50, max_depth=1)
    shallow.learn_many(*zip(*data))
    assert shallow.describe_tree()["depth"] == 1
    capped = HoeffdingTree(grace_period=50, max_nodes=3)
    capped.learn_many(*zip(*data))
    assert capped.describe_tree()["n_nodes"] <= 3
    free = HoeffdingTree(grace_period=50)
    free.learn_many(*zip(*data))
    assert free.describe_tree()["n_nodes"] > 3


def test_category_first_seen_after_the_split_gets_its_own_branch():
    tree = HoeffdingTree(grace_period=30, leaf_prediction="mc", tau=0.5)
    for i in range(600):
        c = "abc"[i % 3]
        tree.learn_one({"c": c}, c == "a")
    n_before = tree.describe_tree()["n_nodes"]
    assert n_before == 4  # root + a branch per value
    assert tree.predict_one({"c": "zzz"}) is not None  # unseen at predict time: stops at the split
    for _ in range(40):
        tree.learn_one({"c": "d"}, True)
    assert tree.describe_tree()["n_nodes"] == n_before + 1
    assert tree.predict_one({"c": "d"}) is True


def test_missing_value_at_a_split_follows_the_heaviest_branch():
    tree = HoeffdingTree(grace_period=30, leaf_prediction="mc", tau=0.5)
    for i in range(900):
        c = "ab"[i % 3 == 0]  # "a" twice as often as "b"
        tree.learn_one({"c": c}, c == "a")
    assert tree.describe_tree()["n_nodes"] == 3
    assert tree.predict_one({}) is True
    assert tree.predict_one({"c": None}) is True
