"""benchmarks/synthetic.py: Oza's Synthetic1-3 are deterministic and have the structure the
thesis describes (attributes tied to their neighbour and the class, not realisable by naive Bayes)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.datasets import load
from benchmarks.synthetic import SYNTHETIC, generate
from learners import MLP, DecisionStump, HoeffdingTree, NaiveBayes


def _matrix(X: list[dict]) -> np.ndarray:
    return np.array([[int(x[f"a{i}"]) for i in range(1, 21)] for x in X])


def _accuracy(model, X, y) -> float:
    return float(np.mean([p == t for p, t in zip(model.predict_many(X), y, strict=True)]))


@pytest.mark.parametrize("name", SYNTHETIC)
def test_deterministic_and_prefix_stable(name):
    X, y = generate(name, 5000, seed=3)
    assert (X, y) == generate(name, 5000, seed=3)
    assert (X[:1000], y[:1000]) == generate(name, 1000, seed=3)
    assert (X, y) != generate(name, 5000, seed=4)
    assert all(sorted(x) == sorted(f"a{i}" for i in range(1, 21)) for x in X[:50])
    assert set(y) == {"0", "1"} and abs(y.count("1") / len(y) - 0.5) < 0.03
    ds = load(name, "unused", n=2000)
    assert len(ds) == 2000 and set(ds.kinds.values()) == {"categorical"} and ds.notes


def test_dependence_structure():
    """Every attribute agrees with its neighbour with 0.8 (class 0) / 0.9 (class 1); in
    Synthetic1 each attribute alone says nothing about the class; a20 does in 2 and 3."""
    tol = 0.02
    for name, p_last in zip(SYNTHETIC, [(0.5, 0.5), (0.1, 0.8), (0.01, 0.975)], strict=True):
        X, y = generate(name, 20000, seed=1)
        A, c = _matrix(X), np.array(y) == "1"
        agree = A[:, :-1] == A[:, 1:]
        assert abs(agree[~c].mean() - 0.8) < tol and abs(agree[c].mean() - 0.9) < tol
        assert abs(A[~c, -1].mean() - p_last[0]) < tol and abs(A[c, -1].mean() - p_last[1]) < tol
        if name == "synthetic1":
            marg = np.abs(A[c].mean(0) - A[~c].mean(0))
            assert marg.max() < 0.04, marg


def test_naive_bayes_cannot_represent_them():
    """Synthetic1: naive Bayes and a stump are at chance, a tree and a network are not.
    Synthetic2: naive Bayes double-counts the chained evidence and falls below a single stump."""
    X, y = generate("synthetic1", 12000, seed=5)
    scores = {}
    for model in (NaiveBayes(), DecisionStump(), HoeffdingTree(), MLP()):
        model.learn_many(X[:10000], y[:10000])
        scores[type(model).__name__] = _accuracy(model, X[10000:], y[10000:])
    assert scores["NaiveBayes"] < 0.53 and scores["DecisionStump"] < 0.53, scores
    assert scores["HoeffdingTree"] > 0.6 and scores["MLP"] > 0.62, scores
    X, y = generate("synthetic2", 12000, seed=5)
    nb, stump = NaiveBayes(), DecisionStump()
    nb.learn_many(X[:10000], y[:10000])
    stump.learn_many(X[:10000], y[:10000])
    assert _accuracy(nb, X[10000:], y[10000:]) < _accuracy(stump, X[10000:], y[10000:]) - 0.04


def test_unknown_name_names_the_choices():
    with pytest.raises(ValueError, match="synthetic1"):
        generate("synthetic4", 10)
