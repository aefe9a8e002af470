"""``chorus consume`` on Redis Streams (issue 39): the message parser, and the consumer on a real
redis-server with the registry on a real SQLite store (no mocks).

Learned exactly once (ack after the log append, redelivery absorbed by the idempotency window),
dead letters with their reason, late labels, predictions on the output stream, a dead consumer's
messages claimed, a poison message that keeps coming dead-lettered, a model that cannot learn
never blocking the others, a store that stalls held and retried, clear errors for what cannot
work. The kill -9 cycles are in ``test_consume_faults.py``.
"""

from __future__ import annotations

import asyncio
import json
import math
import time

import pytest
import redis
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from typer.testing import CliRunner

from app.cli import app as cli
from app.consume.config import ConsumeConfig, ConsumeConfigError
from app.consume.messages import BadMessage, BusMessage, Message, parse
from app.consume.metrics import ConsumeMetrics
from app.consume.run import make_consumer
from app.registry import Registry
from app.settings import Settings
from app.stores import make_store

SPEC = {"ensemble": "bagging", "learner": "naive_bayes", "n_models": 3, "seed": 1, "params": {}}
STREAM = "chorus:examples"


# ---------------------------------------------------------------------------- the parser

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63 - 2, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.builds(lambda c, n: c * n, st.characters(), st.integers(10_000, 10_050)),  # 10 kB
)  # fmt: skip
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)  # fmt: skip
names = st.one_of(st.just("m"), st.text(max_size=70), st.integers(), st.none())
fields = st.fixed_dictionaries(
    {},
    optional={
        "model": names,
        "features": st.one_of(st.dictionaries(st.text(max_size=20), scalars, max_size=5), values),
        "label": values,
        "id": st.one_of(st.text(max_size=210), values),
        "weight": values,
        "prediction_id": st.one_of(st.text(max_size=210), values),
        "extra": values,
    },
)

labels = st.one_of(st.text(max_size=20), st.integers(), st.booleans(),
                   st.integers(min_value=2**63 - 2, max_value=2**80), st.floats())  # fmt: skip
near_valid = st.one_of(
    st.fixed_dictionaries(  # an example, a prediction or a late label with hostile values
        {"model": st.one_of(st.just("m"), st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,70}",
                                                         fullmatch=True)),
         "features": st.dictionaries(st.text(max_size=20), scalars, max_size=5)},
        optional={"label": labels, "id": st.text(min_size=0, max_size=210),
                  "weight": st.one_of(st.floats(), st.integers(-5, 2**64))},
    ),
    st.fixed_dictionaries(
        {"model": st.just("m"), "prediction_id": st.text(max_size=210), "label": labels},
        optional={"id": st.text(max_size=210), "weight": st.floats(0, 2)},
    ),
)  # fmt: skip


def _encode(body: dict) -> bytes:
    """JSON as a producer might write it (NaN / Infinity as Python's json writes them)."""
    return json.dumps(body).encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.one_of(fields, near_valid))
def test_parse_takes_what_the_schema_takes_and_names_the_rest(body):
    """Hostile values (huge ints, NaN/inf, 10 kB strings, unicode, missing/extra fields): the parser
    gives a message exactly when the pydantic schema accepts the payload, with the same values,
    and otherwise a reason, never another exception."""
    raw = _encode(body)
    try:
        schema = BusMessage.model_validate_json(raw)
    except Exception:  # noqa: BLE001 - whatever pydantic refuses
        schema = None
    try:
        msg = parse(raw)
    except BadMessage as exc:
        assert schema is None, (raw[:200], exc.reason)
        assert exc.reason
        event("refused")
        return
    event(f"accepted: {msg.kind}")
    assert schema is not None, raw[:200]
    assert isinstance(msg, Message)
    assert msg.model == schema.model and msg.id == schema.id
    assert _same(msg.label, schema.label) and _same(msg.features, schema.features)
    if msg.kind == "label":
        assert msg.prediction_id == schema.prediction_id
    else:
        assert msg.weight == schema.weight and type(msg.weight) is float
        assert msg.kind == ("predict" if schema.label is None else "learn")


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


