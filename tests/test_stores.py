"""The store protocol, one suite run against a real SQLite file, a real redis-server and a real
3-master Redis Cluster."""

from __future__ import annotations

import asyncio

import pytest

from app.stores import (
    DuplicateKey,
    Entry,
    ModelGone,
    RedisClusterStore,
    RedisStore,
    SeqConflict,
    SqliteStore,
    StoreDown,
)


@pytest.fixture(params=["sqlite", "redis", "cluster"])
def run(request, tmp_path):
    """``run(fn)`` opens a fresh store, awaits ``fn(store)`` and closes it, in one event loop."""
    if request.param == "sqlite":
        make = lambda: SqliteStore(tmp_path / "s.db")  # noqa: E731
    elif request.param == "redis":
        url = request.getfixturevalue("clean_redis_url")
        make = lambda: RedisStore(url, timeout=2)  # noqa: E731
    else:
        url = request.getfixturevalue("clean_cluster_url")
        make = lambda: RedisClusterStore(url, timeout=2)  # noqa: E731

    def _run(fn):
        async def main():
            store = make()
            await store.open(5)
            try:
                return await fn(store)
            finally:
                await store.close()

        return asyncio.run(main())

    _run.make = make
    return _run


SPEC = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 1}


def test_models_create_list_get_delete(run):
    async def body(s):
        assert await s.create_model("a", SPEC)
        assert not await s.create_model("a", {**SPEC, "seed": 2})
        assert await s.create_model("b.2_x-y", SPEC)
        assert await s.get_model("a") == SPEC
        assert await s.get_model("zz") is None
        assert set(await s.list_models()) == {"a", "b.2_x-y"}
        assert await s.delete_model("a")
        assert not await s.delete_model("a")
        assert set(await s.list_models()) == {"b.2_x-y"}

    run(body)


def test_append_read_in_order_with_conditional_seq(run):
    async def body(s):
        await s.create_model("m", SPEC)
        assert await s.last_seq("m") == 0
        assert await s.append("m", [Entry(b"r1"), Entry(b"r2")], 0) == 2
        assert await s.append("m", [Entry(b"r3")], 2) == 3
        with pytest.raises(SeqConflict) as err:
            await s.append("m", [Entry(b"late")], 2)
        assert err.value.current == 3
        assert await s.read("m", 0) == [(1, b"r1"), (2, b"r2"), (3, b"r3")]
        assert await s.read("m", 1, limit=1) == [(2, b"r2")]
        assert await s.read("m", 3) == []
        assert await s.last_seq("m") == 3

    run(body)


def test_reads_and_trims_fall_inside_a_batch(run):
    """A batch is one append (SQLite: one row); reading after, or trimming up to, a seq inside
    it gives exactly the entries after that seq, in order, ``limit`` counted in entries."""

    async def body(s):
        await s.create_model("m", SPEC)
        recs = [b"r%d" % i for i in range(1, 8)] + [b"", b"\x00\xff" * 300, b"r10"]
        assert await s.append("m", [Entry(r) for r in recs[:4]], 0) == 4
        assert await s.append("m", [Entry(recs[4])], 4) == 5
        assert await s.append("m", [Entry(r) for r in recs[5:]], 5) == 10
        want = list(enumerate(recs, start=1))
        assert await s.read("m", 0) == want
        for after in range(11):
            assert await s.read("m", after) == want[after:]
            for limit in (1, 2, 3, 7):
                assert await s.read("m", after, limit=limit) == want[after : after + limit]
        await s.trim("m", 2)
        assert await s.read("m", 0) == want[2:]
        await s.trim("m", 6)
        assert await s.read("m", 0) == want[6:]
        assert await s.read("m", 7, limit=2) == want[7:9]
        assert await s.append("m", [Entry(b"r11"), Entry(b"r12")], 10) == 12
        await s.trim("m", 11)
        assert await s.read("m", 0) == [(12, b"r12")]
        assert await s.last_seq("m") == 12

    run(body)


