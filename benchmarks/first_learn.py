"""A Python user's first answer on an empty numba cache: ``CHORUS_COMPILE=block`` (the first
call compiles) against ``subprocess`` (the default: the interpreted twins answer while a
subprocess compiles, then the compiled kernels take over).

Each run is a fresh child process with an empty temporary ``NUMBA_CACHE_DIR`` that does what a
user does: ``import``, ``OnlineBagging(HoeffdingTree())`` (or ``OnlineBoosting``), one
``learn_one`` and one ``predict_one`` (the first answer: ``learn_one`` alone defers its kernel
call into the next prediction), then ``predict_learn_one`` on a stream until the compiled
kernels answer. Times are wall seconds from the child's start; ``answered meanwhile`` counts
the examples learned from the twins before the switch.

Run: ``python benchmarks/first_learn.py [--ensembles bagging,boosting] [--modes
block,subprocess] [--repeats 1] [--out FILE]`` (each run compiles from nothing: minutes of CPU).
Prints a Markdown table.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from ensembles import OnlineBagging, OnlineBoosting
from learners import HoeffdingTree, jit
imported = time.perf_counter() - t0
cls = {"bagging": OnlineBagging, "boosting": OnlineBoosting}[sys.argv[1]]
model = cls(HoeffdingTree())
model.learn_one({"a": 1.0, "b": "x"}, "yes")
model.predict_one({"a": 2.0, "b": "y"})
first = time.perf_counter() - t0
n = 0
while jit.interpreting() or jit.compiling():
    model.predict_learn_one({"a": float(n % 7), "b": "xyz"[n % 3]}, "yn"[n % 7 > 3])
    n += 1
compiled = time.perf_counter() - t0
model.predict_learn_one({"a": 3.0, "b": "z"}, "no")
print(json.dumps({"imported": imported, "first": first, "compiled": compiled, "meanwhile": n}))
"""


def run(ensemble: str, mode: str) -> dict:
    """One cold run in a child process; its timings."""
    with tempfile.TemporaryDirectory(prefix="first-learn-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, CHORUS_COMPILE=mode, PYTHONPATH=str(ROOT))
        out = subprocess.run(  # noqa: S603 - our own code
            [sys.executable, "-c", _CHILD, ensemble], env=env, cwd=ROOT, capture_output=True,
            text=True, timeout=3600, check=True,
        )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ensembles", default="bagging,boosting")
    ap.add_argument("--modes", default="block,subprocess")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    load = os.getloadavg()
    lines = [
        f"# First answer on an empty numba cache ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"`python benchmarks/first_learn.py --ensembles {args.ensembles} --modes {args.modes} "
        f"--repeats {args.repeats}`; {os.cpu_count()} cores, load average "
        f"{load[0]:.1f} at the start (a shared machine); medians of {args.repeats} run(s), "
        "wall seconds from the child's start.",
        "",
        "| model | CHORUS_COMPILE | import | first answer | compiled kernels answer | "
        "answered meanwhile |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for ensemble in args.ensembles.split(","):
        for mode in args.modes.split(","):
            runs = [run(ensemble, mode) for _ in range(args.repeats)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            name = {"bagging": "OnlineBagging", "boosting": "OnlineBoosting"}[ensemble]
            lines.append(f"| {name}(HoeffdingTree()) | {mode} | {med['imported']:.2f} | "
                         f"{med['first']:.2f} | {med['compiled']:.1f} | {med['meanwhile']:.0f} |")  # fmt: skip
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