@given(raw=st.one_of(st.binary(max_size=300), st.text(max_size=300), st.none()))
def test_parse_of_any_bytes_is_a_message_or_a_reason(raw):
    try:
        assert isinstance(parse(raw), Message)
    except BadMessage as exc:
        assert exc.reason


def test_parse_names_the_field():
    cases = {
        b'{"features": {"a": 1}, "label": "x"}': "model: Field required",
        b'{"model": "m", "features": {"a": 1}, "label": 1.5}': "label: expected a boolean",
        b'{"model": "m", "prediction_id": "p"}': "label: required with 'prediction_id'",
        b'{"model": "m", "features": {}, "label": "x", "ts": 1}': "ts: Extra inputs",
        b'{"model": "m", "features": {}, "label": "x", "weight": -1}': "weight: Input should be",
        b'{"model": "../m", "features": {}, "label": "x"}': "model: String should match",
        b"[1]": "Input should be an object",
        b"": "Invalid JSON",
    }
    for raw, reason in cases.items():
        with pytest.raises(BadMessage) as info:
            parse(raw)
        assert reason in info.value.reason, (raw, info.value.reason)
    assert parse(b'{"model":"m","features":{"a":1},"label":2,"weight":3}').weight == 3.0


def test_config_from_url_and_its_errors():
    c = ConsumeConfig.from_url("redis://h:1/0?stream=a&stream=b&group=g&batch=7&output=o&"
                               "socket_keepalive=true", consumer="me")  # fmt: skip
    assert (c.streams, c.group, c.batch, c.output, c.consumer) == (["a", "b"], "g", 7, "o", "me")
    assert c.url == "redis://h:1/0?socket_keepalive=true" and c.dead_letter == "chorus:dead"
    n = ConsumeConfig.from_url("nats://h:4222")
    assert (n.kind, n.streams, n.subject, n.dead_letter) == ("nats", ["CHORUS"],
                                                             "chorus.examples", "chorus.dead")  # fmt: skip
    bad = {
        "http://h:1": "the scheme must be one of",
        "redis://": "no host",
        "redis://h?batch=x": "batch: 'x' is not an integer",
        "redis://h?batch=0": "batch: 0 is not in",
        "redis://h?claim_idle=nan": "claim_idle",
        "redis://h?batch=100&max_pending=10": "max_pending (10) is below batch (100)",
        "nats://h?stream=a&stream=b": "NATS reads one JetStream stream",
        "redis://h?create=maybe": "create: 'maybe' is not true or false",
    }
    for url, message in bad.items():
        with pytest.raises(ConsumeConfigError) as info:
            ConsumeConfig.from_url(url)
        assert message in str(info.value), (url, info.value)
    with pytest.raises(ValueError, match="scheme must be one of"):
        Settings(consume="kafka://h:9092")


# ---------------------------------------------------------------------------- the consumer


def _settings(tmp_path, **kw) -> Settings:
    return Settings(data_dir=tmp_path / "data", redis_url=None, snapshot_interval=3600, **kw)


async def _registry(settings: Settings, *specs: tuple[str, dict]) -> Registry:
    store = make_store(settings)
    await store.open(5)
    reg = Registry(store, settings)
    await reg.recover()
    for name, spec in specs:
        if await store.get_model(name) is None:
            await reg.create(name, spec)
    return reg


async def _drain(reg: Registry, url: str, metrics=None, **options) -> dict[str, int]:
    """Consume ``url`` until no message is left; returns the consumer's counts."""
    cfg = ConsumeConfig.from_url(url, block=0.05, **options)
    consumer = make_consumer(reg, cfg, metrics)
    try:
        await consumer.run(asyncio.Event(), once=True)
    finally:
        await consumer.bus.close()
    return consumer.counts


def _example(i: int) -> tuple[dict, str]:
    x = {"a": (i * 37 % 101) / 101, "b": "pqr"[i % 3]}
    return x, ("yes" if x["a"] > 0.5 else "no")


