"""Drift-adaptive bagging and boosting: Chorus against MOA and river on drifting streams, in one
run.

Streams (river's ``datasets.synth``, one concept drift in the middle of ``--n`` examples, built
with ``ConceptDriftStream``; ``width`` is the length of the change, river's sigmoid):

* ``SEA abrupt``: ``SEA(variant=0)`` -> ``SEA(variant=3)`` (threshold 8 -> 9.5), width 100;
* ``Agrawal abrupt``: ``Agrawal(classification_function=1)`` -> ``(function=4)``, width 100;
* ``Agrawal gradual``: ``Agrawal(function=2)`` -> ``(function=5)``, width ``n / 4``;
* ``LED abrupt`` (10 classes, where output codes make binary problems of their own): ``LED(noise
  10%, 17 irrelevant features)`` -> ``LEDDrift(the same, 7 drifting features)``, width 100.

Models, 10 Hoeffding trees each (MOA's defaults: grace 200, delta 1e-7, tie 0.05, NBA leaves):

=====================  ===================================  ==============================
row                    Chorus                               MOA (capymoa) / river 0.26
=====================  ===================================  ==============================
OzaBag                 OnlineBagging(HT)                    meta.OzaBag / BaggingClassifier
OzaBagAdwin            OnlineBagging(HT, drift="adwin")     meta.OzaBagAdwin / ADWINBaggingClassifier
LeveragingBag          ... drift="adwin", poisson_lambda=6  meta.LeveragingBag / LeveragingBaggingClassifier
LeveragingBag, codes   ... and output_codes=True            meta.LeveragingBag -o / (none)
OzaBagAdwin, weighted  ... drift="adwin", vote="weighted"   (Chorus only)
OzaBag + DDM           ... drift="ddm"                      (Chorus only)
OzaBoost               OnlineBoosting(HT)                   meta.OzaBoost / AdaBoostClassifier
OzaBoostAdwin          OnlineBoosting(HT, drift="adwin")    meta.OzaBoostAdwin / ADWINBoostingClassifier
OzaBoost, MOA lambda   ... lambda_rule="moa"                (MOA's OzaBoost is that rule)
OzaBoostAdwin, MOA l.  ... drift="adwin", lambda_rule="moa"  (MOA's OzaBoostAdwin is)
=====================  ===================================  ==============================

Significance: for each Chorus row, a paired t-test over the seeds (the same stream for both) of
its accuracy against MOA's row of the same algorithm (``PEER``: the weighted vote and DDM against
OzaBagAdwin, the MOA-lambda rows against MOA's boosting): ``▲`` / ``▼`` Chorus significantly
above / below (p < 0.05), p-value in the table.

Prequential predict-then-learn, one example per call, the same materialised stream for every
library (MOA gets the same rows as pre-built Java instances, all features numeric). Stream seed
and model seed are the run's seed (``--seeds``); river runs on the first seed only unless
``--river-seeds`` says more, and only its ADWIN bagging, leveraging bagging and ADWIN boosting
unless ``--river-models`` says more (its leveraging bagging learns each example k ~ Poisson(6)
times per member: ~150 examples/s here; its plain bagging and boosting are in results/peers.md).
``--rows`` runs some rows only (e.g. ``--rows boost,boost_adwin``). Speed is examples per
second of the timed loop (wall clock, after an
untimed warm-up on the first ``--warmup`` examples: numba / JIT), on a shared machine: noisy.

Run from the repository root::

    python benchmarks/drift.py                      # writes benchmarks/results/drift.md + .png
    python benchmarks/drift.py --n 4000 --seeds 1 --skip river --out '' --plot ''   # a quick look

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from peers import DELTA, GRACE_PERIOD, TAU, moa_cli, moa_instances, write_result  # noqa: E402

ROWS = {
    "bag": "OzaBag",
    "adwin": "OzaBagAdwin",
    "lev": "LeveragingBag",
    "lev_oc": "LeveragingBag, output codes",
    "adwin_w": "OzaBagAdwin, weighted vote",
    "ddm": "OzaBag + DDM",
    "boost": "OzaBoost",
    "boost_adwin": "OzaBoostAdwin",
    "boost_moa": "OzaBoost, MOA's lambda",
    "boost_adwin_moa": "OzaBoostAdwin, MOA's lambda",
}
# the MOA row a Chorus row is tested against (default: the same key)
PEER = {"adwin_w": "adwin", "ddm": "adwin", "boost_moa": "boost", "boost_adwin_moa": "boost_adwin"}
LIBS = ("chorus", "moa", "river")
STYLE = {"chorus": "-", "moa": "--", "river": ":"}
COLOR = {"bag": "tab:gray", "adwin": "tab:blue", "lev": "tab:red", "lev_oc": "tab:pink",
         "adwin_w": "tab:green", "ddm": "tab:purple", "boost": "tab:olive",
         "boost_adwin": "tab:orange", "boost_moa": "tab:cyan",
         "boost_adwin_moa": "tab:brown"}  # fmt: skip


def abrupt_width(n: int) -> int:
    """The shortest change river's ``ConceptDriftStream`` takes for a drift in the middle of ``n``
    examples: its sigmoid overflows below ~position / 177."""
    return max(100, n // 2 * 4 // 700 + 1)


def make_streams(n: int, seed: int) -> dict[str, list]:
    from river.datasets import synth

    half = n // 2
    abrupt = abrupt_width(n)

    def drift(a: Any, b: Any, width: int) -> list:
        s = synth.ConceptDriftStream(stream=a, drift_stream=b, position=half, width=width,
                                     seed=seed)  # fmt: skip
        return [({str(k): v for k, v in x.items()}, y) for x, y in s.take(n)]  # SEA's keys: ints

    return {
        "SEA abrupt": drift(
            synth.SEA(variant=0, seed=seed), synth.SEA(variant=3, seed=seed), abrupt
        ),  # fmt: skip
        "Agrawal abrupt": drift(
            synth.Agrawal(classification_function=1, seed=seed),
            synth.Agrawal(classification_function=4, seed=seed),
            abrupt,
        ),  # fmt: skip
        "Agrawal gradual": drift(
            synth.Agrawal(classification_function=2, seed=seed),
            synth.Agrawal(classification_function=5, seed=seed),
            n // 4,
        ),  # fmt: skip
        "LED abrupt": drift(
            synth.LED(seed=seed, noise_percentage=0.1, irrelevant_features=True),
            synth.LEDDrift(
                seed=seed, noise_percentage=0.1, irrelevant_features=True, n_drift_features=7
            ),  # fmt: skip
            abrupt,
        ),  # fmt: skip
    }


# --------------------------------------------------------------------------- models
def chorus_factories(seed: int, n_models: int) -> dict[str, Callable[[], Any]]:
    from ensembles import OnlineBagging, OnlineBoosting
    from learners import HoeffdingTree

    def bag(**kw: Any) -> Callable[[], Any]:
        return lambda: OnlineBagging(HoeffdingTree(), n_models=n_models, seed=seed, **kw)

    def boost(**kw: Any) -> Callable[[], Any]:
        return lambda: OnlineBoosting(HoeffdingTree(), n_models=n_models, seed=seed, **kw)

    return {
        "bag": bag(),
        "adwin": bag(drift="adwin"),
        "lev": bag(drift="adwin", poisson_lambda=6.0),
        "lev_oc": bag(drift="adwin", poisson_lambda=6.0, output_codes=True),
        "adwin_w": bag(drift="adwin", vote="weighted"),
        "ddm": bag(drift="ddm"),
        "boost": boost(),
        "boost_adwin": boost(drift="adwin"),
        "boost_moa": boost(lambda_rule="moa"),
        "boost_adwin_moa": boost(drift="adwin", lambda_rule="moa"),
    }


def moa_specs(n_models: int) -> dict[str, tuple[str, str]]:
    ht = moa_cli(DELTA)
    return {
        "bag": ("moa.classifiers.meta.OzaBag", f"-l ({ht}) -s {n_models}"),
        "adwin": ("moa.classifiers.meta.OzaBagAdwin", f"-l ({ht}) -s {n_models}"),
        "lev": (
            "moa.classifiers.meta.LeveragingBag",
            f"-l ({ht}) -s {n_models} -w 6.0 -a 0.002 -m LeveragingBag",
        ),  # fmt: skip
        "lev_oc": (
            "moa.classifiers.meta.LeveragingBag",
            f"-l ({ht}) -s {n_models} -w 6.0 -a 0.002 -o -m LeveragingBag",
        ),  # fmt: skip
        "boost": ("moa.classifiers.meta.OzaBoost", f"-l ({ht}) -s {n_models}"),
        "boost_adwin": ("moa.classifiers.meta.OzaBoostAdwin", f"-l ({ht}) -s {n_models} -a 0.002"),
    }


def river_factories(seed: int, n_models: int) -> dict[str, Callable[[], Any]]:
    from river import ensemble, tree

    def ht() -> Any:
        return tree.HoeffdingTreeClassifier(grace_period=GRACE_PERIOD, delta=DELTA, tau=TAU,
                                            leaf_prediction="nba")  # fmt: skip

    return {
        "bag": lambda: ensemble.BaggingClassifier(ht(), n_models=n_models, seed=seed),
        "adwin": lambda: ensemble.ADWINBaggingClassifier(ht(), n_models=n_models, seed=seed),
        "lev": lambda: ensemble.LeveragingBaggingClassifier(
            ht(), n_models=n_models, w=6.0, adwin_delta=0.002, bagging_method="bag", seed=seed
        ),
        "boost": lambda: ensemble.AdaBoostClassifier(ht(), n_models=n_models, seed=seed),
        "boost_adwin": lambda: ensemble.ADWINBoostingClassifier(ht(), n_models=n_models, seed=seed),
    }


# --------------------------------------------------------------------------- loops
CLOCK = {"wall": time.perf_counter, "cpu": time.thread_time}  # set by --clock
clock = CLOCK["wall"]


def loop_dicts(model: Any, stream: list) -> tuple[np.ndarray, float]:
    ok = np.zeros(len(stream), dtype=bool)
    t0 = clock()
    for i, (x, y) in enumerate(stream):
        ok[i] = model.predict_one(x) == y
        model.learn_one(x, y)
    return ok, clock() - t0


def loop_moa(model: Any, rows: list) -> tuple[np.ndarray, float]:
    ok = np.zeros(len(rows), dtype=bool)
    t0 = clock()
    for i, (inst, y) in enumerate(rows):
        ok[i] = model.predict(inst) == y
        model.train(inst)
    return ok, clock() - t0


def run_all(args: argparse.Namespace) -> dict:
    """``{(stream, lib, row): [(ok array, seconds, drifts), ...]}`` over seeds."""
    out: dict[tuple[str, str, str], list] = {}
    seeds = [int(s) for s in args.seeds.split(",")]
    river_seeds = seeds[: args.river_seeds]
    skip = set(filter(None, args.skip.split(",")))
    wanted = set(args.rows.split(",")) if args.rows else set(ROWS)
    if "moa" not in skip:
        import capymoa  # noqa: F401 - starts the JVM outside the timed loops
        import jpype
        from capymoa.base import MOAClassifier
    for seed in seeds:
        streams = make_streams(args.n, seed)
        for sname, stream in streams.items():
            warm = stream[: args.warmup]
            if "chorus" not in skip:
                for key, make in chorus_factories(seed, args.n_models).items():
                    if key not in wanted:
                        continue
                    loop_dicts(make(), warm)
                    model = make()
                    ok, sec = loop_dicts(model, stream)
                    out.setdefault((sname, "chorus", key), []).append((ok, sec, model.n_drifts))
                    log(sname, seed, "chorus", key, ok, sec)
            if "moa" not in skip:
                schema, rows = moa_instances(stream)
                for key, (cls, cli) in moa_specs(args.n_models).items():
                    if key not in wanted:
                        continue

                    def make_moa(cls: str = cls, cli: str = cli, schema: Any = schema,
                                 seed: int = seed) -> Any:  # fmt: skip
                        return MOAClassifier(jpype.JClass(cls), schema=schema, CLI=cli,
                                             random_seed=seed)  # fmt: skip

                    loop_moa(make_moa(), rows[: args.warmup])
                    ok, sec = loop_moa(make_moa(), rows)
                    out.setdefault((sname, "moa", key), []).append((ok, sec, None))
                    log(sname, seed, "moa", key, ok, sec)
            if "river" not in skip and seed in river_seeds:
                for key, make in river_factories(seed, args.n_models).items():
                    if key not in args.river_models.split(",") or key not in wanted:
                        continue
                    ok, sec = loop_dicts(make(), stream)
                    out.setdefault((sname, "river", key), []).append((ok, sec, None))
                    log(sname, seed, "river", key, ok, sec)
    return out


def log(stream: str, seed: int, lib: str, key: str, ok: np.ndarray, sec: float) -> None:
    print(f"{stream:<16} seed {seed}  {lib:<6} {ROWS[key]:<27} acc {ok.mean():.4f}  "
          f"{len(ok) / sec:>9,.0f} ex/s", file=sys.stderr, flush=True)  # fmt: skip


# --------------------------------------------------------------------------- report
def blocks(ok: np.ndarray, w: int) -> np.ndarray:
    n = len(ok) // w * w
    return ok[:n].reshape(-1, w).mean(axis=1)


def fmt_acc(vals: list[float]) -> str:
    if len(vals) == 1:
        return f"{vals[0]:.3f}"
    return f"{statistics.mean(vals):.3f} ± {statistics.stdev(vals):.3f}"


def paired_p(a: list[float], b: list[float]) -> float | None:
    """Two-sided p-value of a paired t-test (``None`` below 2 pairs)."""
    from scipy import stats

    if len(a) < 2 or len(a) != len(b):
        return None
    d = np.asarray(a) - np.asarray(b)
    if np.allclose(d, d[0]):  # no spread: equal, or a constant difference
        return 1.0 if np.allclose(d, 0.0) else 0.0
    return float(stats.ttest_rel(a, b).pvalue)


def versus(res: dict, sname: str, key: str, lib: str = "moa") -> str:
    """``▲ 0.01`` / ``▼ 0.03`` / ``0.40``: Chorus' row ``key`` against ``lib``'s peer row over
    the seeds both ran (paired: the same stream per seed)."""
    ours = res.get((sname, "chorus", key)) or []
    theirs = res.get((sname, lib, PEER.get(key, key))) or []
    n = min(len(ours), len(theirs))
    a = [float(ok.mean()) for ok, _, _ in ours[:n]]
    b = [float(ok.mean()) for ok, _, _ in theirs[:n]]
    p = paired_p(a, b)
    if p is None:
        return ""
    mark = ("▲ " if statistics.mean(a) > statistics.mean(b) else "▼ ") if p < 0.05 else ""
    return f"{mark}{p:.2f}"


def report(res: dict, args: argparse.Namespace) -> str:
    half = args.n // 2
    lines = []
    streams = list(dict.fromkeys(s for s, _, _ in res))
    for sname in streams:
        lines += [f"### {sname}", "",
                  "| library | model | seeds | mean accuracy | after the drift | "
                  "first 1,000 after | examples/s | members reset | vs MOA (p) |",
                  "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for lib in LIBS:
            for key in ROWS:
                runs = res.get((sname, lib, key))
                if not runs:
                    continue
                acc = [float(ok.mean()) for ok, _, _ in runs]
                after = [float(ok[half:].mean()) for ok, _, _ in runs]
                first = [float(ok[half : half + 1000].mean()) for ok, _, _ in runs]
                rate = statistics.mean(len(ok) / sec for ok, sec, _ in runs)
                drifts = [d for _, _, d in runs]
                reset = "" if drifts[0] is None else f"{statistics.mean(drifts):.0f}"
                vs = versus(res, sname, key) if lib == "chorus" else ""
                lines.append(f"| {lib} | {ROWS[key]} | {len(runs)} | {fmt_acc(acc)} | "
                             f"{fmt_acc(after)} | {fmt_acc(first)} | {rate:,.0f} | {reset} | "
                             f"{vs} |")  # fmt: skip
        lines.append("")
    lines += option_effects(res, streams)
    return "\n".join(lines)


def option_effects(res: dict, streams: list[str]) -> list[str]:
    """Mean accuracy with an option minus without, per stream and library, with the paired
    p-value over seeds: output codes (leveraging bagging), MOA's lambda rule (boosting)."""
    pairs = [("lev_oc", "lev", ("chorus", "moa")), ("boost_moa", "boost", ("chorus",)),
             ("boost_adwin_moa", "boost_adwin", ("chorus",))]  # fmt: skip
    lines = ["### What the options change", "",
             "Mean accuracy with the option minus without (paired over seeds, p-value).", "",
             "| stream | option | library | with | without | difference (p) |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for sname in streams:
        for on, off, libs in pairs:
            for lib in libs:
                a = [float(ok.mean()) for ok, _, _ in res.get((sname, lib, on)) or []]
                b = [float(ok.mean()) for ok, _, _ in res.get((sname, lib, off)) or []]
                if not a or len(a) != len(b):
                    continue
                p = paired_p(a, b)
                diff = statistics.mean(a) - statistics.mean(b)
                lines.append(f"| {sname} | {ROWS[on]} | {lib} | {statistics.mean(a):.3f} | "
                             f"{statistics.mean(b):.3f} | {diff:+.3f}"
                             f"{'' if p is None else f' ({p:.2f})'} |")  # fmt: skip
    return [*lines, ""]


def plot(res: dict, args: argparse.Namespace, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    streams = list(dict.fromkeys(s for s, _, _ in res))
    fig, axes = plt.subplots(1, len(streams), figsize=(6 * len(streams), 4.6), sharey=False)
    axes = np.atleast_1d(axes)
    w = args.window
    for ax, sname in zip(axes, streams, strict=True):
        for lib in LIBS:
            for key in ROWS:
                runs = res.get((sname, lib, key))
                if not runs:
                    continue
                curve = np.mean([blocks(ok, w) for ok, _, _ in runs], axis=0)
                xs = (np.arange(len(curve)) + 1) * w
                ax.plot(xs, curve, STYLE[lib], color=COLOR[key], lw=1.4,
                        label=f"{lib} {ROWS[key]}")  # fmt: skip
        ax.axvline(args.n // 2, color="k", lw=0.6, alpha=0.5)
        ax.set_title(sname)
        ax.set_xlabel(f"examples (accuracy per block of {w})")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("prequential accuracy (mean over seeds)")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--river-seeds", type=int, default=1, help="run river on the first K seeds")
    p.add_argument("--river-models", default="adwin,lev,boost_adwin",
                   help="river rows (of bag,adwin,lev,boost,boost_adwin)")  # fmt: skip
    p.add_argument(
        "--rows", default="", help=f"comma list of rows to run (default all: {','.join(ROWS)})"
    )
    p.add_argument("--n-models", type=int, default=10)
    p.add_argument("--window", type=int, default=500, help="block of the accuracy curve")
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--skip", default="", help="comma list of chorus, moa, river")
    p.add_argument("--out", default=str(HERE / "results" / "drift.md"))
    p.add_argument("--plot", default=str(HERE / "results" / "drift.png"))
    p.add_argument(
        "--clock",
        choices=sorted(CLOCK),
        default="wall",
        help="wall clock, or CPU time of the timing thread (JVM work on it included)",
    )
    args = p.parse_args(argv)
    global clock
    clock = CLOCK[args.clock]
    res = run_all(args)
    body = report(res, args)
    print(body)
    if args.plot:
        plot(res, args, args.plot)
    if args.out:
        specs = "\n".join(f"- MOA {ROWS[k]}: `{cls} {cli}`" for k, (cls, cli)
                          in moa_specs(args.n_models).items()
                          if not args.rows or k in args.rows.split(","))  # fmt: skip
        intro = (f"{args.n:,} examples per stream, drift at {args.n // 2:,}, "
                 f"{args.n_models} Hoeffding trees per model, seeds {args.seeds} "
                 f"(river: the first {args.river_seeds}); examples/s on the {args.clock} "
                 "clock; accuracy = prequential, "
                 "mean ± sd over seeds. Plot: `drift.png` (accuracy per block of "
                 f"{args.window}, mean over seeds).\n\n{specs}\n\n")  # fmt: skip
        write_result(args.out, "Drifting streams: Chorus vs MOA vs river", "drift.py",
                     argv if argv is not None else sys.argv[1:], intro + body)  # fmt: skip


if __name__ == "__main__":
    main()
