"""Fault injection for ``chorus consume`` on NATS JetStream (issue 39): ``kill -9`` of the consumer
and of the ``nats-server`` at random points.

The NATS twin of ``test_consume_faults.py`` (the same cycles and final check, from
``tests/exactly_once.py``): a producer publishes examples to a JetStream stream (a real
``nats-server -js`` on a free port, file storage) while ``chorus consume nats://...`` runs as a
real process on its own SQLite store and gets SIGKILL at a random moment (start-up, recovery,
mid-batch, between a log append and its acknowledgement). A dead consumer's unacknowledged
messages come again after the durable consumer's ``ack_wait`` (``--claim-idle``). In about a
third of the cycles the nats-server gets SIGKILL too and restarts on its files; the consumer and
the producer reconnect (the producer publishes again what was not confirmed: a message may then
be in the stream twice, and both are learned: they are two messages). Some examples carry the
producer's own id and some are published twice under it.

After the last cycle a consumer runs until the durable has nothing pending or unacknowledged;
then every message of the stream (its ``id``, else its stream sequence, is its learn id) was
learned exactly once: the store's idempotency window maps each learn id to one log seq, the seqs
are exactly 1..n, the model has seen n examples, and it equals, bit for bit, an in-process model
trained on the messages in that log order, whose predictions are the stored answers.

``CHORUS_CONSUME_CYCLES`` sets the number of kills (default 20).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sqlite3
import threading
import time
from collections.abc import Coroutine
from typing import Any

import pytest

from app.testing import NatsServer, start_consumer, stop_process
from tests.exactly_once import (
    MODEL,
    Messages,
    assert_learned_once,
    create_model,
    kill_cycles,
    process_env,
    same_probabilities,
    stored_answers,
    tail,
)

nats = pytest.importorskip("nats")
pytest.importorskip("ensembles")

CYCLES = int(os.environ.get("CHORUS_CONSUME_CYCLES", "20"))
PER_CYCLE = 100
CONSUMING = "consuming nats"  # the consumer's INFO line once it consumes
STREAM, SUBJECT, DURABLE = "CHORUS", "chorus.examples", "chorus"


class JetStream:
    """A nats-py connection on an event loop of its own thread (the cycles are synchronous):
    publishes messages, confirmed one by one, through restarts of the server; reads the stream
    and the durable consumer."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.nc = self.call(nats.connect(url, max_reconnect_attempts=-1, reconnect_time_wait=0.1))
        self.js = self.nc.jetstream()
        self.published: dict[bytes, int] = {}  # payload -> example number
        self.dead: list[Any] = []

    def call(self, coro: Coroutine, timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def setup(self) -> None:
        """The stream (as the consumer would create it) and a watch on the dead letters."""
        from nats.js.api import StorageType

        async def go() -> None:
            await self.js.add_stream(name=STREAM, subjects=[SUBJECT], storage=StorageType.FILE)

            async def keep(msg: Any) -> None:
                self.dead.append(msg)

            await self.nc.subscribe("chorus.dead", cb=keep)

        self.call(go())

    def send(self, messages: Messages, k: int) -> None:
        bodies = []
        for _ in range(k):
            _, i, body = messages.next()
            self.published.setdefault(body, i)
            bodies.append(body)
        self.call(self._publish(bodies))

    async def _publish(self, bodies: list[bytes]) -> None:
        for body in bodies:
            while True:  # until the server confirms it (it may be restarting)
                try:
                    await self.js.publish(SUBJECT, body, timeout=2)
                    break
                except (nats.errors.Error, TimeoutError):
                    await asyncio.sleep(0.05)

    def outstanding(self) -> int:
        """Messages of the stream the durable has not delivered, or delivered and not had
        acknowledged."""

        async def go() -> int:
            info = await self.js.consumer_info(STREAM, DURABLE)
            return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

        return self.call(go())

    def stream(self) -> list[tuple[int, bytes]]:
        """Every message of the stream: (stream sequence, payload)."""

        async def go() -> list[tuple[int, bytes]]:
            state = (await self.js.stream_info(STREAM)).state
            out = [(seq, (await self.js.get_msg(STREAM, seq)).data)
                   for seq in range(state.first_seq, state.last_seq + 1)]  # fmt: skip
            assert len(out) == state.messages, (len(out), state)
            return out

        return self.call(go())

    def close(self) -> None:
        self.call(self.nc.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _learned(data) -> int:
    """The model's log position in the store (0 before its first append)."""
    db = sqlite3.connect(data / "chorus.db", timeout=10)
    try:
        row = db.execute("SELECT last_seq FROM models WHERE name = ?", (MODEL,)).fetchone()
    finally:
        db.close()
    return int(row[0]) if row else 0


@pytest.fixture
def nats_server(tmp_path):
    if shutil.which("nats-server") is None and not os.path.exists("/usr/sbin/nats-server"):
        pytest.skip("nats-server not installed (apt-get install nats-server)")
    server = NatsServer(tmp_path / "nats")
    server.start()
    yield server
    server.stop()


def test_kill9_of_the_consumer_and_nats_learns_every_message_exactly_once(tmp_path, nats_server):
    rnd = random.Random()
    data, log = tmp_path / "data", tmp_path / "consumer.log"
    create_model(data)
    bus = JetStream(nats_server.url)
    try:
        bus.setup()
        messages = Messages(rnd)
        bus.send(messages, 200)

        def start(level: str = "warning"):
            args = ["--batch", str(rnd.choice([5, 20, 64])), "--claim-idle", "1",
                    "--log-level", level]  # fmt: skip
            return start_consumer(nats_server.url, process_env(data), *args, log=log)

        def kill_bus() -> None:
            nats_server.kill()
            nats_server.start()

        kills, bus_kills = kill_cycles(
            CYCLES, rnd, start=start, produce=lambda k: bus.send(messages, k),
            progress=lambda: _learned(data), log=log, kill_bus=kill_bus, per_cycle=PER_CYCLE,
        )  # fmt: skip
        assert kills == CYCLES
        started = tail(log, 10**9).count(CONSUMING)
        drain = start("info")
        try:
            deadline = time.monotonic() + 120
            # its SIGTERM handler is set before it consumes: a SIGTERM during its start-up (when
            # nothing is left to drain) would end it with -15, not with a clean stop
            while tail(log, 10**9).count(CONSUMING) == started and time.monotonic() < deadline:
                assert drain.poll() is None, tail(log)
                time.sleep(0.05)
            while bus.outstanding() and time.monotonic() < deadline and drain.poll() is None:
                time.sleep(0.1)
        finally:
            stop_process(drain, 30)
        assert drain.returncode == 0, tail(log)
        assert bus.outstanding() == 0
        stream = bus.stream()
        dead = len(bus.dead)
    finally:
        bus.close()
    assert dead == 0
    example_of: dict[str, int] = {}  # learn id -> example number
    for seq, payload in stream:
        key = json.loads(payload).get("id") or f"nats:{STREAM}:{seq}"
        example_of.setdefault(key, bus.published[payload])
    answers = stored_answers(data, list(example_of))
    want = assert_learned_once(data, {k: a["seq"] for k, a in answers.items()}, example_of)
    by_seq = {a["seq"]: a for a in answers.values()}
    for seq, proba in enumerate(want, start=1):
        assert same_probabilities(by_seq[seq], proba), seq
    summary = f"{CYCLES} consumer kills, {bus_kills} nats-server kills, {len(want)} distinct"
    print(summary, f"messages learned once ({len(stream)} in the stream)")  # noqa: T201