def test_a_log_written_one_row_per_entry_reads_and_grows(tmp_path):
    """SQLite log format 1 (before batches were one row: no ``n`` column) is read as it was,
    gets batch rows after it, and trims across both."""
    import sqlite3

    path = tmp_path / "v1.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE models (name TEXT PRIMARY KEY, spec TEXT NOT NULL, "
        "last_seq INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL);"
        "CREATE TABLE log (model TEXT NOT NULL, seq INTEGER NOT NULL, record BLOB NOT NULL, "
        "PRIMARY KEY (model, seq)) WITHOUT ROWID;"
    )
    db.execute("INSERT INTO models VALUES ('m', '{}', 3, 0)")
    db.executemany("INSERT INTO log VALUES ('m', ?, ?)", [(i, b"old%d" % i) for i in (1, 2, 3)])
    db.commit()
    db.close()

    async def main():
        s = SqliteStore(path)
        await s.open(5)
        try:
            assert await s.read("m", 1) == [(2, b"old2"), (3, b"old3")]
            assert await s.append("m", [Entry(b"new4"), Entry(b"new5")], 3) == 5
            await s.trim("m", 2)
            assert await s.read("m", 0) == [(3, b"old3"), (4, b"new4"), (5, b"new5")]
        finally:
            await s.close()

    asyncio.run(main())
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert db.execute("SELECT seq, n FROM log ORDER BY seq").fetchall() == [(3, 1), (5, 2)]
    db.close()


def test_idempotency_keys_land_atomically_with_the_log(run):
    async def body(s):
        await s.create_model("m", SPEC)
        await s.append("m", [Entry(b"r1", "k1", b"resp1"), Entry(b"r2")], 0)
        with pytest.raises(DuplicateKey) as err:
            await s.append("m", [Entry(b"r3", "k2", b"x"), Entry(b"r4", "k1", b"y")], 2)
        assert err.value.key == "k1"
        # nothing of the refused batch was written: no r3, no k2
        assert [seq for seq, _ in await s.read("m", 0)] == [1, 2]
        assert await s.get_answers("m", ["k1", "k2"]) == {"k1": b"resp1"}
        assert await s.key_names("m") == ["k1"]
        assert await s.last_seq("m") == 2

    run(body)


def test_a_batch_of_many_keys_lands_whole_or_not_at_all(run):
    """A consumer's read of 1,200 messages: more keys than one of SQLite's multi-row inserts
    takes; a repeated key in the last part refuses the whole batch."""

    async def body(s):
        await s.create_model("m", SPEC)
        first = [Entry(b"r%d" % i, f"k{i}", b"v%d" % i) for i in range(1200)]
        assert await s.append("m", first, 0) == 1200
        again = [Entry(b"s%d" % i, f"n{i}", b"w") for i in range(1200)]
        again[1100] = Entry(b"dup", "k7", b"other")
        with pytest.raises(DuplicateKey) as err:
            await s.append("m", again, 1200)
        assert err.value.key == "k7"
        assert await s.last_seq("m") == 1200
        assert await s.get_answers("m", ["n0", "n1099", "n1199"]) == {}
        answers = await s.get_answers("m", [f"k{i}" for i in range(1200)])
        assert answers == {f"k{i}": b"v%d" % i for i in range(1200)}

    run(body)


def test_forget_keys_by_seq(run):
    async def body(s):
        await s.create_model("m", SPEC)
        await s.append("m", [Entry(b"r%d" % i, f"k{i}", b"v%d" % i) for i in range(5)], 0)
        await s.forget_keys("m", 2)  # the ids of entries 1 and 2
        assert sorted(await s.key_names("m")) == ["k2", "k3", "k4"]
        assert await s.get_answers("m", ["k0", "k1", "k2"]) == {"k2": b"v2"}
        assert await s.append("m", [Entry(b"again", "k0", b"w")], 5) == 6  # k0 usable again
        await s.forget_keys("m", 5)
        assert await s.key_names("m") == ["k0"]  # learned again as entry 6

    run(body)


def test_many_keys_answered_and_forgotten_in_batches(run):
    """More ids than one store call takes (SQLite's bound parameters, the Redis scripts'
    batches): every one is answered, and forgetting goes on until all old ones are gone."""

    async def body(s):
        await s.create_model("m", SPEC)
        n = 2500
        await s.append("m", [Entry(b"r", f"k{i}", b"v%d" % i) for i in range(n)], 0)
        got = await s.get_answers("m", [f"k{i}" for i in range(n)] + ["nope"])
        assert got == {f"k{i}": b"v%d" % i for i in range(n)}
        await s.forget_keys("m", n - 10)
        assert sorted(await s.key_names("m")) == sorted(f"k{i}" for i in range(n - 10, n))

    run(body)


