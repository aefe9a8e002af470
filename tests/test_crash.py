"""Fault injection: ``kill -9`` the server mid-stream, restart Redis from its AOF, take Redis away.

The server runs as a real subprocess (uvicorn, like ``chorus serve``); examples are sent with
idempotency ids by a few concurrent clients; at a random moment the server gets SIGKILL. After the
restart the model must hold exactly the examples whose ``/learn`` was acknowledged (plus, at most,
the ones in flight at the kill, which the clients then retry with the same id), and its answers must
equal an in-process model trained on that stream, in log order, with the same seed.

``CHORUS_CRASH_N`` sets the stream length (default 1500; the issue's full run is 5000).
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import httpx
import pytest

from app.testing import ChorusServer as Server
from app.testing import RedisServer

ensembles = pytest.importorskip("ensembles")

N = int(os.environ.get("CHORUS_CRASH_N", "1500"))
SENDERS = 4
SPEC = {
    "ensemble": "bagging",
    "learner": "hoeffding_tree",
    "n_models": 5,
    "seed": 11,
    "params": {"grace_period": 50},
}
ROOT = Path(__file__).resolve().parents[1]


def example(i: int) -> tuple[dict, str]:
    rnd = random.Random(i)
    x = {"a": rnd.random(), "b": rnd.choice("pqrs"), "c": rnd.gauss(0, 1)}
    y = "yes" if (x["a"] > 0.5) ^ (x["b"] in "pq") else "no"
    if rnd.random() < 0.1:
        y = "no" if y == "yes" else "yes"
    return x, y


PROBES = [example(10_000_000 + i)[0] for i in range(50)]


def stream(url: str, ids: list[int], acked: dict, inflight: set, lock, stop: threading.Event):
    """Send ``/learn`` for ``ids`` until done or the server goes away; record what was acked."""
    with httpx.Client(base_url=url, trust_env=False, timeout=10) as c:
        for i in ids:
            if stop.is_set():
                return
            x, y = example(i)
            with lock:
                inflight.add(i)
            body = {"model": "m", "features": x, "label": y, "id": f"e{i}"}
            for _ in range(100):  # a 503 (store busy) is retried with the same id, like a client
                try:
                    r = c.post("/learn", json=body)
                except httpx.TransportError:
                    return  # killed: i stays "in flight"
                if r.status_code != 503:
                    break
                time.sleep(0.05)
            if r.status_code != 200:
                with lock:
                    acked.setdefault("errors", []).append((r.status_code, r.text))
                return
            with lock:
                inflight.discard(i)
                acked[i] = r.json()


def run_until_killed(server: Server, ids: list[int], kill_after: int) -> tuple[dict, set]:
    """Stream ``ids`` with a few concurrent clients; SIGKILL the server after ``kill_after`` acks."""
    acked: dict[int, dict] = {}
    inflight: set[int] = set()
    lock, stop = threading.Lock(), threading.Event()
    parts = [ids[k::SENDERS] for k in range(SENDERS)]
    threads = [
        threading.Thread(target=stream, args=(server.url, p, acked, inflight, lock, stop))
        for p in parts
    ]
    for t in threads:
        t.start()
    while len(acked) < kill_after and any(t.is_alive() for t in threads):
        time.sleep(0.001)
    server.kill9()
    stop.set()
    for t in threads:
        t.join(30)
    return acked, inflight


def check_model(server: Server, acked: dict[int, dict], inflight: set[int]) -> dict[int, dict]:
    """n_seen is the acked count (+ at most the in-flight ones); retries complete the stream;
    the served model equals an in-process model trained on the stream in log (seq) order."""
    with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as c:
        n_seen = c.get("/models/m").json()["n_seen"]
        assert len(acked) <= n_seen <= len(acked) + len(inflight)
        # every acked id is in the log: a retry is a duplicate with the same seq
        for i in random.Random(0).sample(sorted(acked), min(50, len(acked))):
            x, y = example(i)
            r = c.post(
                "/learn", json={"model": "m", "features": x, "label": y, "id": f"e{i}"}
            ).json()
            assert r["duplicate"] is True and r["seq"] == acked[i]["seq"]
        # the clients retry what was in flight (same ids): each lands exactly once
        done = dict(acked)
        for i in sorted(inflight):
            x, y = example(i)
            r = c.post("/learn", json={"model": "m", "features": x, "label": y, "id": f"e{i}"})
            assert r.status_code == 200
            done[i] = r.json()
        d = c.get("/models/m").json()
        assert d["n_seen"] == d["seq"] == len(done)
        assert sorted(r["seq"] for r in done.values()) == list(range(1, len(done) + 1))
        served = c.post(
            "/predict", json={"model": "m", "examples": [{"features": p} for p in PROBES]}
        )
        served = [r["probabilities"] for r in served.json()["results"]]
    order = sorted(done, key=lambda i: done[i]["seq"])
    model = ensembles.build_model(SPEC)
    X, Y = zip(*(example(i) for i in order), strict=True)
    want = model.predict_learn_many(list(X), list(Y))
    # the answers given before the crash are the ones the replayed model gives
    for i, proba in zip(order, want, strict=True):
        assert done[i]["probabilities"] == {k: float(v) for k, v in proba.items()}
    assert served == [dict(p) for p in model.predict_proba_many(PROBES)]
    return done


def _create(server: Server) -> None:
    with httpx.Client(base_url=server.url, trust_env=False) as c:
        assert c.post("/models", json={"name": "m", **SPEC}).status_code == 201


def _env(tmp_path: Path, redis_url: str | None) -> dict[str, str]:
    env = {
        "CHORUS_DATA_DIR": str(tmp_path / "data"),
        "CHORUS_SNAPSHOT_EVERY": "300",
        "CHORUS_SNAPSHOT_INTERVAL": "0.5",
        "CHORUS_REDIS_TIMEOUT": "0.5",
    }
    if redis_url:
        env["CHORUS_REDIS_URL"] = redis_url
    return env


def _url(store: str, request) -> str | None:
    """The store URL of a parametrized test (``None``: SQLite)."""
    fixture = {"redis": "clean_redis_url", "cluster": "clean_cluster_url"}.get(store)
    return request.getfixturevalue(fixture) if fixture else None


@pytest.mark.parametrize("store", ["sqlite", "redis", "cluster"])
def test_kill9_loses_no_acknowledged_example(store, tmp_path, request):
    url = _url(store, request)
    server = Server(_env(tmp_path, url))
    server.start()
    try:
        _create(server)
        rng = random.Random()
        kill_after = rng.randint(N // 4, 3 * N // 4)
        acked, inflight = run_until_killed(server, list(range(N)), kill_after)
        assert len(acked) >= kill_after
        server.start()
        done = check_model(server, acked, inflight)
        # the stream goes on after recovery, and survives a second crash too
        rest = [i for i in range(N) if i not in done]
        acked2, inflight2 = run_until_killed(server, rest, len(rest) // 2)
        server.start()
        check_model(server, {**done, **acked2}, inflight2)
    finally:
        server.stop()


def test_kill9_with_redis_restarted_from_aof(tmp_path):
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    server = Server(_env(tmp_path, redis.url))
    try:
        server.start()
        _create(server)
        acked, inflight = run_until_killed(
            server, list(range(N)), random.randint(N // 4, 3 * N // 4)
        )
        redis.kill()  # SIGKILL Redis too: only its AOF survives
        redis.start()
        server.start()
        check_model(server, acked, inflight)
    finally:
        server.stop()
        redis.stop()


def test_redis_down_for_seconds_503_then_nothing_lost(tmp_path):
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    server = Server(_env(tmp_path, redis.url))
    n = min(N, 800)
    statuses: list[int] = []
    done: dict[int, dict] = {}
    try:
        server.start()
        _create(server)
        outage = threading.Event()

        def take_redis_away():
            while len(done) < n // 3:
                time.sleep(0.005)
            redis.stop()
            outage.set()
            time.sleep(2.5)
            redis.start()

        t = threading.Thread(target=take_redis_away)
        t.start()
        with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as c:
            for i in range(n):
                x, y = example(i)
                body = {"model": "m", "features": x, "label": y, "id": f"e{i}"}
                deadline = time.monotonic() + 30
                while True:  # a client that retries with the same id until acknowledged
                    r = c.post("/learn", json=body)
                    statuses.append(r.status_code)
                    if r.status_code == 200:
                        done[i] = r.json()
                        break
                    assert r.status_code == 503, r.text
                    assert "store" in r.json()["detail"]
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
        t.join(30)
        assert outage.is_set() and 503 in statuses
        with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as c:
            d = c.get("/models/m").json()
        assert d["n_seen"] == d["seq"] == n
        # and a kill -9 after the outage still recovers everything
        server.kill9()
        server.start()
        check_model(server, done, set())
    finally:
        server.stop()
        redis.stop()


@pytest.mark.parametrize("store", ["sqlite", "redis", "cluster"])
def test_two_workers_share_one_log(store, tmp_path, request):
    """Two uvicorn workers writing one model: the log stays one exact sequence."""
    url = _url(store, request)
    env = {**_env(tmp_path, url), "CHORUS_SHARED_STORE": "true"}
    server = Server(env, workers=2)
    server.start()
    try:
        _create(server)
        n = min(N, 600)
        acked, inflight = run_until_killed(server, list(range(n)), n)
        assert "errors" not in acked, acked.get("errors")
        assert not inflight
        server.workers = 1
        server.start()
        check_model(server, acked, inflight)
    finally:
        server.stop()
