"""Member-parallel bagging: examples per second of a batched model for 1..N threads.

``OnlineBagging(..., threads=T)`` runs the members of a batch (``predict_learn_many``) in T
threads, with results bit-identical to one thread. This times the prequential batch loop of
``benchmarks/peers.py`` (``predict_learn_many`` on blocks of ``--batch-size`` rows of river's
``Agrawal(classification_function=2, seed=7, perturbation=0.05)``) for OzaBag(HT, 10) and
OzaBag(NB, 10) (MOA's tree defaults, as peers.py) at each thread count of ``--threads``, and the
same loop with ``learn_many`` (no predictions: no output dicts to build, ``--calls``).

Each run at T > 1 threads is repeated on a fresh model to take its critical path (``CriticalPath``):
the members of each parallel phase run one at a time in the calling thread, each timed by its
thread CPU time, and the critical path is the calling thread's CPU outside the members plus, per
phase, when the last thread would be done on idle cores, the threads taking members as
``MemberThreads`` has them take (their own group, then the others' not started) and a worker
starting one hand-off after the calling thread (``--handoff``, measured by default). One-thread
CPU time over that is the speed-up idle cores would give ("critical-path speed-up"): an estimate
from thread CPU times, which the load of a shared machine disturbs much less than the wall clock.
"static groups" is the same estimate for threads that keep to their own group (before session 8).
A second table splits two threads' critical path into the calling thread's CPU outside the
members (encoding the rows, building the answers, combining votes, growing arrays: Python, or
serial) and the members' CPU, with the speed-up that serial part leaves if the members split
evenly at no cost (Amdahl's bound).

``--calls predict_learn_batches,learn_batches`` times the pipelined stream calls on the same
blocks (``ensembles/stream.py``: the members of block i learn while the calling thread encodes
block i+1 and builds the answers of block i-1; at one thread they are the batch calls in order).
Their critical path is ``PipelinePath``'s: per block, the longest of the calling thread's CPU
between two starts, the members' side (the stream thread's CPU outside the members plus each
phase's makespan, as above, plus a hand-off each way) and that step's CPU over the thread count
(three threads share two cores), plus what is serial (the first block's encoding, starting each
block, the last block's answers). A third table splits it. A stream pipelines only with a core
to spare beside its member threads (``CompiledBackend.pipelines``: 2 threads need 3 cores);
otherwise it runs the batch calls in order, and its critical path is theirs (``CriticalPath``).

Every model first runs an untimed warm-up on a throwaway copy at the same thread count (the
parallel kernels compile or load from numba's cache there). The thread counts are then run in
turn, ``--repeat`` rounds, alternating the order (1, 2, 3, 4 then 4, 3, 2, 1, ...) so that a change
of the machine's load does not favour one count; every run is reported, with the load average at
its start, the rate by wall clock and the process's CPU time over the wall time (2.0 is two cores
busy). The speed-up is of medians. On a machine shared with other work the wall-clock rates move
with their load: read the load column.

``--compile`` also measures the first call of the parallel kernels (a batch at 2 threads after a
batch at 1 thread has compiled the serial one): with an empty numba cache (``NUMBA_CACHE_DIR`` a
new directory, so every kernel compiles) and with the cache that run left (so they load), each in
a fresh process.

Run from the repository root::

    python benchmarks/threads.py                       # writes benchmarks/results/threads.md
    python benchmarks/threads.py --threads 1,2 --repeat 2 --out ''   # a quick look

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from peers import GRACE_PERIOD, TAU, cpu_name, log, make_stream, write_result  # noqa: E402

MODELS = {"bag_ht": "OzaBag(HT, 10)", "bag_nb": "OzaBag(NB, 10)"}

COMPILE_SNIPPET = """
import json, sys, time
t0 = time.perf_counter()
from ensembles import OnlineBagging
from learners import HoeffdingTree
X = [{"a": float(i % 7), "b": "xyz"[i % 3], "c": (i * 37 % 101) / 101.0} for i in range(400)]
y = ["yn"[(i % 7) > 3] for i in range(400)]
model = OnlineBagging(HoeffdingTree(grace_period=50), n_models=4, seed=1)
t1 = time.perf_counter()
model.predict_learn_many(X[:200], y[:200])
t2 = time.perf_counter()
model.threads = 2
model.predict_learn_many(X[200:], y[200:])
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "serial": t2 - t1, "parallel": t3 - t2}))
"""


def factory(key: str, threads: int) -> Any:
    from ensembles import OnlineBagging
    from learners import HoeffdingTree, NaiveBayes

    if key == "bag_ht":
        learner = HoeffdingTree(grace_period=GRACE_PERIOD, delta=1e-7, tau=TAU)
    else:
        learner = NaiveBayes()
    return OnlineBagging(learner, n_models=10, seed=1, threads=threads)


def timed_loop(model: Any, xs: list, ys: list, batch: int, call: str) -> tuple[float, float]:
    """Wall seconds and process CPU seconds of the batch loop (``call``: ``predict_learn_many``,
    the prequential loop, or ``learn_many``)."""
    t0, c0 = time.perf_counter(), time.process_time()
    run_calls(model, xs, ys, batch, call)
    return time.perf_counter() - t0, time.process_time() - c0


STREAM_CALLS = ("predict_learn_batches", "learn_batches")
BATCH_CALL = {"predict_learn_batches": "predict_learn_many", "learn_batches": "learn_many"}


def run_calls(model: Any, xs: list, ys: list, batch: int, call: str) -> None:
    """The batch loop: ``call`` on each block of ``batch`` rows, or (a stream call) on the
    stream of blocks, consuming every batch's answers."""
    blocks = ((xs[i : i + batch], ys[i : i + batch]) for i in range(0, len(xs), batch))
    if call == "predict_learn_batches":
        for _ in model.predict_learn_batches(blocks):
            pass
    elif call == "learn_batches":
        model.learn_batches(blocks)
    else:
        run = getattr(model, call)
        for X, y in blocks:
            run(X, y)