def _produce(r: redis.Redis, rows: list[dict], stream: str = STREAM) -> list[bytes]:
    pipe = r.pipeline(transaction=False)
    for row in rows:
        pipe.xadd(stream, {"data": json.dumps(row)})
    return pipe.execute()


def _learn_rows(n: int, model: str = "m", start: int = 0, ids: bool = False) -> list[dict]:
    rows = []
    for i in range(start, start + n):
        x, y = _example(i)
        rows.append({"model": model, "features": x, "label": y} | ({"id": f"e{i}"} if ids else {}))
    return rows


def _fields(entries) -> list[dict]:
    return [{k.decode(): v.decode() for k, v in f.items()} for _, f in entries]


def test_learns_dead_letters_predicts_and_takes_late_labels(tmp_path, clean_redis_url):
    r = redis.Redis.from_url(clean_redis_url)
    rows = _learn_rows(200)
    rows += [
        {"model": "nope", "features": {"a": 1}, "label": "yes"},
        {"model": "m", "features": {"a": 2**70}, "label": "yes"},
        {"model": "m", "features": {"a": 0.9, "b": "p"}},  # predict only
        {"model": "m", "features": {"a": 0.1}, "label": "no", "weight": 1e13},
    ]
    _produce(r, rows)
    r.xadd(STREAM, {"data": b"{not json"})
    r.xadd(STREAM, {"other": b"x"})
    prom = CollectorRegistry()
    metrics = ConsumeMetrics(prom)

    async def go():
        reg = await _registry(_settings(tmp_path), ("m", SPEC))
        counts = await _drain(reg, clean_redis_url + "?output=out", metrics, batch=64)
        out = _fields(r.xrange("out"))
        predicted = [json.loads(o["data"]) for o in out if "prediction_id" in o["data"]]
        assert len(predicted) == 1 and predicted[0]["prediction_id"]
        # the producer gives the late label of that prediction (twice: learned once)
        pid = predicted[0]["prediction_id"]
        _produce(r, [{"model": "m", "prediction_id": pid, "label": "yes"}] * 2)
        counts2 = await _drain(reg, clean_redis_url + "?output=out", metrics)
        desc = await reg.describe("m")
        await reg.store.close()
        return counts, counts2, desc

    counts, counts2, desc = asyncio.run(go())
    assert counts["learned"] == 200 and counts["dead"] == 5 and counts["acked"] == 206
    assert counts2["learned"] == 1 and counts2["duplicates"] == 1
    assert desc["n_seen"] == 201
    dead = {d["message"]: d for d in _fields(r.xrange("chorus:dead"))}
    reasons = sorted(d["reason"] for d in dead.values())
    assert reasons == sorted([
        "404: model 'nope' not found",
        "422: features.a: integer 1180591620717411303424 is outside the 64-bit range; send a "
        "float or a string",
        "422: weight: Input should be less than or equal to 1000000000000",
        "422: Invalid JSON: key must be a string at line 1 column 2",
        "422: no payload (a Redis entry needs a 'data' field holding the JSON)",
    ]), reasons  # fmt: skip
    assert all(d["stream"] == STREAM for d in dead.values())
    assert {d["model"] for d in dead.values()} == {"nope", "m", ""}
    assert r.xpending(STREAM, "chorus")["pending"] == 0
    answers = [json.loads(o["data"]) for o in _fields(r.xrange("out"))]
    learned = [a for a in answers if "seq" in a]
    assert [a["seq"] for a in learned] == list(range(1, 202)) + [201]
    assert learned[-1]["duplicate"] is True and learned[-2]["duplicate"] is False
    text = generate_latest(prom).decode()
    assert f'chorus_consume_learned_total{{model="m",stream="{STREAM}"}} 201.0' in text
    assert f'chorus_consume_dead_lettered_total{{model="<unknown>",stream="{STREAM}"}} 4.0' in text
    assert f'chorus_consume_dead_lettered_total{{model="m",stream="{STREAM}"}} 1.0' in text
    assert f'chorus_consume_duplicates_total{{model="m",stream="{STREAM}"}} 1.0' in text


