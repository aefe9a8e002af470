"""Mixed learn/predict load on a local 3-master Redis Cluster, 1 then 2 Chorus instances (#15).

Starts the cluster (the tests' ``RedisCluster``: three ``redis-server --cluster-enabled yes`` +
``redis-cli --cluster create``, AOF ``appendfsync everysec`` as deployed), then for each instance
count N: N ``uvicorn`` instances with ``CHORUS_SHARED_STORE=true`` on a fresh cluster database,
the deploy's nginx config (``deploy/nginx-cluster.conf``: routing by model name, from the
``X-Chorus-Model`` header) in front of them, ``--models`` models (OzaBag(HT, 5)) each warmed with
a few examples, then load from ``wrk`` running ``benchmarks/load_mixed.lua``: every request
picks a random model and is ``POST /learn`` (one example, with a new id) with probability
``--learn`` else ``POST /predict``.

1. capacity: closed loops (``wrk -c C``, no pause) for ``--probe`` seconds each, C from
   ``--steps``; the capacity is the highest throughput whose p99 is within ``--p99-limit`` ms;
2. load (``--duration`` > 0): ``--fraction`` of that capacity, paced (each connection pauses an
   exponentially distributed time before each request), with RSS sampled every 5 s.

Reported for every run: requests/s, p50/p99, errors (anything but 200, and socket errors), and
the CPU (user+sys seconds / wall seconds) of every process: instances, Redis masters, nginx and
the load generator (wrk's own rusage). From the per-request CPU of the instances the report
models what N instances on N free cores would give.

Usage::

    nice -n 10 python benchmarks/load.py [--models 1000] [--probe 10] [--steps 2,4,8,16,32,64]
        [--duration 0] [--instances 1,2] [--fraction 0.8] [--out results.md]

Everything runs on this machine's cores (client, nginx, Redis and Chorus share them); the CPU
columns say who used what.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import RedisCluster  # noqa: E402  (the tests' real-cluster helper)
from http_load import TICK, agrawal, cpu_seconds, emit, free_port, rss_mb, start_chorus  # noqa: E402
from peers import write_result  # noqa: E402

from app.testing import DeployNginx  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LUA = Path(__file__).resolve().parent / "load_mixed.lua"
SPEC = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 5, "seed": 1}


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent outside idle and iowait so far (``/proc/stat``)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK


def children(pid: int) -> list[int]:
    """Direct children of a process (nginx's workers)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


class Nginx(DeployNginx):
    """The deploy's nginx in front of ``ports``, started, with its processes for CPU accounting."""

    def __init__(self, ports: list[int], directory: Path) -> None:
        super().__init__(ports, directory)
        self.start()

    def pids(self) -> list[int]:
        assert self.proc is not None
        return [self.proc.pid, *children(self.proc.pid)]


def run_wrk(url: str, conns: int, seconds: float, args, run_id: str, watched: dict[str, list[int]],
            rate_per_conn: float = 0.0) -> dict:  # fmt: skip
    """One wrk run of the mixed load; its summary and the CPU (cores) of each group of
    ``watched`` processes, plus ``client`` (wrk's own rusage)."""
    cmd = ["wrk", "-t", str(args.wrk_threads), "-c", str(conns), "-d", f"{seconds:g}s",
           "--timeout", "10s", "-s", str(LUA), url, "--", str(args.rows_file), str(args.models),
           str(args.learn), run_id]  # fmt: skip
    if rate_per_conn:
        cmd.append(f"{rate_per_conn:g}")
    cpu0 = {g: sum(cpu_seconds(p) for p in pids) for g, pids in watched.items()}
    busy0 = machine_busy_seconds()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    cpu = {g: (sum(cpu_seconds(p) for p in pids) - cpu0[g]) / wall for g, pids in watched.items()}
    cpu["client"] = (usage.ru_utime + usage.ru_stime) / wall
    cpu["machine"] = (machine_busy_seconds() - busy0) / wall  # every process, ours or not
    m = re.search(r"^JSON (.*)$", out, re.M)
    if proc.returncode or not m:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {out}\n{err}")
    res = json.loads(m.group(1))
    res.update(conns=conns, rps=res["requests"] / res["seconds"], cpu=cpu)
    res["ok_rps"] = (res["requests"] - res["non200"]) / res["seconds"]
    return res


def setup_models(url: str, args) -> None:
    with httpx.Client(base_url=url, trust_env=False, timeout=30) as c:
        for m in range(args.models):
            r = c.post("/models", json={"name": f"u{m}", **SPEC})
            assert r.status_code == 201, r.text
            batch = [{"features": x, "label": y} for x, y in args.rows[m % 50 : m % 50 + 20]]
            assert c.post("/learn", json={"model": f"u{m}", "examples": batch}).status_code == 200


def run_config(n: int, cluster: RedisCluster, args, workdir: Path) -> dict:
    cluster.flushall()
    env = {
        "CHORUS_REDIS_URL": cluster.url,
        "CHORUS_SHARED_STORE": "true",
        "CHORUS_SNAPSHOT_EVERY": "1000",
        "CHORUS_STARTUP_TIMEOUT": "60",
    }
    procs = []
    nginx = None
    try:
        for k in range(n):
            d = workdir / f"n{n}-i{k}"
            d.mkdir(parents=True)
            procs.append(start_chorus(free_port(), {**env, "CHORUS_DATA_DIR": str(d / "data")}))
        nginx = Nginx([p.port for p in procs], workdir / f"n{n}-nginx")
        setup_models(procs[0].url, args)
        watched = {
            "instances": [p.proc.pid for p in procs],
            "redis": [node.proc.pid for node in cluster.nodes if node.proc],
            "nginx": nginx.pids(),
        }
        per_instance = {f"i{k}": [p.proc.pid] for k, p in enumerate(procs)}
        steps = []
        for conns in (int(c) for c in args.steps.split(",")):
            r = run_wrk(nginx.url, conns, args.probe, args, f"n{n}c{conns}",
                        {**watched, **per_instance})  # fmt: skip
            steps.append(r)
            emit(f"N={n} c={conns}: {r['rps']:,.0f} req/s, p50 {r['p50_ms']:.1f} ms, p99 "
                 f"{r['p99_ms']:.1f} ms, non-200 {r['non200']}, CPU "
                 + ", ".join(f"{g} {v:.2f}" for g, v in r["cpu"].items()))  # fmt: skip
        within = [r for r in steps if r["p99_ms"] <= args.p99_limit and not r["non200"]]
        best = max(within or steps, key=lambda r: r["ok_rps"])
        result = {"n": n, "steps": steps, "capacity": best, "within": bool(within)}
        if args.duration > 0:
            rate = args.fraction * best["ok_rps"]
            conns = 4 * best["conns"]  # pauses, not connections, set the pace
            rss: list[list[float]] = []
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    rss.append([rss_mb(p.proc.pid) for p in procs])
                    stop.wait(5)

            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                load = run_wrk(nginx.url, conns, args.duration, args, f"n{n}load",
                               {**watched, **per_instance}, rate_per_conn=rate / conns)  # fmt: skip
            finally:
                stop.set()
                sampler.join()
            rss.append([rss_mb(p.proc.pid) for p in procs])
            result.update(load=load, offered=rate, rss=rss)
        return result
    finally:
        if nginx is not None:
            nginx.stop()
        for p in procs:
            p.stop()


def _cpu_cells(r: dict, n: int) -> str:
    per = " + ".join(f"{r['cpu'][f'i{k}']:.2f}" for k in range(n))
    c = r["cpu"]
    ours = c["instances"] + c["redis"] + c["nginx"] + c["client"]
    return (
        f"{per} | {c['redis']:.2f} | {c['nginx']:.2f} | {c['client']:.2f} "
        f"| {c['machine']:.2f} ({max(0.0, c['machine'] - ours):.2f})"
    )


def report(results: list[dict], args) -> str:
    lines = [
        f"{args.models:,} models (OzaBag(HT, 5)); requests {args.learn:.0%} single-example "
        f"`POST /learn` (each with a new id) / {1 - args.learn:.0%} `POST /predict` on a random "
        "model, generated by wrk (`benchmarks/load_mixed.lua`, "
        f"{args.wrk_threads} thread) through nginx with the deploy's config (routing by model "
        f"name). Closed loops of {args.probe:g} s per connection count; capacity = the highest "
        f"throughput with p99 <= {args.p99_limit:g} ms and no errors. Everything (3 Redis "
        "masters with AOF `appendfsync everysec`, the instances, nginx, wrk) shares the "
        f"machine's {os.cpu_count()} cores. CPU in cores (CPU seconds per wall second); "
        "*machine busy* is every process's (from `/proc/stat`), *others* the part not ours "
        "(other work on the shared machine).",
        "",
        "| instances | connections | req/s | p50 ms | p99 ms | errors | CPU per instance "
        "| Redis CPU | nginx CPU | client (wrk) CPU | machine busy (others) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for r in res["steps"]:
            mark = " **capacity**" if r is res["capacity"] else ""
            errors = r["non200"] + r["socket_errors"]
            lines.append(
                f"| {res['n']} | {r['conns']}{mark} | {r['rps']:,.0f} | {r['p50_ms']:.1f} "
                f"| {r['p99_ms']:.1f} | {errors} | {_cpu_cells(r, res['n'])} |"
            )
    if any("load" in res for res in results):
        lines += [
            "",
            f"Paced load at {args.fraction:.0%} of capacity for {args.duration:g} s:",
            "",
            "| instances | offered req/s | served req/s | p50 ms | p99 ms | errors "
            "| CPU per instance | Redis CPU | nginx CPU | client (wrk) CPU "
            "| machine busy (others) | RSS MB start -> end |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for res in results:
            if "load" not in res:
                continue
            r = res["load"]
            rss = ", ".join(
                f"{res['rss'][0][k]:.0f} -> {res['rss'][-1][k]:.0f}" for k in range(res["n"])
            )
            lines.append(
                f"| {res['n']} | {res['offered']:,.0f} | {r['ok_rps']:,.0f} | {r['p50_ms']:.1f} "
                f"| {r['p99_ms']:.1f} | {r['non200'] + r['socket_errors']} "
                f"| {_cpu_cells(r, res['n'])} | {rss} |"
            )
    lines += ["", "## Model: N instances on N free cores", ""]
    for res in results:
        r = res["capacity"]
        inst = sum(r["cpu"][f"i{k}"] for k in range(res["n"]))
        lines.append(
            f"- N={res['n']} at capacity: {r['ok_rps']:,.0f} req/s with {inst:.2f} instance "
            f"cores -> {1e6 * inst / r['ok_rps']:.0f} µs of instance CPU per request "
            f"({r['ok_rps'] / inst:,.0f} req/s per busy instance core); Redis "
            f"{1e6 * r['cpu']['redis'] / r['ok_rps']:.0f} µs, nginx "
            f"{1e6 * r['cpu']['nginx'] / r['ok_rps']:.0f} µs, wrk "
            f"{1e6 * r['cpu']['client'] / r['ok_rps']:.0f} µs per request."
        )
    base = results[0]["capacity"]
    n0 = results[0]["n"]
    inst_us = 1e6 * sum(base["cpu"][f"i{k}"] for k in range(n0)) / base["ok_rps"]
    redis_us = 1e6 * base["cpu"]["redis"] / base["ok_rps"]
    nginx_us = 1e6 * base["cpu"]["nginx"] / base["ok_rps"]
    per_core = 1e6 / inst_us
    lines += [
        "",
        f"With one free core per instance (and Redis, nginx and the clients elsewhere), N "
        f"instances serve about N x {per_core:,.0f} req/s (N={n0}'s instance CPU per request), "
        f"and need {redis_us * per_core / 1e6:.2f} x N Redis cores (spread over the masters by "
        f"model) and {nginx_us * per_core / 1e6:.2f} x N nginx cores: e.g. 4 instances "
        f"~{4 * per_core:,.0f} req/s with ~{4 * redis_us * per_core / 1e6:.1f} Redis cores.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--probe", type=float, default=10)
    ap.add_argument("--steps", default="2,4,8,16,32,64", help="wrk connection counts to try")
    ap.add_argument("--p99-limit", type=float, default=50.0, help="acceptable p99 (ms)")
    ap.add_argument("--duration", type=float, default=0, help="paced load after the search (s)")
    ap.add_argument("--instances", default="1,2")
    ap.add_argument("--fraction", type=float, default=0.8)
    ap.add_argument("--learn", type=float, default=0.8)
    ap.add_argument("--wrk-threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (apt-get install wrk)")
    args.rows = agrawal(2000)
    with tempfile.TemporaryDirectory(prefix="chorus-load-") as tmp:
        args.rows_file = Path(tmp) / "rows.tsv"
        args.rows_file.write_text(
            "".join(f"{json.dumps(x)}\t{json.dumps(y)}\n" for x, y in args.rows)
        )
        cluster = RedisCluster(Path(tmp) / "cluster")
        for node in cluster.nodes:  # the deploy's fsync policy (the tests' is "always")
            node.extra = (*node.extra, "--appendfsync", "everysec")
        cluster.start()
        try:
            results = [
                run_config(int(n), cluster, args, Path(tmp)) for n in args.instances.split(",")
            ]
        finally:
            cluster.stop()
    text = report(results, args)
    emit(text)
    if args.out:
        write_result(args.out, "Load on Redis Cluster (#15)", "load.py", sys.argv[1:], text)


if __name__ == "__main__":
    main()