def test_put_keys_keeps_the_ones_already_there(run):
    async def body(s):
        await s.create_model("m", SPEC)
        await s.append("m", [Entry(b"r", "k1", b"first")], 0)
        await s.put_keys("m", [("k1", 5, b"other"), ("k2", 6, b"v2")])
        assert await s.get_answers("m", ["k1", "k2"]) == {"k1": b"first", "k2": b"v2"}
        await s.forget_keys("m", 5)
        assert await s.key_names("m") == ["k2"]
        with pytest.raises(ModelGone):
            await s.put_keys("ghost", [("k", 1, b"v")])

    run(body)


def test_append_to_deleted_model_writes_nothing(run):
    async def body(s):
        with pytest.raises(ModelGone):
            await s.append("ghost", [Entry(b"r")], 0)
        assert await s.read("ghost", 0) == []
        await s.create_model("m", SPEC)
        await s.append("m", [Entry(b"r", "k", b"v")], 0)
        await s.delete_model("m")
        with pytest.raises(ModelGone):
            await s.append("m", [Entry(b"r")], 1)
        assert await s.create_model("m", SPEC)  # a new model of the same name starts empty
        assert await s.read("m", 0) == [] and await s.key_names("m") == []
        assert await s.get_snapshot("m") is None and await s.last_seq("m") == 0

    run(body)


def test_snapshot_and_trim(run):
    async def body(s):
        await s.create_model("m", SPEC)
        assert await s.get_snapshot("m") is None
        await s.append("m", [Entry(b"r%d" % i) for i in range(1, 6)], 0)
        blob = bytes(range(256)) * 10
        await s.put_snapshot("m", 3, blob)
        await s.trim("m", 3)
        assert await s.get_snapshot("m") == (3, blob)
        assert await s.read("m", 0) == [(4, b"r4"), (5, b"r5")]
        assert await s.last_seq("m") == 5
        await s.put_snapshot("m", 5, b"newer")
        assert await s.get_snapshot("m") == (5, b"newer")
        await s.put_snapshot("m", 4, b"stale")  # another process, behind: ignored
        assert await s.get_snapshot("m") == (5, b"newer")
        with pytest.raises(ModelGone):
            await s.put_snapshot("ghost", 1, b"x")

    run(body)


def test_snapshots_keep_the_previous_generation(run):
    async def body(s):
        await s.create_model("m", SPEC)
        assert await s.get_snapshots("m") == []
        assert await s.put_snapshot("m", 3, b"g3") == 3  # only one kept: trim up to 3
        assert await s.get_snapshots("m") == [(3, b"g3")]
        assert await s.put_snapshot("m", 7, b"g7") == 3  # oldest kept is still 3
        assert await s.get_snapshots("m") == [(7, b"g7"), (3, b"g3")]
        assert await s.put_snapshot("m", 7, b"g7bis") == 3  # same seq: replaced in place
        assert await s.get_snapshots("m") == [(7, b"g7bis"), (3, b"g3")]
        assert await s.put_snapshot("m", 5, b"stale") == 3  # behind: ignored
        assert await s.put_snapshot("m", 9, b"g9") == 7  # 3 drops out
        assert await s.get_snapshots("m") == [(9, b"g9"), (7, b"g7bis")]
        await s.delete_model("m")
        await s.create_model("m", SPEC)
        assert await s.get_snapshots("m") == []

    run(body)


def test_sqlite_writes_a_snapshot_blob_once(tmp_path):
    """SQLite keeps the two generations in two slots: a newer snapshot overwrites the older
    one's slot, one row written (shifting the current one to the other table first copied its
    blob too); a store written the old way (newest in ``snapshots``) goes on the same."""
    import asyncio

    async def body() -> None:
        s = SqliteStore(tmp_path / "slots.db")
        await s.open(timeout=2)
        await s.create_model("m", SPEC)
        for seq in (3, 7, 9, 9, 12):
            before = s.db.total_changes
            await s.put_snapshot("m", seq, b"g%d" % seq)
            assert s.db.total_changes - before == 2  # the blob's row and models.last_seq
        assert await s.get_snapshots("m") == [(12, b"g12"), (9, b"g9")]
        # the old layout: newest in snapshots, previous in snapshots_prev
        s.db.execute("UPDATE snapshots SET seq = 20, blob = X'6E' WHERE model = 'm'")
        s.db.execute("UPDATE snapshots_prev SET seq = 15, blob = X'6F' WHERE model = 'm'")
        s.db.commit()
        assert await s.put_snapshot("m", 25, b"g25") == 20  # 15, the older, is overwritten
        assert await s.get_snapshots("m") == [(25, b"g25"), (20, b"n")]
        assert await s.put_snapshot("m", 18, b"stale") == 20
        assert await s.get_snapshots("m") == [(25, b"g25"), (20, b"n")]
        await s.close()

    asyncio.run(body())


