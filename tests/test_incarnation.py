"""A model is its incarnation (ARCHITECTURE §10): a DELETE and a create of the same name are two
lives that no worker, handle or delayed label mixes (issue 42, items 1-3 and 10).

Real stores only: SQLite files, a spawned ``redis-server``, two uvicorn workers.
"""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
import pytest

from app.errors import ModelNotFound, PredictionExpired, PredictionNotFound
from app.registry import Example
from app.settings import Settings
from app.stores import make_store
from app.testing import ChorusServer, open_registry

pytest.importorskip("ensembles")

SPEC = {"ensemble": "bagging", "learner": "naive_bayes", "n_models": 3, "seed": 3,
        "features": {"x": "numeric"}}  # fmt: skip
STALENESS = 0.2  # CHORUS_READ_STALENESS of these tests: the bound a stale read may last


def _examples(label: str, n: int, start: int = 0) -> list[Example]:
    return [Example({"x": float((start + i) % 10)}, label) for i in range(n)]


@pytest.fixture(params=["sqlite", "redis"])
def settings(request, tmp_path):
    """``settings(**overrides)``: Settings on a fresh store of the parameter's kind."""
    base = {"data_dir": tmp_path / "data", "snapshot_interval": 3600, "redis_url": None}
    if request.param == "redis":
        base["redis_url"] = request.getfixturevalue("clean_redis_url")
    return lambda **kw: Settings(**{**base, **kw})


_registry = open_registry


# ------------------------------------------------------------------ item 1: two real workers
def _fresh(url: str, method: str, path: str, **kw) -> httpx.Response:
    """One request on a connection of its own (so the kernel may give it to either worker)."""
    with httpx.Client(base_url=url, trust_env=False, timeout=30) as c:
        return c.request(method, path, **kw)


def test_two_workers_never_serve_a_deleted_incarnation(tmp_path):
    """The issue's scenario with ``--workers 2``: learn ``old``, DELETE, every fresh connection
    answers 404; re-create, learn ``new``: every one answers the new model (after the bound)."""
    env = {"CHORUS_DATA_DIR": str(tmp_path / "data"), "CHORUS_REDIS_URL": "",
           "CHORUS_SHARED_STORE": "true", "CHORUS_READ_STALENESS": str(STALENESS),
           "CHORUS_WARMUP": "none"}  # fmt: skip
    server = ChorusServer(env, workers=2, access_log=False)
    server.start()
    n = 20
    try:
        url = server.url
        assert _fresh(url, "POST", "/models", json={"name": "m", **SPEC}).status_code == 201
        old = [{"features": {"x": float(i % 10)}, "label": "old"} for i in range(400)]
        assert _fresh(url, "POST", "/learn", json={"model": "m", "examples": old}).is_success
        # both workers load the model (fresh connections spread over them)
        seen = [_fresh(url, "GET", "/models/m").json()["n_seen"] for _ in range(n)]
        assert seen == [400] * n
        assert _fresh(url, "DELETE", "/models/m").status_code == 204
        assert [_fresh(url, "GET", "/models/m").status_code for _ in range(n)] == [404] * n
        time.sleep(2 * STALENESS)  # the documented bound of /predict
        predicted = [_fresh(url, "GET", "/predict", params={"model": "m", "x": "1"}).status_code
                     for _ in range(n)]  # fmt: skip
        assert predicted == [404] * n
        assert _fresh(url, "POST", "/models", json={"name": "m", **SPEC}).status_code == 201
        new = [{"features": {"x": float(i % 10)}, "label": "new"} for i in range(10)]
        assert _fresh(url, "POST", "/learn", json={"model": "m", "examples": new}).is_success
        assert [_fresh(url, "GET", "/models/m").json()["n_seen"] for _ in range(n)] == [10] * n
        time.sleep(2 * STALENESS)
        answers = [
            _fresh(url, "GET", "/predict", params={"model": "m", "x": "1"}).json()["prediction"]
            for _ in range(n)
        ]
        assert answers == ["new"] * n
        # a learn on either worker lands in the new life's log, right after its 10 entries
        seqs = [_fresh(url, "POST", "/learn", json={"model": "m", **new[0]}).json()["seq"]
                for _ in range(n)]  # fmt: skip
        assert seqs == list(range(11, 11 + n))
    finally:
        server.stop()


