"""Accuracy against the peers: Chorus, river and MOA (capymoa) on many streams, many seeds.

Prequential predict-then-learn accuracy (a ``None`` prediction counts as wrong) of five models:
single naive Bayes and Hoeffding tree, OzaBag(HT), OzaBoost(HT) and OzaBag(NB), M = 10 members,
every tree with MOA's defaults. The models of the three libraries are those of
``benchmarks/peers.py`` (MOA's classes with MOA's defaults spelled out as CLI strings), reused from
there. Streams:

* every classification data set river ships that needs no download (Phishing, ImageSegments,
  Bananas);
* river's synthetic generators in several configurations (numeric, multi-class, categorical);
* UCI files from ``--data-dir`` (``shared/datasets/raw``, loaders in ``benchmarks/datasets.py``);
* with ``--drifting``, river's drifting generators (:func:`drifting_streams`) at ``--drift-n``
  rows: SEA, Agrawal and RandomRBF through ``ConceptDriftStream`` with one abrupt or gradual
  drift in the middle, RandomRBF with moving centroids and a rotating Hyperplane.

``--models arf,srp,stack`` runs the forests of issue 37 (ARF, SRP, stacking; the options of
``benchmarks/peers.py``, which spells them out for all three libraries; MOA has no stacking).
A Chorus forest this checkout lacks prints "not available". ``arf_stack`` and ``srp_stack`` are
Chorus's forests with ``vote="stacking"`` (no peer has them): run beside ``arf`` / ``srp``, a
second table compares each with its forest's own vote, Chorus against Chorus, seed by seed
(the same trees: the vote does not change what they learn), with the same Welch mark.

Each stream is capped at ``--n`` rows. Seed ``s`` (``--seeds``) seeds the ensembles of all three
libraries and the synthetic generators, shuffles the rows of the fixed data sets (every
library sees the same rows in the same order), so single models vary too, and draws the order of
the features (:func:`shuffled_features`: MOA's ARF draws its features by column index with a
generator the seed does not reach; ``--keep-feature-order``: the stream's own). Each cell prints
mean ± sd over the seeds, the difference of Chorus to the better peer (the higher mean), and a
Welch t-test mark (scipy, p < 0.05): ``▼`` Chorus significantly below the better peer, ``▲``
significantly above it.

river's ``GaussianNB`` takes numeric features only, so river's NB models are left out (``—``) on
streams with categorical features; MOA is then the only peer there.

Run from the repository root::

    python benchmarks/accuracy.py               # full run, writes benchmarks/results/accuracy.md/.json
    python benchmarks/accuracy.py --quick       # smoke run: 3 streams, 2 seeds, 300 rows, no files

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import peers  # noqa: E402 - the shared model factories

MODELS = (
    "nb",
    "ht",
    "bag_ht",
    "boost_ht",
    "bag_nb",
    "boost_nb",
    "stump",
    "bag_stump",
    "boost_stump",
    *peers.FORESTS,
)
DEFAULT_MODELS = MODELS[:5]  # the first table; the rest: --models boost_nb,stump,...
LIBS = ("chorus", "moa", "river")
DELTA = peers.DELTA
UCI = ("balance", "breast_cancer", "german", "car", "chess", "nursery")

Stream = list[tuple[dict[str, Any], Any]]


# --------------------------------------------------------------------------- streams


def _river_dataset(name: str) -> Callable[[int, int], Stream]:
    def make(n: int, seed: int) -> Stream:
        from river import datasets

        rows = list(getattr(datasets, name)())
        random.Random(seed).shuffle(rows)
        return rows[:n]

    return make


def _synth(
    build: Callable[[int], Any], *, categorical: bool = False
) -> Callable[[int, int], Stream]:
    def make(n: int, seed: int) -> Stream:
        rows = list(build(seed).take(n))
        if categorical:  # integer-coded nominal features as strings (categorical everywhere)
            rows = [({str(k): str(v) for k, v in x.items()}, y) for x, y in rows]
        else:
            rows = [({str(k): float(v) for k, v in x.items()}, y) for x, y in rows]
        return rows

    return make


def _uci(name: str, data_dir: str) -> Callable[[int, int], Stream]:
    def make(n: int, seed: int) -> Stream:
        import datasets as uci

        ds = uci.load(name, data_dir)
        rows = list(zip(ds.X, ds.y, strict=True))
        random.Random(seed).shuffle(rows)
        return rows[:n]

    return make


def streams(data_dir: str, *, quick: bool) -> dict[str, Callable[[int, int], Stream]]:
    """name -> ``make(n, seed)`` returning the first n rows of the stream for that seed."""
    from river.datasets import synth

    out: dict[str, Callable[[int, int], Stream]] = {
        "Phishing": _river_dataset("Phishing"),
        "ImageSegments": _river_dataset("ImageSegments"),
        "Bananas": _river_dataset("Bananas"),
    }
    if quick:
        out["LED (categorical)"] = _synth(
            lambda s: synth.LED(seed=s, noise_percentage=0.1), categorical=True
        )
        return out
    out |= {
        "Agrawal f2": _synth(lambda s: synth.Agrawal(2, seed=s, perturbation=0.05)),
        "Agrawal f5": _synth(lambda s: synth.Agrawal(5, seed=s, perturbation=0.05)),
        "Agrawal f8": _synth(lambda s: synth.Agrawal(8, seed=s)),
        "SEA v0 (10% noise)": _synth(lambda s: synth.SEA(variant=0, seed=s, noise=0.1)),
        "SEA v2": _synth(lambda s: synth.SEA(variant=2, seed=s)),
        "RandomRBF 5 classes": _synth(
            lambda s: synth.RandomRBF(seed_model=s, seed_sample=s, n_classes=5, n_features=10)
        ),
        "Hyperplane": _synth(
            lambda s: synth.Hyperplane(seed=s, n_features=10, noise_percentage=0.05)
        ),
        "LED (categorical, 10% noise)": _synth(
            lambda s: synth.LED(seed=s, noise_percentage=0.1, irrelevant_features=True),
            categorical=True,
        ),
        "STAGGER (categorical)": _synth(lambda s: synth.STAGGER(seed=s), categorical=True),
    }
    if data_dir and Path(data_dir).is_dir():
        out |= {f"UCI {name}": _uci(name, data_dir) for name in UCI}
    return out


def _drift(first: Callable[[int], Any], second: Callable[[int], Any], *,
           gradual: bool) -> Callable[[int, int], Stream]:  # fmt: skip
    """``first(seed)`` drifting to ``second(seed)`` in the middle of the n rows (river's sigmoid
    ``ConceptDriftStream``): over a quarter of the stream, or as abruptly as river allows."""

    def make(n: int, seed: int) -> Stream:
        from drift import abrupt_width
        from river.datasets import synth

        width = n // 4 if gradual else abrupt_width(n)
        stream = synth.ConceptDriftStream(stream=first(seed), drift_stream=second(seed),
                                          position=n // 2, width=width, seed=seed)  # fmt: skip
        return _synth(lambda _: stream)(n, seed)

    return make


DRIFTING = (
    "SEA abrupt",
    "SEA gradual",
    "Agrawal abrupt",
    "Agrawal gradual",
    "RandomRBF abrupt",
    "RandomRBF gradual",
    "RandomRBF moving centroids",
    "Hyperplane rotating",
)


def drifting_streams(*, quick: bool) -> dict[str, Callable[[int, int], Stream]]:
    """River's drifting generators (``--drifting``), named as in :data:`DRIFTING`.

    SEA variant 0 -> 3 (threshold 8 -> 9.5) and Agrawal function 1 -> 4 (abrupt) / 2 -> 5
    (gradual), as ``benchmarks/drift.py``; RandomRBF (5 classes, 10 features, 50 centroids) ->
    another RandomRBF (model seed + 100); RandomRBFDrift with all 50 centroids moving at speed
    0.001 (the ARF paper's RBF_f); Hyperplane of 10 features all rotating by 0.001 per example,
    5% noise.
    """
    from river.datasets import synth

    def sea(variant: int) -> Callable[[int], Any]:
        return lambda s: synth.SEA(variant=variant, seed=s)

    def agrawal(function: int) -> Callable[[int], Any]:
        return lambda s: synth.Agrawal(classification_function=function, seed=s)

    def rbf(offset: int) -> Callable[[int], Any]:
        return lambda s: synth.RandomRBF(seed_model=s + offset, seed_sample=s, n_classes=5,
                                         n_features=10, n_centroids=50)  # fmt: skip

    def rbf_moving(s: int) -> Any:
        return synth.RandomRBFDrift(seed_model=s, seed_sample=s, n_classes=5, n_features=10,
                                    n_centroids=50, change_speed=0.001, n_drift_centroids=50)  # fmt: skip

    def hyperplane(s: int) -> Any:
        return synth.Hyperplane(seed=s, n_features=10, n_drift_features=10, mag_change=0.001,
                                noise_percentage=0.05, sigma=0.1)  # fmt: skip

    out = {
        "SEA abrupt": _drift(sea(0), sea(3), gradual=False),
        "SEA gradual": _drift(sea(0), sea(3), gradual=True),
        "Agrawal abrupt": _drift(agrawal(1), agrawal(4), gradual=False),
        "Agrawal gradual": _drift(agrawal(2), agrawal(5), gradual=True),
        "RandomRBF abrupt": _drift(rbf(0), rbf(100), gradual=False),
        "RandomRBF gradual": _drift(rbf(0), rbf(100), gradual=True),
        "RandomRBF moving centroids": _synth(rbf_moving),
        "Hyperplane rotating": _synth(hyperplane),
    }
    assert tuple(out) == DRIFTING
    return {"SEA abrupt": out["SEA abrupt"]} if quick else out


FEATURE_ORDER_SEED = 10_000  # (the column orders' generators: not the rows' shuffles)


def shuffled_features(stream: Stream, seed: int) -> Stream:
    """The rows with their features in an order drawn from ``seed``, the same in every row and
    for every library (the values untouched).

    A stream's column order is arbitrary, but MOA's ARF follows it: every one of its trees
    draws its leaves' features from a generator seeded 1 whatever the run's seed
    (docs/forests.md, "What is surprising in the sources", 1), so in one column order every
    run and every tree draws the same feature indices (on Agrawal, every root gets salary
    and age). Drawing the order per seed makes MOA's draws vary with the seed as Chorus's and
    river's do, so the mean over seeds is each library's expected accuracy."""
    names = list(dict.fromkeys(f for x, _ in stream for f in x))
    random.Random(FEATURE_ORDER_SEED + seed).shuffle(names)
    return [({f: x[f] for f in names if f in x}, y) for x, y in stream]


def stream_rows(name: str, args: argparse.Namespace) -> int:
    """Rows of stream ``name``: ``--drift-n`` for the drifting ones, else ``--n``."""
    return args.drift_n if name in DRIFTING else args.n


def categorical_features(stream: Stream) -> list[str]:
    return sorted({f for x, _ in stream for f, v in x.items() if isinstance(v, str)})


# --------------------------------------------------------------------------- runs


def run_stream(name: str, make: Callable[[int, int], Stream], args: argparse.Namespace) -> dict:
    """All libraries, models and seeds on one stream: ``{lib: {model: [acc per seed]}}``."""
    out: dict[str, dict[str, list[float]]] = {lib: {m: [] for m in args.models} for lib in LIBS}
    n = stream_rows(name, args)
    for seed in args.seeds:
        stream = make(n, seed)
        if args.shuffle_features:
            stream = shuffled_features(stream, seed)
        cats = categorical_features(stream)
        factories: dict[str, dict[str, Callable[[], Any]]] = {
            "chorus": peers.chorus_factories(args.n_models, seed, DELTA),
            "river": peers.river_factories(args.n_models, seed, DELTA, peers.n_features(stream)),
        }
        loops: dict[str, Callable[[Any, Any], peers.Result]] = {
            "chorus": functools.partial(peers.loop_batch, batch=1000),
            "river": peers.loop_one,
        }
        data: dict[str, Any] = {"chorus": stream, "river": stream}
        if "moa" not in args.skip and "moa" not in args.reused:
            schema, rows = peers.moa_instances(stream, cats)
            factories["moa"] = peers.moa_factories(schema, args.n_models, seed, DELTA)
            loops["moa"] = peers.loop_moa
            data["moa"] = rows
        for lib in LIBS:
            if lib in args.skip or lib in args.reused:
                continue
            for model in args.models:
                if lib == "river" and cats and model in ("nb", "bag_nb", "boost_nb"):
                    continue  # river's GaussianNB is numeric-only
                if model not in factories[lib]:
                    continue  # river has no decision stump, MOA no stacking; Chorus forests
                res = loops[lib](factories[lib][model](), data[lib])
                out[lib][model].append(res.accuracy)
        if args.verbose:
            print(f"  {name} seed {seed} done", file=sys.stderr, flush=True)  # noqa: T201
    for lib, by_stream in args.reused.items():
        out[lib] = {m: by_stream[name].get(m, []) for m in args.models}
    return {"stream": name, "n": n, "rows": len(stream), "seeds": args.seeds,
            "categorical": len(cats), "shuffled_features": args.shuffle_features,
            "acc": out}  # fmt: skip


def _run_named(name: str, args: argparse.Namespace) -> dict:
    return run_stream(name, all_streams(args)[name], args)


def all_streams(args: argparse.Namespace) -> dict[str, Callable[[int, int], Stream]]:
    """The streams of this run: :func:`streams`, and :func:`drifting_streams` with ``--drifting``."""
    out = streams(args.data_dir, quick=args.quick)
    return out | drifting_streams(quick=args.quick) if args.drifting else out


# --------------------------------------------------------------------------- report


def welch(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Welch t-test p-value; identical constant samples give 1, distinct ones 0."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        return float("nan")
    if statistics.pstdev(a) == 0 and statistics.pstdev(b) == 0:
        return 1.0 if statistics.fmean(a) == statistics.fmean(b) else 0.0
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def fmt_ms(xs: Sequence[float]) -> str:
    if not xs:
        return "—"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.fmean(xs):.3f} ± {sd:.3f}"


def compare(acc: dict[str, dict[str, list[float]]], model: str) -> tuple[str, float, float, str]:
    """(better peer, Chorus − better peer, p, mark)."""
    c = acc["chorus"][model]
    peers_ = {lib: acc[lib][model] for lib in ("moa", "river") if acc[lib][model]}
    if not c or not peers_:
        return "—", float("nan"), float("nan"), ""
    best = max(peers_, key=lambda lib: statistics.fmean(peers_[lib]))
    diff = statistics.fmean(c) - statistics.fmean(peers_[best])
    p = welch(c, peers_[best])
    mark = ("▼" if diff < 0 else "▲") if p < 0.05 else ""
    return best, diff, p, mark


def report(
    results: list[dict], models: Sequence[str], unavailable: dict[str, str] | None = None
) -> tuple[str, list[tuple[str, str]]]:
    """The table and its ▼ cells; ``unavailable``: Chorus models this checkout lacks."""
    unavailable = unavailable or {}
    headers = ["stream", "model", "Chorus", "MOA", "river", "Chorus − best peer", "p", ""]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    below = []
    for res in results:
        acc = res["acc"]
        for model in models:
            best, diff, p, mark = compare(acc, model)
            if mark == "▼":
                below.append((res["stream"], peers.NAMES[model]))
            cells = [
                res["stream"],
                peers.NAMES[model],
                "not available" if model in unavailable else fmt_ms(acc["chorus"][model]),
                fmt_ms(acc["moa"][model]),
                fmt_ms(acc["river"][model]),
                "—" if best == "—" else f"{diff:+.3f} ({best})",
                "—" if p != p else f"{p:.3f}",
                mark,
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), below


def variants_report(results: list[dict], models: Sequence[str]) -> str:
    """Chorus's forest variants (``peers.FOREST_VARIANTS``) against their forests run beside
    them: mean ± sd, the difference of the means, the seeds on which the variant was above
    (a seed grows the same trees for both), Welch's p and mark (``▲`` the variant
    significantly above, ``▼`` below); "" when no pair was run."""
    pairs = [(v, b) for v, b in peers.FOREST_VARIANTS.items() if v in models and b in models]
    if not pairs:
        return ""
    headers = ["stream", "model", "forest's vote", "stacked vote", "stacked − own", "seeds above",
               "p", ""]  # fmt: skip
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for res in results:
        for variant, base in pairs:
            v, b = res["acc"]["chorus"][variant], res["acc"]["chorus"][base]
            if not v or not b:
                continue
            diff = statistics.fmean(v) - statistics.fmean(b)
            p = welch(v, b)
            mark = ("▼" if diff < 0 else "▲") if p < 0.05 else ""
            above = sum(x > y for x, y in zip(v, b, strict=True))
            lines.append(f"| {res['stream']} | {peers.NAMES[base]} | {fmt_ms(b)} | {fmt_ms(v)} "
                         f"| {diff:+.3f} | {above}/{len(v)} | {p:.3f} | {mark} |")  # fmt: skip
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1000, help="rows per stream (1000)")
    p.add_argument("--seeds", default="1,2,3,4,5", help="comma list of seeds (1,2,3,4,5)")
    p.add_argument("--n-models", type=int, default=10, help="ensemble size M (10)")
    p.add_argument(
        "--models", default=",".join(DEFAULT_MODELS), help=f"comma list of {','.join(MODELS)}"
    )
    p.add_argument("--streams", default="", help="comma list of stream names (default: all)")
    p.add_argument("--skip", default="", help="comma list of libraries to skip: chorus,moa,river")
    p.add_argument("--reuse-peers", default="",
                   help="take MOA's and river's accuracies from this earlier --out .json (same "
                   "streams, seeds and --n) instead of running them again: peers do not change "
                   "when Chorus does")  # fmt: skip
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets" / "raw"),
                   help="UCI files (../shared/datasets/raw); missing: UCI streams are skipped")  # fmt: skip
    p.add_argument("--keep-feature-order", dest="shuffle_features", action="store_false",
                   help="give every library the features in the stream's own order (default: "
                   "an order drawn per seed, see shuffled_features)")  # fmt: skip
    p.add_argument("--jobs", type=int, default=1, help="streams run in parallel processes (1)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 4 streams (5 with --drifting), 2 seeds, 300 rows (600 drifting)",
    )
    p.add_argument(
        "--drifting",
        action="store_true",
        help=f"also the drifting generators: {', '.join(DRIFTING)}",
    )
    p.add_argument("--drift-n", type=int, default=10_000,
                   help="rows per drifting stream, drift in the middle (10000)")  # fmt: skip
    p.add_argument("--out", default=str(HERE / "results" / "accuracy.md"),
                   help="markdown results file, raw numbers next to it as .json ('' to not write)")  # fmt: skip
    p.add_argument("-q", "--quiet", dest="verbose", action="store_false", help="no progress")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.seeds = min(args.n, 300), "1,2"
        args.drift_n = min(args.drift_n, 600)
        if "--out" not in (argv or sys.argv):
            args.out = ""
    args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if bad := set(args.models) - set(MODELS):
        p.error(f"unknown model(s) {sorted(bad)}; choose from {', '.join(MODELS)}")
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if bad := args.skip - set(LIBS):
        p.error(f"unknown library(ies) {sorted(bad)}; choose from {', '.join(LIBS)}")
    args.reused = {}
    if args.reuse_peers:
        old = json.loads(Path(args.reuse_peers).read_text())
        args.reused = {"moa": {}, "river": {}}
        for res in old:
            if (
                res["n"] != stream_rows(res["stream"], args)
                or res.get("seeds", args.seeds) != args.seeds
                or res.get("shuffled_features", False) != args.shuffle_features
            ):
                p.error(f"{args.reuse_peers}: {res['stream']} was run with other --n/--seeds "
                        "or feature order")  # fmt: skip
            for lib in args.reused:
                args.reused[lib][res["stream"]] = res["acc"][lib]
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    t0 = time.perf_counter()
    names = list(all_streams(args))
    if args.streams:
        wanted = [s.strip() for s in args.streams.split(",") if s.strip()]
        if bad := set(wanted) - set(names):
            raise SystemExit(f"unknown stream(s) {sorted(bad)}; choose from {names}")
        names = wanted
    for lib, by_stream in args.reused.items():
        if missing := [
            f"{s} / {m}" for s in names for m in args.models
            if m not in by_stream.get(s, {}) and m not in peers.FOREST_VARIANTS
        ]:  # fmt: skip
            raise SystemExit(f"--reuse-peers has no {lib} cells for {', '.join(missing)}")
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_run_named, names, [args] * len(names)))
    else:
        results = [_run_named(name, args) for name in names]
    unavailable = {} if "chorus" in args.skip else peers.chorus_unavailable()
    unavailable = {m: why for m, why in unavailable.items() if m in args.models}
    table, below = report(results, args.models, unavailable)
    variants = variants_report(results, args.models)
    if variants:
        variants = ("Chorus's forests with the stacked vote against their own vote (Welch "
                    "t-test, p < 0.05: `▲` stacking significantly above, `▼` below):\n\n"
                    + variants + "\n\n")  # fmt: skip
    elapsed = time.perf_counter() - t0
    compared = sum(compare(res["acc"], m)[0] != "—" for res in results for m in args.models)
    summary = f"{len(below)} of {compared} cells significantly below the better peer" + (
        ": " + "; ".join(f"{s} / {m}" for s, m in below) if below else ""
    )
    setup = (
        f"{len(args.seeds)} seeds ({', '.join(map(str, args.seeds))}), ≤ {args.n:,} rows per "
        f"stream"
        + (f" ({args.drift_n:,} per drifting stream, drift in the middle)" if args.drifting else "")
        + (
            ", the features in an order drawn per seed"
            if args.shuffle_features
            else ", the features in each stream's own order"
        )
        + f", M = {args.n_models}, prequential; every tree with MOA's defaults (grace period "
        f"{peers.GRACE_PERIOD}, delta {DELTA:g}, tie threshold {peers.TAU}, naive-Bayes-adaptive "
        f"leaves)"
        + (
            f"; the forests' trees with MOA's ARF/SRP defaults (grace period "
            f"{peers.FOREST_GRACE_PERIOD}, delta {peers.FOREST_DELTA:g}), ARF with "
            "sqrt(F)+1 of the F features per leaf in all three libraries (an int for river), "
            "river's stacking a one-vs-rest logistic regression over 10 Poisson(1)-bagged "
            "trees (`peers.PoissonMember`), MOA has no stacking"
            if set(args.models) & set(peers.FORESTS)
            else ""
        )
        + ". MOA models: "
        + "; ".join(
            f"{peers.NAMES[k]} = `{' '.join(filter(None, [cls.removeprefix('moa.classifiers.'), cli]))}`"
            for k, (cls, cli) in peers.moa_specs(args.n_models, DELTA).items()
            if k in args.models
        )
        + f". Wall time {elapsed / 60:.1f} min, load average {os.getloadavg()[0]:.2f}."
    )
    print(table)  # noqa: T201
    print()  # noqa: T201
    print(variants)  # noqa: T201
    print(summary)  # noqa: T201
    print(setup)  # noqa: T201
    if args.out:
        peers.write_result(
            args.out, "Accuracy: Chorus vs MOA (capymoa) vs river", "accuracy.py",
            sys.argv[1:] if argv is None else argv,
            "Mean ± sd of prequential accuracy over seeds; `▼`/`▲`: Chorus significantly "
            "below/above the better peer (Welch t-test, p < 0.05).\n\n"
            f"{table}\n\n**{summary}.**\n\n{variants}{setup}\n",
        )  # fmt: skip
        Path(args.out).with_suffix(".json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
