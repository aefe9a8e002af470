"""Hoeffding tree specifics: splitting, caps, criteria, multiway branches, missing values."""

from __future__ import annotations

import math
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


def _one_value_rare_class(rule):
    """A leaf that knows class "a" from 40 spread values and class "b" from one value learned
    with weight 50 (an oversampled rare example): b's Gaussian has zero variance."""
    tree = HoeffdingTree(leaf_prediction="nb", nb_zero_variance=rule)
    for i in range(40):
        tree.learn_one({"x": float(i % 10)}, "a")
    tree.learn_one({"x": 3.0}, "b", w=50.0)
    return tree


def test_nb_zero_variance_point_mass_and_skip_hand_worked():
    """``"point"`` (MOA, the default): b's density is 0 away from 3.0, so naive Bayes never says b
    there; "skip" (river): b has no term for x, only its prior 50/90 against a's 40/90 times
    a's Gaussian (mean 4.5, unbiased variance 330/39) at 3.5."""
    point = _one_value_rare_class("point")
    p = point.predict_proba_one({"x": 3.5})
    assert p["a"] == 1.0 and p.get("b", 0.0) == 0.0
    assert point.predict_one({"x": 3.0}) == "b"  # (at its value: density 1)
    skip = _one_value_rare_class("skip")
    var = 330.0 / 39.0
    la = math.log(40 / 90) - 0.5 * (3.5 - 4.5) ** 2 / var - 0.5 * math.log(2 * math.pi * var)
    lb = math.log(50 / 90)
    pb = 1.0 / (1.0 + math.exp(la - lb))
    assert skip.predict_proba_one({"x": 3.5}) == pytest.approx({"a": 1 - pb, "b": pb}, rel=1e-12)
    # plain trees keep MOA's rule: "auto" (the default) is "point" outside OOB / UOB
    assert HoeffdingTree().nb_zero_variance == "auto"
    assert _one_value_rare_class("auto").predict_proba_one({"x": 3.5}) == p


def test_nb_zero_variance_skip_equals_rivers_naive_bayes_leaf():
    """With ``nb_zero_variance="skip"`` a naive-Bayes leaf gives river's
    ``HoeffdingTreeClassifier`` leaf probabilities on a weighted stream whose rare class comes
    back to the same few values (zero-variance Gaussians, weights of 1 too: river's
    ``n <= ddof``); with "point" it does not."""
    from river.tree import HoeffdingTreeClassifier

    rng = random.Random(5)
    ours = {rule: HoeffdingTree(grace_period=10**6, leaf_prediction="nb", nb_zero_variance=rule)
            for rule in ("point", "skip")}  # fmt: skip
    theirs = HoeffdingTreeClassifier(grace_period=10**6, leaf_prediction="nb")
    differ = 0
    for i in range(300):
        if i % 15 == 0:
            x, y, w = {"u": rng.choice([1.0, 2.0]), "v": 7.0}, "rare", float(rng.randint(1, 60))
        else:
            x, y, w = {"u": rng.gauss(3, 2), "v": rng.gauss(5, 1)}, "common", 1.0
        if i > 20:
            want = theirs.predict_proba_one(x)
            got = ours["skip"].predict_proba_one(x)
            assert got == pytest.approx({c: want.get(c, 0.0) for c in got}, abs=1e-9)
            differ += ours["point"].predict_one(x) != theirs.predict_one(x)
        theirs.learn_one(x, y, w=w)
        for tree in ours.values():
            tree.learn_one(x, y, w=w)
    assert differ > 10  # (MOA's point mass answers otherwise)


def test_nb_zero_variance_is_checked_kept_and_restored():
    with pytest.raises(ValueError, match="nb_zero_variance"):
        HoeffdingTree(nb_zero_variance="drop")
    assert "nb_zero_variance" not in HoeffdingTree().params()  # (old specs and states stay)
    assert "nb_zero_variance" not in HoeffdingTree(nb_zero_variance="point").params()
    tree = _one_value_rare_class("skip")
    assert tree.params()["nb_zero_variance"] == "skip"
    back = HoeffdingTree.from_state(tree.to_state())
    assert back.nb_zero_variance == "skip"
    assert back.predict_proba_one({"x": 3.5}) == tree.predict_proba_one({"x": 3.5})
    assert tree.clone().nb_zero_variance == "skip"