def test_redelivered_messages_are_learned_once(tmp_path, clean_redis_url):
    """Messages delivered and not acknowledged (the consumer died) come back to the consumer of
    that name at its restart; messages delivered again after being learned (an acknowledgement
    lost: here the group's position set back) are duplicates; a producer that published one
    example twice under one id has it learned once."""
    r = redis.Redis.from_url(clean_redis_url)
    rows = _learn_rows(300, ids=False) + _learn_rows(50, start=1000, ids=True)
    rows += _learn_rows(50, start=1000, ids=True)  # published twice by the producer
    _produce(r, rows)
    r.xgroup_create(STREAM, "chorus", id="0")
    r.xreadgroup("chorus", "c1", {STREAM: ">"}, count=120)  # c1 took 120, died before learning

    async def go():
        reg = await _registry(_settings(tmp_path), ("m", SPEC))
        first = await _drain(reg, clean_redis_url, consumer="c1", batch=50)
        r.xgroup_setid(STREAM, "chorus", "0")  # everything is delivered again
        again = await _drain(reg, clean_redis_url, consumer="c1", batch=50)
        n = (await reg.describe("m"))["n_seen"]
        await reg.store.close()
        return first, again, n

    first, again, n_seen = asyncio.run(go())
    assert n_seen == 350
    assert first["learned"] == 350 and first["duplicates"] == 50 and first["redelivered"] == 120
    assert again["learned"] == 0 and again["duplicates"] == 400


def test_claims_the_messages_of_a_dead_consumer(tmp_path, clean_redis_url):
    r = redis.Redis.from_url(clean_redis_url)
    _produce(r, _learn_rows(100))
    r.xgroup_create(STREAM, "chorus", id="0")
    r.xreadgroup("chorus", "dead", {STREAM: ">"}, count=60)  # and it never comes back

    async def go():
        reg = await _registry(_settings(tmp_path), ("m", SPEC))
        early = await _drain(reg, clean_redis_url, consumer="alive", claim_idle=30)
        await asyncio.sleep(0.3)
        late = await _drain(reg, clean_redis_url, consumer="alive", claim_idle=0.2)
        n = (await reg.describe("m"))["n_seen"]
        await reg.store.close()
        return early, late, n

    early, late, n_seen = asyncio.run(go())
    assert early["learned"] == 40  # the 60 of "dead" are not idle long enough yet
    assert late["learned"] == 60 and late["redelivered"] == 60
    assert n_seen == 100 and r.xpending(STREAM, "chorus")["pending"] == 0


def test_a_message_that_keeps_coming_back_is_dead_lettered(tmp_path, clean_redis_url):
    r = redis.Redis.from_url(clean_redis_url)
    (poison,) = _produce(r, _learn_rows(1))
    r.xgroup_create(STREAM, "chorus", id="0")
    r.xreadgroup("chorus", "c1", {STREAM: ">"}, count=1)
    r.xclaim(STREAM, "chorus", "c1", 0, [poison], retrycount=10)  # 10 deliveries, all failed

    async def go():
        reg = await _registry(_settings(tmp_path), ("m", SPEC))
        counts = await _drain(reg, clean_redis_url, consumer="c1")
        await reg.store.close()
        return counts

    assert asyncio.run(go())["dead"] == 1
    (dead,) = _fields(r.xrange("chorus:dead"))
    assert dead["reason"].startswith("delivered 11 times without being learned")
    assert dead["deliveries"] == "11"


