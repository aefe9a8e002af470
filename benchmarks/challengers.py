"""Challengers on drifting streams (issue 38): does auto-promotion serve the best candidate?

A model created with OzaBag(HT, 10) as its champion and the forests ARF(HT, 10) and SRP(HT, 10)
as challengers, with the default promotion policy (window 1,000, at least 1,000 examples, McNemar
at alpha 0.01, margin 0.01), learns each of ``benchmarks/accuracy.py``'s drifting streams in
batches of 100 (the policy is checked after each, as the service's writer does after a group).
It runs the service's own board (:class:`app.registry.challengers.LocalCandidates`), in this
process.

Per stream and seed: the accuracy of the predictions *served* (by the champion of the moment)
over the rest of the stream after the first auto-promotion (after ``min_examples`` when none
happened), and every candidate's accuracy over the same rows; the gap is the best candidate's
minus the served one's. The goal: within 1 point. Also the promotions and the whole-stream
accuracies.

Run from the repository root::

    python benchmarks/challengers.py [--n 10000] [--seeds 1,2,3] [--jobs 2]
                                     [--out benchmarks/results/challengers.md]

A benchmark, not a test: it prints a table and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

CHAMPION = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 10}
CHALLENGERS = [
    {"name": "arf", "ensemble": "arf", "learner": "hoeffding_tree", "n_models": 10},
    {"name": "srp", "ensemble": "srp", "learner": "hoeffding_tree", "n_models": 10},
]
POLICY = {"window": 1000, "min_examples": 1000, "alpha": 0.01, "margin": 0.01}
BATCH = 100


def correct(score: Any) -> tuple[int, int]:
    """``(right, scored)`` of a :class:`app.metrics.Prequential` so far."""
    return sum(n for (t, p), n in score.cells.items() if t == p), score.n_scored


def run(stream_name: str, seed: int, n: int) -> dict[str, Any]:
    """One stream and seed: the served and candidate accuracies (module doc)."""
    from accuracy import drifting_streams

    from app.registry.challengers import LocalCandidates

    rows = drifting_streams(quick=False)[stream_name](n, seed)
    spec = {**CHAMPION, "seed": seed}
    chs = [{**c, "seed": seed} for c in CHALLENGERS]
    lc = LocalCandidates(spec, chs, POLICY, champion="ozabag")
    board = lc.h.board
    at_min = at_promotion = None  # the counts after min_examples rows / the first promotion
    start_row = POLICY["min_examples"]
    promotions = []
    t0 = time.perf_counter()
    for i in range(0, len(rows), BATCH):
        chunk = rows[i : i + BATCH]
        before = board.promotions
        lc.predict_learn([x for x, _ in chunk], [y for _, y in chunk])
        done = i + len(chunk)
        if board.promotions != before:
            promotions.append((done, board.champion.name))
            if at_promotion is None:
                at_promotion, start_row = _counts(lc), done
        if done == POLICY["min_examples"]:
            at_min = _counts(lc)
    mark = at_promotion or at_min or _counts(lc)
    end = _counts(lc)
    rest = {k: (end[k][0] - mark[k][0]) / max(1, end[k][1] - mark[k][1]) for k in end}
    served = rest.pop("served")
    whole = {c["name"]: c["metrics"]["accuracy"] for c in lc.leaderboard()["candidates"]}
    whole["served"] = lc.served.values()["accuracy"]
    best = max(rest, key=rest.get)  # type: ignore[arg-type]
    return {"stream": stream_name, "seed": seed, "n": len(rows), "start": start_row,
            "promotions": promotions, "served": served, "rest": rest, "best": best,
            "gap": rest[best] - served, "whole": whole,
            "seconds": time.perf_counter() - t0}  # fmt: skip


def _counts(lc: Any) -> dict[str, tuple[int, int]]:
    out = {c.name: correct(c.scores()) for c in [lc.h.board.champion, *lc.h.board.challengers]}
    out["served"] = correct(lc.served)
    return out


def _job(a: tuple[str, int, int]) -> dict[str, Any]:
    return run(*a)


def main(argv: list[str] | None = None) -> None:
    from accuracy import DRIFTING

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="rows per stream")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--streams", default=",".join(DRIFTING))
    ap.add_argument("--out", type=Path, default=None, help="also write the table here (.md)")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    streams = [s.strip() for s in args.streams.split(",") if s.strip()]
    jobs = [(s, seed, args.n) for s in streams for seed in seeds]
    t0 = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_job, jobs))
    else:
        results = [_job(j) for j in jobs]
    lines = [
        "# Challengers on drifting streams: OzaBag(HT,10) champion, ARF(HT,10) and SRP(HT,10) "
        "challengers, auto-promotion\n",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python "
        f"benchmarks/challengers.py --n {args.n} --seeds {args.seeds}` ({len(jobs)} runs, "
        f"{time.perf_counter() - t0:.0f} s wall, {args.jobs} jobs). Policy {json.dumps(POLICY)}, "
        f"batches of {BATCH}. *Rest*: the rows after the first promotion (after "
        f"{POLICY['min_examples']} rows when none happened); *served*: the predictions the "
        "model served there (the champion of the moment's); *gap*: the best candidate's "
        "accuracy over the same rows minus the served one's (goal: ≤ 0.01).\n",
        "| stream | seed | promotions (row: new champion) | rest from row | served | ozabag | arf "
        "| srp | best | gap | whole stream: served / ozabag / arf / srp |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        prom = ", ".join(f"{row}: {name}" for row, name in r["promotions"]) or "none"
        w = r["whole"]
        lines.append(
            f"| {r['stream']} | {r['seed']} | {prom} | {r['start']} | {r['served']:.4f} | "
            f"{r['rest']['ozabag']:.4f} | {r['rest']['arf']:.4f} | {r['rest']['srp']:.4f} | "
            f"{r['best']} | {r['gap']:+.4f} | {w['served']:.4f} / {w['ozabag']:.4f} / "
            f"{w['arf']:.4f} / {w['srp']:.4f} |"
        )
    lines.append("\nPer stream (mean over seeds):\n")
    lines.append(
        "| stream | served (rest) | best candidate (rest) | mean gap | max gap | within 1 pt |"
    )
    lines.append("|---|---|---|---|---|---|")
    for s in streams:
        rs = [r for r in results if r["stream"] == s]
        gaps = [r["gap"] for r in rs]
        lines.append(
            f"| {s} | {statistics.fmean(r['served'] for r in rs):.4f} | "
            f"{statistics.fmean(r['rest'][r['best']] for r in rs):.4f} | "
            f"{statistics.fmean(gaps):+.4f} | {max(gaps):+.4f} | "
            f"{sum(g <= 0.01 for g in gaps)}/{len(gaps)} |"
        )
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
