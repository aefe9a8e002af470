"""Fault injection for ``chorus consume`` (issue 39): ``kill -9`` of the consumer at random points.

A producer keeps adding examples to a Redis stream (a real redis-server) while ``chorus consume``
runs as a real process on its own SQLite store; at a random moment (mid-batch, between the log
append and the acknowledgement, during start-up and recovery) it gets SIGKILL, and the next cycle
starts it again, under the same consumer name (it takes back its unacknowledged messages) or
another one (it claims the dead one's with ``XAUTOCLAIM``). In about a third of the cycles the
bus's redis-server gets SIGKILL too while the consumer runs, and restarts from its AOF
(``appendfsync always``): the consumer waits it out and goes on. Snapshots and log trims happen
throughout (``CHORUS_SNAPSHOT_EVERY`` is small). Some examples carry the producer's own id and
some are published twice under it (a producer's retry).

After the last cycle a consumer drains the stream, then: nothing is pending and nothing was
dead-lettered; every distinct message (its id, else its entry id) was learned exactly once: the
output stream maps each to one log seq and the seqs are exactly 1..n; the model's example count is
n; and the stored model equals an in-process model trained on the messages in that log order, bit
for bit (every array of its state), whose predictions are the answers the consumer published.

``CHORUS_CONSUME_CYCLES`` sets the number of kills (default 20).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from app.testing import ROOT
from tests.streams import assert_same_state
from tests.test_crash import example

ensembles = pytest.importorskip("ensembles")

CYCLES = int(os.environ.get("CHORUS_CONSUME_CYCLES", "20"))
PER_CYCLE = 150  # examples the producer adds while a consumer runs
STREAM = "chorus:examples"
SPEC = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 5,
        "params": {"grace_period": 20}}  # fmt: skip


class Producer:
    """Adds examples to the stream; remembers each entry's learn id and example."""

    def __init__(self, r: redis.Redis, rnd: random.Random) -> None:
        self.r, self.rnd = r, rnd
        self.n = 0
        self.examples: dict[str, int] = {}  # learn id -> example number
        self.producer_ids: list[tuple[str, int]] = []

    def send(self, k: int) -> None:
        pipe = self.r.pipeline(transaction=False)
        plan = []
        for _ in range(k):
            roll = self.rnd.random()
            if roll < 0.05 and self.producer_ids:  # a producer's retry: same id, same example
                key, i = self.rnd.choice(self.producer_ids[-50:])
            else:
                i, key = self.n, (f"p{self.n}" if roll < 0.15 else None)
                self.n += 1
                if key is not None:
                    self.producer_ids.append((key, i))
            x, y = example(i)
            body = {"model": "m", "features": x, "label": y} | ({"id": key} if key else {})
            pipe.xadd(STREAM, {"data": json.dumps(body)})
            plan.append((key, i))
        for entry_id, (key, i) in zip(pipe.execute(), plan):
            self.examples.setdefault(key or f"redis:{STREAM}:{entry_id.decode()}", i)


def _consumer(url: str, data: Path, name: str, batch: int, log: Path, *, once: bool = False):
    env = {**os.environ, "CHORUS_DATA_DIR": str(data), "CHORUS_REDIS_URL": "",
           "CHORUS_SNAPSHOT_EVERY": "97", "CHORUS_SNAPSHOT_INTERVAL": "0.3",
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    args = [sys.executable, "-m", "app.cli", "consume", url, "--consumer", name, "--batch",
            str(batch), "--output", "answers", "--claim-idle", "0.3", "--log-level", "warning"]  # fmt: skip
    if once:
        args.append("--once")
    with log.open("ab") as err:
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)


async def _create_and_load(data: Path, create: bool):
    from app.registry import Registry
    from app.settings import Settings
    from app.stores import make_store

    settings = Settings(data_dir=data, redis_url=None, snapshot_interval=3600)
    store = make_store(settings)
    await store.open(5)
    reg = Registry(store, settings)
    await reg.recover()
    if create:
        await reg.create("m", SPEC)
        await store.close()
        return None
    h = await reg.models.get("m")
    await store.close()
    return h


