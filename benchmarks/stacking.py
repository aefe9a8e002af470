"""The stacked vote (``vote="stacking"``) against the average vote: accuracy and speed.

Accuracy: prequential predict-then-learn accuracy (batches of 1,000 through
``predict_learn_many``; a ``None`` prediction counts as wrong) of OzaBag(HT) and OzaBoost(HT),
M = 10 members with Chorus' defaults, average vote against stacking, on streams of
``benchmarks/accuracy.py`` (``--streams``) capped at ``--n`` rows, seeds ``--seeds`` (the seed of
the ensemble, of a generator, or of the shuffle of a fixed data set). Each cell is the mean ± sd
over the seeds; "diff" is stacking minus average per seed, its mean and how many seeds it won.

Speed: CPU microseconds of the timing thread per example (the best of ``--repeat`` runs, the two
votes alternated, after an untimed warm-up), one example per call (``predict_one`` then
``learn_one``, river's loop) and in batches, on ``peers.py``'s Agrawal stream (2 classes) and on
LED (10 classes: the meta-learner costs O(M C^2) per example).

Run from the repository root::

    python benchmarks/stacking.py               # both tables
    python benchmarks/stacking.py --n 2000 --seeds 1,2 --skip speed

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for p in (str(HERE.parent), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import accuracy  # noqa: E402 - the streams
import peers  # noqa: E402 - the loops and the timing

STREAMS = ("Agrawal f2", "LED (categorical, 10% noise)", "ImageSegments")


def model(kind: str, vote: str, seed: int) -> Any:
    from ensembles import OnlineBagging, OnlineBoosting
    from learners import HoeffdingTree

    cls = OnlineBagging if kind == "OzaBag(HT)" else OnlineBoosting
    return cls(HoeffdingTree(), n_models=10, seed=seed, vote=vote)


def accuracy_table(args: argparse.Namespace) -> None:
    make = accuracy.streams("", quick=False)
    print("| stream | model | average | stacking | diff (stacking won) |")  # noqa: T201
    print("|---|---|---|---|---|")  # noqa: T201
    for name in args.streams:
        runs: dict[tuple[str, str], list[float]] = {}
        rows = 0
        for seed in args.seeds:
            stream = make[name](args.n, seed)
            rows = len(stream)
            for kind in ("OzaBag(HT)", "OzaBoost(HT)"):
                for vote in ("average", "stacking"):
                    res = peers.loop_batch(model(kind, vote, seed), stream, batch=1000)
                    runs.setdefault((kind, vote), []).append(res.accuracy)
        for kind in ("OzaBag(HT)", "OzaBoost(HT)"):
            avg, stk = runs[kind, "average"], runs[kind, "stacking"]
            diff = [s - a for s, a in zip(stk, avg, strict=True)]
            won = sum(d > 0 for d in diff)
            print(f"| {name} ({rows:,} rows) | {kind} | {_cell(avg)} | {_cell(stk)} | "  # noqa: T201
                  f"{statistics.mean(diff):+.4f} ({won}/{len(diff)}) |")  # fmt: skip
        sys.stdout.flush()


def _cell(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} ± {sd:.4f}"


def speed_table(args: argparse.Namespace) -> None:
    make = accuracy.streams("", quick=False)
    print("\n| stream | model | loop | average µs | stacking µs | cost |")  # noqa: T201
    print("|---|---|---|---|---|---|")  # noqa: T201
    for name in ("Agrawal f2", "LED (categorical, 10% noise)"):
        stream = make[name](args.speed_n, 7)
        for kind in ("OzaBag(HT)", "OzaBoost(HT)"):
            for loop_name, loop in (("one", peers.loop_one),
                                    ("batch", functools.partial(peers.loop_batch, batch=1000))):  # fmt: skip
                best = {"average": float("inf"), "stacking": float("inf")}
                for vote in best:  # untimed: numba's cache, first calls
                    loop(model(kind, vote, 1), stream[:500])
                for _ in range(args.repeat):  # alternated: both see the machine's load alike
                    for vote in best:
                        res = loop(model(kind, vote, 1), stream)
                        best[vote] = min(best[vote], res.cpu_s / res.n * 1e6)
                avg, stk = best["average"], best["stacking"]
                print(f"| {name} | {kind} | {loop_name} | {avg:.1f} | {stk:.1f} | "  # noqa: T201
                      f"{stk - avg:+.1f} µs ({stk / avg - 1:+.0%}) |")  # fmt: skip
                sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="rows per stream (accuracy)")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--streams", default=";".join(STREAMS), help="';'-separated names")
    ap.add_argument("--speed-n", type=int, default=10_000, help="rows timed (speed)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--skip", default="", help="accuracy and/or speed")
    args = ap.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.streams = args.streams.split(";")
    if "accuracy" not in args.skip:
        accuracy_table(args)
    if "speed" not in args.skip:
        speed_table(args)


if __name__ == "__main__":
    main()
