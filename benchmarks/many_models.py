"""Many small models in one server, with and without a memory budget (#11, ``CHORUS_MEMORY_MB``).

A calendar product keeps a model per user per field: tens of thousands of small models, most of
them idle. For each ``--budgets`` value (MB; 0 = no budget) this starts ``chorus serve``'s app
(uvicorn, one worker, the embedded SQLite store) and

1. creates ``--models`` models (OzaBag(NB, 10)) and teaches each ``--examples`` examples of
   river's Agrawal stream in one batched ``POST /learn``; the server's RSS is sampled every
   1,000 models;
2. predicts once on each of ``--cold`` models created first (the least recently used: with a
   budget they were evicted, so each prediction loads its model from the store: a *cold load*),
   then once more on the same models (now loaded: *warm*), and reports p50 / p99 of both.

Reported: RSS at start and end, RSS per model, the models resident at the end, their estimated bytes and the evictions (``GET /metrics``),
the cold/warm latencies. This is a benchmark, not a test: it prints a table (``--out`` writes it).

    nice -n 10 python benchmarks/many_models.py                         # 10,000 models, 0 and 256 MB
    python benchmarks/many_models.py --models 2000 --budgets 0,64       # quick look
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import httpx
from http_load import agrawal, emit, free_port, percentile_ms, rss_mb, start_chorus
from peers import write_result

SPEC = {"ensemble": "bagging", "learner": "naive_bayes", "n_models": 10, "seed": 1}


def run(budget_mb: int, args: argparse.Namespace, workdir: Path) -> dict:
    port = free_port()
    data = workdir / f"b{budget_mb}" / "data"
    data.parent.mkdir(parents=True)
    env = {"CHORUS_DATA_DIR": str(data), "CHORUS_MEMORY_MB": str(budget_mb)}
    proc = start_chorus(port, env)
    rows = agrawal(args.examples + 1000)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=60) as c:
            rss = [rss_mb(proc.proc.pid)]
            t0 = time.perf_counter()
            for m in range(args.models):
                r = c.post("/models", json={"name": f"u{m}", **SPEC})
                assert r.status_code == 201, r.text
                k = (m * 37) % 1000
                batch = [{"features": x, "label": y} for x, y in rows[k : k + args.examples]]
                r = c.post("/learn", json={"model": f"u{m}", "examples": batch})
                assert r.status_code == 200, r.text
                if (m + 1) % 1000 == 0:
                    rss.append(rss_mb(proc.proc.pid))
                    emit(f"  budget {budget_mb} MB: {m + 1:,} models, RSS {rss[-1]:,.0f} MB")
            setup_s = time.perf_counter() - t0
            x = rows[-1][0]
            lat: dict[str, list[float]] = {"cold": [], "warm": []}
            for phase in ("cold", "warm"):
                for m in range(args.cold):
                    t = time.perf_counter()
                    r = c.post("/predict", json={"model": f"u{m}", "features": x})
                    lat[phase].append(time.perf_counter() - t)
                    assert r.status_code == 200, r.text
            time.sleep(2)  # the evictor finishes its pass
            gauges = dict(re.findall(r"^(chorus_models_\w+|chorus_memory_\w+) (\S+)$",
                                     c.get("/metrics").text, re.M))  # fmt: skip
            end_rss = rss_mb(proc.proc.pid)
    finally:
        proc.stop()
    return {
        "budget": budget_mb,
        "rss_start": rss[0],
        "rss_end": end_rss,
        "rss": rss,
        "per_model_kb": (end_rss - rss[0]) * 1024 / args.models,
        "resident": int(float(gauges.get("chorus_models_loaded", "nan"))),
        "estimate_mb": float(gauges.get("chorus_models_bytes", "nan")) / 2**20,
        "evicted": int(float(gauges.get("chorus_models_evicted_total", "nan"))),
        "setup_s": setup_s,
        "cold_p50": percentile_ms(lat["cold"], 0.5),
        "cold_p99": percentile_ms(lat["cold"], 0.99),
        "warm_p50": percentile_ms(lat["warm"], 0.5),
        "warm_p99": percentile_ms(lat["warm"], 0.99),
    }


def report(results: list[dict], args: argparse.Namespace) -> str:
    lines = [
        f"{args.models:,} models OzaBag(NB, 10), {args.examples} Agrawal examples each (one "
        f"batched `POST /learn`), embedded SQLite store, one uvicorn worker; then `POST /predict` "
        f"on the {args.cold:,} least recently used models (cold: loaded from the store when the "
        "budget had evicted them) and again on the same models (warm).",
        "",
        "| CHORUS_MEMORY_MB | RSS start | RSS end | RSS per model | models resident (estimate) | "
        "evicted | cold p50 | cold p99 | warm p50 | warm p99 | set-up |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['budget'] or 'none'} | {r['rss_start']:,.0f} MB | {r['rss_end']:,.0f} MB | "
            f"{r['per_model_kb']:,.1f} KiB | {r['resident']:,} ({r['estimate_mb']:,.0f} MiB) "
            f"| {r['evicted']:,} | {r['cold_p50']:.1f} ms | {r['cold_p99']:.1f} ms | {r['warm_p50']:.1f} ms | "
            f"{r['warm_p99']:.1f} ms | {r['setup_s']:.0f} s |"
        )
    lines += ["", "RSS (MB) every 1,000 models:", ""]
    for r in results:
        lines.append(f"- budget {r['budget'] or 'none'}: " + " ".join(f"{v:.0f}" for v in r["rss"]))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=10_000)
    ap.add_argument("--examples", type=int, default=300)
    ap.add_argument("--budgets", default="0,256", help="CHORUS_MEMORY_MB values, 0 = none")
    ap.add_argument("--cold", type=int, default=500, help="models predicted cold then warm")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="chorus-many-") as tmp:
        results = [run(int(b), args, Path(tmp)) for b in args.budgets.split(",")]
    text = report(results, args)
    emit(text)
    if args.out:
        write_result(args.out, "Many models, memory budget (#11)", "many_models.py",
                     sys.argv[1:], text)  # fmt: skip


if __name__ == "__main__":
    main()
