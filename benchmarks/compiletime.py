"""Compile time: what ``chorus warmup`` costs per ensemble kind on an empty numba cache.

Each kind is warmed in a fresh process whose ``NUMBA_CACHE_DIR`` is an empty temporary
directory: ``python -m app.warmup KIND``, what the server's start-up runs on a cold cache (its
processes per ``CHORUS_WARMUP_JOBS``). Reported per kind: wall seconds and CPU seconds (user +
system, of the process and every process it waited for: on a shared machine CPU is the steadier
figure). ``--profile N`` instead warms the kind in one process (``app.warmup.warm_all``) with
numba's compile events and prints where the time goes: per kernel, the compile time (CPU seconds
of the process: wall seconds on a shared machine follow its load) *not* spent compiling the
kernels it calls (``numba:compile`` events, nested), and with ``--passes`` per compiler pass the
same (LLVM's optimisation and code generation run inside ``native_lowering``).

Run: ``nice -n 10 python benchmarks/compiletime.py bagging --repeat 3`` (a minute or more a
kind on 2 cores; ``--jobs 2`` measures two kinds at a time). ``--env NAME=VALUE`` sets a
variable in the measured processes (``NUMBA_OPT``, ``CHORUS_WARMUP_JOBS``). For a before/after,
run it from each checkout in turn (``git worktree add /tmp/base <commit>``). Prints Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("bagging", "boosting", "single", "arf", "srp")

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from numba.core import event
excl, passes, count = {}, {}, {}
stacks = {"numba:compile": [], "numba:run_pass": []}  # per event kind: [key, start, nested]
class L(event.Listener):
    def __init__(self, kind):
        self.kind = kind
    def on_start(self, ev):
        if self.kind == "numba:compile":
            key = ev.data["dispatcher"].py_func.__qualname__
        else:
            key = ev.data["name"]
        stacks[self.kind].append([key, time.process_time(), 0.0])
    def on_end(self, ev):
        stack = stacks[self.kind]
        key, start, nested = stack.pop()
        took = time.process_time() - start
        table = excl if self.kind == "numba:compile" else passes
        table[key] = table.get(key, 0.0) + took - nested
        if self.kind == "numba:compile":
            count[key] = count.get(key, 0) + 1
        if stack:
            stack[-1][2] += took
event.register("numba:compile", L("numba:compile"))
if "--passes" in sys.argv:
    event.register("numba:run_pass", L("numba:run_pass"))
from app.warmup import warm_all
warm_all(sys.argv[1])
print(json.dumps({"wall": time.perf_counter() - t0, "kernels": excl,
                  "passes": passes, "count": count}))
"""


def measure(
    kind: str, env: dict[str, str], profile: bool, passes: bool = False, timeout: float = 1800
) -> dict:
    """Warm ``kind`` in a fresh process on an empty cache: ``python -m app.warmup KIND`` (what
    the server's start-up runs; its processes per ``CHORUS_WARMUP_JOBS``), or with ``profile``
    ``warm_all`` in one process with numba's compile events (``_CHILD``). Wall and CPU seconds
    (of the process and every process it waited for: ``os.wait4``)."""
    with tempfile.TemporaryDirectory(prefix="chorus-compiletime-") as cache:
        full = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(ROOT), **env)
        if profile:
            argv = [sys.executable, "-c", _CHILD, kind] + (["--passes"] if passes else [])
        else:
            argv = [sys.executable, "-m", "app.warmup", kind]
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            t0 = time.perf_counter()
            proc = subprocess.Popen(argv, env=full, stdout=out, stderr=err, cwd=ROOT)
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            _, status, usage = os.wait4(proc.pid, 0)  # (its CPU and its waited-for children's)
            timer.cancel()
            wall = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            if proc.returncode:
                raise RuntimeError(f"{kind}: exit {proc.returncode}: {err.read()[-3000:]}")
            res = json.loads(out.read().strip().splitlines()[-1]) if profile else {}
        res["outer_wall"] = wall
        res["cpu"] = usage.ru_utime + usage.ru_stime
        return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kinds", nargs="*", default=list(KINDS), help="ensemble kinds (default all)")
    ap.add_argument("--repeat", type=int, default=1, help="cold runs per kind (medians)")
    ap.add_argument("--jobs", type=int, default=1, help="kinds measured at a time (at most 2)")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the children")
    ap.add_argument("--profile", type=int, default=0, help="print the N costliest kernels")
    ap.add_argument("--passes", action="store_true", help="and the compiler passes' times")
    ap.add_argument("--json", help="also write the raw runs here")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds a run may take (1800)")
    args = ap.parse_args()
    env = dict(e.split("=", 1) for e in args.env)
    work = [k for _ in range(args.repeat) for k in args.kinds]
    with ThreadPoolExecutor(max_workers=min(args.jobs, 2)) as pool:
        runs = list(
            pool.map(
                lambda k: (k, measure(k, env, args.profile > 0, args.passes, args.timeout)), work
            )
        )
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    print(f"env: {env or '-'}; {args.repeat} cold run(s) per kind\n")
    print("| kind | CPU s (median) | wall s (median) | runs (CPU / wall) |")
    print("|---|---|---|---|")
    for kind in args.kinds:
        mine = [r for k, r in runs if k == kind]
        cpu = [r["cpu"] for r in mine]
        wall = [r["outer_wall"] for r in mine]
        each = ", ".join(f"{c:.1f}/{w:.1f}" for c, w in zip(cpu, wall, strict=True))
        print(f"| {kind} | {statistics.median(cpu):.1f} | {statistics.median(wall):.1f} | {each} |")
    if args.profile:
        for kind in args.kinds:
            first = next(r for k, r in runs if k == kind)
            for table in ("kernels", "passes"):
                rows = sorted(first[table].items(), key=lambda kv: -kv[1])[: args.profile]
                if not rows:
                    continue
                total = sum(first[table].values())
                print(f"\n{kind}: {table}, exclusive CPU seconds (total {total:.1f})\n")
                print("| name | s | compiles |\n|---|---|---|")
                for name, s in rows:
                    print(f"| {name} | {s:.2f} | {first['count'].get(name, '')} |")


if __name__ == "__main__":
    main()
