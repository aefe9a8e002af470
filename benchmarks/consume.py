"""Throughput of ``chorus consume`` (issue 39) beside batched ``POST /learn``: one model, durability on.

Both sides learn the same stream (river's Agrawal, as ``http_load.py``) into a fresh
OzaBag(HT, 10) (seed 1) on a fresh store, every example appended to the model's log before it is
acknowledged:

- **consume**: ``chorus consume`` as its own process (``--batch 1000``) reading a Redis stream
  (a real ``redis-server``, ``appendfsync everysec``); this process is the producer (``XADD`` in
  pipelines of 1,000). The first 2,000 examples are produced and consumed untimed (a fresh
  process loads its kernels); then the clock runs from the first ``XADD`` of the rest until the
  group has acknowledged the last one.
- **HTTP**: ``chorus serve`` (one uvicorn worker), batched ``POST /learn`` of 1,000 examples a
  request over one connection, the first two requests untimed (``http_load.warm``); and the same
  with an idempotency ``id`` on every example, which is what the consumer's exactly-once costs
  (every message's learn id and answer are stored with its log entry).

Examples/s by the wall clock and per CPU second of the consuming / serving process. Runs
alternate (consume, HTTP, consume, ...); the median is reported.

Usage::

    python benchmarks/consume.py [--n 60000] [--repeats 3] [--store sqlite|redis] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import redis
from http_load import SPEC, agrawal, cpu_seconds, emit, start_chorus, start_redis, warm

from app.testing import ROOT, RedisServer, free_port, stop_process

STREAM = "chorus:examples"
WARM = 2000
BATCH = 1000


def _create(env: dict) -> None:
    """Declare the model in the store of ``env`` (a short-lived server: the consumer has no HTTP)."""
    server = start_chorus(free_port(), env)
    try:
        with httpx.Client(base_url=server.url, trust_env=False) as c:
            c.post("/models", json={"name": "bench", **SPEC}).raise_for_status()
    finally:
        server.stop()


def _acked(r: redis.Redis) -> int:
    """Entries the group has been delivered and acknowledged."""
    for g in r.xinfo_groups(STREAM):
        if g["name"] == b"chorus":
            return int(g["entries-read"] or 0) - int(g["pending"])
    return 0


def _produce(r: redis.Redis, payloads: list[bytes]) -> None:
    for i in range(0, len(payloads), BATCH):
        pipe = r.pipeline(transaction=False)
        for p in payloads[i : i + BATCH]:
            pipe.xadd(STREAM, {"data": p})
        pipe.execute()


def consume_run(stream: list, work: Path, store: str) -> dict:
    """One timed ``chorus consume`` run (see the module's docstring)."""
    bus = RedisServer(work / "bus", fsync="everysec")
    bus.start()
    store_redis = None
    env = {**os.environ, "CHORUS_DATA_DIR": str(work / "data"), "CHORUS_SNAPSHOT_INTERVAL": "30",
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    proc = None
    try:
        if store == "redis":
            store_redis, env["CHORUS_REDIS_URL"] = start_redis(work / "store")
        _create(env)
        r = redis.Redis.from_url(bus.url)
        payloads = [json.dumps({"model": "bench", "features": x, "label": y}).encode()
                    for x, y in stream]  # fmt: skip
        log = (work / "consumer.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "consume", bus.url, "--batch", str(BATCH),
             "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        _produce(r, payloads[:WARM])
        deadline = time.monotonic() + 300
        while _acked(r) < WARM:  # the untimed part: kernels loaded, the model warm
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((work / "consumer.log").read_text()[-2000:])
            time.sleep(0.01)
        cpu0 = cpu_seconds(proc.pid)
        t0 = time.perf_counter()
        _produce(r, payloads[WARM:])
        produced = time.perf_counter() - t0
        while _acked(r) < len(payloads):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((work / "consumer.log").read_text()[-2000:])
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(proc.pid) - cpu0
        n = len(payloads) - WARM
        return {"rps": n / wall, "rps_cpu": n / cpu, "produce_rps": n / produced}
    finally:
        stop_process(proc, 30)
        bus.stop()
        if store_redis is not None:
            store_redis.stop()


def _post_with_ids(url: str, stream: list, pid: int) -> dict:
    """``http_load.warm`` with an idempotency id on every example (what exactly-once costs)."""
    bodies = [json.dumps({"model": "bench", "examples": [
        {"features": x, "label": y, "id": f"e{i + j}"}
        for j, (x, y) in enumerate(stream[i : i + BATCH])]})
        for i in range(0, len(stream), BATCH)]  # fmt: skip
    headers = {"content-type": "application/json"}
    with httpx.Client(base_url=url, trust_env=False, timeout=120) as c:
        for body in bodies[:2]:
            c.post("/learn", content=body, headers=headers).raise_for_status()
        cpu0 = cpu_seconds(pid)
        t0 = time.perf_counter()
        for body in bodies[2:]:
            c.post("/learn", content=body, headers=headers).raise_for_status()
        wall = time.perf_counter() - t0
        n = BATCH * (len(bodies) - 2)
        return {"rps": n / wall, "rps_cpu": n / max(cpu_seconds(pid) - cpu0, 1e-9)}


def http_ids_run(stream: list, work: Path, store: str) -> dict:
    """:func:`http_run` with an id on every example."""
    return http_run(stream, work, store, ids=True)


def http_run(stream: list, work: Path, store: str, ids: bool = False) -> dict:
    """One timed batched ``POST /learn`` run on a fresh server and model."""
    env = {"CHORUS_DATA_DIR": str(work / "data"), "CHORUS_SNAPSHOT_INTERVAL": "30"}
    store_redis = None
    try:
        if store == "redis":
            store_redis, env["CHORUS_REDIS_URL"] = start_redis(work / "store")
        server = start_chorus(free_port(), env)
        try:
            with httpx.Client(base_url=server.url, trust_env=False) as c:
                c.post("/models", json={"name": "bench", **SPEC}).raise_for_status()
            pid = server.proc.pid if server.proc else None
            if ids and pid is not None:
                return _post_with_ids(server.url, stream, pid)
            return warm(server.url, stream, pid=pid)
        finally:
            server.stop()
    finally:
        if store_redis is not None:
            store_redis.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=60_000, help="examples per run (2,000 untimed)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--store", choices=["sqlite", "redis"], default="sqlite")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    stream = agrawal(args.n)
    results: dict[str, list[dict]] = {"consume": [], "http": [], "http_ids": []}
    for run in range(args.repeats):
        for name, fn in (("consume", consume_run), ("http", http_run),
                         ("http_ids", http_ids_run)):  # fmt: skip
            work = Path(tempfile.mkdtemp(prefix="chorus-consume-bench-"))
            try:
                r = fn(stream, work, args.store)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            results[name].append(r)
            emit(f"run {run + 1} {name:8s}: {r['rps']:,.0f} examples/s (wall), "
                 f"{r['rps_cpu']:,.0f} per CPU second of the consuming/serving process")  # fmt: skip
    emit("")
    emit(f"| {args.store} store, OzaBag(HT, 10), {args.n - WARM:,} examples timed | examples/s "
         "(median, wall) | per process CPU second (median) | runs (wall) |")  # fmt: skip
    emit("|---|---|---|---|")
    for name, label in (("consume", "`chorus consume` (Redis Streams, batch 1,000)"),
                        ("http", "batched `POST /learn` (1,000 a request)"),
                        ("http_ids", "batched `POST /learn`, an `id` on every example")):  # fmt: skip
        rs = results[name]
        med = statistics.median(r["rps"] for r in rs)
        cpu = statistics.median(r["rps_cpu"] for r in rs)
        runs = ", ".join(f"{r['rps']:,.0f}" for r in rs)
        emit(f"| {label} | {med:,.0f} | {cpu:,.0f} | {runs} |")
    if args.json:
        args.json.write_text(json.dumps({"store": args.store, "n": args.n, **results}, indent=2))


if __name__ == "__main__":
    main()