def test_snapshot_ahead_of_log_moves_the_sequence(run):
    """With durability off the log stays empty; the snapshot's seq is the new tail."""

    async def body(s):
        await s.create_model("m", SPEC)
        await s.put_snapshot("m", 7, b"s")
        assert await s.last_seq("m") == 7
        assert await s.append("m", [Entry(b"r8")], 7) == 8

    run(body)


def test_predictions_are_kept(run):
    async def body(s):
        await s.create_model("m", SPEC)
        await s.put_prediction("m", "p1", b'{"x":1}', ttl=60)
        assert await s.get_prediction("m", "p1") == b'{"x":1}'
        assert await s.get_prediction("m", "nope") is None
        await s.delete_model("m")
        assert await s.get_prediction("m", "p1") is None

    run(body)


def test_two_clients_one_writer_wins(run):
    """Two connections appending at the same expected seq: exactly one lands."""

    async def body(s):
        await s.create_model("m", SPEC)
        other = run.make()
        await other.open(5)
        try:
            results = await asyncio.gather(
                s.append("m", [Entry(b"a")], 0),
                other.append("m", [Entry(b"b")], 0),
                return_exceptions=True,
            )
        finally:
            await other.close()
        assert sorted(type(r).__name__ for r in results) == ["SeqConflict", "int"]
        assert len(await s.read("m", 0)) == 1

    run(body)


def test_writer_lease(run):
    async def body(s):
        await s.create_model("m", SPEC)
        assert await s.acquire_writer("m", "a", 5)
        assert await s.acquire_writer("m", "a", 5)  # extend our own
        assert not await s.acquire_writer("m", "b", 5)
        await s.release_writer("m", "b")  # not b's to release
        assert not await s.acquire_writer("m", "b", 5)
        await s.release_writer("m", "a")
        assert await s.acquire_writer("m", "b", 0.05)
        await asyncio.sleep(0.1)  # expired: free again
        assert await s.acquire_writer("m", "a", 5)

    run(body)


def test_ping(run):
    async def body(s):
        assert await s.ping()

    run(body)


def test_kept_predictions_are_bounded_oldest_out(run):
    async def body(s):
        await s.create_model("m", SPEC)
        await s.create_model("n", SPEC)
        for i in range(7):
            items = [("m", f"p{i}", b"x" * 10), ("n", f"q{i}", b"y")]
            await s.put_predictions(items, ttl=60, max_per_model=3)
        kept = [i for i in range(7) if await s.get_prediction("m", f"p{i}") is not None]
        assert kept == [4, 5, 6]
        assert (
            await s.get_prediction("n", "q6") == b"y" and await s.get_prediction("n", "q3") is None
        )

    run(body)


# ------------------------------------------------------------------ Redis Cluster only
def test_cluster_lists_models_on_every_master(redis_cluster, clean_cluster_url):
    """Models spread over the three masters are listed without a cross-slot command, and a name
    the index holds without a spec (a create or delete stopped half-way) is skipped."""
    names = [f"m{i}" for i in range(30)]
    owners = {redis_cluster.node_of(f"chorus:m:{{{n}}}:spec").port for n in names}
    assert len(owners) == 3  # the test means something: every master holds some

    async def main():
        s = RedisClusterStore(clean_cluster_url, timeout=2)
        await s.open(5)
        try:
            for n in names:
                assert await s.create_model(n, {**SPEC, "seed": int(n[1:])})
            await s.r.sadd("chorus:models", "half-made")  # as a crash after the first SADD
            listed = await s.list_models()
            assert list(listed) == sorted(names)
            assert all(listed[n]["seed"] == int(n[1:]) for n in names)
            await s.put_prediction("m3", "p1", b"x", ttl=60)
            assert await s.delete_model("m3")
            assert await s.get_prediction("m3", "p1") is None
            assert "m3" not in await s.list_models()
            assert await s.create_model("half-made", SPEC)  # the dangling name is reusable
            assert "half-made" in await s.list_models()
        finally:
            await s.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("redis+cluster://", "host:port"),
        ("redis+cluster://h:1,h2", "'h2' is not host:port"),
        ("redis+cluster://h:99999", "host:port"),
        ("redis+cluster://h:1/3", "database 0 only"),
        ("redis+clustr://h:1", "redis+cluster://"),
        ("http://h:1", "redis+cluster://"),
    ],
)
def test_bad_store_urls_are_refused_with_settings(url, words):
    from pydantic import ValidationError

    from app.settings import Settings

    with pytest.raises(ValidationError, match="redis_url") as err:
        Settings(redis_url=url)
    assert words in str(err.value)