def test_a_model_that_cannot_learn_never_blocks_the_others(tmp_path, clean_redis_url):
    """A model at its limit refuses what is over it (dead letters naming the limit), one whose
    name is unknown refuses everything; the others' messages in the same reads are learned."""
    r = redis.Redis.from_url(clean_redis_url)
    small = {**SPEC, "limits": {"max_features": 2}}
    rows = []
    for i in range(300):
        x, y = _example(i)
        rows.append({"model": "good", "features": x, "label": y})
        rows.append({"model": "small", "features": {**x, f"f{i}": 1.0}, "label": y})
        rows.append({"model": "ghost", "features": x, "label": y})
    _produce(r, rows)

    async def go():
        reg = await _registry(_settings(tmp_path), ("good", SPEC), ("small", small))
        counts = await _drain(reg, clean_redis_url, batch=100)
        good, smalld = await reg.describe("good"), await reg.describe("small")
        await reg.store.close()
        return counts, good, smalld

    counts, good, small_desc = asyncio.run(go())
    assert good["n_seen"] == 300 and small_desc["n_seen"] == 0
    assert counts["dead"] == 600 and counts["learned"] == 300
    reasons = {
        d["reason"].split(":")[0] + ":" + d["model"] for d in _fields(r.xrange("chorus:dead"))
    }
    assert reasons == {"422:small", "404:ghost"}
    one = next(d for d in _fields(r.xrange("chorus:dead")) if d["model"] == "small")
    assert "max_features" in one["reason"] or "features" in one["reason"], one["reason"]


def test_a_stalled_store_holds_the_messages_and_learns_them_once(tmp_path, clean_redis_url):
    """The registry's store (its own redis-server) stops answering mid-stream (SIGSTOP): the
    model's messages are held, in order, and retried; once it answers again each is learned
    exactly once, in stream order."""
    from app.testing import RedisServer

    store_redis = RedisServer(tmp_path / "store")
    store_redis.start()
    r = redis.Redis.from_url(clean_redis_url)
    rows = _learn_rows(600, ids=True)
    _produce(r, rows)
    settings_ = _settings(tmp_path, redis_timeout=0.3)
    settings_.redis_url = store_redis.url

    async def go():
        reg = await _registry(settings_, ("m", SPEC))
        cfg = ConsumeConfig.from_url(clean_redis_url, block=0.05, batch=50)
        consumer = make_consumer(reg, cfg, None)
        stop = asyncio.Event()
        task = asyncio.create_task(consumer.run(stop))

        async def wait_for(done, what: str, seconds: float = 120.0) -> None:
            # (a consumer that died, or stopped progressing, fails the test instead of hanging it)
            deadline = time.monotonic() + seconds
            while not done():
                if task.done():
                    task.result()  # its exception, if it raised
                    raise AssertionError(f"the consumer stopped before {what}: {consumer.counts}")
                assert time.monotonic() < deadline, f"no {what} in {seconds} s: {consumer.counts}"
                await asyncio.sleep(0.005)

        await wait_for(lambda: consumer.counts["learned"] >= 100, "100 learned")
        store_redis.pause()
        held, until = 0, time.monotonic() + 1.5
        while time.monotonic() < until:  # (a retry takes its messages out of the hold a moment)
            held = max(held, consumer.n_held)
            await asyncio.sleep(0.005)
        store_redis.resume()
        await wait_for(lambda: consumer.counts["learned"] + consumer.counts["duplicates"] >= 600,
                    "600 learned or duplicates after the store came back")  # fmt: skip
        stop.set()
        await _within(task, "the consumer's stop")
        await _within(consumer.bus.close(), "the bus's close")
        out = (await _within(reg.describe("m"), "describe"))["n_seen"], held, dict(consumer.counts)
        await _within(reg.store.close(), "the store's close")
        return out

    try:
        n_seen, held, counts = asyncio.run(go())
    finally:
        store_redis.stop()
    assert held > 0  # the messages waited while the store did not answer
    assert n_seen == 600 and counts["dead"] == 0
    assert r.xpending(STREAM, "chorus")["pending"] == 0


async def _within(aw, what: str, seconds: float = 60.0):
    """``await aw``, or fail after ``seconds`` naming where every task of the loop waits (a
    hang shows its cause instead of a silent idle loop until the suite's timeout)."""
    fut = asyncio.ensure_future(aw)
    done, _ = await asyncio.wait({fut}, timeout=seconds)
    if done:
        return fut.result()
    import io

    out = io.StringIO()
    for t in asyncio.all_tasks():  # (before the cancel: where each one waits)
        out.write(f"--- {t!r}\n")
        t.print_stack(limit=30, file=out)
    fut.cancel()
    raise AssertionError(f"{what}: no end in {seconds} s; the tasks:\n{out.getvalue()}")


