"""Chorus against another checkout of itself (A/B), on ``peers.py``'s stream and loops.

A speed change is measured against the code before it, on the same machine in the same minutes,
runs alternated (A, B, A, B, ...) so that a busy machine slows both alike. Each run is a fresh
process importing ``learners`` and ``ensembles`` from its checkout; each cell is the fastest of
``--repeat`` loops by the timing thread's CPU time. Accuracy is printed too: a change meant to be
exact must leave it unchanged in every cell.

Make the other checkout with ``git worktree add /tmp/base <commit>`` (its numba cache is its own:
the first run compiles). From the repository root::

    python benchmarks/ab.py --base /tmp/base                       # batch and per example
    python benchmarks/ab.py --base /tmp/base --modes batch --models nb,bag_nb --rounds 3
    python benchmarks/ab.py --base /tmp/base --stream nominal      # another of peers.STREAMS
    python benchmarks/ab.py --base /tmp/base --modes one --stream sea --models ht,bag_adwin

``--stream`` is one of ``peers.py``'s streams or ``sea`` (river's ``SEA(variant=0, seed=7)``: 3
numeric features, where the per-call Python is most of an example); ``--models`` are
``peers.chorus_factories`` names and ``bag_adwin`` (ADWIN bagging, MOA's OzaBagAdwin, 10 trees).

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def make_stream(peers, kind: str, n: int) -> list:
    if kind != "sea":
        return peers.make_stream(n, kind=kind)
    from river import datasets

    return [({f"x{k}": v for k, v in x.items()}, y)
            for x, y in datasets.synth.SEA(variant=0, seed=7).take(n)]  # fmt: skip


def measure(root: str, mode: str, models: list[str], n: int, repeat: int, kind: str) -> dict:
    """In this process (``root`` first on the path): ``{model: [ex/s, accuracy]}``."""
    sys.path[:0] = [root, str(Path(root) / "benchmarks")]
    import peers

    import learners

    if not learners.__file__.startswith(str(Path(root).resolve())):
        raise SystemExit(f"imported {learners.__file__}, not {root}'s learners")
    stream = make_stream(peers, kind, n)
    factories = peers.chorus_factories(10, 1, peers.DELTA)

    def bag_adwin():
        from ensembles import OnlineBagging

        return OnlineBagging(learners.HoeffdingTree(), n_models=10, seed=1, drift="adwin")

    factories["bag_adwin"] = bag_adwin
    peers.loop_one(factories[models[0]](), stream[:500])  # load the kernels before timing
    out = {}
    for name in models:
        best = None
        for _ in range(repeat):
            model = factories[name]()
            r = (peers.loop_batch(model, stream, 1000) if mode == "batch"
                 else peers.loop_one(model, stream))  # fmt: skip
            best = r if best is None or r.cpu_s < best.cpu_s else best
        assert best is not None
        out[name] = [best.n / best.cpu_s, best.correct / best.n]
    return out


def run_child(root: str, mode: str, models: str, n: int, repeat: int, kind: str) -> dict:
    cmd = [sys.executable, __file__, "--child", root, "--modes", mode, "--models", models,
           "--n", str(n), "--repeat", str(repeat), "--stream", kind]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", help="the other checkout (A)")
    p.add_argument("--new", default=str(ROOT), help="this checkout (B; default: this one)")
    p.add_argument("--models", default="nb,ht,bag_nb,bag_ht,boost_ht",
                   help="comma list of peers.chorus_factories names")  # fmt: skip
    p.add_argument("--modes", default="batch,one", help="batch (1,000 a call), one, or both")
    p.add_argument("--n", type=int, default=20_000, help="examples in the stream (20000)")
    p.add_argument("--repeat", type=int, default=3, help="loops per cell, fastest kept (3)")
    p.add_argument("--rounds", type=int, default=2, help="A/B alternations (2)")
    p.add_argument("--stream", default="agrawal", help="one of peers.STREAMS or sea (agrawal)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(measure(a.child, a.modes, a.models.split(","), a.n, a.repeat, a.stream)))
        return
    if not a.base:
        p.error("--base is required")
    models = a.models.split(",")
    for mode in a.modes.split(","):
        got: dict[str, list] = {"A": [], "B": []}
        for i in range(a.rounds):
            for tag, root in (("A", a.base), ("B", a.new)):
                got[tag].append(run_child(root, mode, a.models, a.n, a.repeat, a.stream))
                print(f"# {mode} round {i + 1} {tag} done", file=sys.stderr, flush=True)
        print(
            f"\n{mode}, {a.stream}: A = {a.base}, B = {a.new} (ex/s by CPU time, range over rounds)\n"
        )
        print("| model | A | B | B/A (medians) | accuracy A / B |")
        print("|---|---|---|---|---|")
        for name in models:
            ra = sorted(r[name][0] for r in got["A"])
            rb = sorted(r[name][0] for r in got["B"])
            acc = f"{got['A'][0][name][1]:.4f} / {got['B'][0][name][1]:.4f}"
            ratio = rb[len(rb) // 2] / ra[len(ra) // 2]
            print(f"| {name} | {ra[0] / 1e3:.1f}-{ra[-1] / 1e3:.1f}k | "
                  f"{rb[0] / 1e3:.1f}-{rb[-1] / 1e3:.1f}k | {ratio:.2f}× | {acc} |")  # fmt: skip


if __name__ == "__main__":
    main()
