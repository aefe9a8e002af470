"""Honest outcomes: a 503 means nothing was applied, or it says the outcome is unknown (issue 42,
item 4).

A real redis-server is stopped with SIGSTOP while an append is in flight: the append reaches
Redis's socket, the client times out, and Redis runs the append when it is resumed. The answer
must be applied-and-acknowledged, or 503 with nothing applied (the model and its log unchanged,
for good), or 503 "outcome unknown" that a later request settles; never "nothing applied"
followed by a change. Whatever the answer, the served model and the log agree afterwards.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis as redis_sync
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from app.stores import Entry, OutcomeUnknown, RedisStore, StoreDown

TIMEOUT = 0.5  # CHORUS_REDIS_TIMEOUT: the append's answer is lost after this
BATCH = 50


def _examples(n: int, start: int = 0) -> list[dict]:
    return [
        {"features": {"x": float(i % 7)}, "label": "ab"[i % 2]} for i in range(start, start + n)
    ]


def _log_seq(url: str, model: str) -> int:
    r = redis_sync.Redis.from_url(url)
    try:
        return int(r.get(f"chorus:m:{{{model}}}:seq") or 0)
    finally:
        r.close()


def _settled_log(url: str, model: str, before: int) -> int:
    """The log's last seq once a paused append had its chance to run (it runs when Redis
    resumes, or never: then the log stays where it was)."""
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and _log_seq(url, model) == before:
        time.sleep(0.05)
    return _log_seq(url, model)


@pytest.fixture
def client(clean_redis_url):
    settings = Settings(
        redis_url=clean_redis_url, redis_timeout=TIMEOUT, warmup="none",
        snapshot_every=10**9, snapshot_interval=3600,
    )  # fmt: skip
    with TestClient(create_app(settings)) as c:
        r = c.post("/models", json={"name": "m", "ensemble": "bagging",
                                    "learner": "naive_bayes", "n_models": 3})  # fmt: skip
        assert r.status_code == 201, r.text
        for start in range(0, 300, BATCH):
            assert c.post(
                "/learn", json={"model": "m", "examples": _examples(BATCH, start)}
            ).is_success
        yield c


def _check_honest(c: TestClient, url: str, answer, before: int) -> None:
    """The answer to the batch sent while Redis stalled told the truth, and the model agrees
    with its log afterwards."""
    log_after = _settled_log(url, "m", before)
    later = c.post("/learn", json={"model": "m", "features": {"x": 1.0}, "label": "a"})
    assert later.status_code == 200, later.text  # settles the stalled append first
    final = _log_seq(url, "m")
    assert later.json()["seq"] == final
    described = c.get("/models/m").json()
    assert described["n_seen"] == described["seq"] == final  # the model is its log
    if answer.status_code == 200:  # acknowledged: applied
        assert final == before + BATCH + 1
        assert answer.json()["results"][-1]["seq"] == before + BATCH
    else:
        assert answer.status_code == 503, answer.text
        detail = answer.json()["detail"]
        if answer.headers.get("X-Chorus-Outcome") == "unknown":
            assert detail.startswith("outcome unknown") and "ids" in detail
            assert final in (before + 1, before + BATCH + 1)
        else:  # "nothing applied" must stay true
            assert "nothing applied" in detail
            assert log_after == before and final == before + 1


def test_a_stalled_append_is_never_a_false_nothing_applied(client, redis_server, clean_redis_url):
    before = _log_seq(clean_redis_url, "m")
    redis_server.pause()
    try:  # the append and then its settling time out: Redis runs both once resumed
        answer = client.post("/learn", json={"model": "m", "examples": _examples(BATCH, 300)})
    finally:
        redis_server.resume()
    _check_honest(client, clean_redis_url, answer, before)
    assert answer.status_code == 503 and answer.headers["X-Chorus-Outcome"] == "unknown"


def test_an_append_settled_while_the_request_waits_answers_for_sure(
    client, redis_server, clean_redis_url
):
    before = _log_seq(clean_redis_url, "m")
    redis_server.pause()
    resume = threading.Timer(TIMEOUT * 1.4, redis_server.resume)  # during the settling call
    resume.start()
    try:
        answer = client.post("/learn", json={"model": "m", "examples": _examples(BATCH, 300)})
    finally:
        resume.join()
        redis_server.resume()
    _check_honest(client, clean_redis_url, answer, before)


def test_the_store_settles_an_unanswered_append_once_and_for_all(redis_server, clean_redis_url):
    async def run() -> None:
        store = RedisStore(clean_redis_url, timeout=TIMEOUT)
        await store.open(5)
        try:
            await store.create_model("s", {"ensemble": "bagging"})
            await store.append("s", [Entry(b'{"x": {}, "y": 1}')] * 3, 0)
            redis_server.pause()
            try:
                with pytest.raises(OutcomeUnknown) as lost:
                    await store.append("s", [Entry(b'{"x": {}, "y": 2}')] * 4, 3)
                with pytest.raises(StoreDown):  # still stalled: no answer either
                    await store.resolve("s", lost.value.token, 3, 4)
            finally:
                redis_server.resume()
            applied = await store.resolve("s", lost.value.token, 3, 4)
            assert applied in (True, False)
            assert await store.last_seq("s") == (7 if applied else 3)
            assert await store.resolve("s", lost.value.token, 3, 4) is applied  # for good
            await asyncio.sleep(0.2)
            assert await store.last_seq("s") == (7 if applied else 3)
            assert await store.append("s", [Entry(b'{"x": {}, "y": 3}')], await store.last_seq("s"))
        finally:
            await store.close()

    asyncio.run(run())


@pytest.mark.parametrize("applied", [True, False])
def test_a_writer_interrupted_mid_append_answers_its_requests(tmp_path, monkeypatch, applied):
    """A cancellation that reaches the model's writer while it appends (one can leak out of a
    store client's read timeout) ends the writer: the requests of its group are answered
    "outcome unknown" and those queued behind it "nothing applied", never left waiting; the
    next request finds the model rebuilt from its log."""
    from app.errors import OutcomeUnknownError, StoreUnavailable
    from app.registry.handles import Example
    from app.testing import with_registry

    settings = Settings(data_dir=tmp_path / "data", redis_url=None, snapshot_interval=3600)
    spec = {"ensemble": "bagging", "learner": "naive_bayes", "n_models": 3, "seed": 1}

    def ex(i: int, key: str | None = None) -> Example:
        return Example({"x": float(i % 7)}, "ab"[i % 2], 1.0, key)

    async def body(reg) -> None:
        await reg.learn("m", [ex(i) for i in range(20)], batch=True)
        original = reg.store.append
        entered, release = asyncio.Event(), asyncio.Event()

        async def interrupted(*args, **kwargs):
            if entered.is_set():
                return await original(*args, **kwargs)
            entered.set()
            await release.wait()
            if applied:
                await original(*args, **kwargs)
            raise asyncio.CancelledError

        monkeypatch.setattr(reg.store, "append", interrupted)
        first = asyncio.ensure_future(reg.learn("m", [ex(20, "k20"), ex(21, "k21")], batch=True))
        await asyncio.wait_for(entered.wait(), 10)  # the writer appends the first's group
        second = asyncio.ensure_future(reg.learn("m", [ex(22, "k22")]))
        h = reg.models.peek("m")
        while not h.pending:  # the second queues behind it
            await asyncio.sleep(0.001)
        release.set()
        done = await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 10)
        assert isinstance(done[0], OutcomeUnknownError), done[0]
        assert str(done[0]).startswith("outcome unknown") and "same ids" in str(done[0])
        assert isinstance(done[1], StoreUnavailable) and "nothing applied" in str(done[1])
        assert not isinstance(done[1], OutcomeUnknownError)
        again = await asyncio.wait_for(
            reg.learn("m", [ex(20, "k20"), ex(21, "k21"), ex(22, "k22")], batch=True), 10
        )
        assert [a["duplicate"] for a in again] == [applied, applied, False]
        n = 20 + 3
        assert again[-1]["seq"] == n == await reg.store.last_seq("m")
        desc = await reg.describe("m")
        assert desc["n_seen"] == desc["seq"] == n  # the model is its log

    with_registry(settings, body, create={"m": spec})
