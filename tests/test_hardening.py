"""Hardening (issue #12): nothing from the store is unpickled, a model that cannot load is
*broken* with its reason while every other model keeps serving. Both stores, real servers."""

from __future__ import annotations

import asyncio
import os
import pickle
import time

import pytest

from app import snapshot as codec
from app.stores import StoreDown, make_store
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
        for gen in (1, 2):  # both generations: no good snapshot to fall back to
            await store.put_snapshot("m", seq + gen, codec.encode(state, {"seq": seq}, wrong))

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


# ------------------------------------------------------------- unrepresentable input
BIG = 2**64 + 7


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"classes": ["a", BIG]}, "classes.1"),
        ({"classes": [-(2**63) - 1]}, "classes.0"),
        ({"params": {"grace_period": BIG}}, "params.grace_period"),
        ({"seed": BIG}, "seed"),
        ({"params": {"max_nodes": 10**12}}, "params.max_nodes"),
        ({"params": {"max_nodes": 1e12}}, "params.max_nodes"),
        ({"params": {"n_split_points": 10**9}}, "params.n_split_points"),
    ],
)
def test_create_refuses_wide_integers(client, body, field):
    r = client.post("/models", json={**SPEC, **body})
    assert r.status_code == 422 and r.json()["detail"].startswith(field), r.text
    assert client.get("/models").json() == {"models": [], "next": None}


@pytest.fixture
def client(make_client):
    with make_client() as c:
        yield c


def _n(client, name="m"):
    d = client.get(f"/models/{name}").json()
    return d["n_seen"], d["seq"]


def test_wide_integers_in_examples_leave_no_trace(client):
    """Label or feature wider than 64 bits: 422 naming the field, nothing learned or logged,
    the model and every other route keep working (also after a restart)."""
    assert client.post("/models", json=SPEC).status_code == 201
    _stream(client, 4)
    bad = [
        ({"model": "m", "features": {"x": 1.0}, "label": BIG}, "label"),
        ({"model": "m", "features": {"x": BIG}, "label": "lo"}, "features.x"),
        ({"model": "m", "features": {"x": -BIG}, "label": "lo", "id": "k1"}, "features.x"),
        (
            {
                "model": "m",
                "examples": [
                    {"features": {"x": 1.0}, "label": "lo"},
                    {"features": {"y": BIG}, "label": "hi"},
                ],
            },
            "examples.1.features.y",
        ),  # fmt: skip
    ]
    for body, field in bad:
        r = client.post("/learn", json=body)
        assert r.status_code == 422 and r.json()["detail"].startswith(field), r.text
        assert _n(client) == (4, 4)
    r = client.post("/predict", json={"model": "m", "features": {"x": BIG}})
    assert r.status_code == 422 and r.json()["detail"].startswith("features.x")
    assert client.get("/models").status_code == 200
    _stream(client, 2, start=4)
    assert _n(client) == (6, 6)


def test_engine_failure_after_learning_leaves_no_trace_in_log_or_snapshot(make_client, monkeypatch):
    """Fault injection: the engine learns then fails; the store append fails; the snapshot
    fails. Each time nothing is acknowledged and the model, log and snapshot agree."""
    import app.registry as registry
    from ensembles import OnlineBagging

    with make_client(snapshot_every=3) as client:
        client.post("/models", json=SPEC)
        _stream(client, 2)
        real = OnlineBagging.predict_learn_one

        def learn_then_fail(self, *a, **k):
            real(self, *a, **k)
            raise RuntimeError("fails after learning")

        with monkeypatch.context() as mp:
            mp.setattr(OnlineBagging, "predict_learn_one", learn_then_fail)
            r = client.post("/learn", json={"model": "m", "features": {"x": 1.0}, "label": "lo"})
        assert r.status_code == 500
        assert _n(client) == (2, 2)

        reg = client.app.state.registry

        for failure in (StoreDown("disk on fire"), RuntimeError("a store bug")):

            async def append_fails(*a, failure=failure, **k):
                raise failure

            with monkeypatch.context() as mp:
                mp.setattr(reg.store, "append", append_fails)
                r = client.post(
                    "/learn", json={"model": "m", "features": {"x": 1.0}, "label": "lo"}
                )
            assert r.status_code == 503  # nothing applied, retry
            assert _n(client) == (2, 2)

        def encode_fails(*a, **k):
            raise OSError("snapshot encoding failed")

        with monkeypatch.context() as mp:
            mp.setattr(registry.codec, "encode", encode_fails)
            _stream(client, 2, start=2)  # crosses snapshot_every: the snapshot fails quietly
        assert _n(client) == (4, 4)
    with make_client(snapshot_every=3) as client:  # restart: exactly the acknowledged examples
        assert _n(client) == (4, 4)
        _stream(client, 1, start=4)
        assert _n(client) == (5, 5)


# ------------------------------------------------------------- replicas
PROBES = [{"x": float(i % 7), "color": c} for i in range(7) for c in ("red", "green", "blue")]


def _probas(client, **extra):
    body = {"model": "m", "examples": [{"features": x} for x in PROBES], **extra}
    r = client.post("/predict", json=body)
    assert r.status_code == 200, r.text
    return [res["probabilities"] for res in r.json()["results"]]