class CriticalPath:
    """CPU seconds of the loop's critical path on idle cores, from thread CPU times, which other
    load on the machine disturbs much less than wall time.

    The loop runs with every parallel phase's members one at a time in the calling thread, each
    timed (its thread CPU: what it costs in any thread; the results are those of any thread
    count). The critical path is the calling thread's CPU outside the members (encoding, output,
    combining votes, growing arrays) plus, per phase, when the last thread would finish on idle
    cores: the threads of ``MemberThreads`` run their own members and then take the others'
    (``backends.member_orders``), a worker thread starting ``handoff`` seconds after the calling
    one and the calling thread seeing a worker's end ``handoff`` later. ``cpu(1 thread) /
    critical path`` estimates the speed-up that idle cores would give (leaving out what a member
    taken by another thread loses of its core's cache). ``seconds(static=True)`` is the critical
    path of threads that keep to their own group (as before they took each other's members)."""

    def __init__(self, threads: int, handoff: float) -> None:
        from ensembles import _kernels, backends

        self.kernels, self.backends = _kernels, backends
        self.threads, self.handoff = threads, handoff
        self.phases: list[list[float]] = []  # per phase: each member's CPU seconds (0: not run)
        self.python = {"encode": 0.0, "answers": 0.0}  # the calling thread's CPU in these

    def __enter__(self) -> CriticalPath:
        import numpy as np

        run, cp = self.kernels.bagging_members, self

        def phase(obj: Any, B: Any, ipar: Any, args: Any) -> None:
            costs = [0.0] * obj.n_models
            vote_n, vote_k, vote_p = obj.votes
            obj.claimed[:] = 0
            for m in range(obj.n_models):
                c = time.thread_time()
                run(B, ipar, *args, np.array([m]), obj.claimed, obj.base, obj.stop, obj.progress,
                    obj.halt, vote_n, vote_k, vote_p)  # fmt: skip
                costs[m] = time.thread_time() - c
            cp.phases.append(costs)

        from learners.schema import Schema

        def timed(label: str, fn: Any) -> Any:
            def call(*args: Any, **kw: Any) -> Any:
                c = time.thread_time()
                try:
                    return fn(*args, **kw)
                finally:
                    cp.python[label] += time.thread_time() - c

            return call

        self._saved = (self.backends.MemberThreads._phase, Schema.encode_rows, Schema.proba_dicts)
        self.backends.MemberThreads._phase = phase  # type: ignore[method-assign]
        Schema.encode_rows = timed("encode", Schema.encode_rows)  # type: ignore[method-assign]
        Schema.proba_dicts = timed("answers", Schema.proba_dicts)  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from learners.schema import Schema

        phase, Schema.encode_rows, Schema.proba_dicts = self._saved  # type: ignore[method-assign]
        self.backends.MemberThreads._phase = phase  # type: ignore[method-assign]

    def members(self) -> float:
        """CPU seconds of all the members' phases."""
        return sum(sum(p) for p in self.phases)

    def _makespan(self, costs: list[float], orders: list) -> float:
        """When the last of the threads taking members in ``orders`` would finish, on idle
        cores."""
        clock = [0.0] + [self.handoff] * (len(orders) - 1)
        nxt = [0] * len(orders)
        taken: set[int] = set()
        while True:
            # the thread that is free first takes its next member not taken
            free = sorted(range(len(orders)), key=lambda g: clock[g])
            for g in free:
                order = orders[g]
                while nxt[g] < len(order) and int(order[nxt[g]]) in taken:
                    nxt[g] += 1
                if nxt[g] < len(order):
                    m = int(order[nxt[g]])
                    taken.add(m)
                    clock[g] += costs[m]
                    break
            else:
                return max(clock[0], *(c + self.handoff for c in clock[1:]))

    def seconds(self, caller_cpu: float, static: bool = False) -> float:
        M = len(self.phases[0]) if self.phases else 1
        T = min(self.threads, M)
        if static:
            orders = [list(range(g * M // T, (g + 1) * M // T)) for g in range(T)]
        else:
            orders = [list(o) for o in self.backends.member_orders(M, T)]
        serial = caller_cpu - self.members()
        return serial + sum(self._makespan(p, orders) for p in self.phases)


class PipelinePath(CriticalPath):
    """The critical path of a pipelined stream (``predict_learn_batches`` / ``learn_batches``)
    on ``threads`` idle cores, from thread CPU times.

    The stream runs with the members of each phase one at a time in the stream's thread, timed
    (as ``CriticalPath``), and records the calling thread's CPU clock where it starts each batch
    (``CompiledBackend.start``) and builds each batch's answers. Batch i's members take ``K_i``:
    the stream thread's CPU outside the members (combining votes, growing arrays) plus each
    phase's makespan (``CriticalPath``), plus a hand-off each way. Meanwhile the calling thread
    works ``M_i`` (its CPU from the start of batch i to the start of batch i+1: the answers of
    batch i-1, the encoding of batch i+1). Starting batch i+1 (``S_{i+1}``, serial) waits for
    both, so the step takes ``max(M_i, K_i, (M_i + C_i) / threads) + S_{i+1}``, where ``C_i``
    is the stream thread's and the members' CPU of batch i: the third term is the CPU of the
    step shared evenly by ``threads`` cores (three threads on two cores). The first batch's
    encoding and start, and the last batch's answers, are serial. An estimate for idle cores
    that share perfectly: it leaves out what the threads wait for the GIL (at most
    ``stream.SWITCH_INTERVAL`` per hand-off) and any cache cost."""

    def __enter__(self) -> PipelinePath:
        super().__enter__()
        from ensembles import backends

        cp = self
        self.starts: list[tuple[float, float]] = []  # calling thread CPU at start()'s entry, exit
        self.answer_cpu: list[float] = []  # calling thread CPU building each batch's answers
        self.batches: list[tuple[float, int, int]] = []  # stream thread CPU, its phases' range
        start, answers = backends.CompiledBackend.start, backends.CompiledBackend.answers

        def timed_start(obj: Any, staged: tuple, *, predict: bool) -> Any:
            c = time.thread_time()
            members = start(obj, staged, predict=predict)
            cp.starts.append((c, time.thread_time()))
            if members is None:
                raise RuntimeError("a batch ran outside the pipeline (max_state_bytes)")

            def timed_members() -> Any:
                c0, p0 = time.thread_time(), len(cp.phases)
                try:
                    return members()
                finally:
                    cp.batches.append((time.thread_time() - c0, p0, len(cp.phases)))

            return timed_members

        def timed_answers(obj: Any, out: Any, staged: tuple) -> Any:
            c = time.thread_time()
            try:
                return answers(obj, out, staged)
            finally:
                cp.answer_cpu.append(time.thread_time() - c)

        self._saved_stream = (start, answers)
        backends.CompiledBackend.start = timed_start  # type: ignore[method-assign]
        backends.CompiledBackend.answers = timed_answers  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from ensembles import backends

        backends.CompiledBackend.start, backends.CompiledBackend.answers = self._saved_stream  # type: ignore[method-assign]
        super().__exit__(*exc)

    def pipeline_seconds(self, begin: float, end: float) -> dict:
        """The critical path (``critical_cpu_s``) and its parts, given the calling thread's CPU
        clock at the loop's ``begin`` and ``end``."""
        M = len(self.phases[0]) if self.phases else 1
        T = min(self.threads, M)
        orders = [list(o) for o in self.backends.member_orders(M, T)]
        n = len(self.starts)
        if len(self.batches) != n:
            raise RuntimeError("every batch of the stream must run in the pipeline")
        serial_s = self.starts[0][1] - begin  # the first batch's encoding and start
        steps = kernel_path = main_par = 0.0
        last_answers = self.answer_cpu[-1] if len(self.answer_cpu) == n else 0.0
        for i, (stream_cpu, p0, p1) in enumerate(self.batches):
            members = sum(sum(p) for p in self.phases[p0:p1])
            K = (stream_cpu - members + 2 * self.handoff
                 + sum(self._makespan(p, orders) for p in self.phases[p0:p1]))  # fmt: skip
            if i + 1 < n:
                main = self.starts[i + 1][0] - self.starts[i][1]
                serial = self.starts[i + 1][1] - self.starts[i + 1][0]
            else:
                main = end - self.starts[i][1] - last_answers
                serial = last_answers
            steps += max(main, K, (main + stream_cpu) / T)
            kernel_path += K
            main_par += main
            serial_s += serial
        return {"critical_cpu_s": serial_s + steps, "serial_s": serial_s, "steps_s": steps,
                "kernel_path_s": kernel_path, "main_par_s": main_par,
                "members_s": self.members()}  # fmt: skip


def pipeline_path(model: Any, xs: list, ys: list, batch: int, call: str,
                  handoff: float) -> dict | None:  # fmt: skip
    """``PipelinePath``'s critical path of the stream call and its parts, or ``None`` when the
    stream pipelined no batch: a stream overlaps batches only with a core to spare beside the
    member threads (``CompiledBackend.pipelines``), else it runs the batch calls in order."""
    with PipelinePath(model.threads, handoff) as cp:
        c0 = time.thread_time()
        run_calls(model, xs, ys, batch, call)
        c1 = time.thread_time()
    if not cp.starts:
        return None
    out = cp.pipeline_seconds(c0, c1)
    out["static_cpu_s"] = out["critical_cpu_s"]
    out["encode_s"], out["answers_s"] = cp.python["encode"], cp.python["answers"]
    return out


def handoff_seconds() -> float:
    """Median seconds from handing a task to a worker thread to the worker running it, and back
    (half a round trip of an empty task, on the process's member pool)."""
    from ensembles import backends

    pool = backends._executor(1)
    trips = []
    for _ in range(200):
        t0 = time.perf_counter()
        pool.submit(int).result()
        trips.append(time.perf_counter() - t0)
    return statistics.median(trips) / 2


def critical_path(model: Any, xs: list, ys: list, batch: int, call: str, handoff: float) -> dict:
    """The loop's critical-path CPU seconds (``CriticalPath``), those of static groups, and
    what they are made of: the calling thread's CPU outside the members (``serial_s``), of which
    ``encode_s`` encoding the rows and ``answers_s`` building the answers, and the members' CPU
    (``members_s``)."""
    run = getattr(model, call)
    with CriticalPath(model.threads, handoff) as cp:
        c0 = time.thread_time()
        for i in range(0, len(xs), batch):
            run(xs[i : i + batch], ys[i : i + batch])
        caller_cpu = time.thread_time() - c0
    return {"critical_cpu_s": cp.seconds(caller_cpu),
            "static_cpu_s": cp.seconds(caller_cpu, static=True),
            "serial_s": caller_cpu - cp.members(), "members_s": cp.members(),
            "encode_s": cp.python["encode"], "answers_s": cp.python["answers"]}  # fmt: skip


def curve(args: argparse.Namespace) -> dict[str, list[dict]]:
    stream = make_stream(args.n)
    xs = [x for x, _ in stream]
    ys = [y for _, y in stream]
    warm = args.warmup
    runs: dict[str, list[dict]] = {}
    for key in args.models:
        for t in args.threads:  # compile / load every kernel first, untimed
            timed_loop(factory(key, t), xs[:warm], ys[:warm], args.batch_size, args.calls[0])
        for call in args.calls:
            rs = runs[f"{key} {call}"] = []
            for rnd in range(args.repeat):
                order = args.threads if rnd % 2 == 0 else list(reversed(args.threads))
                for t in order:
                    load = os.getloadavg()[0]
                    wall, cpu = timed_loop(factory(key, t), xs, ys, args.batch_size, call)
                    path = {"critical_cpu_s": cpu, "static_cpu_s": cpu}
                    piped = None
                    if t > 1 and call in STREAM_CALLS:
                        piped = pipeline_path(factory(key, t), xs, ys, args.batch_size, call,
                                              args.handoff)  # fmt: skip
                    if piped is not None:
                        path = piped
                    elif t > 1:  # (a stream that did not pipeline ran these batch calls)
                        path = critical_path(factory(key, t), xs, ys, args.batch_size,
                                             BATCH_CALL.get(call, call), args.handoff)  # fmt: skip
                    crit = path["critical_cpu_s"]
                    rs.append({"threads": t, "round": rnd, "load": load, "wall_s": wall,
                               "cpu_s": cpu, **path, "rate": len(xs) / wall})  # fmt: skip
                    log(args, f"{MODELS[key]:<15} {call:<18} threads={t} round {rnd}: "
                              f"{len(xs) / wall:>9,.0f} ex/s  cpu/wall {cpu / wall:.2f}  load "
                              f"{load:.2f}  critical path {crit:.3f} s of {cpu:.3f} s CPU")  # fmt: skip
    return runs


def compile_cost(args: argparse.Namespace) -> list[dict]:
    """First calls in fresh processes: cold numba cache, then the cache it left."""
    out = []
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        for label in ("empty cache", "warm cache"):
            res = subprocess.run([sys.executable, "-c", COMPILE_SNIPPET], env=env, check=True,
                                 capture_output=True, text=True, cwd=ROOT)  # fmt: skip
            row = json.loads(res.stdout.strip().splitlines()[-1])
            row["cache"] = label
            out.append(row)
            log(args, f"compile ({label}): serial batch {row['serial']:.2f} s, first parallel "
                      f"batch {row['parallel']:.2f} s")  # fmt: skip
    return out


def report(runs: dict[str, list[dict]], compiles: list[dict], args: argparse.Namespace) -> str:
    parts = []
    head = ("| model, call | threads | ex/s (median) | speed-up | critical-path speed-up | "
            "static groups | every run: ex/s (cpu/wall, load) |")  # fmt: skip
    rows = [head, "|---|---|---|---|---|---|---|"]
    for key, rs in runs.items():
        model, call = key.split(" ")
        first = [r for r in rs if r["threads"] == args.threads[0]]
        base = statistics.median(r["rate"] for r in first)
        base_cpu = statistics.median(r["cpu_s"] for r in first)
        for t in args.threads:
            mine = [r for r in rs if r["threads"] == t]
            med = statistics.median(r["rate"] for r in mine)
            crit = base_cpu / statistics.median(r["critical_cpu_s"] for r in mine)
            static = base_cpu / statistics.median(r["static_cpu_s"] for r in mine)
            every = "; ".join(f"{r['rate']:,.0f} ({r['cpu_s'] / r['wall_s']:.2f}, {r['load']:.1f})"
                              for r in mine)  # fmt: skip
            rows.append(f"| {MODELS[model]} `{call}` | {t} | {med:,.0f} | {med / base:.2f}× | {crit:.2f}× | "
                        f"{static:.2f}× | {every} |")  # fmt: skip
    parts.append("\n".join(rows))
    parts.append(serial_share(runs, args))
    if compiles:
        crow = ["| numba cache | import | first batch, 1 thread | first batch, 2 threads |",
                "|---|---|---|---|"]  # fmt: skip
        crow += [f"| {c['cache']} | {c['import']:.2f} s | {c['serial']:.2f} s | "
                 f"{c['parallel']:.2f} s |" for c in compiles]  # fmt: skip
        parts.append("First calls, each in a fresh process (OzaBag(HT, 4), 200-row batches):\n\n"
                     + "\n".join(crow))  # fmt: skip
    return "\n\n".join(parts)


def serial_share(runs: dict[str, list[dict]], args: argparse.Namespace) -> str:
    """Where two threads' critical path goes (medians of the runs, CPU ms): the calling thread's
    work outside the members, which no thread count shortens, and the members'; the last column
    is the speed-up two idle cores would give with that serial part if the members split evenly
    at no cost (Amdahl's bound)."""
    t = 2 if 2 in args.threads else max(args.threads)
    if t < 2 or 1 not in args.threads:
        return ""
    rows = [f"Where {t} threads' critical path goes (CPU ms, medians; members run one at a time "
            f"and timed, so their CPU includes a kernel call each):", "",
            "| model, call | 1 thread | outside the members | of which: encoding | answers | "
            "members | bound: members split evenly at no cost |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    for key, rs in runs.items():
        model, call = key.split(" ")
        if call in STREAM_CALLS:
            continue
        one = statistics.median(r["cpu_s"] for r in rs if r["threads"] == 1)
        mine = [r for r in rs if r["threads"] == t]

        def med(k: str, mine: list = mine) -> float:
            return statistics.median(r[k] for r in mine)

        serial, members = med("serial_s"), med("members_s")
        bound = one / (serial + members / t)
        rows.append(f"| {MODELS[model]} `{call}` | {one * 1e3:.0f} | {serial * 1e3:.0f} "
                    f"({serial / one:.0%}) | {med('encode_s') * 1e3:.0f} | "
                    f"{med('answers_s') * 1e3:.0f} | {members * 1e3:.0f} | {bound:.2f}× |")  # fmt: skip
    pipe = pipeline_share(runs, t)
    if len(rows) == 4:
        return pipe
    return "\n".join(rows) + ("\n\n" + pipe if pipe else "")


def pipeline_share(runs: dict[str, list[dict]], t: int) -> str:
    """Where a pipelined stream's critical path at ``t`` threads goes (``PipelinePath``, CPU
    ms, medians): the serial part (the first batch's encoding, starting each batch, the last
    batch's answers), the steps (each the longest of the calling thread's work, the members'
    side and the step's CPU over ``t`` cores), the calling thread's work overlapped with the
    members (encoding, answers) and the members' side (its critical path)."""
    rows = [f"Where a pipelined stream's critical path at {t} threads goes (CPU ms, medians; "
            f"`PipelinePath`):", "",
            "| model, call | 1 thread | critical path | serial: first batch, starts, last "
            "answers | steps | calling thread, overlapped | members' side | members' CPU |",
            "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for key, rs in runs.items():
        model, call = key.split(" ")
        mine = [r for r in rs if r["threads"] == t]
        if call not in STREAM_CALLS or not mine or "steps_s" not in mine[0]:
            continue
        one = statistics.median(r["cpu_s"] for r in rs if r["threads"] == 1)

        def med(k: str, mine: list = mine) -> float:
            return statistics.median(r[k] for r in mine) * 1e3

        rows.append(f"| {MODELS[model]} `{call}` | {one * 1e3:.0f} | {med('critical_cpu_s'):.0f} "
                    f"| {med('serial_s'):.0f} | {med('steps_s'):.0f} | {med('main_par_s'):.0f} | "
                    f"{med('kernel_path_s'):.0f} | {med('members_s'):.0f} |")  # fmt: skip
    return "\n".join(rows) if len(rows) > 4 else ""


def environment(args: argparse.Namespace, load_before: tuple[float, ...]) -> str:
    import numba

    cpu = cpu_name()
    after = os.getloadavg()
    return (f"Agrawal(classification_function=2, seed=7, perturbation=0.05), n={args.n:,}, "
            f"batch {args.batch_size}, M=10, seed 1, HT grace period {GRACE_PERIOD}, delta 1e-7; "
            f"{args.repeat} round(s) per thread count, alternating order; critical paths with a "
            f"hand-off of {args.handoff * 1e6:.0f} µs each way{args.handoff_note}.  \n"
            f"{cpu}, {os.cpu_count()} cores (shared with other work: see the load per run); "
            f"load average {load_before[0]:.2f} before / {after[0]:.2f} after; numba "
            f"{numba.__version__}.")  # fmt: skip


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=20_000, help="examples in the stream (20000)")
    p.add_argument("--threads", default="1,2,3,4", help="thread counts (1,2,3,4); the first is "
                   "the speed-up's base")  # fmt: skip
    p.add_argument("--models", default=",".join(MODELS), help=f"comma list of {','.join(MODELS)}")
    p.add_argument("--batch-size", type=int, default=1000, help="rows per batch (1000)")
    p.add_argument("--calls", default="predict_learn_many,learn_many",
                   help="batch calls timed (predict_learn_many,learn_many)")  # fmt: skip
    p.add_argument("--warmup", type=int, default=2000, help="untimed warm-up rows per count")
    p.add_argument("--repeat", type=int, default=3, help="rounds over the thread counts (3)")
    p.add_argument("--compile", action="store_true", help="also time the first parallel calls")
    p.add_argument("--handoff", type=float, default=None, help="seconds a worker thread starts "
                   "after the calling one, in the critical paths (default: measured)")  # fmt: skip
    p.add_argument("--shared-struct", action="store_true",
                   help="every thread reads the bank through one struct, as before thread_views "
                   "(to measure what the contended reference counts cost)")  # fmt: skip
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "threads.md"),
                   help="markdown results file ('' to not write)")  # fmt: skip
    p.add_argument("--json", default="", help="also write every run as JSON here")
    p.add_argument("-q", "--quiet", dest="verbose", action="store_false", help="no progress")
    args = p.parse_args(argv)
    args.threads = [int(t) for t in args.threads.split(",") if t.strip()]
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.calls = [c.strip() for c in args.calls.split(",") if c.strip()]
    if bad := set(args.calls) - {"predict_learn_many", "learn_many", *STREAM_CALLS}:
        p.error(f"unknown call(s) {sorted(bad)}; choose predict_learn_many, learn_many, "
                f"{', '.join(STREAM_CALLS)}")  # fmt: skip
    if bad := set(args.models) - set(MODELS):
        p.error(f"unknown model(s) {sorted(bad)}; choose from {', '.join(MODELS)}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.shared_struct:
        from ensembles import backends

        backends.CompiledBackend.thread_views = lambda self, B, n: [B] * n  # type: ignore[method-assign]
    load_before = os.getloadavg()
    args.handoff_note = " (given)"
    if args.handoff is None:
        args.handoff, args.handoff_note = handoff_seconds(), " (measured: median of 200)"
    compiles = compile_cost(args) if args.compile else []
    runs = curve(args)
    body = report(runs, compiles, args)
    env = environment(args, load_before)
    print(body + "\n\n" + env)  # noqa: T201
    if args.out:
        write_result(args.out, "Member-parallel bagging: examples per second by threads",
                     "threads.py", sys.argv[1:] if argv is None else argv, f"{body}\n\n{env}\n")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "compile": compiles}, indent=2))


if __name__ == "__main__":
    main()
