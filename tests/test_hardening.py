"""Hardening (issue #12): nothing from the store is unpickled, a model that cannot load is
*broken* with its reason while every other model keeps serving. Both stores, real servers."""

from __future__ import annotations

import asyncio
import os
import pickle

import pytest

from app import snapshot as codec
from app.stores import make_store
from tests import test_service as _svc
from tests.test_service import SPEC, _stream

make_client = _svc.make_client  # the same fixture: both stores

pytest.importorskip("ensembles")

RIVER = {"name": "r", "learner": "river:naive_bayes.GaussianNB", "n_models": 2, "seed": 1}


class _Payload:
    """What an attacker with write access to the store would plant: runs a shell command."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _in_store(settings, fn):
    async def go():
        store = make_store(settings)
        await store.open(5)
        try:
            return await fn(store)
        finally:
            await store.close()

    return asyncio.run(go())


def test_river_model_needs_the_snapshot_key(make_client):
    with make_client() as client:
        r = client.post("/models", json=RIVER)
        assert r.status_code == 422 and "CHORUS_SNAPSHOT_KEY" in r.json()["detail"]
        assert client.get("/models/r").status_code == 404
    with make_client(snapshot_key="k" * 32) as client:
        assert client.post("/models", json=RIVER).status_code == 201
        r = client.post("/learn", json={"model": "r", "features": {"x": 1.0}, "label": "a"})
        assert r.status_code == 200


@pytest.mark.parametrize("server_key", [None, "secret-key-the-attacker-does-not-have"])
def test_forged_pickle_snapshot_runs_nothing(make_client, tmp_path, server_key):
    """A snapshot rewritten to a river spec + pickle payload (with a valid plain SHA-256, or
    signed with a wrong key) is refused before decoding: no file, the model is broken."""
    import ensembles

    marker = tmp_path / "pwned"
    with make_client(snapshot_every=5, snapshot_key=server_key) as client:
        assert client.post("/models", json=SPEC).status_code == 201
        assert client.post("/models", json={**SPEC, "name": "other"}).status_code == 201
        _stream(client, 12)
        _stream(client, 3, model="other")
        settings = client.app.state.settings

    forged_model = ensembles.build_model({k: v for k, v in RIVER.items() if k != "name"})
    state = forged_model.to_state()
    evil = pickle.dumps(_Payload(marker))
    import numpy as np

    state["arrays"] = {k: np.frombuffer(evil, dtype=np.uint8) for k in state["arrays"]}
    wrong = b"attacker-guess" if server_key else None

    async def plant(store):
        seq, _ = await store.get_snapshot("m")
        await store.put_snapshot("m", seq + 1, codec.encode(state, {"seq": seq}, wrong))

    _in_store(settings, plant)
    for n_other in (3, 4):  # restart twice: nothing runs, nothing loops
        with make_client(snapshot_every=5, snapshot_key=server_key) as client:
            assert client.get("/readyz").status_code == 200
            listed = {m["name"]: m for m in client.get("/models").json()["models"]}
            assert listed["m"]["status"] == "broken" and listed["m"]["reason"]
            assert listed["other"]["status"] == "ok" and listed["other"]["n_seen"] == n_other
            r = client.get("/models/m")
            assert r.status_code == 409 and "broken" in r.json()["detail"]
            r = client.post("/learn", json={"model": "m", "features": {"x": 1.0}, "label": "a"})
            assert r.status_code == 409
            r = client.post("/predict", json={"model": "m", "features": {"x": 1.0}})
            assert r.status_code == 409
            _stream(client, 1, model="other", start=n_other)
    assert not marker.exists()
    with make_client(snapshot_key=server_key) as client:  # a broken model can be deleted
        assert client.delete("/models/m").status_code == 204
        assert [m["name"] for m in client.get("/models").json()["models"]] == ["other"]
