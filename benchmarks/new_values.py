"""A feature that takes a new value on most examples (user ids): examples per second (issue 43).

OzaBag(HT, 10) (``OnlineBagging(HoeffdingTree(), n_models=10, seed=1)``), ``--n`` examples
(20,000) of three numbers ``a, b, c`` in [0, 1) and label ``a + b > 1``, plus a string feature
``user`` that is

- ``new``: ``u{i}``, a new value on every example (user ids, session ids, URLs),
- ``100``: ``u{i % 100}``, 100 distinct values,
- ``none``: absent (three numbers only).

Loops: Chorus one example per call (``predict_one`` then ``learn_one``, river's loop), Chorus
batched (``predict_learn_many`` on blocks of 1,000), and river 0.26's
``ensemble.BaggingClassifier(tree.HoeffdingTreeClassifier(), n_models=10, seed=1)`` one example
per call, and MOA's ``OzaBag`` of ``HoeffdingTree`` (10, through capymoa; ``user``'s values
declared in the stream's header up front, as MOA needs) one example per call, each stopped
after ``--river-budget`` seconds (MOA also when its heap runs out, as on ``new``). Rates are cumulative at every ``--every``
examples (a per-example path whose cost grows with the values known shows as a falling rate),
by the wall clock or, with ``--clock cpu``, the CPU time of the loop's thread (steadier on a
shared machine).
A throwaway model first learns 200 examples, so loading the numba cache is not billed.
Before issue 43 the schema rebuilt an array of every known code each time a code was added, so
the ``new`` stream's per-example rate fell as the values grew (batches rebuilt it once a block).

    CAPYMOA_JVM_ARGS="-Xmx2g -Xss10M" python benchmarks/new_values.py --mem-gb 12   # ~3 min
    python benchmarks/new_values.py --skip river,moa --n 10000      # quick look
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import peers  # the shared result writer (this folder is the script's sys.path[0])

STREAMS = ("new", "100", "none")
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
clock = time.perf_counter


def row(i: int, stream: str) -> tuple[dict[str, Any], bool]:
    """Example i of ``stream`` (deterministic)."""
    a = ((i * 2654435761) % 1000) / 1000.0
    b = ((i * 40503) % 997) / 997.0
    c = ((i * 9973) % 991) / 991.0
    x: dict[str, Any] = {"a": a, "b": b, "c": c}
    if stream == "new":
        x["user"] = f"u{i}"
    elif stream == "100":
        x["user"] = f"u{i % 100}"
    return x, a + b > 1.0


def chorus() -> Any:
    from ensembles import OnlineBagging
    from learners import HoeffdingTree

    return OnlineBagging(HoeffdingTree(), n_models=10, seed=1)


def river() -> Any:
    from river import ensemble, tree

    return ensemble.BaggingClassifier(tree.HoeffdingTreeClassifier(), n_models=10, seed=1)


def one_per_call(model: Any, rows: list, every: int, budget: float) -> Iterator[tuple]:
    """(examples, cumulative ex/s, accuracy) every ``every`` examples, predict then learn."""
    correct, t_run = 0, 0.0
    for i, (x, y) in enumerate(rows, 1):
        t0 = clock()
        correct += model.predict_one(x) == y
        model.learn_one(x, y)
        t_run += clock() - t0
        if i % every == 0 or i == len(rows) or t_run > budget:
            yield i, i / t_run, correct / i
        if t_run > budget:
            return


def batched(model: Any, rows: list, every: int, budget: float) -> Iterator[tuple]:
    correct, t_run, block = 0, 0.0, 1000
    for start in range(0, len(rows), block):
        part = rows[start : start + block]
        xs, ys = [x for x, _ in part], [y for _, y in part]
        t0 = clock()
        probas = model.predict_learn_many(xs, ys)
        t_run += clock() - t0
        correct += sum(bool(p) and max(p, key=p.get) == y for p, y in zip(probas, ys, strict=True))
        done = start + len(part)
        if done % every == 0 or done == len(rows):
            yield done, done / t_run, correct / done


def moa(rows: list, every: int, budget: float) -> Iterator[tuple]:
    """MOA's OzaBag(HT, 10) through capymoa, predict then train, one example per call.

    MOA reads a nominal attribute's values from the stream's header, so ``user``'s values are
    declared up front (all of them: MOA cannot take a value it was not told of, which is the
    point of this stream); the Java instances are built before the timed loop.
    """
    import capymoa  # noqa: F401 - starts the JVM, untimed

    schema, instances = peers.moa_instances(rows, ["user"] if "user" in rows[0][0] else [])
    model = peers.moa_factories(schema, 10, 1, peers.DELTA)["bag_ht"]()
    correct, t_run = 0, 0.0
    for i, (inst, y) in enumerate(instances, 1):
        t0 = clock()
        try:
            correct += model.predict(inst) == y
            model.train(inst)
        except Exception as exc:  # noqa: BLE001 - MOA's heap runs out on the `new` stream
            if i > 1:
                yield i - 1, (i - 1) / t_run, correct / (i - 1), f"stopped: {exc}"[:80]
            return
        t_run += clock() - t0
        if i % every == 0 or i == len(instances) or t_run > budget:
            yield i, i / t_run, correct / i
        if t_run > budget:
            return


LOOPS: dict[str, tuple[Callable[[], Any], Callable]] = {
    "chorus": (chorus, one_per_call),
    "batch": (chorus, batched),
    "river": (river, one_per_call),
    "moa": (lambda: None, lambda _model, rows, every, budget: moa(rows, every, budget)),
}
LABEL = {"chorus": "Chorus, one per call", "batch": "Chorus, blocks of 1,000",
         "river": "river, one per call",
         "moa": "MOA (capymoa), one per call, values in the header"}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000, help="examples per stream (20000)")
    ap.add_argument("--every", type=int, default=5_000, help="report every N examples (5000)")
    ap.add_argument("--streams", default=",".join(STREAMS), help="comma list of new,100,none")
    ap.add_argument("--skip", default="", help="comma list of chorus,batch,river,moa")
    ap.add_argument("--river-budget", type=float, default=30.0,
                    help="seconds of timed loop river or MOA may run per stream (30)")  # fmt: skip
    ap.add_argument("--clock", choices=list(CLOCKS), default="wall", help="wall or cpu (wall)")
    ap.add_argument("--mem-gb", type=float, default=4.0, help="address-space limit (4)")
    ap.add_argument("--out", default="", help="also write the table (markdown) here")
    args = ap.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    limit = int(args.mem_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    skip = set(filter(None, args.skip.split(",")))
    what = "wall-clock" if args.clock == "wall" else "CPU time of the loop's thread"
    lines = [
        f"Rates by {what}.",
        "",
        "| loop | stream | examples | ex/s (cumulative) | accuracy |",
        "|---|---|---|---|---|",
    ]
    for name, (make, loop) in LOOPS.items():
        if name in skip:
            continue
        warm = make()  # (loads the kernels from numba's cache, untimed)
        for x, y in (row(i, "new") for i in range(200)) if warm is not None else ():
            warm.predict_one(x)
            warm.learn_one(x, y)
        budget = args.river_budget if name in ("river", "moa") else float("inf")
        for stream in args.streams.split(","):
            rows = [row(i, stream) for i in range(args.n)]
            print(f"{name} / {stream} ...", file=sys.stderr, flush=True)
            for done, rate, acc, *why in loop(make(), rows, args.every, budget):
                stop = f" (stopped: {budget:.0f} s budget)" if done % args.every else ""
                stop = f" ({why[0]})" if why else stop
                lines.append(f"| {LABEL[name]} | {stream} | {done:,}{stop} | {rate:,.0f} | "
                             f"{acc:.3f} |")  # fmt: skip
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        argv = sys.argv[1:]
        peers.write_result(args.out, "A new value on most examples", "new_values.py", argv, text)


if __name__ == "__main__":
    main()
