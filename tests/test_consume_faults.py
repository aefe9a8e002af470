"""Fault injection for ``chorus consume`` on Redis Streams (issue 39): ``kill -9`` of the consumer,
of the bus and of ``chorus serve`` consuming with ``CHORUS_CONSUME``, at random points.

A producer keeps adding examples to a Redis stream (a real redis-server) while ``chorus consume``
runs as a real process on its own SQLite store; at a random moment (mid-batch, between the log
append and the acknowledgement, during start-up and recovery) it gets SIGKILL, and the next cycle
starts it again, under the same consumer name (it takes back its unacknowledged messages) or
another one (it claims the dead one's with ``XAUTOCLAIM``). In about a third of the cycles the
bus's redis-server gets SIGKILL too while the consumer runs, and restarts from its AOF
(``appendfsync always``): the consumer waits it out and goes on. Snapshots and log trims happen
throughout (``CHORUS_SNAPSHOT_EVERY`` is small). Some examples carry the producer's own id and
some are published twice under it (a producer's retry). The cycles and the final check are
``tests/exactly_once.py``'s (shared with the NATS JetStream test).

After the last cycle a consumer drains the stream, then: nothing is pending and nothing was
dead-lettered; every distinct message (its id, else its entry id) was learned exactly once: the
output stream maps each to one log seq and the seqs are exactly 1..n; the model's example count is
n; and the stored model equals an in-process model trained on the messages in that log order, bit
for bit (every array of its state), whose predictions are the answers the consumer published.

``CHORUS_CONSUME_CYCLES`` sets the number of kills (default 20).
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest
import redis

from app.testing import ChorusServer, start_consumer
from tests.exactly_once import (
    Messages,
    assert_learned_once,
    create_model,
    kill_cycles,
    process_env,
    same_probabilities,
    tail,
)

pytest.importorskip("ensembles")

CYCLES = int(os.environ.get("CHORUS_CONSUME_CYCLES", "20"))
SERVE_CYCLES = 5  # kills of `chorus serve` consuming (each restart recovers the model: slower)
STREAM = "chorus:examples"


class Producer:
    """Adds :class:`~tests.exactly_once.Messages` to the stream in pipelines; remembers each
    message's learn id (its id, else its entry id) and example."""

    def __init__(self, r: redis.Redis, rnd: random.Random) -> None:
        self.r = r
        self.messages = Messages(rnd)
        self.examples: dict[str, int] = {}  # learn id -> example number

    def send(self, k: int) -> None:
        pipe = self.r.pipeline(transaction=False)
        plan = []
        for _ in range(k):
            key, i, body = self.messages.next()
            pipe.xadd(STREAM, {"data": body})
            plan.append((key, i))
        for entry_id, (key, i) in zip(pipe.execute(), plan):
            self.examples.setdefault(key or f"redis:{STREAM}:{entry_id.decode()}", i)


def _start(url: str, data: Path) -> tuple[redis.Redis, random.Random, Producer]:
    """The model in the store in ``data``, and a producer that has added 200 examples."""
    r = redis.Redis.from_url(url)
    rnd = random.Random()
    create_model(data)
    producer = Producer(r, rnd)
    producer.send(200)
    return r, rnd, producer


def _consumer(url: str, data: Path, name: str, batch: int, log: Path, *, once: bool = False):
    args = ["--consumer", name, "--batch", str(batch), "--output", "answers", "--claim-idle",
            "0.3", "--log-level", "warning", *(["--once"] if once else [])]  # fmt: skip
    return start_consumer(url, process_env(data), *args, log=log)


def _check(r: redis.Redis, data: Path, producer: Producer, log: Path) -> int:
    """Acknowledged, none dead; learned once (the answers' seqs), the model bit for bit, the
    published answers its predictions. Returns the distinct messages."""
    assert r.xpending(STREAM, "chorus")["pending"] == 0, tail(log)
    assert r.xlen("chorus:dead") == 0, r.xrange("chorus:dead", count=3)
    seq_of: dict[str, int] = {}
    answer_of: dict[int, dict] = {}
    for _, fields in r.xrange("answers"):
        a = json.loads(fields[b"data"])
        assert seq_of.setdefault(a["id"], a["seq"]) == a["seq"], a
        answer_of.setdefault(a["seq"], a)
    want = assert_learned_once(data, seq_of, producer.examples)
    for seq, proba in enumerate(want, start=1):
        assert same_probabilities(answer_of[seq], proba), seq
    return len(want)


def test_kill9_of_the_consumer_learns_every_message_exactly_once(
    tmp_path, clean_redis_url, redis_server
):
    r, rnd, producer = _start(clean_redis_url, tmp_path / "data")
    data, log = tmp_path / "data", tmp_path / "consumer.log"

    def start():  # c2 claims c1's messages (and the other way)
        name = rnd.choice(["c1", "c1", "c2"])
        return _consumer(clean_redis_url, data, name, rnd.choice([5, 20, 64]), log)

    def kill_bus() -> None:  # mid-stream, between two of the producer's pipelines
        redis_server.kill()
        redis_server.start()

    kills, bus_kills = kill_cycles(
        CYCLES, rnd, start=start, produce=producer.send, progress=lambda: r.xlen("answers"),
        log=log, kill_bus=kill_bus,
    )  # fmt: skip
    assert kills == CYCLES
    drain = _consumer(clean_redis_url, data, "c1", 100, log, once=True)
    assert drain.wait(120) == 0, tail(log)
    n = _check(r, data, producer, log)
    summary = f"{CYCLES} consumer kills, {bus_kills} bus kills, {n} distinct messages learned once"
    print(summary, f"({r.xlen(STREAM)} entries)")  # noqa: T201


def _acked(r: redis.Redis) -> int:
    """Entries the group has been delivered and acknowledged."""
    for g in r.xinfo_groups(STREAM):
        if g["name"] == b"chorus":
            return int(g["entries-read"] or 0) - int(g["pending"])
    return 0


def test_kill9_of_chorus_serve_consuming_learns_every_message_exactly_once(
    tmp_path, clean_redis_url
):
    """The consumer inside ``chorus serve`` (``CHORUS_CONSUME``): the whole server is killed
    (its process group) mid-stream or while it starts, and started again on the same store; its
    consumer (the host's name, the default) takes back what it had not acknowledged."""
    r, rnd, producer = _start(clean_redis_url, tmp_path / "data")
    data, log = tmp_path / "data", tmp_path / "server.log"
    consume = f"{clean_redis_url}?output=answers&block=0.2&batch=50"
    env = {**process_env(data), "CHORUS_CONSUME": consume}
    servers: list[ChorusServer] = []

    def start():
        server = ChorusServer(env, log=log, access_log=False)
        server.start(wait=False)
        servers.append(server)
        return server.proc

    def kill(_proc) -> None:
        servers[-1].kill9()

    kills, _ = kill_cycles(SERVE_CYCLES, rnd, start=start, produce=producer.send,
                           progress=lambda: r.xlen("answers"), log=log, kill=kill)  # fmt: skip
    assert kills == SERVE_CYCLES
    server = ChorusServer(env, log=log, access_log=False)
    server.start(timeout=120)
    try:
        deadline = time.monotonic() + 120
        while _acked(r) < r.xlen(STREAM) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        server.stop()  # (uvicorn exits by the SIGTERM it handled: -15)
    assert _acked(r) == r.xlen(STREAM), tail(log)
    n = _check(r, data, producer, log)
    print(f"{SERVE_CYCLES} kills of chorus serve, {n} distinct messages learned once")  # noqa: T201
