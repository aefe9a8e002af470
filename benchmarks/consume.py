"""Throughput of ``chorus consume`` (issue 39) beside batched ``POST /learn``: one model, durable.

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

Examples/s by the wall clock and per CPU second of the consuming / serving process (the bus's
redis-server's CPU seconds are reported beside, not counted in). Runs alternate (consume, HTTP,
consume, ...); the median is reported, with the load average at the start of each run.

``--baseline CHECKOUT`` runs the consumer of another checkout too (``consume_base``, an A/B of
the consumer's code on the same machine and load; the runs' order flips every repeat).
``--profile DIR`` records the consumer's timed part with py-spy (``DIR/consume-<run>.txt``,
collapsed stacks) and prints where its samples went (:func:`profile_summary`).

Usage::

    python benchmarks/consume.py [--n 60000] [--repeats 3] [--store sqlite|redis] [--only consume]
                                 [--baseline CHECKOUT] [--profile DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import redis
from http_load import SPEC, agrawal, cpu_seconds, emit, start_chorus, start_redis, warm

from app.testing import ROOT, RedisServer, free_port, start_consumer, stop_process, with_registry

STREAM = "chorus:examples"
WARM = 2000
BATCH = 1000


def _create(env: dict) -> None:
    """Declare the model in the store of ``env`` (in this process: the consumer has no HTTP)."""
    from app.settings import Settings

    settings = Settings(
        data_dir=env["CHORUS_DATA_DIR"], redis_url=env.get("CHORUS_REDIS_URL") or None
    )
    with_registry(settings, create={"bench": SPEC})


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


def _load() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def consume_run(stream: list, work: Path, store: str, profile: Path | None = None,
                checkout: Path = ROOT) -> dict:  # fmt: skip
    """One timed ``chorus consume`` run (see the module's docstring); with ``profile``, py-spy
    records the consumer's timed part into that file; ``checkout``: the consumer's code."""
    bus = RedisServer(work / "bus", fsync="everysec")
    bus.start()
    store_redis = None
    env = {"CHORUS_DATA_DIR": str(work / "data"), "CHORUS_SNAPSHOT_INTERVAL": "30"}
    proc = spy = None
    try:
        if store == "redis":
            store_redis, env["CHORUS_REDIS_URL"] = start_redis(work / "store")
        _create(env)
        r = redis.Redis.from_url(bus.url)
        payloads = [json.dumps({"model": "bench", "features": x, "label": y}).encode()
                    for x, y in stream]  # fmt: skip
        proc = start_consumer(bus.url, env, "--batch", str(BATCH), "--log-level", "warning",
                              log=work / "consumer.log", checkout=checkout)  # fmt: skip
        _produce(r, payloads[:WARM])
        deadline = time.monotonic() + 300
        while _acked(r) < WARM:  # the untimed part: kernels loaded, the model warm
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((work / "consumer.log").read_text()[-2000:])
            time.sleep(0.01)
        if profile is not None:
            spy = subprocess.Popen(["py-spy", "record", "--pid", str(proc.pid), "--rate", "250",
                                    "--format", "raw", "--nonblocking", "--threads", "-o",
                                    str(profile)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)  # fmt: skip
            time.sleep(1.0)  # py-spy attaches
        load = _load()
        cpu0, bus0 = cpu_seconds(proc.pid), cpu_seconds(bus.proc.pid)  # type: ignore[union-attr]
        t0 = time.perf_counter()
        _produce(r, payloads[WARM:])
        produced = time.perf_counter() - t0
        while _acked(r) < len(payloads):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((work / "consumer.log").read_text()[-2000:])
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(proc.pid) - cpu0
        bus_cpu = cpu_seconds(bus.proc.pid) - bus0  # type: ignore[union-attr]
        n = len(payloads) - WARM
        return {"rps": n / wall, "rps_cpu": n / cpu, "produce_rps": n / produced,
                "bus_cpu_us": 1e6 * bus_cpu / n, "load": load}  # fmt: skip
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
        stop_process(proc, 30)
        bus.stop()
        if store_redis is not None:
            store_redis.stop()


def _function(frame: str) -> str:
    """``name (file.py)`` of a py-spy frame ``name (path/file.py:line)``."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit('/', 1)[-1].split(':')[0].rstrip(')')})"


def profile_summary(path: Path, top: int = 25) -> list[str]:
    """Where the samples of a py-spy raw profile went: the share of the samples of the
    consumer's process (all its threads, idle ones excluded) each function is on the stack of
    (inclusive) and on the top of (self), the ``top`` largest by self share."""
    self_n: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = [_function(f) for f in stack.split(";")[1:]]  # [0]: the thread
        for f in set(frames):
            incl[f] = incl.get(f, 0) + n
        if frames:
            self_n[frames[-1]] = self_n.get(frames[-1], 0) + n
    lines = [f"{total} samples; self% incl% function"]
    for f, n in sorted(self_n.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{100 * n / total:5.1f} {100 * incl[f] / total:5.1f}  {f}")
    return lines


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
    load = _load()
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
                return _post_with_ids(server.url, stream, pid) | {"load": load}
            return warm(server.url, stream, pid=pid) | {"load": load}
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
    p.add_argument(
        "--only", choices=["consume", "http", "http_ids", "consume_base"], action="append"
    )
    p.add_argument("--profile", type=Path, default=None, help="py-spy the consumer into DIR")
    p.add_argument("--baseline", type=Path, default=None,
                   help="another checkout: its consumer runs too, alternated (consume_base)")  # fmt: skip
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    stream = agrawal(args.n)
    sides = {"consume": consume_run, "http": http_run, "http_ids": http_ids_run}
    if args.baseline is not None:
        base = args.baseline.resolve()
        sides["consume_base"] = lambda s, w, st: consume_run(s, w, st, checkout=base)
    results: dict[str, list[dict]] = {name: [] for name in args.only or sides}
    if args.baseline is not None and "consume_base" not in results:
        results["consume_base"] = []
    for run in range(args.repeats):
        for name in list(results) if run % 2 == 0 else list(results)[::-1]:  # alternated
            work = Path(tempfile.mkdtemp(prefix="chorus-consume-bench-"))
            spy = None
            try:
                if name == "consume" and args.profile is not None:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    spy = args.profile / f"consume-{run + 1}.txt"
                    r = consume_run(stream, work, args.store, spy)
                else:
                    r = sides[name](stream, work, args.store)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            results[name].append(r)
            bus = f", bus {r['bus_cpu_us']:.1f} CPU us/example" if "bus_cpu_us" in r else ""
            emit(f"run {run + 1} {name:8s}: {r['rps']:,.0f} examples/s (wall), "
                 f"{r['rps_cpu']:,.0f} per CPU second of the consuming/serving process{bus} "
                 f"(load {r['load']:.1f})")  # fmt: skip
            if spy is not None and spy.exists():
                for line in profile_summary(spy):
                    emit("    " + line)
    emit("")
    emit(f"| {args.store} store, OzaBag(HT, 10), {args.n - WARM:,} examples timed | examples/s "
         "(median, wall) | per process CPU second (median) | runs (wall) | load |")  # fmt: skip
    emit("|---|---|---|---|---|")
    labels = {"consume": "`chorus consume` (Redis Streams, batch 1,000)",
              "http": "batched `POST /learn` (1,000 a request)",
              "http_ids": "batched `POST /learn`, an `id` on every example",
              "consume_base": f"`chorus consume` of {args.baseline} (batch 1,000)"}  # fmt: skip
    for name, rs in results.items():
        med = statistics.median(r["rps"] for r in rs)
        cpu = statistics.median(r["rps_cpu"] for r in rs)
        runs = ", ".join(f"{r['rps']:,.0f}" for r in rs)
        loads = ", ".join(f"{r['load']:.1f}" for r in rs)
        emit(f"| {labels[name]} | {med:,.0f} | {cpu:,.0f} | {runs} | {loads} |")
    if args.json:
        args.json.write_text(json.dumps({"store": args.store, "n": args.n, **results}, indent=2))


if __name__ == "__main__":
    main()
