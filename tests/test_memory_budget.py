"""The server-wide memory budget (``CHORUS_MEMORY_MB``, issue #11): least recently used idle models
are snapshotted and dropped from memory, loaded again on demand, and come back exactly.

Both stores (real SQLite and a real redis-server). The reference is an in-process model fed the
same stream: a model evicted and reloaded any number of times answers exactly as one that never
left memory.
"""

from __future__ import annotations

import re
import time

import pytest

from app.registry.handles import MODEL_OVERHEAD
from app.stores.base import StoreDown
from tests import test_service

pytest.importorskip("ensembles")

make_client = test_service.make_client  # the fixture: a TestClient on SQLite, then on Redis

SPEC = {"ensemble": "bagging", "learner": "naive_bayes", "n_models": 3, "seed": 5}
N_MODELS = 24
BUDGET_MB = 1  # each model costs at least MODEL_OVERHEAD (160 KiB): about 6 fit


def _ex(i: int, m: int) -> dict:
    return {"x": float((i * (m + 3)) % 11), "y": float(i % 5), "c": f"v{(i + m) % 4}"}


def _label(i: int, m: int) -> str:
    return "hi" if ((i * (m + 3)) % 11) + (i % 5) > 7 else "lo"


def _gauges(client) -> dict[str, float]:
    text = client.get("/metrics").text
    out = {}
    for name in ("chorus_models_loaded", "chorus_models_bytes", "chorus_memory_budget_bytes",
                 "chorus_models_evicted_total"):  # fmt: skip
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        out[name] = float(m.group(1)) if m else float("nan")
    return out


def _settled(client, timeout: float = 20.0) -> dict[str, float]:
    """The gauges once the evictor has nothing left to do (bytes within the budget)."""
    deadline = time.monotonic() + timeout
    while True:
        g = _gauges(client)
        if g["chorus_models_bytes"] <= g["chorus_memory_budget_bytes"]:
            return g
        assert time.monotonic() < deadline, f"never got within the budget: {g}"
        time.sleep(0.05)


def _learn_round(client, models, start: int, n: int) -> None:
    for m in range(N_MODELS):
        batch = [{"features": _ex(i, m), "label": _label(i, m)} for i in range(start, start + n)]
        r = client.post("/learn", json={"model": f"u{m}", "examples": batch})
        assert r.status_code == 200, r.text
        got = [e["probabilities"] for e in r.json()["results"]]
        want = [
            dict(models[m].predict_learn_one(_ex(i, m), _label(i, m)))
            for i in range(start, start + n)
        ]
        assert got == want  # prequential answers equal a model that never left memory


def test_budget_evicts_least_recently_used_models_and_they_come_back_exactly(make_client):
    from ensembles import build_model

    models = [build_model(SPEC) for _ in range(N_MODELS)]
    with make_client(memory_mb=BUDGET_MB) as c:
        for m in range(N_MODELS):
            assert c.post("/models", json={"name": f"u{m}", **SPEC}).status_code == 201
        evicted = 0.0
        for r in range(3):  # every round reloads the models evicted by the previous one
            _learn_round(c, models, start=r * 40, n=40)
            g = _settled(c)
            assert g["chorus_memory_budget_bytes"] == BUDGET_MB * 2**20
            assert 1 <= g["chorus_models_loaded"] <= BUDGET_MB * 2**20 // MODEL_OVERHEAD
            assert g["chorus_models_evicted_total"] > evicted
            evicted = g["chorus_models_evicted_total"]
        for m in range(N_MODELS):  # the oldest were evicted: these reads load them
            x = _ex(999, m)
            r = c.post("/predict", json={"model": f"u{m}", "features": x})
            assert r.status_code == 200, r.text
            assert r.json()["probabilities"] == dict(models[m].predict_proba_one(x))
            assert c.get(f"/models/u{m}").json()["n_seen"] == 120
        assert _settled(c)["chorus_models_loaded"] < N_MODELS


def test_without_a_budget_nothing_is_evicted(make_client):
    with make_client() as c:
        for m in range(N_MODELS):
            assert c.post("/models", json={"name": f"u{m}", **SPEC}).status_code == 201
            batch = [{"features": _ex(i, m), "label": _label(i, m)} for i in range(20)]
            assert c.post("/learn", json={"model": f"u{m}", "examples": batch}).status_code == 200
        g = _gauges(c)
        assert g["chorus_models_loaded"] == N_MODELS
        assert g["chorus_models_evicted_total"] == 0 and g["chorus_memory_budget_bytes"] == 0