def test_a_reader_that_fails_ends_the_run_with_its_error(tmp_path, clean_redis_url):
    """An error of the read that is not the bus being down (a bug, a reply it cannot parse)
    ends ``run`` with that error: it used to end the read loop and ``run`` returned as if
    stopped, so ``chorus consume`` exited 0 and the stream waited unread."""
    r = redis.Redis.from_url(clean_redis_url)
    _produce(r, _learn_rows(20, ids=True))

    async def go():
        reg = await _registry(_settings(tmp_path), ("m", SPEC))
        consumer = make_consumer(reg, ConsumeConfig.from_url(clean_redis_url, block=0.05), None)
        read = consumer.bus.read
        calls = 0

        async def failing_read(*args):
            nonlocal calls
            calls += 1
            if calls > 1:
                raise RuntimeError("unparseable reply")
            return await read(*args)

        consumer.bus.read = failing_read
        try:
            with pytest.raises(RuntimeError, match="unparseable reply"):
                await asyncio.wait_for(consumer.run(asyncio.Event()), 30)
        finally:
            await consumer.bus.close()
            await reg.store.close()
        return consumer.counts

    assert asyncio.run(go())["learned"] == 20  # what it read before is learned


def test_inside_serve_a_failed_consumer_starts_again(tmp_path, clean_redis_url, monkeypatch,
                                                    caplog):  # fmt: skip
    """``CHORUS_CONSUME``: a consumer that fails (here its first read) is logged at ERROR and
    started again; every message is learned once all the same."""
    from app.consume import redis_bus, run

    monkeypatch.setattr(run, "OPEN_RETRY", 0.2)
    caplog.set_level("INFO", logger=run.log.name)
    read = redis_bus.RedisBus.read
    calls = 0

    async def failing_once(self, *args):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("unparseable reply")
        return await read(self, *args)

    monkeypatch.setattr(redis_bus.RedisBus, "read", failing_once)
    r = redis.Redis.from_url(clean_redis_url)
    _produce(r, _learn_rows(300, ids=True))
    settings_ = _settings(tmp_path, consume=clean_redis_url)

    async def go():
        reg = await _registry(settings_, ("m", SPEC))
        stop = asyncio.Event()
        task = asyncio.create_task(run.consume_in_app(reg, settings_, CollectorRegistry(), stop))
        deadline = time.monotonic() + 60
        while (await reg.describe("m"))["n_seen"] < 300:
            assert time.monotonic() < deadline and not task.done(), "not every message learned"
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(task, 30)
        n = (await reg.describe("m"))["n_seen"]
        await reg.store.close()
        return n

    assert asyncio.run(go()) == 300
    assert "the consumer failed; starting it again" in caplog.text and calls > 1


def test_errors_that_cannot_be_retried_are_clear(tmp_path, clean_redis_url):
    r = redis.Redis.from_url(clean_redis_url)
    r.set("notastream", "x")
    runner = CliRunner()
    env = {"CHORUS_DATA_DIR": str(tmp_path / "data"), "CHORUS_REDIS_URL": ""}
    cases = [
        (["consume", "kafka://h:1"], 2, "the scheme must be one of"),
        (["consume", clean_redis_url, "--stream", "missing", "--no-create"], 1,
         "stream 'missing' does not exist"),
        (["consume", clean_redis_url, "--stream", "notastream"], 1, "holds a Redis string"),
        (["consume", "redis://127.0.0.1:1/0"], 1, "cannot reach redis at redis://127.0.0.1:1/0"),
        (["consume"], 2, "give the bus URL"),
    ]  # fmt: skip
    for args, code, message in cases:
        result = runner.invoke(cli, args, env=env)
        assert result.exit_code == code, (args, result.output)
        assert message in result.output, (args, result.output)