# ------------------------------------------------------------------ items 1 and 3, two registries
def test_a_stale_registry_reloads_and_refuses_labels_of_the_deleted_life(settings):
    """Two processes on one store: the one that served the deleted incarnation reloads the new
    one within the bound, and a delayed label for a prediction the deleted one served is a 410
    on both (it was learned into the new model before)."""
    s = settings(shared_store=True, read_staleness=3600)  # b stays stale: labels alone are tested

    async def main():
        async with _registry(s) as a, _registry(s) as b:
            await a.create("m", SPEC)
            await a.learn("m", _examples("old", 20), batch=True)
            (served,) = await b.predict("m", [{"x": 1.0}])  # b holds the first life
            assert served["prediction"] == "old"
            await a.delete("m")
            await a.create("m", SPEC)
            await a.learn("m", _examples("new", 5), batch=True)
            (stale,) = await b.predict("m", [{"x": 1.0}])  # within b's bound: still the old
            assert stale["prediction"] == "old" and stale["prediction_id"]
            for reg in (a, b):
                with pytest.raises(PredictionNotFound):  # deleted with its model
                    await reg.learn_delayed("m", served["prediction_id"], "old")
                with pytest.raises(PredictionExpired, match="earlier model"):  # kept after
                    await reg.learn_delayed("m", stale["prediction_id"], "old")
            # b's describe checks the store on every call: the new life, caught up
            assert (await b.describe("m"))["n_seen"] == 5
            (fresh,) = await a.predict("m", [{"x": 1.0}])
            assert fresh["prediction"] == "new"
            learned = await b.learn_delayed("m", fresh["prediction_id"], "new")
            assert learned["seq"] == 6
            assert (await a.describe("m"))["n_seen"] == 6 == await a.store.last_seq("m")

    asyncio.run(main())


# ------------------------------------------------------------------ item 2, one process
def test_learns_racing_a_delete_and_create_never_leave_the_model_behind_its_log(settings):
    """Learns that found a model just before it was deleted and created again: each either
    lands in the new life (and the served model has it) or answers 404; the served model's seq
    is the store's (4 of 150 rounds failed on each store before: acknowledged seqs 1-4, the
    store at 4, the served model at 0)."""
    s = settings()  # one process

    async def main():
        behind = []
        async with _registry(s) as reg:
            for r in range(10):
                await reg.create("m", SPEC)
                await reg.learn("m", _examples("old", 3), batch=True)
                old = reg.models.peek("m")
                tasks = [asyncio.create_task(reg.learn("m", _examples("new", 1, i)))
                         for i in range(4)]  # fmt: skip
                await asyncio.sleep(0)  # they found the model and queued on it
                await reg.delete("m")
                await reg.create("m", SPEC)
                # and requests that resolved the old model before the DELETE reach its writer
                # only now (the registry's learn between its lookup and the writer)
                late = [reg.writer.learn(old, _examples("new", 1, i)) for i in range(4)]
                done = await asyncio.gather(*tasks, *late, return_exceptions=True)
                for d in done:
                    assert isinstance(d, (list, ModelNotFound)), d
                acked = sorted(d[0]["seq"] for d in done if isinstance(d, list))
                last = await reg.store.last_seq("m")
                d = await reg.describe("m")
                assert acked == list(range(1, last + 1))
                if (d["seq"], d["n_seen"]) != (last, last):
                    behind.append((r, d["seq"], d["n_seen"], last))
                await reg.delete("m")
        assert behind == []

    asyncio.run(main())


