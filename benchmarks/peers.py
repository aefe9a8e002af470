"""Chorus against its peers: river and MOA (via capymoa) on one stream, in one run.

Prequential predict-then-learn, one process, one example per call, on river's
``datasets.synth.Agrawal(classification_function=2, seed=7, perturbation=0.05)``
(20,000 examples, M = 10 members by default). Four models per library:

==============  =============================  =============================  ===========================
model           river                          MOA (via capymoa)              Chorus
==============  =============================  =============================  ===========================
Hoeffding tree  tree.HoeffdingTreeClassifier   trees.HoeffdingTree            learners.HoeffdingTree()
OzaBag(HT)      ensemble.BaggingClassifier     meta.OzaBag                    ensembles.OnlineBagging
OzaBoost(HT)    ensemble.AdaBoostClassifier    meta.OzaBoost                  ensembles.OnlineBoosting
OzaBag(NB)      BaggingClassifier(GaussianNB)  meta.OzaBag(bayes.NaiveBayes)  OnlineBagging(NaiveBayes())
==============  =============================  =============================  ===========================

and, with ``--models arf,srp,stack`` (issue 37), the forests, all three libraries with the same
options spelled out (:func:`moa_specs`, :func:`river_factories`, :func:`chorus_factories`; MOA's
and river's defaults are in ``docs/forests.md``):

==============  =============================  =============================  ===========================
model           river                          MOA (via capymoa)              Chorus
==============  =============================  =============================  ===========================
ARF(HT)         forest.ARFClassifier           meta.AdaptiveRandomForest      ensembles.AdaptiveRandomForest
SRP(HT)         ensemble.SRPClassifier         meta.StreamingRandomPatches    ensembles.StreamingRandomPatches
Stacking(HT)    ensemble.StackingClassifier    (MOA has none)                 OnlineBagging(vote="stacking")
==============  =============================  =============================  ===========================

ARF: 10 trees of grace period 50, delta 0.01, tie threshold 0.05, NBA leaves (MOA's
``ARFHoeffdingTree -g 50 -c 0.01``), sqrt(F)+1 of the F features per leaf (the paper's m; MOA's
``SqrtM1``), Poisson(6), ADWIN warning 0.01 / drift 0.001 (MOA's and river's defaults, the
paper's ARF_fast), weighted vote. SRP: the same trees over all features of a member's random
patch of 60% of the features, Poisson(6), ADWIN warning 1e-4 / drift 1e-5, weighted vote.
Stacking: 10 Poisson(1)-bagged Hoeffding trees with MOA's defaults whose class probabilities are
the features of a meta-learner (river: one-vs-rest logistic regression; Chorus: its own). A
Chorus row whose class or option this checkout lacks prints "not available" (the forests came
with issue 37). Goals of issue 37 for ARF and SRP: per example >= 3x MOA and >= 30x river,
batch >= 2x Chorus per example (:data:`GOALS`).

Every Hoeffding tree uses MOA's defaults: grace period 200, delta 1e-7 (``--delta``),
tie threshold 0.05, naive-Bayes-adaptive leaves, Gaussian numeric observers. MOA
models are built from MOA's classes with explicit CLI strings (printed with the
results) because capymoa's own ``HoeffdingTree`` wrapper changes MOA's defaults
(confidence 1e-3, ``-z -p``). All nine Agrawal features are numeric everywhere.

What is timed is only the predict-then-learn loop over an in-memory stream:
the stream is materialised once (a list of ``(x, y)`` dicts for river and Chorus,
and the same rows as pre-built capymoa/Java instances for MOA), the JVM is started
before any timing, and every model first runs a short untimed warm-up on a
throwaway copy (``--warmup``) so that JIT/numba compilation and cache loading are
not billed to the loop. Accuracy counts a ``None`` prediction as wrong.

Run from the repository root::

    python benchmarks/peers.py                     # full table, writes benchmarks/results/peers.md
    python benchmarks/peers.py --markdown          # the same table as markdown on stdout
    python benchmarks/peers.py --n 2000 --skip moa,extras --out ''   # a quick look
    python benchmarks/peers.py --stream nominal --skip extras --out benchmarks/results/peers_nominal.md

``--stream`` picks another of river's generators (:data:`STREAMS`): ``led`` and ``rbf`` are
multi-class, ``nominal`` is categorical (MOA nominal attributes, Chorus and river strings; river's
GaussianNB takes numbers only, so its naive-Bayes cells stay empty there). The extras (state size,
cold start) always use Agrawal.

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # the repo's packages, without an install
    sys.path.insert(0, str(ROOT))

MODELS = ("ht", "bag_ht", "boost_ht", "bag_nb")
# Chorus's forests with another option, against the forest without it (Chorus only; MOA's and
# river's forests have no stacked vote): {variant: base}
FOREST_VARIANTS = {"arf_stack": "arf", "srp_stack": "srp"}
FORESTS = ("arf", "srp", "stack", *FOREST_VARIANTS)  # issue 37: --models arf,srp,stack
NAMES = {
    "nb": "NaiveBayes",  # not in MODELS: used by benchmarks/accuracy.py
    "ht": "Hoeffding tree",
    "bag_ht": "OzaBag(HT)",
    "boost_ht": "OzaBoost(HT)",
    "bag_nb": "OzaBag(NB)",
    "boost_nb": "OzaBoost(NB)",  # this and the stumps: only benchmarks/accuracy.py
    "stump": "DecisionStump",
    "bag_stump": "OzaBag(stump)",
    "boost_stump": "OzaBoost(stump)",
    "arf": "ARF(HT)",
    "srp": "SRP(HT)",
    "stack": "Stacking(HT)",
    "arf_stack": "ARF(HT), stacked vote",
    "srp_stack": "SRP(HT), stacked vote",
}
# Targets from issue 2 ("Speed and memory"): (examples per second, accuracy or None).
TARGETS: dict[str, tuple[float, float | None]] = {
    "ht": (150_000, None),
    "bag_ht": (50_000, 0.92),
    "boost_ht": (50_000, 0.90),
    "bag_nb": (150_000, None),
}
# Goals from issue 37 (ARF, SRP): Chorus per example / MOA and / river, and batch / per example.
GOALS: dict[str, dict[str, float]] = {
    "arf": {"moa": 3.0, "river": 30.0, "batch": 2.0},
    "srp": {"moa": 3.0, "river": 30.0, "batch": 2.0},
}
PARTS = ("river", "moa", "chorus", "batch", "extras")
CLOCK = "wall"  # set by --clock: "wall" (perf_counter) or "cpu" (thread_time)

# Hoeffding tree settings shared by all three libraries (MOA's defaults).
GRACE_PERIOD = 200
DELTA = 1e-7
TAU = 0.05

# The forests' trees and detectors (MOA's ARF / SRP defaults, river's the same; docs/forests.md).
FOREST_GRACE_PERIOD = 50
FOREST_DELTA = 0.01
FOREST_LAMBDA = 6.0
ARF_WARNING, ARF_DRIFT = 0.01, 0.001  # MOA's and river's ARF defaults (the paper's ARF_fast)
SRP_WARNING, SRP_DRIFT = 1e-4, 1e-5  # MOA's and river's SRP defaults
SRP_SUBSPACE = 0.6  # a member's share of the features: MOA -o Percentage -m 60, river 0.6


def arf_features(n_features: int) -> int:
    """MOA's ``sqrt(M)+1`` (``SqrtM1``, M the number of features): the features a leaf of an ARF
    tree may split on.

    river's ``max_features="sqrt"`` is ``round(sqrt(M))`` without the +1, so river is given this
    number as an int (MOA: ``(int) Math.round(Math.sqrt(n)) + 1``, capped at M).
    """
    return min(n_features, round(n_features**0.5) + 1)


Stream = list[tuple[dict[str, Any], Any]]


@dataclass
class Result:
    """One model run: prequential accuracy and throughput of the timed loop."""

    correct: int
    n: int
    wall_s: float
    cpu_s: float  # CPU time of the timing thread (JVM work done on it included)
    unanswered: int = 0  # predictions of no class (counted for MOA: its OzaBoost can give none)

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else float("nan")

    @property
    def seconds(self) -> float:
        return self.cpu_s if CLOCK == "cpu" else self.wall_s

    @property
    def rate(self) -> float:
        return self.n / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class Extras:
    state_n: int = 0
    state_bytes: int = 0
    header_bytes: int = 0
    n_arrays: int = 0
    to_state_s: float = float("nan")
    load_state_s: float = float("nan")
    roundtrip_identical: bool | None = None
    cold_start_s: list[float] = field(default_factory=list)
    python_start_s: list[float] = field(default_factory=list)


# --------------------------------------------------------------------------- stream


# --stream: river generators, seed 7; feature names made strings, nominal values strings
STREAMS = {
    "agrawal": "Agrawal(classification_function=2, seed=7, perturbation=0.05): 9 numeric "
    "features, 2 classes",
    "led": "LED(seed=7, noise_percentage=0.1, irrelevant_features=True): 24 binary (0/1, "
    "numeric) features, 10 classes",
    "rbf": "RandomRBF(seed_model=7, seed_sample=7, n_classes=5, n_features=10, n_centroids=50): "
    "10 numeric features, 5 classes",
    "nominal": "RandomTree(seed_tree=7, seed_sample=7, n_classes=3, n_num_features=0, "
    "n_cat_features=10, n_categories_per_feature=5, max_tree_depth=6): 10 categorical "
    "features (values 'v0'-'v4'), 3 classes",
}


def make_stream(n: int, seed: int = 7, kind: str = "agrawal") -> Stream:
    """``n`` examples of stream ``kind`` (:data:`STREAMS`) as ``(dict, label)`` pairs."""
    from river import datasets

    synth = datasets.synth
    if kind == "agrawal":
        return list(synth.Agrawal(classification_function=2, seed=seed, perturbation=0.05).take(n))
    if kind == "led":
        gen = synth.LED(seed=seed, noise_percentage=0.1, irrelevant_features=True)
    elif kind == "rbf":
        gen = synth.RandomRBF(seed_model=seed, seed_sample=seed, n_classes=5, n_features=10,
                              n_centroids=50)  # fmt: skip
    elif kind == "nominal":
        gen = synth.RandomTree(seed_tree=seed, seed_sample=seed, n_classes=3, n_num_features=0,
                               n_cat_features=10, n_categories_per_feature=5, max_tree_depth=6)  # fmt: skip
        return [({str(k): f"v{v}" for k, v in x.items()}, y) for x, y in gen.take(n)]
    else:
        raise ValueError(f"unknown stream {kind!r}; choose from {', '.join(STREAMS)}")
    return [({f"x{k}": v for k, v in x.items()}, y) for x, y in gen.take(n)]


def categorical_features(stream: Stream) -> list[str]:
    """The features whose values are strings (MOA's nominal attributes)."""
    return sorted({f for x, _ in stream[:100] for f, v in x.items() if isinstance(v, str)})


# --------------------------------------------------------------------------- loops


def loop_one(model: Any, stream: Stream) -> Result:
    """The river-style prequential loop: ``predict_one`` then ``learn_one``."""
    correct = 0
    t0, c0 = time.perf_counter(), time.thread_time()
    for x, y in stream:
        if model.predict_one(x) == y:
            correct += 1
        model.learn_one(x, y)
    return Result(correct, len(stream), time.perf_counter() - t0, time.thread_time() - c0)


def loop_batch(model: Any, stream: Stream, batch: int) -> Result:
    """Chorus' batch form: ``predict_learn_many`` (row i predicted before it is learned)."""
    xs = [x for x, _ in stream]
    ys = [y for _, y in stream]
    correct = 0
    t0, c0 = time.perf_counter(), time.thread_time()
    for i in range(0, len(xs), batch):
        y_block = ys[i : i + batch]
        probas = model.predict_learn_many(xs[i : i + batch], y_block)
        for proba, y in zip(probas, y_block, strict=True):
            if proba and max(proba, key=proba.get) == y:
                correct += 1
    return Result(correct, len(xs), time.perf_counter() - t0, time.thread_time() - c0)


def run(
    factory: Callable[[], Any],
    loop: Callable[[Any, Any], Result],
    data: Any,
    warmup_data: Any,
    repeat: int = 1,
) -> Result:
    """Warm up on a throwaway model, then time ``repeat`` fresh models; keep the fastest."""
    if warmup_data:
        loop(factory(), warmup_data)  # untimed: JIT / numba cache / first-call costs
    runs = [loop(factory(), data) for _ in range(max(1, repeat))]
    return min(runs, key=lambda r: r.seconds)


def run_library(tag: str, factories: dict[str, Callable[[], Any]], loop: Callable[[Any, Any], Result],
                data: Any, models: Sequence[str], args: argparse.Namespace) -> dict[str, Result]:  # fmt: skip
    """:func:`run` for each of ``models`` (warm-up on the first ``args.warmup`` rows), logged."""
    warm = data[: args.warmup]
    out = {}
    for key in models:
        if key not in factories:  # MOA has no stacking; a Chorus forest this checkout lacks
            log(args, f"{tag:<7} {NAMES[key]:<15} not available")
            continue
        out[key] = run(factories[key], loop, data, warm, args.loop_repeat)
        log(args, f"{tag:<7} {NAMES[key]:<15} {fmt_cell(out[key])}")
    return out


def write_result(path: str, title: str, script: str, argv: Sequence[str], body: str) -> None:
    """Write a benchmark's markdown result: its title, when and by which command, then ``body``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = f"python benchmarks/{script} " + " ".join(argv)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out.write_text(f"# {title}\n\nGenerated {when} by `{cmd.strip()}`.\n\n{body}")


# --------------------------------------------------------------------------- river


class PoissonMember:
    """One member of river's online bagging (``BaggingClassifier`` refuses a single member): it
    learns each example k ~ Poisson(1) times, as river's bagging does, and predicts as its model."""

    def __init__(self, model: Any, seed: int) -> None:
        from river.utils.random import poisson

        self.model = model
        self._poisson = functools.partial(poisson, 1.0, random.Random(seed))

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        for _ in range(self._poisson()):
            self.model.learn_one(x, y)

    def predict_proba_one(self, x: dict[str, Any]) -> dict[Any, float]:
        return self.model.predict_proba_one(x)


def river_factories(
    n_models: int, seed: int, delta: float, n_features: int | None = None
) -> dict[str, Callable[[], Any]]:
    """river's models; the forests only with ``n_features`` (the stream's M), which ARF's m needs."""
    from river import drift, ensemble, forest, linear_model, multiclass, naive_bayes, tree

    def ht() -> Any:
        return tree.HoeffdingTreeClassifier(
            grace_period=GRACE_PERIOD, delta=delta, tau=TAU, leaf_prediction="nba"
        )

    def forest_tree() -> Any:
        return tree.HoeffdingTreeClassifier(grace_period=FOREST_GRACE_PERIOD, delta=FOREST_DELTA,
                                            tau=TAU, leaf_prediction="nba")  # fmt: skip

    def stack() -> Any:
        """Poisson(1)-bagged trees whose class probabilities a logistic regression combines."""
        members = [PoissonMember(ht(), seed * 1000 + m) for m in range(n_models)]
        meta = multiclass.OneVsRestClassifier(linear_model.LogisticRegression())
        return ensemble.StackingClassifier(members, meta_classifier=meta, include_features=False)

    forests: dict[str, Callable[[], Any]] = {}
    if n_features is not None:
        forests = {
            "arf": lambda: forest.ARFClassifier(
                n_models=n_models,
                max_features=arf_features(n_features),
                lambda_value=FOREST_LAMBDA,
                disable_weighted_vote=False,
                drift_detector=drift.ADWIN(delta=ARF_DRIFT),
                warning_detector=drift.ADWIN(delta=ARF_WARNING),
                grace_period=FOREST_GRACE_PERIOD,
                delta=FOREST_DELTA,
                tau=TAU,
                leaf_prediction="nba",
                seed=seed,
            ),
            "srp": lambda: ensemble.SRPClassifier(
                model=forest_tree(),
                n_models=n_models,
                subspace_size=SRP_SUBSPACE,
                training_method="patches",
                lam=FOREST_LAMBDA,
                drift_detector=drift.ADWIN(delta=SRP_DRIFT),
                warning_detector=drift.ADWIN(delta=SRP_WARNING),
                disable_weighted_vote=False,
                seed=seed,
            ),
        }
    return {
        **forests,
        "stack": stack,
        "nb": naive_bayes.GaussianNB,
        "ht": ht,
        "bag_ht": lambda: ensemble.BaggingClassifier(ht(), n_models=n_models, seed=seed),
        "boost_ht": lambda: ensemble.AdaBoostClassifier(ht(), n_models=n_models, seed=seed),
        "bag_nb": lambda: ensemble.BaggingClassifier(
            naive_bayes.GaussianNB(), n_models=n_models, seed=seed
        ),
        "boost_nb": lambda: ensemble.AdaBoostClassifier(
            naive_bayes.GaussianNB(), n_models=n_models, seed=seed
        ),
    }  # river has no decision stump: its stump cells stay empty


def n_features(stream: Stream) -> int:
    """M: the distinct features of the stream (MOA's schema has them all)."""
    return len({f for x, _ in stream for f in x})


def run_river(stream: Stream, models: Sequence[str], args: argparse.Namespace) -> dict[str, Result]:
    factories = river_factories(args.n_models, args.seed, args.delta, n_features(stream))
    if categorical_features(stream):  # river's GaussianNB takes numbers only
        models = [m for m in models if not m.endswith("nb")]
    return run_library("river", factories, loop_one, stream, models, args)


# --------------------------------------------------------------------------- MOA


# MOA's DecisionStump with its defaults spelled out: re-chooses its split every 1000 weight
# (Chorus's stump always predicts with the best split of everything seen so far).
STUMP_CLI = "-g 1000 -c InfoGainSplitCriterion"


def moa_cli(delta: float) -> str:
    """MOA's HoeffdingTree with its own defaults spelled out (capymoa's wrapper differs)."""
    return f"trees.HoeffdingTree -g {GRACE_PERIOD} -c {delta!r} -t {TAU} -l NBAdaptive"


def moa_forest_specs(n_models: int) -> dict[str, tuple[str, str]]:
    """MOA's ARF and SRP with every option spelled out (``-w``, ``-u``, ``-q`` absent: weighted
    vote, drift detection and background learners on). MOA has no stacking classifier."""
    tree = f"-g {FOREST_GRACE_PERIOD} -c {FOREST_DELTA} -t {TAU} -l NBAdaptive"
    lam = f"-a {FOREST_LAMBDA}"
    return {
        "arf": (
            "moa.classifiers.meta.AdaptiveRandomForest",
            f"-l (ARFHoeffdingTree -e 2000000 {tree}) -s {n_models} -o (sqrt(M)+1) {lam} "
            f"-x (ADWINChangeDetector -a {ARF_DRIFT}) -p (ADWINChangeDetector -a {ARF_WARNING}) -j 1",
        ),  # fmt: skip
        "srp": (
            "moa.classifiers.meta.StreamingRandomPatches",
            f"-l (trees.HoeffdingTree {tree}) -s {n_models} -o (Percentage (M * (m / 100))) "
            f"-m {round(SRP_SUBSPACE * 100)} -t (Random Patches) {lam} "
            f"-x (ADWINChangeDetector -a {SRP_DRIFT}) -p (ADWINChangeDetector -a {SRP_WARNING})",
        ),  # fmt: skip
    }


def moa_specs(n_models: int, delta: float) -> dict[str, tuple[str, str]]:
    """(MOA class, CLI options) per model; shown in the results so the setup is auditable."""
    ht = moa_cli(delta)
    return moa_forest_specs(n_models) | {
        "nb": ("moa.classifiers.bayes.NaiveBayes", ""),
        "ht": ("moa.classifiers.trees.HoeffdingTree", ht.split(" ", 1)[1]),
        "bag_ht": ("moa.classifiers.meta.OzaBag", f"-l ({ht}) -s {n_models}"),
        "boost_ht": ("moa.classifiers.meta.OzaBoost", f"-l ({ht}) -s {n_models}"),
        "bag_nb": ("moa.classifiers.meta.OzaBag", f"-l bayes.NaiveBayes -s {n_models}"),
        "boost_nb": ("moa.classifiers.meta.OzaBoost", f"-l bayes.NaiveBayes -s {n_models}"),
        "stump": ("moa.classifiers.trees.DecisionStump", STUMP_CLI),
        "bag_stump": (
            "moa.classifiers.meta.OzaBag",
            f"-l (trees.DecisionStump {STUMP_CLI}) -s {n_models}",
        ),
        "boost_stump": (
            "moa.classifiers.meta.OzaBoost",
            f"-l (trees.DecisionStump {STUMP_CLI}) -s {n_models}",
        ),
    }


def moa_factories(
    schema: Any, n_models: int, seed: int, delta: float
) -> dict[str, Callable[[], Any]]:
    # capymoa's own HoeffdingTree wrapper defaults to confidence 1e-3 and turns pre-pruning
    # off (-p) and memory management stop on (-z); MOA's defaults are 1e-7 and neither flag.
    # So every MOA model is built from MOA's class and an explicit CLI string.
    import jpype
    from capymoa.base import MOAClassifier

    def factory(cls_name: str, cli: str) -> Callable[[], Any]:
        return lambda: MOAClassifier(
            jpype.JClass(cls_name), schema=schema, CLI=cli, random_seed=seed
        )

    return {key: factory(*spec) for key, spec in moa_specs(n_models, delta).items()}


def moa_instances(
    stream: Stream, categorical: Sequence[str] = (), labels: Sequence[Any] | None = None
) -> tuple[Any, list[tuple[Any, int]]]:
    """The same rows as capymoa labelled instances, Java objects built up front.

    ``labels``: the classes in MOA's index order (default: sorted by their text).

    Features named in ``categorical`` become MOA nominal attributes (values as strings, in
    order of first appearance); the others are numeric. A missing key is a missing value (NaN).
    """
    import numpy as np
    from capymoa.core import LabeledInstance
    from capymoa.stream import Schema

    features = list(dict.fromkeys(f for x, _ in stream for f in x))
    labels = list(labels) if labels is not None else sorted({y for _, y in stream}, key=str)
    index = {y: i for i, y in enumerate(labels)}
    values: dict[str, dict[str, int]] = {f: {} for f in categorical}
    for x, _ in stream:
        for f, vals in values.items():
            if f in x:
                vals.setdefault(str(x[f]), len(vals))
    schema = Schema.from_custom(
        features=[*features, "class"],
        target="class",
        categories={"class": [str(y) for y in labels]}
        | {f: list(vals) or ["?"] for f, vals in values.items()},
        name="stream",
    )

    def value(x: dict[str, Any], f: str) -> float:
        if f not in x:
            return float("nan")
        return float(values[f][str(x[f])]) if f in values else float(x[f])

    rows = []
    for x, y in stream:
        vec = np.array([value(x, f) for f in features], dtype=np.float64)
        inst = LabeledInstance.from_array(schema, vec, index[y])
        inst.java_instance  # noqa: B018 - materialise the Java instance outside the timed loop
        rows.append((inst, index[y]))
    return schema, rows


def loop_moa(model: Any, rows: list[tuple[Any, int]]) -> Result:
    correct = unanswered = 0
    t0, c0 = time.perf_counter(), time.thread_time()
    for inst, y in rows:
        p = model.predict(inst)
        if p == y:
            correct += 1
        elif p is None:
            unanswered += 1
        model.train(inst)
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    return Result(correct, len(rows), wall, cpu, unanswered)


def run_moa(stream: Stream, models: Sequence[str], args: argparse.Namespace) -> dict[str, Result]:
    import capymoa  # noqa: F401 - starts the JVM here, outside every timed loop

    schema, rows = moa_instances(stream, categorical_features(stream))
    factories = moa_factories(schema, args.n_models, args.seed, args.delta)
    return run_library("MOA", factories, loop_moa, rows, models, args)


def moa_versions() -> dict[str, str]:
    try:
        import capymoa
        import jpype

        java = str(jpype.java.lang.System.getProperty("java.version"))
        return {"capymoa": capymoa.__version__, "java": java}
    except Exception:  # noqa: BLE001 - capymoa is an optional `bench` extra
        return {}


# --------------------------------------------------------------------------- Chorus


def chorus_factories(n_models: int, seed: int, delta: float) -> dict[str, Callable[[], Any]]:
    from learners import DecisionStump, NaiveBayes
    from learners import HoeffdingTree as _HT

    def HoeffdingTree() -> Any:  # noqa: N802 - Chorus' defaults unless --delta says otherwise
        return _HT() if delta == DELTA else _HT(delta=delta)

    def bagging(learner: Any) -> Any:
        from ensembles import OnlineBagging

        return OnlineBagging(learner, n_models=n_models, seed=seed)

    def boosting(learner: Any) -> Any:
        from ensembles import OnlineBoosting

        return OnlineBoosting(learner, n_models=n_models, seed=seed)

    def forest_tree() -> Any:  # what learner=None means in Chorus's ARF and SRP, spelled out
        return _HT(grace_period=FOREST_GRACE_PERIOD, delta=FOREST_DELTA, tau=TAU,
                   leaf_prediction="nba")  # fmt: skip

    def arf(vote: str = "weighted") -> Any:
        from ensembles import AdaptiveRandomForest

        return AdaptiveRandomForest(forest_tree(), n_models=n_models, seed=seed,
                                    max_features="sqrt", poisson_lambda=FOREST_LAMBDA,
                                    warning_delta=ARF_WARNING, drift_delta=ARF_DRIFT,
                                    vote=vote)  # fmt: skip

    def srp(vote: str = "weighted") -> Any:
        from ensembles import StreamingRandomPatches

        return StreamingRandomPatches(forest_tree(), n_models=n_models, seed=seed,
                                      subspace=SRP_SUBSPACE, training="patches",
                                      poisson_lambda=FOREST_LAMBDA, warning_delta=SRP_WARNING,
                                      drift_delta=SRP_DRIFT, vote=vote)  # fmt: skip

    def stack() -> Any:
        from ensembles import OnlineBagging

        return OnlineBagging(HoeffdingTree(), n_models=n_models, seed=seed, vote="stacking")

    forests = {"arf": arf, "srp": srp, "stack": stack,
               "arf_stack": functools.partial(arf, "stacking"),
               "srp_stack": functools.partial(srp, "stacking")}  # fmt: skip
    return {key: make for key, make in forests.items() if key not in chorus_unavailable()} | {
        "nb": lambda: NaiveBayes(),
        "ht": lambda: HoeffdingTree(),
        "bag_ht": lambda: bagging(HoeffdingTree()),
        "boost_ht": lambda: boosting(HoeffdingTree()),
        "bag_nb": lambda: bagging(NaiveBayes()),
        "boost_nb": lambda: boosting(NaiveBayes()),
        "stump": lambda: DecisionStump(),
        "bag_stump": lambda: bagging(DecisionStump()),
        "boost_stump": lambda: boosting(DecisionStump()),
    }


@functools.cache
def chorus_unavailable() -> dict[str, str]:
    """The forests (issue 37) this checkout's Chorus lacks, with why: ``{model: reason}``."""
    import ensembles
    from learners import HoeffdingTree

    out = {}
    for key, name in (("arf", "AdaptiveRandomForest"), ("srp", "StreamingRandomPatches")):
        if getattr(ensembles, name, None) is None:
            out[key] = f"ensembles has no {name}"
    try:
        ensembles.OnlineBagging(HoeffdingTree(), n_models=2, vote="stacking")
    except ValueError:
        out["stack"] = 'OnlineBagging has no vote="stacking"'
    for key, name in (
        ("arf_stack", "AdaptiveRandomForest"),
        ("srp_stack", "StreamingRandomPatches"),
    ):
        try:
            getattr(ensembles, name)(n_models=2, vote="stacking")
        except (TypeError, ValueError):  # (TypeError: ensembles has no such forest)
            out[key] = f'{name} has no vote="stacking"'
    return out


def run_chorus(
    stream: Stream, models: Sequence[str], args: argparse.Namespace, *, batch: bool
) -> dict[str, Result]:
    factories = chorus_factories(args.n_models, args.seed, args.delta)
    loop = functools.partial(loop_batch, batch=args.batch_size) if batch else loop_one
    return run_library("batch" if batch else "Chorus", factories, loop, stream, models, args)


COLD_START = """
import ensembles, learners
model = ensembles.OnlineBagging(learners.HoeffdingTree(), n_models=10, seed=1)
x = {x!r}
model.learn_one(x, {y!r})
model.predict_one(x)
"""


def run_extras(args: argparse.Namespace) -> Extras:
    import numpy as np

    from ensembles import OnlineBagging, load_state
    from learners import HoeffdingTree

    ex = Extras(state_n=args.state_n)
    stream = make_stream(args.state_n + 1000)
    train, probe = stream[: args.state_n], stream[args.state_n :]
    model = OnlineBagging(HoeffdingTree(), n_models=args.n_models, seed=args.seed)
    for i in range(0, len(train), 1000):
        block = train[i : i + 1000]
        model.learn_many([x for x, _ in block], [y for _, y in block])

    state = model.to_state()
    header_json = json.dumps(state["header"])
    arrays = state["arrays"]
    ex.header_bytes = len(header_json.encode())
    ex.n_arrays = len(arrays)
    ex.state_bytes = ex.header_bytes + sum(int(np.asarray(a).nbytes) for a in arrays.values())

    to_s, load_s = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        state = model.to_state()
        t1 = time.perf_counter()
        clone = load_state(state)
        t2 = time.perf_counter()
        to_s.append(t1 - t0)
        load_s.append(t2 - t1)
    ex.to_state_s = statistics.median(to_s)
    ex.load_state_s = statistics.median(load_s)
    xs = [x for x, _ in probe]
    ex.roundtrip_identical = model.predict_proba_many(xs) == clone.predict_proba_many(xs)

    x0, y0 = stream[0]
    code = COLD_START.format(x=x0, y=y0)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }

    def timed(cmd: list[str]) -> float:
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0

    timed([sys.executable, "-c", code])  # fill / validate the numba cache first
    ex.cold_start_s = [timed([sys.executable, "-c", code]) for _ in range(args.repeat)]
    ex.python_start_s = [timed([sys.executable, "-c", "pass"]) for _ in range(args.repeat)]
    log(args, f"extras  state {ex.state_bytes} B, cold start {min(ex.cold_start_s):.2f} s")
    return ex


