"""OOB's Poisson rate: the class sizes after the example (Wang, Minku & Yao; Chorus) or before
it, with or without a cap on the rate (issue 40's ablation; the kernel is not changed).

Every variant runs on the slow path, ``OnlineBagging`` over ten Hoeffding trees seen through
the learner protocol only (``Member``, so the ensemble calls ``_py_learn`` and its
``_imbalance_rate``, which a subclass replaces), ``nb_zero_variance="skip"``, the streams and
scores of ``imbalance.py`` (prequential, batches of 1,000, 5 seeds). Variants, one name each
(``--models``):

- ``after(θ)``: Chorus' rule, ``w_k <- θ w_k + (1 - θ)[y = k]`` then ``λ = w_max / w_y``;
- ``before(θ)``: ``λ = w_max / w_y`` from the sizes before the update (a class seen for the
  first time: the sizes after it), then the update;
- ``... capN``: either with ``λ`` at most N.

Welch's p of each variant against ``after(θ)`` at the same θ is printed beside it.

Run from the repository root::

    python benchmarks/imbalance_rate_rule.py --n 10000 --streams "SEA 1%;Hyperplane 5%" \\
        --models "after(0.99);before(0.99);after(0.9999);before(0.9999);before(0.99) cap100"

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for p in (str(HERE.parent), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from accuracy import welch  # noqa: E402
from imbalance import streams  # noqa: E402

from app.metrics import Prequential  # noqa: E402


class Member:
    """A Hoeffding tree seen through the learner protocol only (the ensemble's slow path)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def learn_one(self, x: dict, y: Any, *, w: float = 1.0) -> None:
        self.inner.learn_one(x, y, w=w)

    def predict_proba_one(self, x: dict) -> dict:
        return self.inner.predict_proba_one(x)

    def predict_one(self, x: dict) -> Any:
        return self.inner.predict_one(x)

    def clone(self) -> Member:
        return Member(self.inner.clone())


def variant(name: str, seed: int) -> Any:
    """OOB over ``Member`` trees with the rate rule ``name`` (module doc)."""
    from ensembles import OnlineBagging
    from learners import HoeffdingTree

    rule, _, cap_s = name.partition(" cap")
    kind, _, decay_s = rule.rstrip(")").partition("(")
    decay, cap = float(decay_s), float(cap_s) if cap_s else float("inf")

    class RateRule(OnlineBagging):
        def _imbalance_rate(self, y: Any) -> float:
            sizes = self._class_sizes
            before = None
            if kind == "before" and sizes.get(y, 0.0) > 0.0:
                before = max(sizes.values()) / sizes[y]
            after = super()._imbalance_rate(y)
            return min(cap, after if before is None else before)

    tree = Member(HoeffdingTree(nb_zero_variance="skip"))
    return RateRule(tree, n_models=10, seed=seed, imbalance="oob", imbalance_decay=decay)


def score(name: str, stream: list, seed: int) -> dict[str, float]:
    model = variant(name, seed)
    scores = Prequential(window=1000)
    for i in range(0, len(stream), 1000):
        block = stream[i : i + 1000]
        probas = model.predict_learn_many([x for x, _ in block], [y for _, y in block])
        for p, (_, y) in zip(probas, block, strict=True):
            if p:
                scores.update(y, max(p, key=p.get))
    return scores.values()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--census-n", type=int, default=20_000)
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--data-dir", default="")
    ap.add_argument("--streams", default="SEA 1%;Hyperplane 5%")
    ap.add_argument("--models", default="after(0.99);before(0.99);after(0.9999);before(0.9999)")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    make = streams(args.data_dir)
    models = args.models.split(";")
    print("| stream | variant | G-mean | balanced accuracy | p (G-mean) vs after(θ) |")  # noqa: T201
    print("|---|---|---|---|---|")  # noqa: T201
    for name in args.streams.split(";"):
        n = args.census_n if name.startswith("Census") else args.n
        runs: dict[str, dict[str, list[float]]] = {m: {} for m in models}
        for seed in seeds:
            stream = make[name](n, seed)
            for m in models:
                v = score(m, stream, seed)
                for k in ("g_mean", "balanced_accuracy"):
                    runs[m].setdefault(k, []).append(v[k])
        for m in models:
            g, b = runs[m]["g_mean"], runs[m]["balanced_accuracy"]
            ref = "after(" + m.split("(", 1)[1].split(")")[0] + ")"
            p = welch(g, runs[ref]["g_mean"]) if ref in runs and ref != m else float("nan")
            print(f"| {name} | {m} | {statistics.fmean(g):.3f} ± {statistics.stdev(g):.3f} | "  # noqa: T201
                  f"{statistics.fmean(b):.3f} ± {statistics.stdev(b):.3f} | {p:.3f} |")  # fmt: skip
        sys.stdout.flush()


if __name__ == "__main__":
    main()
