"""A model's kernels compiled into numba's cache: ``python -m ensembles.warm SPEC_JSON ...``.

On a cold numba cache, a model's construction (``ensembles.backends.cold_start``) asks for this
to run in a subprocess with the model's spec, which trains a tiny model of that spec
(``warm_spec``: exactly the kernels it runs), while the model answers from the interpreted
twins; then ``warm`` in the model's process loads them from the cache and they take over
(``learners.jit.compile_elsewhere``). ``app.warmup`` warms a service's kinds with ``warm_spec``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .backends import compiling_on_purpose
from .spec import build_model, load_state


def warm_spec(spec: dict, *, threads: int = 1, n: int = 120) -> Any:
    """Compile (or load from the cache) what a model of ``spec`` runs: a tiny model of it (at
    most 3 members) learns ``n`` examples one at a time and in a batch, predicts, is described
    and its state reloaded. ``threads > 1``: the member-parallel batch kernels too (a batch of
    ``n >= 64`` rows). Returns the tiny model."""
    X = [{"a": float(i % 7), "b": "xyz"[i % 3], "c": (i * 37 % 101) / 101.0} for i in range(n)]
    y = ["yn"[(i % 7) > 3] for i in range(n)]
    spec = {**spec, "n_models": min(int(spec.get("n_models", 3)), 3)}
    # everything built here compiles here, at its first calls: no job elsewhere, no warning
    with compiling_on_purpose():
        model = build_model(spec)
        half = n // 2
        for xi, yi in zip(X[:half], y[:half], strict=True):
            model.predict_learn_one(xi, yi)
        model.learn_one(X[0], y[0])
        model.predict_one(X[1])
        model.predict_learn_many(X[half:], y[half:])
        if threads > 1:  # (CHORUS_THREADS > 1: the member-parallel batch kernels)
            model.threads = threads
            model.predict_learn_many(X, y)
        model.predict_proba_many(X[:10])
        model.describe()
        load_state(model.to_state()).predict_one(X[0])
    return model


def warm(*specs: str) -> None:
    """``warm_spec`` of each spec (JSON text), as ``python -m ensembles.warm`` takes them."""
    for text in specs:
        warm_spec(json.loads(text))


if __name__ == "__main__":  # python -m ensembles.warm SPEC_JSON ... (compiles into the cache)
    warm(*sys.argv[1:])