def test_a_model_whose_snapshot_fails_is_kept_not_lost(make_client):
    """Fault injection: while the store refuses snapshots, nothing can be evicted (an unloaded
    model would need its log replayed from the last snapshot: still exact, but eviction only
    drops what is snapshotted); every model keeps serving and learning, then eviction resumes."""
    from ensembles import build_model

    models = [build_model(SPEC) for _ in range(N_MODELS)]
    with make_client(memory_mb=BUDGET_MB) as c:
        store = c.app.state.registry.store
        real = store.put_snapshot

        async def refused(*args, **kwargs):
            raise StoreDown("injected: snapshot refused")

        store.put_snapshot = refused
        for m in range(N_MODELS):
            assert c.post("/models", json={"name": f"u{m}", **SPEC}).status_code == 201
        # a model that learned nothing since its snapshot (here: none) is its stored state
        # already, so it may go without one; every model learns in this round (reloaded if it
        # went), after which none can go
        _learn_round(c, models, start=0, n=30)
        before = _gauges(c)["chorus_models_evicted_total"]
        time.sleep(0.5)  # let the evictor try
        g = _gauges(c)
        assert g["chorus_models_evicted_total"] == before  # none could be snapshotted
        assert g["chorus_models_loaded"] == N_MODELS  # over the budget, nothing lost
        assert g["chorus_models_bytes"] > g["chorus_memory_budget_bytes"]
        store.put_snapshot = real
        _learn_round(c, models, start=30, n=10)  # the next learn triggers eviction again
        g = _settled(c)
        assert g["chorus_models_evicted_total"] > 0
        for m in range(N_MODELS):
            x = _ex(500, m)
            r = c.post("/predict", json={"model": f"u{m}", "features": x})
            assert r.json()["probabilities"] == dict(models[m].predict_proba_one(x))


def test_idempotency_keys_count_as_they_come_and_survive_eviction(make_client):
    """Each learn's id is counted at once (the segment of the model's id filter it allocates),
    not only at the next snapshot, and only as a filter (~1.5 bytes an id): 1,500 ids do not make
    a model outgrow the budget, the models' own overhead does. An evicted model reloads its ids
    from the store: a retry is still answered as a duplicate."""
    with make_client(memory_mb=1) as c:
        n_models = 8  # 8 x 160 KiB of overhead > 1 MiB
        for m in range(n_models):
            assert c.post("/models", json={"name": f"u{m}", **SPEC}).status_code == 201
        for start in range(0, 1500, 250):
            for m in range(n_models):
                batch = [{"features": _ex(i, m), "label": _label(i, m), "id": f"id-{m}-{i:06d}"}
                         for i in range(start, start + 250)]  # fmt: skip
                r = c.post("/learn", json={"model": f"u{m}", "examples": batch})
                assert r.status_code == 200, r.text
        reg = c.app.state.registry
        for h in reg.models:  # 1,500 ids: a few segments, 12 bits an id (was ~1.2 KB an id)
            assert h.ids.nbytes <= 4 * 1500, h.ids.nbytes
        g = _settled(c)
        assert g["chorus_models_evicted_total"] > 0
        for m in range(n_models):  # a retry of an old id, whichever models were evicted
            body = {"model": f"u{m}", "features": _ex(7, m), "label": _label(7, m),
                    "id": f"id-{m}-{7:06d}"}  # fmt: skip
            r = c.post("/learn", json=body)
            assert r.status_code == 200 and r.json()["duplicate"] is True, r.text
            assert c.get(f"/models/u{m}").json()["n_seen"] == 1500


def test_a_models_cost_counts_its_arrays_in_memory_not_its_compact_state():
    """The saved state is compact (live rows, int32): a loaded model takes several times its
    ``state_bytes``. The budget's estimate must cover the arrays as allocated."""
    from app.registry.handles import Handle, estimate_cost
    from ensembles import build_model

    model = build_model({"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 4,
                         "seed": 1})  # fmt: skip
    xs = [{"u": f"user{i % 3000}", "x": float(i % 17)} for i in range(6000)]
    model.learn_many(xs, ["ab"[(i * 7) % 3 == 0] for i in range(6000)])
    bank = model._settled().bank
    arrays = sum(a.nbytes for a in bank.T)  # what is held: allocated arrays (and the schema)
    assert model.memory_bytes == arrays + bank.schema.held_bytes()
    h = Handle("m", {}, model)
    cost = estimate_cost(h)
    assert cost >= arrays + MODEL_OVERHEAD
    saved = sum(a.nbytes for a in model.to_state()["arrays"].values())
    assert arrays > 2 * saved, "the compact state is no longer smaller: recheck"
