"""A native learner's kernels compiled into numba's cache: ``python -m learners.warm``.

A ``HoeffdingTree`` (``NaiveBayes``, ``DecisionStump``: the same kernels) made on a cold numba
cache asks for this to run in a subprocess (``learners.native``, ``learners.jit.CompileJob``)
while its calls run the interpreted twins; ``warm()`` then loads the kernels in this process.
"""

from __future__ import annotations

import sys

from .native import HoeffdingTree


def warm(n: int = 120) -> None:
    """Run a tiny Hoeffding tree through the calls a user makes (one example at a time, a
    batch, predictions, its state and back), compiling (or loading) their kernels."""
    X = [{"a": float(i % 7), "b": "xyz"[i % 3], "c": (i * 37 % 101) / 101.0} for i in range(n)]
    y = ["yn"[(i % 7) > 3] for i in range(n)]
    tree = HoeffdingTree(grace_period=50)
    half = n // 2
    for xi, yi in zip(X[:half], y[:half], strict=True):
        tree.predict_proba_one(xi)
        tree.learn_one(xi, yi)
        tree.predict_one(xi)
    tree.learn_many(X[half:], y[half:])
    tree.predict_proba_many(X[:10])
    HoeffdingTree.from_state(tree.to_state()).predict_one(X[0])


if __name__ == "__main__":  # python -m learners.warm (compiles into numba's cache)
    warm(*map(int, sys.argv[1:2]))
