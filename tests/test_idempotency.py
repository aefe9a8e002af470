"""Idempotency ids (#15): kept in the store, a small filter in memory, the guarantee unchanged.

A retry of any id within ``CHORUS_IDEMPOTENCY_WINDOW`` answers ``duplicate: true`` with the
original answer — after a restart, after eviction under ``CHORUS_MEMORY_MB``, from another
instance sharing the store, with durability ``none`` — on SQLite, a real redis-server and a real
3-master Redis Cluster; ids behind the window are forgotten; and what a model holds in memory for
its ids stays small however many it learned.
"""

from __future__ import annotations

import contextlib
import random
import time

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from app.main import create_app
from app.registry.handles import MODEL_OVERHEAD
from app.registry.ids import SeenIds
from app.settings import Settings

SPEC = {"name": "m", "ensemble": "bagging", "learner": "naive_bayes", "n_models": 3, "seed": 1}


@pytest.fixture(params=["sqlite", "redis", "cluster"])
def make_client(request, tmp_path):
    """``make_client(**settings)`` -> context manager giving a TestClient on one fresh store
    (the same store for every client the test makes: a restart is a second client)."""
    base = {"data_dir": tmp_path / "data", "snapshot_interval": 3600}
    if request.param == "redis":
        base["redis_url"] = request.getfixturevalue("clean_redis_url")
    elif request.param == "cluster":
        base["redis_url"] = request.getfixturevalue("clean_cluster_url")

    @contextlib.contextmanager
    def _make(**overrides):
        with TestClient(create_app(Settings(**{**base, **overrides}))) as client:
            yield client

    return _make


def _ex(i: int) -> dict:
    return {"x": float(i % 7), "color": ["red", "green", "blue"][i % 3]}


def _label(i: int) -> str:
    return "hi" if i % 7 > 3 else "lo"


