"""Does one request stall the others? (issue 42, item 7; a benchmark, not a test: it prints a table).

Runs one Chorus server (``uvicorn app.main:app_factory``, one worker, SQLite, default limits)
with three OzaBag(HT, 10) models and measures another model's latency while one client loads
the server:

- **big batch**: one client sends ``POST /learn`` batches of 250 examples x 1,000 numeric
  features (~3 MB of JSON each) to model ``big``, back to back;
- **growing**: one client grows model ``grow`` (batches of 50 examples of 20 categorical
  features, every value new) as fast as the server answers.

Meanwhile a prober sends ``GET /predict`` to model ``other`` and ``GET /healthz``, one at a time
(a new request as soon as the last answered), and this prints their p50 / p99 / max latency
per scenario, the loader's own request times, and the status codes it got.

Usage::

    python benchmarks/stall.py [--seconds 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from app.testing import ChorusServer

SPEC = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 10, "seed": 1}


def emit(text: str) -> None:
    """Write a line of the report to stdout."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` in milliseconds (nearest rank)."""
    if not values:
        return float("nan")
    s = sorted(values)
    return 1000 * s[min(len(s) - 1, int(q * len(s)))]


def big_batch(rng: random.Random, n: int = 250, d: int = 1000) -> dict:
    """250 examples x 1,000 numeric features (~3 MB of JSON), two classes."""
    exs = []
    for _ in range(n):
        x = {f"f{j}": round(rng.random(), 2) for j in range(d)}
        exs.append({"features": x, "label": "a" if x["f0"] > 0.5 else "b"})
    return {"model": "big", "examples": exs}


def growing_batch(rng: random.Random, step: int, n: int = 50, d: int = 20) -> dict:
    """``n`` examples of ``d`` categorical features, every value one the model has not seen
    (its codes and its leaves' statistics grow with every batch), and one numeric feature."""
    exs = []
    for i in range(n):
        x = {f"c{j}": f"v{step}-{i}-{j}" for j in range(d)}
        x["x"] = rng.random()
        exs.append({"features": x, "label": rng.choice("abc")})
    return {"model": "grow", "examples": exs}


def probe(url: str, stop: threading.Event, out: dict[str, list[float]]) -> None:
    """Alternate ``GET /predict`` on model ``other`` and ``GET /healthz`` until ``stop``."""
    with httpx.Client(base_url=url, trust_env=False, timeout=120) as c:
        while not stop.is_set():
            for key, path in (("predict", "/predict?model=other&x=0.3&y=0.7"),
                              ("healthz", "/healthz")):  # fmt: skip
                t0 = time.perf_counter()
                r = c.get(path)
                out[key].append(time.perf_counter() - t0)
                out.setdefault(f"status {r.status_code}", []).append(0.0)


def scenario(url: str, name: str, seconds: float, make_body) -> dict:
    """Load the server with ``make_body(step)`` requests for ``seconds`` while probing."""
    lat: dict[str, list[float]] = {"predict": [], "healthz": []}
    stop = threading.Event()
    prober = threading.Thread(target=probe, args=(url, stop, lat))
    loads, codes = [], {}
    with httpx.Client(base_url=url, trust_env=False, timeout=300) as c:
        prober.start()
        time.sleep(0.5)
        t_end = time.monotonic() + seconds
        step = 0
        while time.monotonic() < t_end:
            body = make_body(step)
            t0 = time.perf_counter()
            r = c.post("/learn", content=json.dumps(body, separators=(",", ":")),
                       headers={"Content-Type": "application/json"})  # fmt: skip
            loads.append(time.perf_counter() - t0)
            codes[r.status_code] = codes.get(r.status_code, 0) + 1
            if r.status_code != 200 and codes[r.status_code] == 1:
                emit(f"  {name}: {r.status_code} {r.text[:300]}")
            step += 1
        stop.set()
        prober.join()
    res = {"scenario": name, "loader_requests": len(loads), "loader_codes": codes,
           "loader_p50_ms": pct(loads, 0.5), "loader_max_ms": pct(loads, 1.0)}  # fmt: skip
    for key in ("predict", "healthz"):
        v = lat[key]
        res[key] = {"n": len(v), "p50_ms": pct(v, 0.5), "p99_ms": pct(v, 0.99),
                    "max_ms": pct(v, 1.0)}  # fmt: skip
    res["probe_codes"] = {k: len(v) for k, v in lat.items() if k.startswith("status")}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=15.0, help="load time per scenario")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="chorus-stall-"))
    env = {"CHORUS_DATA_DIR": str(work / "data"), "CHORUS_SNAPSHOT_INTERVAL": "3600"}
    server = ChorusServer(env, log=work / "server.log", access_log=False)
    rows = []
    try:
        server.start(timeout=300)
        rng = random.Random(7)
        with httpx.Client(base_url=server.url, trust_env=False, timeout=120) as c:
            for name in ("big", "other", "grow"):
                c.post("/models", json={"name": name, **SPEC}).raise_for_status()
            exs = [{"features": {"x": rng.random(), "y": rng.random()}, "label": rng.choice("ab")}
                   for _ in range(500)]  # fmt: skip
            c.post("/learn", json={"model": "other", "examples": exs}).raise_for_status()
        rows.append(scenario(server.url, "idle (no load)", min(3.0, args.seconds),
                             lambda step: {"model": "other", "features": {"x": 0.5, "y": 0.5},
                                           "label": "a"}))  # fmt: skip
        batch = big_batch(rng)
        emit(f"big batch body: {len(json.dumps(batch, separators=(',', ':'))):,} bytes")
        rows.append(scenario(server.url, "3 MB batch (250 x 1,000)", args.seconds,
                             lambda step: batch))  # fmt: skip
        rows.append(scenario(server.url, "growing one model", args.seconds,
                             lambda step: growing_batch(rng, step)))  # fmt: skip
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    for r in rows:
        emit(json.dumps(r))
    emit("\n| scenario | loader requests (codes) | loader p50 ms | other's /predict p50 / p99 / "
         "max ms | /healthz p50 / p99 / max ms |")  # fmt: skip
    emit("|---|---|---|---|---|")
    for r in rows:
        p, h = r["predict"], r["healthz"]
        emit(f"| {r['scenario']} | {r['loader_requests']} {r['loader_codes']} "
             f"| {r['loader_p50_ms']:.0f} | {p['p50_ms']:.1f} / {p['p99_ms']:.1f} / "
             f"{p['max_ms']:.1f} | {h['p50_ms']:.1f} / {h['p99_ms']:.1f} / {h['max_ms']:.1f} |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
