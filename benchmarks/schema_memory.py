"""Does the memory budget's gauge match RSS when models hold long names? (issue 42, item 8; a
benchmark, not a test: it prints a table).

Starts one Chorus server (SQLite, no budget), creates ``--models`` OzaBag(HT, 10) models, each
learning ``--examples`` examples of ``--features`` numeric features with ``--name``-character
names (the issue: 200 models, 972 features, 3,600 characters), and prints the server's RSS growth,
the budget's gauge (``chorus_models_bytes``), the names' total length and one model's
``state_bytes``.

Usage::

    python benchmarks/schema_memory.py [--models 40] [--features 972] [--name 3600]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

import httpx

from app.testing import ChorusServer

SPEC = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 10, "seed": 1}


def rss_mb(pid: int) -> float:
    """Resident memory of a process (MB), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 2**10
    return 0.0


def gauge(c: httpx.Client, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", c.get("/metrics").text, re.M)
    return float(m.group(1)) if m else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=40)
    ap.add_argument("--features", type=int, default=972)
    ap.add_argument("--name", type=int, default=3600, help="characters of each feature name")
    ap.add_argument("--examples", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="chorus-schema-mem-"))
    env = {"CHORUS_DATA_DIR": str(work / "data"), "CHORUS_SNAPSHOT_INTERVAL": "3600"}
    server = ChorusServer(env, log=work / "server.log", access_log=False)
    try:
        server.start(timeout=300)
        pid = server.proc.pid
        with httpx.Client(base_url=server.url, trust_env=False, timeout=300) as c:
            c.post("/models", json={"name": "warm", **SPEC}).raise_for_status()
            c.post("/learn", json={"model": "warm", "features": {"x": 1.0}, "label": "a"})
            rss0 = rss_mb(pid)
            for m in range(args.models):
                name = f"wide{m}"
                c.post("/models", json={"name": name, **SPEC}).raise_for_status()
                names = [
                    (f"m{m}-f{j}-" + "n" * args.name)[: args.name] for j in range(args.features)
                ]
                for i in range(args.examples):
                    x = {f: float((i + j) % 5) for j, f in enumerate(names)}
                    r = c.post("/learn", json={"model": name, "features": x, "label": "ab"[i % 2]})
                    r.raise_for_status()
            rss1 = rss_mb(pid)
            held = gauge(c, "chorus_models_bytes") / 2**20
            state = c.get("/models/wide0").json()["state_bytes"]
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    text = args.models * args.features * args.name / 2**20
    sys.stdout.write(
        f"{args.models} models x {args.features} features of {args.name}-character names, "
        f"{args.examples} examples each\n\n"
        "| RSS growth MB | gauge MB (all models) | names MB | gauge / RSS growth | "
        "state_bytes of one model |\n|---|---|---|---|---|\n"
        f"| {rss1 - rss0:,.1f} | {held:,.1f} | {text:,.1f} | {held / (rss1 - rss0):.2f} "
        f"| {state:,} |\n"
    )


if __name__ == "__main__":
    main()