def _learn(client, i: int, model: str = "m", id_: str | None = None) -> dict:
    body = {"model": model, "features": _ex(i), "label": _label(i), "id": id_ or f"e{i}"}
    r = client.post("/learn", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def _learn_batch(client, start: int, n: int, model: str = "m") -> list[dict]:
    exs = [{"features": _ex(i), "label": _label(i), "id": f"e{i}"} for i in range(start, start + n)]
    r = client.post("/learn", json={"model": model, "examples": exs})
    assert r.status_code == 200, r.text
    return r.json()["results"]


def _registry(client):
    return client.app.state.registry


def _same_answer(retry: dict, first: dict) -> None:
    assert retry["duplicate"] is True, retry
    for k in ("prediction", "probabilities", "seq"):
        assert retry[k] == first[k], (k, retry, first)


def test_retry_after_restart_answers_the_original(make_client):
    with make_client() as c:
        assert c.post("/models", json=SPEC).status_code == 201
        first = [_learn(c, i) for i in range(30)]
        _same_answer(_learn(c, 3), first[3])  # in the same process
    with make_client() as c:  # restarted: the model loads from the store
        for i in (0, 17, 29):
            _same_answer(_learn(c, i), first[i])
        assert c.get("/models/m").json()["n_seen"] == 30
        assert _learn(c, 30)["duplicate"] is False


def test_retry_after_a_crash_without_snapshot(make_client):
    """The ids are written with the log entry, not at the snapshot: a process that never
    snapshotted (killed) leaves them in the store."""
    with make_client(snapshot_every=10_000) as c:
        assert c.post("/models", json=SPEC).status_code == 201
        first = [_learn(c, i) for i in range(12)]
        c.app.state.registry.models.snapshot_all = _no_snapshots  # the lifespan's last snapshot
    with make_client() as c:
        _same_answer(_learn(c, 5), first[5])
        assert c.get("/models/m").json()["n_seen"] == 12


async def _no_snapshots(*, force: bool = False) -> int:
    return 0


def test_retry_after_eviction_under_the_memory_budget(make_client):
    with make_client(memory_mb=1) as c:
        models = [f"u{m}" for m in range(8)]
        for name in models:
            assert c.post("/models", json={**SPEC, "name": name}).status_code == 201
        first = {name: _learn_batch(c, 0, 200, model=name) for name in models}
        reg = _registry(c)
        deadline = time.monotonic() + 10
        while reg.memory()["evicted"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)  # the evictor runs on the app's loop
        assert reg.memory()["evicted"] > 0 and len(reg.models) < len(models)
        evicted = [name for name in models if reg.models.peek(name) is None]
        assert evicted
        for name in evicted:
            retry = _learn(c, 150, model=name)
            _same_answer(retry, first[name][150])
            assert c.get(f"/models/{name}").json()["n_seen"] == 200


def test_window_edge_remembered_and_older_ids_forgotten(make_client):
    """Window 50, snapshots every 25: after 200 learns (snapshot at seq 200 forgets the ids of
    entries <= 150) the id of entry 151 — the oldest one in the window — is still a duplicate,
    the one of entry 150 is a new example, also after a restart."""
    with make_client(snapshot_every=25, idempotency_window=50) as c:
        assert c.post("/models", json=SPEC).status_code == 201
        first = _learn_batch(c, 0, 100) + _learn_batch(c, 100, 100)  # entry seq = i + 1
        assert first[150]["seq"] == 151
        _same_answer(_learn(c, 150), first[150])  # edge of the window: remembered
        _same_answer(_learn(c, 199), first[199])
        again = _learn(c, 149)  # seq 150: forgotten, learned again as a new example
        assert again["duplicate"] is False and again["seq"] == 201
    with make_client(snapshot_every=25, idempotency_window=50) as c:
        _same_answer(_learn(c, 160), first[160])
        assert _learn(c, 10)["duplicate"] is False
        assert c.get("/models/m").json()["n_seen"] == 202


def test_durability_none_keeps_ids_until_the_snapshot_records_them(make_client):
    with make_client(durability="none", snapshot_every=20) as c:
        assert c.post("/models", json=SPEC).status_code == 201
        first = [_learn(c, i) for i in range(30)]  # a snapshot at 20 recorded ids 0..19
        h = _registry(c).models.peek("m")
        assert set(h.unsaved_ids) == {f"e{i}" for i in range(20, 30)}
        _same_answer(_learn(c, 25), first[25])  # from memory
        _same_answer(_learn(c, 5), first[5])  # from the store
    with make_client(durability="none", snapshot_every=20) as c:  # the shutdown snapshot
        _same_answer(_learn(c, 28), first[28])
        assert c.get("/models/m").json()["n_seen"] == 30


def test_another_instance_answers_a_retry(make_client):
    """Two instances on one store: an id learned through one is a duplicate on the other, which
    had the model loaded before (its filter learns the id when it catches up with the log)."""
    with make_client(shared_store=True) as a, make_client(shared_store=True) as b:
        assert a.post("/models", json=SPEC).status_code == 201
        _learn(b, 0, id_="warm")  # b holds the model now
        first = _learn(a, 1)
        _same_answer(_learn(b, 1), first)
        assert b.get("/models/m").json()["n_seen"] == 2


def test_memory_for_ids_stays_small(make_client):
    """20,000 learns with ids: the model's filter holds ~1.5 bytes per id, and the counted cost
    (CHORUS_MEMORY_MB's estimate) has no per-id answers in it."""
    with make_client() as c:
        assert c.post("/models", json=SPEC).status_code == 201
        h = None
        for start in range(0, 20_000, 1000):
            _learn_batch(c, start, 1000)
            h = _registry(c).models.peek("m")
        assert h is not None and len(h.ids) == 20_000
        assert h.ids.nbytes <= 64 * 1024, h.ids.nbytes  # was ~6 MB: each id with its answer
        blob = len(_registry(c).recovery.encode(h))  # what the last snapshot counted
        assert h.cost <= MODEL_OVERHEAD + 2 * max(blob, h.model.state_bytes) + 64 * 1024
        assert not h.unsaved_ids


# ------------------------------------------------------------------ the filter itself
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=12), st.booleans()), max_size=400),
    st.integers(min_value=1, max_value=300),
)
def test_filter_never_forgets_an_id_inside_the_window(ops, window):
    """No false "new": every id added at a seq newer than the last horizon forgotten is in."""
    s = SeenIds()
    added: list[tuple[str, int]] = []
    horizon = 0
    for seq, (key, forget) in enumerate(ops, start=1):
        s.add(key, seq)
        added.append((key, seq))
        if forget:
            horizon = max(horizon, seq - window)
            s.forget_upto(horizon)
        for k, q in added:
            if q > horizon:
                assert k in s, (k, q, horizon)


