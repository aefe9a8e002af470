"""``kill -9`` while a model with challengers learns and while it promotes one (issue 38).

A real server (``python -m app.server``) on SQLite (and Redis), killed with SIGKILL at a random
moment of each cycle while two clients send examples with ids and a third asks for a promotion;
restarted; the in-flight examples are retried with their ids. After every cycle an acknowledged
promotion is in force; at the end every candidate learned every example exactly once, and the
whole model (every candidate's arrays, scores and McNemar pairs) equals, bit for bit, an
in-process model fed the same examples in log order with the promotions at the log positions
the server gave them.

``CHORUS_CHALLENGER_CYCLES`` sets the number of kill cycles (default 20).
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from app.registry import Example
from app.registry.challengers import full_state
from app.settings import Settings
from app.testing import ChorusServer, open_registry

pytest.importorskip("ensembles")

CYCLES = int(os.environ.get("CHORUS_CHALLENGER_CYCLES", "20"))
SPEC = {"ensemble": "bagging", "learner": "naive_bayes", "n_models": 2, "seed": 5}
CHALLENGERS = [
    {"name": "ht", "ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 2, "seed": 1,
     "params": {"grace_period": 20}},
    {"name": "nb", "ensemble": "single", "learner": "naive_bayes", "seed": 2},
]  # fmt: skip


def example(i: int) -> tuple[dict, str]:
    rnd = random.Random(i)
    x = {"a": rnd.random(), "b": rnd.choice("pqrs"), "c": rnd.gauss(0, 1)}
    return x, "yes" if x["a"] > 0.5 and x["c"] > 0 else "no"


def _post(c: httpx.Client, path: str, body: dict) -> httpx.Response | None:
    """POST, retrying a 503 like a client; ``None`` when the server went away."""
    for _ in range(100):
        try:
            r = c.post(path, json=body)
        except httpx.TransportError:
            return None
        if r.status_code != 503:
            return r
        time.sleep(0.02)
    return r


def _learn(url: str, ids: list[int], done: dict, lock: threading.Lock) -> None:
    with httpx.Client(base_url=url, trust_env=False, timeout=10) as c:
        for i in ids:
            x, y = example(i)
            r = _post(c, "/learn", {"model": "m", "features": x, "label": y, "id": f"e{i}"})
            if r is None:
                return
            assert r.status_code == 200, r.text
            with lock:
                done[i] = r.json()["seq"]


def _promote(url: str, target: str, delay: float, out: dict) -> None:
    time.sleep(delay)
    with httpx.Client(base_url=url, trust_env=False, timeout=10) as c:
        r = _post(c, "/models/m/promote", {"challenger": target})
    out["acked"] = r is not None and r.status_code == 200


def _leaderboard(url: str) -> dict:
    with httpx.Client(base_url=url, trust_env=False, timeout=10) as c:
        return c.get("/models/m/leaderboard").json()


async def _reference(tmp: Path, order: list[tuple[str, object]]) -> list:
    """An in-process model fed ``order`` (``("x", id)`` examples, ``("p", name)`` promotions)."""
    settings = Settings(data_dir=tmp, snapshot_interval=3600, redis_url=None)
    async with open_registry(settings) as reg:
        await reg.create("m", {**SPEC, "challengers": CHALLENGERS})
        for kind, v in order:
            if kind == "p":
                await reg.promote("m", v)  # type: ignore[arg-type]
            else:
                x, y = example(v)  # type: ignore[arg-type]
                await reg.learn("m", [Example(x, y, 1.0, f"e{v}")])
        return _snap(reg.models.peek("m"))


async def _served(settings: Settings) -> list:
    async with open_registry(settings) as reg:
        return _snap(await reg.models.get("m"))


def _snap(h) -> list:
    state, meta = full_state(h)
    return [state["header"], {k: v.copy() for k, v in state["arrays"].items()}, meta, h.seq]


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_kill9_while_learning_and_promoting(store, tmp_path, request):
    env = {"CHORUS_DATA_DIR": str(tmp_path / "data"), "CHORUS_SNAPSHOT_EVERY": "40",
           "CHORUS_SNAPSHOT_INTERVAL": "0.3", "CHORUS_WARMUP": "none",
           "CHORUS_REDIS_TIMEOUT": "0.5", "CHORUS_REDIS_URL": ""}  # fmt: skip
    if store == "redis":
        env["CHORUS_REDIS_URL"] = request.getfixturevalue("clean_redis_url")
    server = ChorusServer(env, access_log=False)
    rng = random.Random()
    done: dict[int, int] = {}  # example id -> its seq
    promoted: list[str] = []  # promotions in force, in order
    lock = threading.Lock()
    next_id = 0
    server.start()
    try:
        with httpx.Client(base_url=server.url, trust_env=False) as c:
            r = c.post("/models", json={"name": "m", **SPEC, "challengers": CHALLENGERS})
            assert r.status_code == 201, r.text
        for _ in range(CYCLES):
            lb = _leaderboard(server.url)
            target = rng.choice([c["name"] for c in lb["candidates"][1:]])
            ids = list(range(next_id, next_id + 60))
            next_id += 60
            out: dict = {}
            threads = [
                threading.Thread(target=_learn, args=(server.url, ids[k::2], done, lock))
                for k in range(2)
            ] + [threading.Thread(target=_promote, args=(server.url, target,
                                                         rng.uniform(0, 0.3), out))]  # fmt: skip
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.02, 0.4))
            server.kill9()
            for t in threads:
                t.join(30)
            server.start()
            lb = _leaderboard(server.url)
            if out.get("acked"):
                assert lb["champion"] == target, (lb["champion"], target)
            if lb["champion"] == target:
                promoted.append(target)
            # the examples in flight at the kill are retried with their ids
            _learn(server.url, [i for i in ids if i not in done], done, lock)
        lb = _leaderboard(server.url)
    finally:
        server.stop()
    assert lb["promotions"] == len(promoted) and promoted  # (each cycle asks for one)
    n = len(done)
    for c in lb["candidates"]:  # every candidate learned every example exactly once
        assert c["learned"] == n and c["skipped"] == 0, c
    seqs = sorted(done.values())
    assert len(set(seqs)) == n and seqs[-1] == n + len(promoted)
    # the log positions left to promotions, in order
    by_seq = {s: i for i, s in done.items()}
    order: list[tuple[str, object]] = []
    it = iter(promoted)
    for s in range(1, n + len(promoted) + 1):
        order.append(("x", by_seq[s]) if s in by_seq else ("p", next(it)))
    want = asyncio.run(_reference(tmp_path / "ref", order))
    settings = Settings(data_dir=tmp_path / "data", redis_url=env["CHORUS_REDIS_URL"] or None,
                        snapshot_interval=3600)  # fmt: skip
    got = asyncio.run(_served(settings))
    assert got[0] == want[0] and got[2] == want[2] and got[3] == want[3]
    assert got[1].keys() == want[1].keys()
    for k in want[1]:
        assert np.array_equal(got[1][k], want[1][k], equal_nan=True), k