def test_kill9_of_the_consumer_learns_every_message_exactly_once(
    tmp_path, clean_redis_url, redis_server
):
    r = redis.Redis.from_url(clean_redis_url)
    rnd = random.Random()
    data, log = tmp_path / "data", tmp_path / "consumer.log"
    asyncio.run(_create_and_load(data, create=True))
    producer = Producer(r, rnd)
    producer.send(200)
    kills = bus_kills = 0
    for cycle in range(CYCLES):
        name = rnd.choice(["c1", "c1", "c2"])  # c2: claims c1's messages (and the other way)
        proc = _consumer(clean_redis_url, data, name, rnd.choice([5, 20, 64]), log)
        answered = r.xlen("answers")
        t0 = time.monotonic()
        early = rnd.random() < 0.2  # killed during start-up / recovery
        kill_at = t0 + rnd.uniform(0.2, 2.0) if early else None
        budget = PER_CYCLE  # more examples while it consumes (the last cycle's are pending)
        bus_kill = rnd.random() < 0.3  # this cycle the bus dies too (kill -9, AOF restart)
        while proc.poll() is None:
            now = time.monotonic()
            if bus_kill and kill_at is not None:
                redis_server.kill()  # mid-stream, between two of the producer's pipelines
                redis_server.start()
                bus_kills += 1
                bus_kill = False
                kill_at = time.monotonic() + rnd.uniform(0.3, 1.0)  # it reconnects meanwhile
            if kill_at is None and r.xlen("answers") > answered:
                kill_at = now + rnd.uniform(0.0, 0.25)  # consuming: somewhere mid-stream
            if kill_at is not None and budget > 0:
                k = min(budget, rnd.randint(1, 15))
                producer.send(k)
                budget -= k
            if (kill_at is not None and now >= kill_at) or now - t0 > 30:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                kills += 1
                break
            time.sleep(0.002)
        assert proc.returncode == -signal.SIGKILL, (cycle, log.read_text()[-3000:])
    assert kills == CYCLES
    drain = _consumer(clean_redis_url, data, "c1", 100, log, once=True)
    assert drain.wait(120) == 0, log.read_text()[-3000:]
    # acknowledged, none dead
    assert r.xpending(STREAM, "chorus")["pending"] == 0, log.read_text()[-3000:]
    assert r.xlen("chorus:dead") == 0, r.xrange("chorus:dead", count=3)
    # each distinct message learned once: its answers all name one seq, the seqs are 1..n
    seq_of: dict[str, int] = {}
    answer_of: dict[int, dict] = {}
    for _, fields in r.xrange("answers"):
        a = json.loads(fields[b"data"])
        assert seq_of.setdefault(a["id"], a["seq"]) == a["seq"], a
        answer_of.setdefault(a["seq"], a)
    n = len(producer.examples)
    assert seq_of.keys() == producer.examples.keys()
    assert sorted(seq_of.values()) == list(range(1, n + 1))
    h = asyncio.run(_create_and_load(data, create=False))
    assert h.seq == n and int(h.model.n_seen) == n
    # the stored model is the one its messages make, in log order, bit for bit
    order = sorted(seq_of, key=seq_of.get)
    X, Y = zip(*(example(producer.examples[key]) for key in order), strict=True)
    model = ensembles.build_model(SPEC)
    want = model.predict_learn_many(list(X), list(Y))
    assert_same_state(h.model, model)
    for seq, proba in enumerate(want, start=1):
        assert answer_of[seq]["probabilities"] == {k: float(v) for k, v in proba.items()}, seq
    summary = f"{CYCLES} consumer kills, {bus_kills} bus kills, {n} distinct messages learned once"
    print(summary, f"({r.xlen(STREAM)} entries)")  # noqa: T201