def test_cluster_url_parts():
    from app.stores.redis_cluster import parse_cluster_url

    conf = parse_cluster_url("rediss+cluster://u:p%40ss@a:7000, b:7001,[::1]:7002/0")
    assert conf == {
        "startup_nodes": [("a", 7000), ("b", 7001), ("::1", 7002)],
        "username": "u",
        "password": "p@ss",
        "ssl": True,
    }


def test_wrong_kind_of_server_fails_at_open(redis_cluster, redis_url):
    """A cluster URL at a plain Redis, a plain URL at a cluster node, nobody listening: each
    is a StoreConfigError naming the fix, not a retry loop."""
    from conftest import free_port

    from app.stores import StoreConfigError

    port = redis_url.split(":")[-1].split("/")[0]
    node = redis_cluster.nodes[0].port

    async def fails(store, timeout):
        try:
            await store.open(timeout)
        finally:
            await store.close()

    with pytest.raises(StoreConfigError, match="not a Redis Cluster node"):
        asyncio.run(fails(RedisClusterStore(f"redis+cluster://127.0.0.1:{port}", 1), 2))
    with pytest.raises(StoreConfigError, match="is a Redis Cluster node: use redis"):
        asyncio.run(fails(RedisStore(f"redis://127.0.0.1:{node}/0", 1), 2))
    with pytest.raises(StoreConfigError, match="unreachable for 0.3 s"):
        asyncio.run(fails(RedisClusterStore(f"redis+cluster://127.0.0.1:{free_port()}", 0.2), 0.3))


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_failing_store_raises_store_down_not_its_drivers_error(kind, tmp_path):
    """The protocol's error, not redis-py's or sqlite3's, reaches the registry (and a 503); the
    cluster's is checked by tests/test_cluster.py (a killed master gives 503s, not 500s)."""
    from conftest import RedisServer

    server = RedisServer(tmp_path / "redis")

    async def main():
        if kind == "sqlite":
            s = SqliteStore(tmp_path / "s.db")
            await s.open(5)
            assert await s.create_model("a", SPEC)
            await s.close()  # every later call fails inside sqlite3
        else:
            server.start()
            s = RedisStore(server.url, timeout=0.5)
            await s.open(5)
            assert await s.create_model("a", SPEC)
            server.kill()  # every later call fails inside redis-py
        for call in (s.last_seq("a"), s.list_models(), s.append("a", [Entry(b"x")], 0)):
            with pytest.raises(StoreDown) as err:
                await call
            assert isinstance(err.value.__cause__, type(s).DRIVER_ERRORS), err.value.__cause__
            assert s.name in str(err.value)

    try:
        asyncio.run(main())
    finally:
        server.stop()


def test_ids_stored_before_the_seq_index_are_indexed_from_their_answers(tmp_path, clean_redis_url):
    """A store written when ids were forgotten by name (SQLite ``idem`` without ``seq``, Redis
    ``ids`` without ``idz``) gets each id's seq from its stored answer: forgetting by seq then
    drops exactly the old ones."""
    import sqlite3

    import redis

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE idem (model TEXT NOT NULL, key TEXT NOT NULL, response BLOB NOT NULL, "
        "PRIMARY KEY (model, key)) WITHOUT ROWID;"
    )
    db.executemany(
        "INSERT INTO idem VALUES ('m', ?, ?)",
        [(f"k{i}", b'{"prediction":null,"seq":%d}' % i) for i in range(1, 6)],
    )
    db.commit()
    db.close()
    r = redis.Redis.from_url(clean_redis_url)
    r.set("chorus:m:{m}:spec", "{}")
    r.hset("chorus:m:{m}:ids", mapping={f"k{i}": b'{"seq":%d}' % i for i in range(1, 6)})
    r.close()

    async def body(s):
        assert sorted(await s.key_names("m")) == [f"k{i}" for i in range(1, 6)]
        await s.forget_keys("m", 3)
        assert sorted(await s.key_names("m")) == ["k4", "k5"]
        assert set(await s.get_answers("m", ["k3", "k4"])) == {"k4"}

    for store in (SqliteStore(path), RedisStore(clean_redis_url)):

        async def main(store=store):
            await store.open(5)
            try:
                await body(store)
            finally:
                await store.close()

        asyncio.run(main())