def test_replica_reloads_when_the_log_was_trimmed_past_it(make_client):
    """Two instances on one store: B loaded the model at seq 30, then A learned to 50 and its
    first snapshot trimmed the whole log. B finds the log ahead of it with an empty tail,
    reloads the snapshot, and serves exactly A's model; ``min_seq`` gives read-your-writes."""
    shared = {"shared_store": True, "snapshot_every": 50, "min_seq_wait": 0.3}
    with make_client(**shared) as a, make_client(**shared, read_staleness=0) as b:
        assert a.post("/models", json=SPEC).status_code == 201
        _stream(a, 30)
        assert b.get("/models/m").json()["seq"] == 30
        last = _stream(a, 20, start=30)[-1]["seq"]
        assert last == 50
        reg_a = a.app.state.registry
        for _ in range(500):  # the snapshot is written just after the answer goes out
            if reg_a.models.peek("m").snap_seq == 50:
                break
            time.sleep(0.01)
        assert reg_a.models.peek("m").snap_seq == 50  # snapshotted: the log behind 50 is gone
        assert _probas(b, min_seq=last) == _probas(a)  # B caught up through the snapshot
        d = b.get("/models/m", params={"min_seq": last}).json()
        assert (d["n_seen"], d["seq"]) == (50, 50)
        _stream(a, 5, start=50)
        assert _probas(b) == _probas(a)  # read_staleness=0: every /predict catches up
        r = b.post("/predict", json={"model": "m", "features": {"x": 1.0}, "min_seq": 10**6})
        assert r.status_code == 409 and "beyond" in r.json()["detail"]  # never acknowledged
        r = b.get("/models/m", params={"min_seq": 10**6})
        assert r.status_code == 409 and "min_seq" in r.json()["detail"]

    # an instance that cannot apply the log (here: its replays are switched off) answers 503
    # once the bound passes
    with make_client(**shared) as a, make_client(**shared) as b:
        b.app.state.registry.settings.shared_store = False  # B no longer reads the others' log
        assert b.get("/models/m").status_code == 200
        last = _stream(a, 1, start=55)[-1]["seq"]
        r = b.get("/models/m", params={"min_seq": last})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert f"{last} not reached" in r.json()["detail"]


# ------------------------------------------------------------- river params
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"grace_period": -5}, "params.grace_period"),
        ({"grace_period": "x"}, "params.grace_period"),
        ({"max_depth": "x"}, "params"),  # river's default is None: caught by the trial learn
        ({"grace_period": -5, "max_depth": "x"}, "params"),
    ],
)
def test_river_params_are_checked_at_create(client, params, field):
    tree = {**RIVER, "learner": "river:tree.HoeffdingTreeClassifier", "params": params}
    r = client.post("/models", json=tree)  # params are checked before the snapshot key
    assert r.status_code == 422 and r.json()["detail"].startswith(field), r.text


def test_good_river_params_learn(make_client):
    with make_client(snapshot_key="k") as client:
        body = {**RIVER, "learner": "river:tree.HoeffdingTreeClassifier"}
        body["params"] = {"grace_period": 5, "max_depth": 3}
        assert client.post("/models", json=body).status_code == 201
        _stream(client, 12, model="r")


@pytest.mark.parametrize("path", ["/models", "/learn", "/predict"])
def test_non_json_body_is_a_documented_422(client, path):
    r = client.post(
        path, content=b"\xff|\x08\x00\x1c", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["detail"], r.text
    assert "422" in client.get("/openapi.json").json()["paths"][path]["post"]["responses"]


def test_openapi_declares_security_and_exactly_one_mode(make_client):
    with make_client(api_key="k") as client:
        doc = client.get("/openapi.json").json()
        assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
        assert doc["paths"]["/learn"]["post"]["security"] == [{"bearerAuth": []}]
        assert "security" not in doc["paths"]["/readyz"]["get"]
        learn = doc["components"]["schemas"]["LearnRequest"]
        assert [b["required"][0] for b in learn["oneOf"]] == [
            "features",
            "examples",
            "prediction_id",
        ]
        assert len(doc["components"]["schemas"]["PredictRequest"]["oneOf"]) == 2
    with make_client() as client:  # no key: declared, not required
        doc = client.get("/openapi.json").json()
        assert "bearerAuth" in doc["components"]["securitySchemes"]
        assert "security" not in doc["paths"]["/learn"]["post"]


def test_boolean_weight_is_refused(client):
    client.post("/models", json=SPEC)
    for body in (
        {"model": "m", "features": {"x": 1.0}, "label": "a", "weight": True},
        {"model": "m", "examples": [{"features": {"x": 1.0}, "label": "a", "weight": False}]},
    ):
        r = client.post("/learn", json=body)
        assert r.status_code == 422 and "weight" in r.json()["detail"], r.text
    r = client.post(
        "/learn", json={"model": "m", "features": {"x": 1.0}, "label": "a", "weight": 2}
    )
    assert r.status_code == 200


def test_kept_predictions_are_bounded(make_client):
    """A huge /predict body is served but not kept; a model keeps at most N predictions."""
    with make_client(max_kept_predictions=3, max_kept_bytes=4096) as client:
        client.post("/models", json=SPEC)
        _stream(client, 3)
        big = {f"f{i}": "v" * 100 for i in range(200)}  # ~25 kB of features
        r = client.post("/predict", json={"model": "m", "features": big})
        assert r.status_code == 200 and r.json()["prediction_id"] is None
        pids = []
        for i in range(5):
            r = client.post("/predict", json={"model": "m", "features": {"x": float(i)}})
            pids.append(r.json()["prediction_id"])
        assert all(pids)
        status = [
            client.post(
                "/learn", json={"model": "m", "prediction_id": p, "label": "lo"}
            ).status_code
            for p in pids
        ]
        assert status == [404, 404, 200, 200, 200]  # the two oldest went out