def test_filter_forgets_whole_segments_and_stays_bounded():
    s = SeenIds()
    window = 100_000
    for seq in range(1, 400_001):
        s.add(f"client-{seq:09d}", seq)
        if seq % 10_000 == 0:  # a snapshot every 10,000 learns
            s.forget_upto(seq - window)
    # ~1.5 bytes per id of the window, plus at most one largest segment of slack
    assert s.nbytes <= 1.5 * window + 2 * 98_305, s.nbytes
    assert f"client-{400_000:09d}" in s and f"client-{300_001:09d}" in s
    rnd = random.Random(1)
    fresh = [f"never-{rnd.random()}" for _ in range(20_000)]
    false_maybe = sum(k in s for k in fresh) / len(fresh)
    assert false_maybe < 0.02, false_maybe  # each of them costs one store lookup, no more


def test_ids_read_at_load_fill_one_segment():
    s = SeenIds()
    s.add_all([f"k{i}" for i in range(5000)], seq=5000)
    assert all(f"k{i}" in s for i in range(5000))
    s.add("new", 5001)
    s.forget_upto(5000)  # the loaded segment only held entries <= 5000
    assert "new" in s and "k1" not in s


def test_bulk_add_sets_the_same_bits_as_one_by_one():
    from app.registry.ids import _hash, _Segment

    keys = [f"row-{i}" for i in range(3000)] + ["", "é", "x" * 500]
    one, bulk = _Segment(4000), _Segment(4000)
    for k in keys:
        one.add(*_hash(k))
    bulk.add_many(keys)
    assert one.bits == bulk.bits and one.count == bulk.count


@given(st.lists(st.text(max_size=12), max_size=300), st.lists(st.text(max_size=12), max_size=50))
def test_batch_lookup_answers_as_one_by_one(added, asked):
    """``maybe_many`` (the writer's lookup of a batch's ids) says what ``in`` says for each."""
    s = SeenIds()
    for seq, key in enumerate(added, start=1):
        s.add(key, seq)
    keys = asked + added[:50] + [f"fresh-{i}" for i in range(20)]
    assert s.maybe_many(keys) == [k in s for k in keys]


@given(st.lists(st.integers(0, 700), min_size=1, max_size=6))
def test_batch_add_makes_the_same_segments_as_one_by_one(batches):
    """``add_many`` (the writer's add of a batch's ids) leaves the filter as ``add`` of each."""
    one, many = SeenIds(), SeenIds()
    seq = 0
    for n in batches:
        keys = [f"id-{seq + i}" for i in range(n)]
        seqs = list(range(seq + 1, seq + n + 1))
        grown_one = sum(one.add(k, q) for k, q in zip(keys, seqs))
        assert many.add_many(keys, seqs) == grown_one
        seq += n
    assert [(g.bits, g.count, g.capacity, g.newest) for g in one._segs] == [
        (g.bits, g.count, g.capacity, g.newest) for g in many._segs
    ]