# ------------------------------------------------------------------ item 3 (Redis): no key lives on
def test_kept_prediction_keys_all_expire(clean_redis_url, tmp_path):
    """Every key of a model's kept predictions has a TTL, the index of them too: a prediction
    served during a DELETE writes it again after the model's keys are gone (it lived forever)."""
    import redis

    s = Settings(data_dir=tmp_path, redis_url=clean_redis_url, prediction_ttl=60)

    async def main():
        async with _registry(s) as reg:
            await reg.create("m", SPEC)
            await reg.learn("m", _examples("a", 5), batch=True)
            await reg.predict("m", [{"x": 1.0}, {"x": 2.0}], many=True)

    asyncio.run(main())
    r = redis.Redis.from_url(clean_redis_url)
    keys = r.keys("chorus:m:{m}:p*")
    assert len(keys) == 3 and {k: r.pttl(k) > 0 for k in keys} == dict.fromkeys(keys, True)


# ------------------------------------------------------------------ item 10: the store emptied
def test_redis_emptied_under_a_running_server(clean_redis_url, redis_server, tmp_path, caplog):
    """Redis restarted empty under a single process: /predict answers 404 within the bound,
    /readyz answers 503 naming the loss once, and it is logged at ERROR."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from app.main import create_app

    s = Settings(data_dir=tmp_path, redis_url=clean_redis_url, read_staleness=STALENESS,
                 warmup="none")  # fmt: skip
    with TestClient(create_app(s)) as c:
        assert c.post("/models", json={"name": "m", **SPEC}).status_code == 201
        ex = [{"features": {"x": float(i)}, "label": "a"} for i in range(5)]
        assert c.post("/learn", json={"model": "m", "examples": ex}).is_success
        assert c.get("/predict", params={"model": "m", "x": "1"}).status_code == 200
        redis_server.flushall()
        time.sleep(2 * STALENESS)
        with caplog.at_level(logging.ERROR, logger="chorus.registry"):
            assert c.get("/predict", params={"model": "m", "x": "1"}).status_code == 404
            r = c.get("/readyz")
            assert r.status_code == 503 and "lost its data" in r.json()["detail"], r.text
            assert c.get("/readyz").status_code == 200  # the server is as the store is again
        errors = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
        assert len(errors) == 1 and "lost its data" in errors[0].getMessage()
        assert c.post("/learn", json={"model": "m", "examples": ex}).status_code == 404


# ------------------------------------------------------------------ stores written before
def test_a_store_written_before_incarnations_loads_and_goes_on(settings):
    """Models stored without an incarnation (no spec field, no SQLite column, no Redis ``inc``
    key, snapshots and kept predictions without one) are legacy ones: they load, learn,
    snapshot and take their delayed labels as before."""
    import sqlite3

    s = settings()
    legacy = dict(SPEC)  # what a create stored before: no "incarnation"

    async def write_old():
        store = make_store(s)
        await store.open(5)
        try:
            assert await store.create_model("m", legacy)
        finally:
            await store.close()

    asyncio.run(write_old())
    if not s.redis_url:  # the file as a version before this one wrote it: no column
        db = sqlite3.connect(s.data_dir / "chorus.db")
        db.execute("ALTER TABLE models DROP COLUMN incarnation")
        db.commit()
        db.close()

    async def main():
        async with _registry(s) as reg:
            h = reg.models.peek("m")
            assert h is not None and h.incarnation == ""
            await reg.learn("m", _examples("a", 5), batch=True)
            (p,) = await reg.predict("m", [{"x": 1.0}])
            assert (await reg.learn_delayed("m", p["prediction_id"], "a"))["seq"] == 6
            assert await reg.snapshot_all(force=True) == 1
        async with _registry(s) as reg:  # recovered from the snapshot it wrote
            d = await reg.describe("m")
            assert d["n_seen"] == d["seq"] == 6 and "incarnation" not in d["spec"]
            await reg.delete("m")
            await reg.create("m", SPEC)  # a new life has one
            assert reg.models.peek("m").incarnation != ""

    asyncio.run(main())
