"""Memory of a model on a high-cardinality stream: Chorus vs river vs MOA (capymoa).

Part 1 -- OzaBag(HT, 10) over ``--n`` examples (200,000) with one categorical feature of
``--values`` distinct values (100,000: value ``u{(i * 7919) % values}`` of example i, so every
value appears, each ``n / values`` times) and three numeric features; the label depends on the
numeric features and on ``user % 5``. Every ``--every`` examples: state bytes, RSS, ex/s of the
prequential loop (``predict_learn_many`` in blocks of 1,000 for Chorus; ``predict_one`` +
``learn_one`` for river and MOA, their API). River is slow: it runs on the first ``--river-n``
examples only. MOA runs ``moa.classifiers.meta.OzaBag -l (trees.HoeffdingTree -g 200 -c 1e-7 -t
0.05 -l NBAdaptive) -s 10`` (MOA's defaults spelled out, as in peers.py) with the feature declared
nominal with all its values; its memory is the JVM heap in use after ``System.gc()``.

Part 2 -- ``--labels`` distinct class labels (50,000) streamed into OzaBag(HT, 10) with
``max_classes`` raised: example i has label ``c{i}``; seconds per 1,000 examples learned
(``learn_many``), which shows how the per-example cost grows with the number of classes.

Each part runs in its own process: Chorus and river under an address-space limit (RLIMIT_AS,
``--mem-gb``), MOA with ``-Xmx`` of the same size (a JVM does not start under RLIMIT_AS).
This is a benchmark, not a test: it prints tables (``--out`` writes them as markdown).

    nice -n 10 python benchmarks/memory.py                     # everything, a few minutes
    python benchmarks/memory.py --skip moa,river --n 40000     # quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import peers  # the shared result writer (this folder is the script's sys.path[0])

ROOT = Path(__file__).resolve().parent.parent
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def row(i: int, values: int) -> tuple[dict[str, Any], bool]:
    """Example i of the stream (deterministic)."""
    u = (i * 7919) % values
    a = ((i * 2654435761) % 1000) / 1000.0
    b = ((i * 40503) % 997) / 997.0
    c = ((i * 9973) % 991) / 991.0
    return {"user": f"u{u}", "a": a, "b": b, "c": c}, (a + b > 1.0) != (u % 5 == 0)


def emit(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


# --------------------------------------------------------------------------- the parts
def part_chorus(args: argparse.Namespace) -> None:
    from ensembles import OnlineBagging
    from learners import HoeffdingTree

    model = OnlineBagging(HoeffdingTree(), n_models=args.n_models, seed=1)
    emit(kind="start", rss_mb=rss_mb())
    correct, t_run, block = 0, 0.0, 1000
    for start in range(0, args.n, block):
        rows = [row(i, args.values) for i in range(start, min(start + block, args.n))]
        xs, ys = [x for x, _ in rows], [y for _, y in rows]
        t0 = time.perf_counter()
        probas = model.predict_learn_many(xs, ys)
        t_run += time.perf_counter() - t0
        correct += sum(bool(p) and max(p, key=p.get) == y for p, y in zip(probas, ys, strict=True))
        done = start + len(rows)
        if done % args.every == 0 or done == args.n:
            emit(kind="point", n=done, state_bytes=model.state_bytes, rss_mb=rss_mb(),
                 ex_s=done / t_run, acc=correct / done)  # fmt: skip


def part_river(args: argparse.Namespace) -> None:
    from river import ensemble, tree

    model = ensemble.BaggingClassifier(tree.HoeffdingTreeClassifier(), n_models=args.n_models,
                                       seed=1)  # fmt: skip
    emit(kind="start", rss_mb=rss_mb())
    correct, t_run = 0, 0.0
    n = min(args.n, args.river_n)
    every = max(1, min(args.every, n // 4))
    for i in range(n):
        x, y = row(i, args.values)
        t0 = time.perf_counter()
        correct += model.predict_one(x) == y
        model.learn_one(x, y)
        t_run += time.perf_counter() - t0
        if (i + 1) % every == 0 or i + 1 == n or t_run > args.budget:
            emit(kind="point", n=i + 1, state_bytes=model._raw_memory_usage, rss_mb=rss_mb(),
                 ex_s=(i + 1) / t_run, acc=correct / (i + 1))  # fmt: skip
        if t_run > args.budget:
            emit(kind="stopped", n=i + 1, after_s=t_run)
            return


def part_moa(args: argparse.Namespace) -> None:
    import capymoa  # noqa: F401 - starts the JVM
    import jpype
    import numpy as np
    from capymoa.base import MOAClassifier
    from capymoa.core import LabeledInstance
    from capymoa.stream import Schema

    n = min(args.n, args.moa_n)
    # The nominal values in order of first appearance, as Chorus's schema numbers them: MOA's
    # per-leaf observers grow with the largest value index seen, so this order is MOA's best case.
    users = [row(i, args.values)[0]["user"] for i in range(args.values)]
    index = {u: k for k, u in enumerate(users)}
    schema = Schema.from_custom(
        features=["user", "a", "b", "c", "class"], target="class",
        categories={"user": users, "class": ["False", "True"]}, name="memory",
    )  # fmt: skip
    ht = "trees.HoeffdingTree -g 200 -c 1e-7 -t 0.05 -l NBAdaptive"
    model = MOAClassifier(jpype.JClass("moa.classifiers.meta.OzaBag"), schema=schema,
                          CLI=f"-l ({ht}) -s {args.n_models}", random_seed=1)  # fmt: skip
    runtime = jpype.java.lang.Runtime.getRuntime()

    def heap() -> int:
        jpype.java.lang.System.gc()
        return int(runtime.totalMemory() - runtime.freeMemory())

    emit(kind="start", rss_mb=rss_mb(), heap=heap())
    correct, t_run, block = 0, 0.0, 1000
    for start in range(0, n, block):
        insts = []
        for i in range(start, min(start + block, n)):
            x, y = row(i, args.values)
            vec = np.array([float(index[x["user"]]), x["a"], x["b"], x["c"]])
            inst = LabeledInstance.from_array(schema, vec, int(y))
            inst.java_instance  # noqa: B018 - built outside the timed loop
            insts.append((inst, int(y)))
        t0 = time.perf_counter()
        for inst, y in insts:
            correct += model.predict(inst) == y
            model.train(inst)
        t_block = time.perf_counter() - t0
        t_run += t_block
        done = start + len(insts)
        # MOA's heap grows fast on this stream: a point every --moa-every examples
        if done % args.moa_every == 0 or done == n or t_run > args.budget or t_block > 10:
            emit(kind="point", n=done, state_bytes=heap(), rss_mb=rss_mb(), ex_s=done / t_run,
                 acc=correct / done)  # fmt: skip
        if t_run > args.budget:
            emit(kind="stopped", n=done, after_s=t_run)
            return


def part_labels(args: argparse.Namespace) -> None:
    from ensembles import OnlineBagging
    from learners import HoeffdingTree

    model = OnlineBagging(HoeffdingTree(), n_models=args.n_models, seed=1,
                          limits={"max_classes": args.labels})  # fmt: skip
    block = 1000
    t_all = time.perf_counter()
    for start in range(0, args.labels, block):
        idx = range(start, min(start + block, args.labels))
        xs = [row(i, args.values)[0] for i in idx]
        ys = [f"c{i}" for i in idx]
        t0 = time.perf_counter()
        model.learn_many(xs, ys)
        dt = time.perf_counter() - t0
        if (start // block) % max(1, args.labels // block // 10) == 0 or idx[-1] + 1 == args.labels:
            emit(kind="point", n=idx[-1] + 1, classes=len(model.classes), s_per_1k=dt * 1000 / len(xs),
                 rss_mb=rss_mb(), state_bytes=model.state_bytes)  # fmt: skip
        if time.perf_counter() - t_all > args.labels_budget:
            emit(kind="stopped", n=idx[-1] + 1, after_s=time.perf_counter() - t_all)
            return


PARTS = {"chorus": part_chorus, "river": part_river, "moa": part_moa, "labels": part_labels}


# --------------------------------------------------------------------------- driver
def run_part(name: str, argv: list[str], mem_gb: float) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if name == "moa":
        env["CAPYMOA_JVM_ARGS"] = f"-Xmx{int(mem_gb * 1024)}m -Xss10M"
    cmd = [sys.executable, __file__, "--part", name, *argv]
    # A part checks its budget between blocks of 1,000 examples; a block that never ends (MOA's
    # nominal split search is quadratic in the values seen) is stopped here, its points kept.
    args, _ = _parser().parse_known_args(argv)
    wall = (args.labels_budget if name == "labels" else args.budget) + 180
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False,
                              timeout=wall)  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        out = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        done = max((p["n"] for p in out if p["kind"] == "point"), default=0)
        return [*out, {"kind": "stopped", "n": done, "after_s": wall,
                       "message": "a block of 1,000 examples did not finish"}]  # fmt: skip
    out = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:]
        out.append({"kind": "error", "message": " | ".join(tail) or f"exit {proc.returncode}"})
    return out


def mib(b: float) -> str:
    return f"{b / 2**20:,.1f} MiB"


def tables(results: dict[str, list[dict]], args: argparse.Namespace) -> str:
    lines = [
        f"## OzaBag(HT, {args.n_models}): {args.n:,} examples, one categorical feature of "
        f"{args.values:,} values + 3 numeric",
        "",
        "| library | examples | state | RSS | ex/s (cumulative) | accuracy |",
        "|---|---|---|---|---|---|",
    ]
    what = {"chorus": "Chorus (state_bytes)", "river": "river (_raw_memory_usage)",
            "moa": "MOA (JVM heap after GC)"}  # fmt: skip
    for name in ("chorus", "river", "moa"):
        for p in results.get(name, []):
            if p["kind"] == "point":
                lines.append(f"| {what[name]} | {p['n']:,} | {mib(p['state_bytes'])} | "
                             f"{p['rss_mb']:,.0f} MiB | {p['ex_s']:,.0f} | {p['acc']:.3f} |")  # fmt: skip
            elif p["kind"] == "error":
                lines.append(f"| {what[name]} | failed: {p['message'][:200]} | | | | |")
            elif p["kind"] == "stopped":
                why = p.get("message") or "budget"
                lines.append(f"| {what[name]} | stopped after {p['n']:,} examples: "
                             f"{p['after_s']:.0f} s ({why}) | | | | |")  # fmt: skip
    labels = results.get("labels", [])
    if labels:
        lines += [
            "",
            f"## {args.labels:,} distinct labels into OzaBag(HT, {args.n_models}) "
            "(`learn_many`, blocks of 1,000)",
            "",
            "| examples | classes | s per 1,000 examples | state | RSS |",
            "|---|---|---|---|---|",
        ]
        for p in labels:
            if p["kind"] == "point":
                lines.append(f"| {p['n']:,} | {p['classes']:,} | {p['s_per_1k']:.3f} | "
                             f"{mib(p['state_bytes'])} | {p['rss_mb']:,.0f} MiB |")  # fmt: skip
            else:
                n = f"{p['n']:,}" if isinstance(p.get("n"), int) else "?"
                lines.append(f"| stopped after {n} examples "
                             f"({p.get('after_s', 0):.0f} s budget) {p.get('message', '')} | | | | |")  # fmt: skip
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200_000, help="examples (200000)")
    ap.add_argument("--values", type=int, default=100_000, help="distinct values (100000)")
    ap.add_argument("--n-models", type=int, default=10, help="ensemble size (10)")
    ap.add_argument("--every", type=int, default=20_000, help="report every N examples (20000)")
    ap.add_argument("--river-n", type=int, default=10_000, help="river's prefix (10000)")
    ap.add_argument("--moa-n", type=int, default=200_000, help="MOA's prefix (200000)")
    ap.add_argument("--moa-every", type=int, default=5_000, help="MOA's report interval (5000)")
    ap.add_argument("--labels", type=int, default=50_000, help="distinct labels (50000)")
    ap.add_argument("--labels-budget", type=float, default=300.0,
                    help="seconds the labels part may run (300)")  # fmt: skip
    ap.add_argument("--budget", type=float, default=300.0,
                    help="seconds of timed loop river and MOA may run (300)")  # fmt: skip
    ap.add_argument("--mem-gb", type=float, default=6.0, help="memory limit per part (6)")
    ap.add_argument("--skip", default="", help="comma list of chorus,river,moa,labels")
    ap.add_argument("--out", default="", help="also write the tables (markdown) here")
    ap.add_argument("--part", default="", help=argparse.SUPPRESS)
    return ap


def main() -> None:
    args, _ = _parser().parse_known_args()
    if args.part:
        if args.part != "moa":
            limit = int(args.mem_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        PARTS[args.part](args)
        return
    argv = [a for a in sys.argv[1:]]
    skip = set(filter(None, args.skip.split(",")))
    results = {}
    for name in PARTS:
        if name not in skip:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            results[name] = run_part(name, argv, args.mem_gb)
    text = tables(results, args)
    print(text)
    if args.out:
        peers.write_result(args.out, "Memory benchmark", "memory.py", argv, text)


if __name__ == "__main__":
    main()