# --------------------------------------------------------------------------- report


def fmt_rate(rate: float) -> str:
    if rate >= 1e6:
        return f"{rate / 1e6:.2f}M"
    if rate >= 1e3:
        return f"{rate / 1e3:.1f}k"
    return f"{rate:.0f}"


def fmt_cell(r: Result | None) -> str:
    return "—" if r is None else f"{r.accuracy:.3f} / {fmt_rate(r.rate)}"


def fmt_ratio(a: Result | None, b: Result | None) -> str:
    if a is None or b is None:
        return "—"
    ratio = a.rate / b.rate
    return f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.1f}×" if ratio >= 1 else f"{ratio:.2f}×"


def fmt_target(key: str) -> str:
    if key in GOALS:
        goal = GOALS[key]
        return f"≥ {goal['moa']:g}× MOA, ≥ {goal['river']:g}× river, batch ≥ {goal['batch']:g}×"
    if key not in TARGETS:
        return "—"
    rate, acc = TARGETS[key]
    text = f"≥ {rate / 1e3:.0f}k/s"
    return text + (f", acc ≥ {acc:.2f}" if acc is not None else "")


def target_status(key: str, r: Result | None) -> str:
    if r is None or key not in TARGETS:
        return "—"
    rate, acc = TARGETS[key]
    missed = []
    if r.rate < rate:
        missed.append(f"speed {r.rate / rate:.0%} of target")
    if acc is not None and r.accuracy < acc:
        missed.append(f"acc {r.accuracy:.4f} < {acc:.2f}")
    return "met" if not missed else "MISSED: " + ", ".join(missed)


