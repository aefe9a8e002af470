"""Class-imbalance online bagging (OOB, UOB: Wang, Minku & Yao 2015) against plain OzaBag.

Prequential predict-then-learn (batches of 1,000 through ``predict_learn_many``) of Chorus'
OzaBag(HT), OOB(HT) and UOB(HT), M = 10 members with Chorus' defaults (``imbalance_decay``
0.9999 and trees with ``nb_zero_variance="skip"``, river's naive-Bayes rule for a zero-variance
class; ``--decays 0.9`` adds the papers' θ; ``--point`` adds each over trees with MOA's point
mass, rows ``... point``; ``--models`` names any set, e.g. ``"OOB(0.99) point"``, the defaults
before issue 40's second pass),
with ``--moa`` MOA's imbalance meta-learners (below),
and with ``--river`` river's ``RandomOverSampler`` / ``RandomUnderSampler`` (desired
distribution 50/50) around river's ``BaggingClassifier(HoeffdingTreeClassifier)``, M = 10, one
example at a time. Scores from ``app.metrics.Prequential`` (river's definitions): G-mean,
balanced accuracy, and accuracy beside the majority-class rate; the predictions of an untrained
model (``None``) are not scored, as the service does (river's G-mean counts a label predicted
but never true as a class of recall 0: a scored ``None`` made every G-mean 0).

Streams: river's generators made imbalanced by keeping each example of the minority class (the
rarer one in a pilot of 5,000 examples) with the probability that gives the target share in the
pilot, with and without an abrupt concept drift at the middle (river's ConceptDriftStream; the
minority share after it is whatever the second concept gives under the same keep rate, shown as
measured; as abrupt as river's sigmoid allows, ``drift.abrupt_width``), and with ``--data-dir`` the Census-Income KDD test file (99,762 rows, 6.2 %
"50000+"), and two UCI files made rare-class detection tasks (that class against the rest):
nursery's ``very_recom`` (2.5 %) and connect-4's ``draw`` (9.5 %), each shuffled per seed.
``--seeds`` seeds the generators, the shuffle and the models.

MOA (``--moa``): ``OnlineUnderOverBagging``, ``OnlineSMOTEBagging`` and ``OnlineRUSBoost`` of
``moa.classifiers.meta.imbalanced`` (Wang & Pineau 2016, as MOA's jar ships them), 10 members
of the same Hoeffding tree as MOA's OzaBag in peers.py, their sampling rates and ADWIN drift
detection at MOA's defaults (``moa_specs``), on binary streams (their positive class is the
minority: class index 1). With peers, a last table sets Chorus' best imbalance option against
the best peer on each stream and score (Welch).

Each cell is the mean ± sd over the seeds; marks are a two-sided Welch t-test against plain
OzaBag on the same column (p < 0.05): ``▲`` significantly above, ``▼`` below.

Run from the repository root::

    python benchmarks/imbalance.py                          # the generators, 20,000 rows, 5 seeds
    python benchmarks/imbalance.py --data-dir ../shared/datasets/raw --census-n 50000 --river --moa
    python benchmarks/imbalance.py --n 5000 --seeds 1,2 --streams "SEA 1%" --decays 0.99

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for p in (str(HERE.parent), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from accuracy import welch  # noqa: E402
from peers import write_result  # noqa: E402

from app.metrics import Prequential  # noqa: E402

Stream = list[tuple[dict[str, Any], Any]]
PILOT = 5_000
CHORUS = ("OzaBag", "OOB", "UOB")
RIVER = ("river OverSampler(Bag)", "river UnderSampler(Bag)")


# --------------------------------------------------------------------------- streams


def _imbalanced(build: Callable[[int], Any], share: float, *,
                then: Callable[[int], Any] | None = None) -> Callable[[int, int], Stream]:  # fmt: skip
    """``make(n, seed)``: ``build(seed)``'s examples with the minority class kept at a rate
    that gives it ``share`` of the pilot; with ``then``, an abrupt drift to ``then(seed)`` at
    the middle of the n rows (the same keep rate)."""

    def make(n: int, seed: int) -> Stream:
        from river.datasets import synth

        pilot = [y for _, y in build(seed).take(PILOT)]
        counts = {c: pilot.count(c) for c in set(pilot)}
        minority = min(counts, key=lambda c: (counts[c], repr(c)))
        r = counts[minority] / len(pilot)
        keep = min(1.0, share * (1 - r) / (r * (1 - share)))
        rng = random.Random(seed * 7919 + 1)
        half = n // 2 if then is not None else n

        def part(gen: Any, rows: int) -> Stream:
            out: Stream = []
            for x, y in gen:
                if y == minority and rng.random() >= keep:
                    continue
                out.append(({str(k): float(v) for k, v in x.items()}, y))
                if len(out) == rows:
                    return out
            return out

        first = build(seed)
        if then is None:
            return part(first, n)
        # (the drift stream's position counts generated examples: give it the kept rows' span)
        from drift import abrupt_width

        position = int(half / max(1e-9, 1 - r + r * keep))
        stream = synth.ConceptDriftStream(stream=first, drift_stream=then(seed), seed=seed,
                                          position=position,
                                          width=abrupt_width(2 * position))  # fmt: skip
        return part(iter(stream), n)

    return make


def _uci(data_dir: str, name: str, rare: str | None = None) -> Callable[[int, int], Stream]:
    """A UCI file shuffled per seed; with ``rare``, binary: that class against the rest
    (``"rest"``), the rare-class detection task (nursery's ``very_recom``, connect-4's ``draw``)."""

    def make(n: int, seed: int) -> Stream:
        import datasets as uci

        ds = uci.load(name, data_dir)
        ys = ds.y if rare is None else [y if y == rare else "rest" for y in ds.y]
        rows = list(zip(ds.X, ys, strict=True))
        random.Random(seed).shuffle(rows)
        return rows[:n]

    return make


def streams(data_dir: str) -> dict[str, Callable[[int, int], Stream]]:
    from river.datasets import synth

    def agrawal(f: int) -> Callable[[int], Any]:
        return lambda s: synth.Agrawal(classification_function=f, seed=s, perturbation=0.05)

    def sea(v: int) -> Callable[[int], Any]:
        return lambda s: synth.SEA(variant=v, seed=s)

    def hyperplane(s: int) -> Any:
        return synth.Hyperplane(seed=s, n_features=10, noise_percentage=0.05)

    out = {
        "SEA 1%": _imbalanced(sea(0), 0.01),
        "Agrawal f2 2%": _imbalanced(agrawal(2), 0.02),
        "Hyperplane 5%": _imbalanced(hyperplane, 0.05),
        "SEA 0->3 abrupt 3%": _imbalanced(sea(0), 0.03, then=sea(3)),
        "Agrawal f2->f5 abrupt 5%": _imbalanced(agrawal(2), 0.05, then=agrawal(5)),
    }
    uci = {
        "Census-Income KDD 6.2%": ("census-income-kdd", "census", None),
        "Nursery very_recom 2.5%": ("nursery", "nursery", "very_recom"),
        "Connect-4 draw 9.5%": ("connect-4", "connect4", "draw"),
    }
    for label, (folder, name, rare) in uci.items():
        if data_dir and (Path(data_dir) / folder).is_dir():
            out[label] = _uci(data_dir, name, rare)
    return out


# --------------------------------------------------------------------------- models


def chorus_model(name: str, seed: int) -> Any:
    """``OzaBag``, ``OOB``, ``UOB`` or ``OOB(θ)`` / ``UOB(θ)`` (another ``imbalance_decay``)
    over ``HoeffdingTree()`` (its ``nb_zero_variance="auto"``: ``"skip"`` under OOB / UOB); a
    name ending in ``" point"`` or ``" skip"`` has trees with that ``nb_zero_variance``."""
    from ensembles import OnlineBagging
    from ensembles.adaptive import IMBALANCE_DECAY
    from learners import HoeffdingTree

    name, _, rule = name.partition(" ")
    kind, _, decay = name.rstrip(")").partition("(")
    imbalance = {"OzaBag": None, "OOB": "oob", "UOB": "uob"}[kind]
    tree = HoeffdingTree(nb_zero_variance=rule or "auto")
    return OnlineBagging(tree, n_models=10, seed=seed, imbalance=imbalance,
                         imbalance_decay=float(decay or IMBALANCE_DECAY))  # fmt: skip


def river_model(name: str, seed: int, classes: list) -> Any:
    from river import ensemble, imblearn, tree

    bag = ensemble.BaggingClassifier(tree.HoeffdingTreeClassifier(), n_models=10, seed=seed)
    dist = {c: 1.0 / len(classes) for c in classes}
    cls = imblearn.RandomOverSampler if "Over" in name else imblearn.RandomUnderSampler
    return cls(bag, desired_dist=dist, seed=seed)


def moa_specs(n_models: int = 10) -> dict[str, tuple[str, str]]:
    """MOA's class-imbalance meta-learners (Wang & Pineau 2016, as MOA's jar ships them) with
    every option spelled out: MOA's defaults but the base learner, there ARF, here the same
    Hoeffding tree as MOA's OzaBag in peers.py; their ADWIN drift detection on (MOA's default)."""
    import peers

    tree = peers.moa_cli(peers.DELTA)
    pkg = "moa.classifiers.meta.imbalanced."
    return {
        "MOA OnlineUnderOverBagging": (pkg + "OnlineUnderOverBagging",
                                       f"-l ({tree}) -s {n_models} -i 2"),
        "MOA OnlineSMOTEBagging": (pkg + "OnlineSMOTEBagging", f"-l ({tree}) -s {n_models} -i 1"),
        "MOA OnlineRUSBoost": (pkg + "OnlineRUSBoost",
                               f"-l ({tree}) -s {n_models} -i 3 -a (Fixed class ration)"),
    }  # fmt: skip


def run_moa(name: str, stream: Stream, seed: int) -> Prequential:
    """MOA's meta-learner ``name``, predict then train one instance at a time. MOA's learners
    treat class index 1 as the positive (minority) one: the labels are ordered so that it is
    the rarest class of the stream."""
    import jpype
    import peers
    from capymoa.base import MOAClassifier

    ys = [y for _, y in stream]
    labels = sorted(set(ys), key=lambda c: (-ys.count(c), repr(c)))  # majority first
    schema, rows = peers.moa_instances(stream, peers.categorical_features(stream), labels=labels)
    cls_name, cli = moa_specs()[name]
    model = MOAClassifier(jpype.JClass(cls_name), schema=schema, CLI=cli, random_seed=seed)
    scores = Prequential(window=1000)
    for inst, y in rows:
        p = model.predict(inst)
        if p is not None:
            scores.update(labels[y], labels[int(p)])
        model.train(inst)
    return scores


def run(name: str, stream: Stream, seed: int) -> Prequential:
    """Prequential scores of model ``name`` over ``stream``."""
    scores = Prequential(window=1000)
    if name.startswith("MOA"):
        return run_moa(name, stream, seed)
    if not name.startswith("river"):
        model = chorus_model(name, seed)
        for i in range(0, len(stream), 1000):
            block = stream[i : i + 1000]
            probas = model.predict_learn_many([x for x, _ in block], [y for _, y in block])
            for p, (_, y) in zip(probas, block, strict=True):
                if p:  # (an untrained model's None is not scored, as the service does)
                    scores.update(y, max(p, key=p.get))
        return scores
    model = river_model(name, seed, sorted({y for _, y in stream}, key=repr))
    for x, y in stream:
        pred = model.predict_one(x)
        if pred is not None:
            scores.update(y, pred)
        model.learn_one(x, y)
    return scores


# --------------------------------------------------------------------------- report


def _cell(values: list[float], base: list[float] | None) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    mark = ""
    if base is not None and values is not base:
        p = welch(values, base)
        diff = statistics.fmean(values) - statistics.fmean(base)
        mark = (" ▲" if diff > 0 else " ▼") if p < 0.05 else ""
    return f"{statistics.fmean(values):.3f} ± {sd:.3f}{mark}"


def best_against_peers(all_runs: dict[str, dict[str, dict[str, list[float]]]],
                       ours: list[str], peer_models: tuple[str, ...]) -> list[str]:  # fmt: skip
    """Per stream and score: each of Chorus' imbalance models against the best peer (by mean),
    with Welch's p; the goal is "not significantly below the best peer" on every stream (with
    the mode the docs recommend for it)."""
    out = ["Each Chorus imbalance model against the best peer, per stream (mean over the seeds, "
           "Welch's two-sided p; ▼ significantly below, ▲ above):", "",
           "| stream | score | peers' best | " + " | ".join(ours) + " |",
           "|---|---|---|" + "---|" * len(ours)]  # fmt: skip
    for stream, runs in all_runs.items():
        for score in ("g_mean", "balanced_accuracy"):
            peers_ = [(statistics.fmean(runs[m][score]), m) for m in peer_models if runs.get(m)]
            if not peers_:
                continue
            b, mb = max(peers_)
            cells = []
            for m in ours:
                if not runs.get(m):
                    cells.append("")
                    continue
                a = statistics.fmean(runs[m][score])
                p = welch(runs[m][score], runs[mb][score])
                mark = (" ▼" if a < b else " ▲") if p < 0.05 else ""
                cells.append(f"{a:.3f} (p {p:.3f}){mark}")
            out.append(f"| {stream} | {score} | {mb} {b:.3f} | " + " | ".join(cells) + " |")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="rows per generated stream")
    ap.add_argument("--census-n", type=int, default=99_762, help="rows of the census file")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--data-dir", default="", help="the UCI files (census-income-kdd/)")
    ap.add_argument("--streams", default="", help="';'-separated names (default: all)")
    ap.add_argument("--river", action="store_true", help="also river's samplers around bagging")
    ap.add_argument("--moa", action="store_true", help="also MOA's imbalance meta-learners "
                    "(binary streams; needs capymoa, CAPYMOA_JVM_ARGS='-Xmx2g')")  # fmt: skip
    ap.add_argument("--decays", default="", help="also OOB and UOB with these ','-separated "
                    "imbalance_decay values")  # fmt: skip
    ap.add_argument("--point", action="store_true", help="also OOB and UOB (each decay) over "
                    "HoeffdingTree(nb_zero_variance='point'), MOA's zero-variance rule")  # fmt: skip
    for flag, text in (
        ("--models", "';'-separated model names to run instead of the default set (e.g. only "
                     "the peers, or 'OOB(0.99) point')"),
        ("--json", "also write every run's scores (per stream, model and seed) to this JSON "
                   "file (--merge reads them)"),
        ("--merge", "','-separated JSON files of earlier runs (--json) to report instead of "
                    "running (the same seeds and rows per stream)"),
    ):  # fmt: skip
        ap.add_argument(flag, default="", help=text)
    ap.add_argument("--out", default="", help="also write the table to this markdown file")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    make = streams(args.data_dir)
    names = args.streams.split(";") if args.streams else list(make)
    more = [f"{m}({d})" for d in args.decays.split(",") if d for m in ("OOB", "UOB")]
    if args.point:
        more += [f"{m} point" for m in (*CHORUS[1:], *more)]
    peer_models = (*(RIVER if args.river else ()), *(moa_specs() if args.moa else ()))
    models = (*CHORUS, *more, *peer_models)
    if args.models:
        models = tuple(args.models.split(";"))
        peer_models = tuple(m for m in models if m.startswith(("river", "MOA")))
    if args.moa or any(m.startswith("MOA") for m in models):
        import capymoa  # noqa: F401 - starts the JVM once, before any timing
    lines = ["| stream | minority | model | G-mean | balanced accuracy | accuracy | majority rate | s/run |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for line in lines:
        print(line)  # noqa: T201
    if args.merge:
        all_runs = merged(args.merge.split(","))
        models = tuple(dict.fromkeys(m for d in all_runs.values() for m in d["runs"]))
        peer_models = tuple(m for m in models if m.startswith(("river", "MOA")))
    else:
        all_runs = {}
        for name in names:
            n = args.census_n if name.startswith("Census") else args.n
            all_runs[name] = measure(make[name], n, seeds, models)
            if args.json:
                Path(args.json).write_text(json.dumps(all_runs))
    for name, data in all_runs.items():
        for row in table_rows(name, data, models):
            lines.append(row)
            print(row)  # noqa: T201
        sys.stdout.flush()
    ours = [m for m in models if m != "OzaBag" and m not in peer_models]
    if peer_models:
        table = best_against_peers({k: d["runs"] for k, d in all_runs.items()}, ours, peer_models)
        lines += ["", *table]
        print("\n".join(["", *table]))  # noqa: T201
    if args.out:
        body = __doc__.split("\n\n", 1)[1].split("Run from")[0] + "\n".join(lines) + "\n"
        write_result(args.out, "Class-imbalance online bagging (OOB, UOB) vs OzaBag",
                     "imbalance.py", argv if argv is not None else sys.argv[1:], body)  # fmt: skip


def measure(make: Callable[[int, int], Stream], n: int, seeds: list[int],
            models: tuple[str, ...]) -> dict[str, Any]:  # fmt: skip
    """Every model's scores over the stream ``make(n, seed)`` for each seed: ``{"rows",
    "minority": [per seed], "runs": {model: {score: [per seed]}}}``."""
    runs: dict[str, dict[str, list[float]]] = {m: {} for m in models}
    minority: list[float] = []
    rows = 0
    for seed in seeds:
        stream = make(n, seed)
        rows = len(stream)
        ys = [y for _, y in stream]
        minority.append(min(ys.count(c) for c in set(ys)) / len(ys))
        binary = len(set(ys)) == 2
        for m in models:
            if m.startswith("MOA") and not binary:
                continue  # (MOA's take one positive class)
            t = time.perf_counter()
            v = run(m, stream, seed).values()
            v["seconds"] = time.perf_counter() - t
            for k in ("g_mean", "balanced_accuracy", "accuracy", "majority_rate", "seconds"):
                runs[m].setdefault(k, []).append(v[k])
    return {"rows": rows, "minority": minority, "seeds": seeds, "runs": runs}


def merged(paths: list[str]) -> dict[str, Any]:
    """The runs of several ``--json`` files, stream by stream (their seeds must agree)."""
    out: dict[str, Any] = {}
    for path in paths:
        for name, data in json.loads(Path(path).read_text()).items():
            if name not in out:
                out[name] = data
                continue
            if data["seeds"] != out[name]["seeds"] or data["rows"] != out[name]["rows"]:
                raise SystemExit(f"{path}: {name} has other seeds or rows than the files before")
            out[name]["runs"].update(data["runs"])
    return out


def table_rows(name: str, data: dict[str, Any], models: tuple[str, ...]) -> list[str]:
    """One stream's rows of the table; marks against its ``OzaBag`` row when there is one."""
    runs = data["runs"]
    base = runs.get("OzaBag") or None
    out = []
    for m in models:
        r = runs.get(m)
        if not r:
            continue
        b = base or {}
        out.append(f"| {name} ({data['rows']:,} rows) | {statistics.fmean(data['minority']):.1%} | "
                   f"{m} | {_cell(r['g_mean'], b.get('g_mean'))} | "
                   f"{_cell(r['balanced_accuracy'], b.get('balanced_accuracy'))} | "
                   f"{_cell(r['accuracy'], b.get('accuracy'))} | "
                   f"{statistics.fmean(r['majority_rate']):.3f} | "
                   f"{statistics.fmean(r['seconds']):.1f} |")  # fmt: skip
    return out


if __name__ == "__main__":
    main()