def test_chorus_consume_drains_a_stream(tmp_path, clean_redis_url):
    r = redis.Redis.from_url(clean_redis_url)
    settings_ = _settings(tmp_path)
    asyncio.run(_create(settings_))
    _produce(r, _learn_rows(500, ids=True), stream="in")
    env = {"CHORUS_DATA_DIR": str(tmp_path / "data"), "CHORUS_REDIS_URL": ""}
    result = CliRunner().invoke(
        cli, ["consume", clean_redis_url, "--stream", "in", "--once", "--output", "answers"],
        env=env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "learned 500" in result.output
    assert r.xlen("answers") == 500


async def _create(settings_: Settings) -> None:
    reg = await _registry(settings_, ("m", SPEC))
    await reg.store.close()


def test_chorus_serve_consumes_with_chorus_consume_set(tmp_path, clean_redis_url):
    import time

    import httpx

    from tests._live_server import live_server

    r = redis.Redis.from_url(clean_redis_url)
    with live_server(tmp_path / "data", consume=clean_redis_url + "?block=0.1") as url:
        with httpx.Client(base_url=url, trust_env=False) as c:
            assert c.post("/models", json={"name": "m", **SPEC}).status_code == 201
            _produce(r, _learn_rows(400, ids=True))
            deadline = time.monotonic() + 20
            while c.get("/models/m").json()["n_seen"] < 400 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert c.get("/models/m").json()["n_seen"] == 400
            acked = f'chorus_consume_acked_total{{model="m",stream="{STREAM}"}} 400.0'
            while acked not in (text := c.get("/metrics").text) and time.monotonic() < deadline:
                time.sleep(0.05)
    assert acked in text
    assert f'chorus_consume_lag{{stream="{STREAM}"}}' in text


def test_commands_packed_by_hiredis_are_redis_pys_bytes():
    from redis.asyncio.connection import Connection, UnixDomainSocketConnection

    from app.consume.redis_bus import packing_in_c

    fast, plain = packing_in_c(Connection)(), Connection()
    commands = [("XACK", "s", "chorus", "1764350000000-0", b"1764350000000-1"),
                ("XINFO GROUPS", "chorus:examples"), ("XREADGROUP", "GROUP", "g", "c", "COUNT",
                 1000, "BLOCK", 100, "STREAMS", "s", ">"),
                ("XADD", "out", "MAXLEN", "~", 100_000, "*", b"data", "é".encode()),
                ("SET", "k", memoryview(b"ab"))]  # fmt: skip
    for args in commands:
        assert b"".join(fast.pack_command(*args)) == b"".join(plain.pack_command(*args)), args
    assert issubclass(packing_in_c(UnixDomainSocketConnection), UnixDomainSocketConnection)


def test_a_reader_that_misses_its_cancellation_does_not_hang_the_stop(tmp_path, clean_redis_url):
    """The reader is cancelled at the stop; redis-py can swallow that cancellation inside a
    blocking read. Such a reader returns from the read and hands its batch over to a queue the
    loop no longer empties: ``run`` waited for it for ever (the CI hang of the stalled-store
    test). Here the read swallows the cancellation while the queue is full."""
    from app.consume.consumer import Delivery

    async def go():
        reg = await _registry(_settings(tmp_path), ("m", SPEC))
        consumer = make_consumer(reg, ConsumeConfig.from_url(clean_redis_url, block=0.05), None)
        stop = asyncio.Event()
        calls = swallowed = 0

        async def read(n: int, block: float) -> list:
            nonlocal calls, swallowed
            calls += 1
            if calls < 3:  # two batches: one the loop works on, one waiting in the queue
                return [Delivery("s", f"{calls}-0", b"{}")]
            stop.set()  # the loop stops once its batch is done, leaving the queue full
            try:
                await asyncio.sleep(5)  # the blocking read the cancellation lands in
            except asyncio.CancelledError:
                swallowed += 1  # as redis-py can: the read answers instead
            return []

        async def slow_process(batch: list) -> None:
            await asyncio.sleep(0.2)

        consumer.bus.read = read
        consumer.process = slow_process
        try:
            await _within(
                consumer.run(stop), "the stop of a run whose reader missed its cancel", 20
            )
        finally:
            await consumer.bus.close()
            await reg.store.close()
        return swallowed

    assert asyncio.run(go()) == 1  # the cancellation did land in the read, and was swallowed