def goal_rows(models: Sequence[str], results: dict[str, dict[str, Result]]) -> list[list[str]]:
    """Issue 37's goals (:data:`GOALS`): one row per ratio, its value by this run's clock."""
    chorus, batch = results.get("chorus", {}), results.get("batch", {})
    rows = []
    for key in models:
        for versus, goal in GOALS.get(key, {}).items():
            ours = batch.get(key) if versus == "batch" else chorus.get(key)
            theirs = chorus.get(key) if versus == "batch" else results.get(versus, {}).get(key)
            what = "Chorus batch / Chorus per example" if versus == "batch" else (
                f"Chorus per example / {'MOA' if versus == 'moa' else versus}")  # fmt: skip
            if ours is None or theirs is None:
                rows.append([NAMES[key], what, "—", f"≥ {goal:g}×", "—"])
                continue
            ratio = ours.rate / theirs.rate
            status = "met" if ratio >= goal else f"MISSED ({ratio / goal:.0%} of the goal)"
            rows.append([NAMES[key], what, fmt_ratio(ours, theirs), f"≥ {goal:g}×", status])
    return rows


def render(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(out)


def report(
    results: dict[str, dict[str, Result]],
    models: Sequence[str],
    extras: Extras | None,
    args: argparse.Namespace,
    markdown: bool,
    unavailable: dict[str, str] | None = None,
) -> str:
    """The tables; ``unavailable``: Chorus models this checkout lacks (:func:`chorus_unavailable`)."""
    global CLOCK
    river, moa = results.get("river", {}), results.get("moa", {})
    chorus, batch = results.get("chorus", {}), results.get("batch", {})
    unavailable = {k: why for k, why in (unavailable or {}).items() if k in models}
    headers = ["model", "river acc / ex/s", "MOA acc / ex/s", "Chorus acc / ex/s",
               "Chorus/river", "Chorus/MOA", "target"]  # fmt: skip
    rows = []
    for key in models:
        r, m, c = river.get(key), moa.get(key), chorus.get(key)
        ours = "not available" if key in unavailable else fmt_cell(c)
        rows.append([NAMES[key], fmt_cell(r), fmt_cell(m), ours,
                     fmt_ratio(c, r), fmt_ratio(c, m), fmt_target(key)])  # fmt: skip
        if key in batch:
            b = batch[key]
            rows.append([f"{NAMES[key]}, Chorus batch", "", "", fmt_cell(b),
                         fmt_ratio(b, r), fmt_ratio(b, m), ""])  # fmt: skip
    parts = [render(headers, rows, markdown)]
    if unavailable:
        parts.append("Not available in this checkout's Chorus: " + "; ".join(
            f"{NAMES[k]} ({why})" for k, why in unavailable.items()) + ".")  # fmt: skip
    if any(key in GOALS for key in models):
        title = f"Goals of issue 37 (rates by the {CLOCK} clock)"
        parts.append(f"**{title}**" if markdown else title)
        parts.append(render(["model", "ratio", "measured", "goal", "status"],
                            goal_rows(models, results), markdown))  # fmt: skip

    # The same run seen through the other clock: on a busy shared machine wall-clock rates
    # swing with other people's load, the timing thread's CPU time much less.
    primary, CLOCK = CLOCK, ("cpu" if CLOCK == "wall" else "wall")
    try:
        other = [["model", "river ex/s", "MOA ex/s", "Chorus ex/s", "Chorus batch ex/s",
                  "Chorus/river", "Chorus/MOA", "batch/MOA"]]  # fmt: skip
        for key in models:
            r, m, c, b = river.get(key), moa.get(key), chorus.get(key), batch.get(key)
            other.append([NAMES[key], *("—" if x is None else fmt_rate(x.rate) for x in (r, m, c, b)),
                          fmt_ratio(c, r), fmt_ratio(c, m), fmt_ratio(b, m)])  # fmt: skip
        clock_name = {"cpu": "CPU time of the timing thread", "wall": "wall clock"}[CLOCK]
        title = f"Same run, rates by {clock_name}"
    finally:
        CLOCK = primary
    parts.append(f"**{title}**" if markdown else title)
    parts.append(render(other[0], other[1:], markdown))

    if chorus or batch:
        check_headers = ["model", "MOA acc", "river acc", "Chorus acc", "Chorus − MOA",
                         "Chorus batch acc", "Chorus vs target", "batch vs target"]  # fmt: skip
        check_rows = []
        for key in models:
            m, r, c, b = moa.get(key), river.get(key), chorus.get(key), batch.get(key)
            diff = "—" if c is None or m is None else f"{c.accuracy - m.accuracy:+.3f}"
            check_rows.append(
                [
                    NAMES[key],
                    "—" if m is None else f"{m.accuracy:.3f}",
                    "—" if r is None else f"{r.accuracy:.3f}",
                    "—" if c is None else f"{c.accuracy:.3f}",
                    diff,
                    "—" if b is None else f"{b.accuracy:.3f}",
                    target_status(key, c),
                    target_status(key, b),
                ]
            )
        title = "Accuracy cross-check (Chorus − MOA; targets from issue 2)"
        parts.append(("**" + title + "**") if markdown else title)
        parts.append(render(check_headers, check_rows, markdown))
        silent = [(key, m) for key in models  # (a few: the untrained model's first answers)
                  if (m := moa.get(key)) is not None and m.unanswered > m.n // 100]  # fmt: skip
        for key, m in silent:
            parts.append(
                f"MOA's {NAMES[key]} predicted no class for {m.unanswered:,} of {m.n:,} examples"
                + (": its vote stops at the first member whose error ε_m is ≥ ½ (or 0), so it "
                   "gives no class while the first member's is (docs/engine-api.md, *Where "
                   "Chorus differs from MOA and river*; Chorus skips such a member and goes on)"
                   if key.startswith("boost") else "")
                + ". Its accuracy counts them as wrong."
            )  # fmt: skip

    if extras is not None:
        ex = extras
        cold = ex.cold_start_s
        py = ex.python_start_s
        extra_rows = [
            [f"state bytes, OzaBag(HT,{args.n_models}) after {ex.state_n:,} examples",
             f"{ex.state_bytes:,} B ({ex.state_bytes / 2**20:.2f} MiB; header JSON "
             f"{ex.header_bytes:,} B + {ex.n_arrays} arrays)"],
            ["to_state() time", f"{ex.to_state_s * 1e3:.2f} ms"],
            ["load_state() time", f"{ex.load_state_s * 1e3:.2f} ms"],
            ["to_state + load_state", f"{(ex.to_state_s + ex.load_state_s) * 1e3:.2f} ms"],
            ["round-trip predicts identically (1,000 held-out rows)",
             "yes" if ex.roundtrip_identical else "NO"],
            ["cold start (subprocess: import + OzaBag(HT) + first learn/predict, warm cache)",
             f"{statistics.median(cold):.2f} s (median of {len(cold)}, min {min(cold):.2f} s)"],
            ["bare `python -c pass` for reference", f"{statistics.median(py):.3f} s"],
        ]  # fmt: skip
        parts.append("Chorus extras" if not markdown else "**Chorus extras**")
        parts.append(render(["measure", "value"], extra_rows, markdown))
    return "\n\n".join(parts)


def cpu_name() -> str:
    """The processor's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def environment(args: argparse.Namespace, load_before: tuple[float, ...]) -> str:
    import numba
    import numpy
    import river

    cpu = cpu_name()
    versions = {"python": platform.python_version(), "numpy": numpy.__version__,
                "numba": numba.__version__, "river": river.__version__, **moa_versions()}  # fmt: skip
    load_after = os.getloadavg()
    return (
        f"{STREAMS[args.stream]}, n={args.n:,}, "
        f"M={args.n_models}, seed={args.seed}, HT delta={args.delta:g}, warm-up {args.warmup} examples (untimed), "
        f"fastest of {args.loop_repeat} timed run(s) per model, {args.clock}-clock rates, "
        f"Chorus batch size {args.batch_size}.  \n"
        f"{cpu}, {os.cpu_count()} cores; load average {load_before[0]:.2f} before / "
        f"{load_after[0]:.2f} after (machine shared).  \n"
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + ".  \nMOA models: "
        + "; ".join(
            f"{NAMES[k]} = `{cls.rsplit('.', 2)[-2]}.{cls.rsplit('.', 1)[-1]} {cli}`"
            for k, (cls, cli) in moa_specs(args.n_models, args.delta).items()
            if k in args.models
        )
        + forests_note(args)
    )


def forests_note(args: argparse.Namespace) -> str:
    """What the forests' relative options come to on this stream's F features."""
    if not set(args.models) & set(FORESTS):
        return ""
    f = n_features(make_stream(100, kind=args.stream))
    k = round(f * SRP_SUBSPACE)
    return (
        f".  \nForests on this stream's F = {f} features: an ARF leaf splits on sqrt(F)+1 = "
        f"{arf_features(f)} random ones (river `max_features={arf_features(f)}`), an SRP member "
        f"sees {k + 1 if k < 2 else k} (round(0.6·F), +1 below 2); river Stacking(HT) = "
        f"`StackingClassifier([PoissonMember(HT, seed=1000·seed+i) for i in "
        f"range({args.n_models})], meta_classifier=OneVsRestClassifier(LogisticRegression()), "
        "include_features=False)`"
    )


def log(args: argparse.Namespace, msg: str) -> None:
    if args.verbose:
        print(msg, file=sys.stderr, flush=True)  # noqa: T201 - progress on stderr


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=20_000, help="examples in the stream (20000)")
    p.add_argument("--stream", choices=tuple(STREAMS), default="agrawal",
                   help="the stream (agrawal; led, rbf: multi-class; nominal: categorical)")  # fmt: skip
    p.add_argument("--n-models", type=int, default=10, help="ensemble size M (10)")
    p.add_argument("--seed", type=int, default=1, help="ensemble seed for all libraries (1)")
    p.add_argument("--skip", default="", help=f"comma list of parts to skip: {','.join(PARTS)}")
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma list of {','.join(MODELS + FORESTS)} (default: the first "
                   f"{len(MODELS)}; the forests of issue 37: --models {','.join(FORESTS)})")  # fmt: skip
    p.add_argument("--delta", type=float, default=DELTA,
                   help="Hoeffding bound delta for every tree in all three libraries (1e-7)")  # fmt: skip
    p.add_argument("--warmup", type=int, default=1000, help="untimed warm-up examples (1000)")
    p.add_argument("--batch-size", type=int, default=1000, help="Chorus batch size (1000)")
    p.add_argument("--state-n", type=int, default=100_000, help="examples before state size")
    p.add_argument("--loop-repeat", type=int, default=1,
                   help="timed runs per model (fresh model each); the fastest is reported (1)")  # fmt: skip
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="rates from wall time (default) or from the timing thread's CPU time, "
                   "which a busy shared machine disturbs less")  # fmt: skip
    p.add_argument("--repeat", type=int, default=3, help="repeats for state/cold-start timings")
    p.add_argument("--markdown", action="store_true", help="print markdown tables")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "peers.md"),
                   help="markdown results file ('' to not write)")  # fmt: skip
    p.add_argument("--json", default="", help="also write raw numbers as JSON here")
    p.add_argument("-q", "--quiet", dest="verbose", action="store_false", help="no progress")
    args = p.parse_args(argv)
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if bad := args.skip - set(PARTS):
        p.error(f"unknown part(s) {sorted(bad)}; choose from {', '.join(PARTS)}")
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if bad := set(args.models) - set(MODELS + FORESTS):
        p.error(f"unknown model(s) {sorted(bad)}; choose from {', '.join(MODELS + FORESTS)}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    global CLOCK
    args = parse_args(argv)
    CLOCK = args.clock
    load_before = os.getloadavg()
    stream = make_stream(args.n, kind=args.stream)
    results: dict[str, dict[str, Result]] = {}
    if "moa" not in args.skip:  # JVM first, so its start-up threads are idle by the timed loops
        results["moa"] = run_moa(stream, args.models, args)
    if "river" not in args.skip:
        results["river"] = run_river(stream, args.models, args)
    if "chorus" not in args.skip:
        results["chorus"] = run_chorus(stream, args.models, args, batch=False)
    if "batch" not in args.skip:
        results["batch"] = run_chorus(stream, args.models, args, batch=True)
    extras = run_extras(args) if "extras" not in args.skip else None
    unavailable = chorus_unavailable() if {"chorus", "batch"} - args.skip else {}

    print(report(results, args.models, extras, args, args.markdown, unavailable))  # noqa: T201
    print()  # noqa: T201
    print(environment(args, load_before))  # noqa: T201

    if args.out:
        body = report(results, args.models, extras, args, markdown=True, unavailable=unavailable)
        write_result(args.out, "Peer benchmark: Chorus vs river vs MOA (capymoa)", "peers.py",
                     sys.argv[1:] if argv is None else argv,
                     f"{body}\n\n{environment(args, load_before)}\n")  # fmt: skip
    if args.json:
        raw = {
            part: {k: {"accuracy": r.accuracy, "n": r.n, "wall_s": r.wall_s, "cpu_s": r.cpu_s,
                       "examples_per_s_wall": r.n / r.wall_s, "examples_per_s_cpu": r.n / r.cpu_s}
                   for k, r in res.items()}
            for part, res in results.items()
        }  # fmt: skip
        if extras is not None:
            raw["extras"] = extras.__dict__
        raw["unavailable"] = {k: why for k, why in unavailable.items() if k in args.models}
        Path(args.json).write_text(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
