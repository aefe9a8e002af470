"""``chorus consume`` on NATS JetStream (issue 39): a real ``nats-server -js`` on a free port.

Examples learned once (a producer's repeat under one id too), dead letters with their reason in
a header, answers on the output subject, a dead consumer's unacknowledged messages delivered
again after ``ack_wait`` and learned once, a missing stream named with ``--no-create``.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from app.consume.config import ConsumeConfig, ConsumeConfigError
from app.consume.run import make_consumer
from app.testing import NatsServer
from tests.test_consume import SPEC, _example, _registry, _settings

nats = pytest.importorskip("nats")


@pytest.fixture
def nats_url(tmp_path):
    if shutil.which("nats-server") is None and not shutil.os.path.exists("/usr/sbin/nats-server"):
        pytest.skip("nats-server not installed (apt-get install nats-server)")
    server = NatsServer(tmp_path / "nats")
    server.start()
    yield server.url
    server.stop()


async def _publish(url: str, bodies: list[bytes]) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    for b in bodies:
        await js.publish("chorus.examples", b)
    await nc.close()


async def _run_until(consumer, done) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(consumer.run(stop))
    for _ in range(400):
        await asyncio.sleep(0.025)
        if task.done() or done(consumer.counts):
            break
    stop.set()
    await task
    await consumer.bus.close()


def test_jetstream_examples_learned_once_with_dead_letters(tmp_path, nats_url):
    bodies = []
    for i in range(300):
        x, y = _example(i)
        body = {"model": "m", "features": x, "label": y} | ({"id": f"p{i}"} if i < 20 else {})
        bodies.append(json.dumps(body).encode())
    bodies += bodies[:20]  # the producer sent those again (same ids)
    bodies += [b"{oops", json.dumps({"model": "ghost", "features": {}, "label": "x"}).encode()]

    async def go():
        reg = await _registry(_settings(tmp_path), ("m", SPEC))
        cfg = ConsumeConfig.from_url(nats_url, block=0.1, batch=64, output="chorus.answers")
        consumer = make_consumer(reg, cfg)
        await consumer.bus.open()  # the stream and the durable exist before the producer runs
        nc = await nats.connect(nats_url)
        dead, answers = [], []
        await nc.subscribe("chorus.dead", cb=_keep(dead))
        await nc.subscribe("chorus.answers", cb=_keep(answers))
        await _publish(nats_url, bodies)
        await _run_until(consumer, lambda c: c["acked"] >= len(bodies))
        await nc.flush()
        await asyncio.sleep(0.1)
        await nc.close()
        n = (await reg.describe("m"))["n_seen"]
        await reg.store.close()
        return consumer.counts, n, dead, answers

    counts, n_seen, dead, answers = asyncio.run(go())
    assert n_seen == 300 and counts["learned"] == 300 and counts["duplicates"] == 20
    assert counts["dead"] == 2 and counts["acked"] == 322
    reasons = sorted(m.headers["Chorus-Reason"] for m in dead)
    assert reasons[0].startswith("404: model 'ghost' not found"), reasons
    assert reasons[1].startswith("422: Invalid JSON"), reasons
    assert {m.data for m in dead} == {b"{oops", bodies[-1]}
    seqs = sorted(json.loads(m.data)["seq"] for m in answers)
    assert len(answers) == 320 and sorted(set(seqs)) == list(range(1, 301))


def _keep(out: list):
    async def cb(msg) -> None:
        out.append(msg)

    return cb


def test_a_dead_consumers_messages_come_again_after_ack_wait(tmp_path, nats_url):
    async def go():
        reg = await _registry(_settings(tmp_path), ("m", SPEC))
        cfg = ConsumeConfig.from_url(nats_url, block=0.1, claim_idle=1.0)
        consumer = make_consumer(reg, cfg)
        await consumer.bus.open()
        bodies = [json.dumps({"model": "m", "features": _example(i)[0],
                              "label": _example(i)[1]}).encode() for i in range(100)]  # fmt: skip
        await _publish(nats_url, bodies)
        nc = await nats.connect(nats_url)  # another consumer of the durable takes 40 and dies
        js = nc.jetstream()
        sub = await js.pull_subscribe_bind(durable="chorus", stream="CHORUS")
        taken = await sub.fetch(40, timeout=2)
        await nc.close()
        await _run_until(consumer, lambda c: c["learned"] >= 100)
        n = (await reg.describe("m"))["n_seen"]
        await reg.store.close()
        return len(taken), consumer.counts, n

    taken, counts, n_seen = asyncio.run(go())
    assert taken == 40
    assert n_seen == 100 and counts["learned"] == 100 and counts["redelivered"] == 40


def test_a_missing_stream_is_named(tmp_path, nats_url):
    async def go():
        reg = await _registry(_settings(tmp_path), ("m", SPEC))
        cfg = ConsumeConfig.from_url(nats_url + "?stream=NOPE&create=false")
        consumer = make_consumer(reg, cfg)
        try:
            with pytest.raises(ConsumeConfigError, match="JetStream stream 'NOPE' does not exist"):
                await consumer.bus.open()
        finally:
            await consumer.bus.close()
            await reg.store.close()

    asyncio.run(go())
    with pytest.raises(ConsumeConfigError, match="cannot reach nats at nats://127.0.0.1:1"):
        asyncio.run(_open("nats://127.0.0.1:1"))


async def _open(url: str) -> None:
    from app.consume.nats_bus import NatsBus

    bus = NatsBus(ConsumeConfig.from_url(url))
    try:
        await bus.open()
    finally:
        await bus.close()


def test_a_dead_letter_its_stream_refuses_leaves_its_message_unacknowledged(tmp_path, nats_url):
    """With a JetStream stream on the dead-letter subject, a dead letter is acknowledged only once
    the stream stored it: one the stream refuses (full, ``discard: new``) leaves its message
    unacknowledged (it comes again after ``ack_wait``), never acknowledged and lost."""
    from nats.js.api import DiscardPolicy

    good = [json.dumps({"model": "m", "features": _example(i)[0], "label": _example(i)[1]})
            for i in range(10)]  # fmt: skip
    poison = [f'{{"model": "m", "features": {{"x{i}": 1}}, "label": {{}}}}' for i in range(3)]
    bodies = [b.encode() for b in good[:5] + poison + good[5:]]

    async def go():
        reg = await _registry(_settings(tmp_path), ("m", SPEC))
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        await js.add_stream(name="DEAD", subjects=["chorus.dead"], max_msgs=1,
                            discard=DiscardPolicy.NEW)  # fmt: skip
        cfg = ConsumeConfig.from_url(nats_url, block=0.1, batch=1, claim_idle=60)
        consumer = make_consumer(reg, cfg)
        await consumer.bus.open()
        await _publish(nats_url, bodies)
        await _run_until(consumer, lambda c: c["learned"] >= len(good) and c["dead"] >= 1)
        info = await js.consumer_info("CHORUS", "chorus")
        kept = (await js.stream_info("DEAD")).state.messages
        await nc.close()
        n = (await reg.describe("m"))["n_seen"]
        await reg.store.close()
        return consumer.counts, n, info.num_ack_pending, kept

    counts, n_seen, unacked, kept = asyncio.run(go())
    assert n_seen == len(good) and counts["learned"] == len(good)
    assert kept == 1 and counts["dead"] == 1  # the one dead letter the stream stored
    assert unacked == 2  # the two it refused: not acknowledged, so delivered again later
    assert counts["acked"] == len(good) + 1
