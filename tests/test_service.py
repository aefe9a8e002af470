"""HTTP API: one test per status path of every route, against both stores (real SQLite, real Redis).

Uses ``with TestClient(app)`` so the lifespan (store, recovery, snapshots) runs.
"""

from __future__ import annotations

import contextlib
import time
import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

pytest.importorskip("ensembles")

SPEC = {"name": "m", "ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 7}


@pytest.fixture(params=["sqlite", "redis"])
def make_client(request, tmp_path):
    """``make_client(**settings)`` -> context manager giving a TestClient on a fresh store."""
    base = {"data_dir": tmp_path / "data", "snapshot_interval": 3600}
    if request.param == "redis":
        base["redis_url"] = request.getfixturevalue("clean_redis_url")

    @contextlib.contextmanager
    def _make(**overrides):
        settings = Settings(**{**base, **overrides})
        with TestClient(create_app(settings)) as client:
            yield client

    _make.kind = request.param
    return _make


@pytest.fixture
def client(make_client):
    with make_client() as c:
        yield c


def _ex(i: int) -> dict:
    return {"x": float(i % 7), "color": ["red", "green", "blue"][i % 3]}


def _label(i: int) -> str:
    return "hi" if i % 7 >= 3 else "lo"


def _stream(client, n, model="m", start=0, with_ids=False):
    out = []
    for i in range(start, start + n):
        body = {"model": model, "features": _ex(i), "label": _label(i)}
        if with_ids:
            body["id"] = f"e{i}"
        r = client.post("/learn", json=body)
        assert r.status_code == 200, r.text
        out.append(r.json())
    return out


# ------------------------------------------------------------------ operations
def test_healthz_and_readyz(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json()["status"] == "ready"


def test_prometheus_metrics(client):
    client.post("/models", json=SPEC)
    _stream(client, 5)
    text = client.get("/metrics").text
    assert 'chorus_requests_total{method="POST",route="/learn",status="200"} 5.0' in text
    assert "chorus_request_duration_seconds_bucket" in text
    assert 'chorus_examples_learned_total{model="m"} 5.0' in text
    assert 'chorus_model_accuracy{model="m"}' in text


def test_openapi_has_an_example_on_every_schema(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    ours = [n for n in schemas if not n.startswith(("HTTPValidationError", "ValidationError"))]
    assert "LearnRequest" in ours
    missing = [n for n in ours if "examples" not in schemas[n] and "example" not in schemas[n]]
    assert missing == []


# ------------------------------------------------------------------ /models
def test_create_model_201(client):
    r = client.post("/models", json={**SPEC, "features": {"x": "numeric"}, "classes": ["lo", "hi"]})
    assert r.status_code == 201, r.text
    d = r.json()
    assert d["name"] == "m" and d["n_seen"] == 0 and d["seq"] == 0
    assert d["spec"]["ensemble"] == "bagging" and d["spec"]["n_models"] == 3
    assert d["spec"]["features"] == {"x": "numeric"}
    assert d["metrics"]["accuracy"] is None


def test_create_model_409(client):
    assert client.post("/models", json=SPEC).status_code == 201
    r = client.post("/models", json=SPEC)
    assert r.status_code == 409 and "'m'" in r.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**SPEC, "name": "bad name!"}, "name"),
        ({**SPEC, "name": "x" * 65}, "name"),
        ({**SPEC, "ensemble": "stacking"}, "ensemble"),
        ({**SPEC, "learner": "svm"}, "learner"),
        ({**SPEC, "n_models": 0}, "n_models"),
        ({**SPEC, "features": {"x": "text"}}, "features.x"),
        ({**SPEC, "params": {"no_such_param": 1}}, "no_such_param"),
        ({**SPEC, "params": {"output_codes": "yes"}}, "output_codes"),
        ({**SPEC, "ensemble": "boosting", "params": {"lambda_rule": "adaboost"}}, "lambda_rule"),
        ({**SPEC, "params": {"vote": "stacked"}}, "vote"),
        ({**SPEC, "ensemble": "arf", "params": {"vote": "majority"}}, "vote"),
        ({**SPEC, "ensemble": "srp", "params": {"vote": "stacked"}}, "vote"),
        ({**SPEC, "params": {"vote": "stacking", "output_codes": True}}, "output_codes"),
        ({**SPEC, "params": {"imbalance": "smote"}}, "imbalance"),
        ({**SPEC, "params": {"imbalance": "oob", "imbalance_decay": 1.5}}, "imbalance_decay"),
        ({**SPEC, "bogus": 1}, "bogus"),
    ],
)
def test_create_model_422_names_the_field(client, body, field):
    r = client.post("/models", json=body)
    assert r.status_code == 422, r.text
    assert field in r.json()["detail"]


def test_list_models(client):
    assert client.get("/models").json() == {"models": [], "next": None}
    client.post("/models", json=SPEC)
    client.post("/models", json={**SPEC, "name": "b", "ensemble": "boosting"})
    names = [m["name"] for m in client.get("/models").json()["models"]]
    assert sorted(names) == ["b", "m"]


def test_list_models_a_page_at_a_time(client):
    """Pages in name order that together hold every model once; a page loads only its models;
    bad limits and afters are 422s naming the parameter."""
    names = [f"p{i:02d}" for i in range(7)] + ["a", "Z", "z-last"]
    for name in names:
        assert client.post("/models", json={**SPEC, "name": name}).status_code == 201
    registry = client.app.state.registry
    for name in names:  # nothing in memory: a page must load only its own models
        registry.models.drop(name)
    pages, after = [], None
    while True:
        r = client.get("/models", params={"limit": 3, **({"after": after} if after else {})})
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["models"]) <= 3 and len(registry.models.names()) <= 3 * (len(pages) + 1)
        pages.append([m["name"] for m in body["models"]])
        after = body["next"]
        if after is None:
            break
    listed = [n for page in pages for n in page]
    assert listed == sorted(names) and [len(p) for p in pages] == [3, 3, 3, 1]
    assert client.get("/models", params={"limit": 10}).json()["next"] is None  # exactly one page
    assert client.get("/models", params={"limit": 9}).json()["next"] == sorted(names)[8]
    tail = client.get("/models", params={"after": "p03x"}).json()["models"]  # not a model's name
    assert [m["name"] for m in tail] == ["p04", "p05", "p06", "z-last"]
    assert client.get("/models", params={"after": "zzz"}).json() == {"models": [], "next": None}
    for params, field in [({"limit": 0}, "limit"), ({"limit": 1001}, "limit"),
                          ({"limit": "x"}, "limit"), ({"after": "a" * 65}, "after")]:  # fmt: skip
        r = client.get("/models", params=params)
        assert r.status_code == 422 and field in r.text, r.text


def test_get_model_200_404_422(client):
    client.post("/models", json={**SPEC, "ensemble": "boosting", "n_models": 2})
    _stream(client, 30)
    d = client.get("/models/m").json()
    assert d["n_seen"] == 30 and d["seq"] == 30 and sorted(d["classes"]) == ["hi", "lo"]
    assert d["state_bytes"] > 0 and d["metrics"]["n_scored"] > 0
    assert len(d["members"]) == 2
    assert {"epsilon", "lambda_sc", "lambda_sw", "vote_weight"} <= set(d["members"][0])
    assert client.get("/models/nope").status_code == 404
    assert client.get("/models/bad%20name").status_code == 422


def test_delete_model_204_404(client):
    client.post("/models", json=SPEC)
    _stream(client, 3)
    assert client.delete("/models/m").status_code == 204
    assert client.get("/models/m").status_code == 404
    assert client.delete("/models/m").status_code == 404
    assert client.post("/models", json=SPEC).status_code == 201  # recreated empty
    assert client.get("/models/m").json()["n_seen"] == 0


def test_model_metrics_200_404(client):
    client.post("/models", json=SPEC)
    assert client.get("/models/m/metrics").json()["n_scored"] == 0
    _stream(client, 40)
    m = client.get("/models/m/metrics").json()
    assert set(m) == {"accuracy", "kappa", "window_accuracy", "n_scored", "majority_rate",
                      "balanced_accuracy", "g_mean", "macro_f1", "window_balanced_accuracy",
                      "window_g_mean", "window_macro_f1", "per_class"}  # fmt: skip
    assert 0 <= m["accuracy"] <= 1 and m["n_scored"] == 39  # the first prediction is {} -> unscored
    assert client.get("/models/nope/metrics").status_code == 404


# ------------------------------------------------------------------ /learn
def test_learn_single_200_prequential(client):
    client.post("/models", json=SPEC)
    first = _stream(client, 1)[0]
    assert first == {
        "prediction": None,
        "probabilities": {},
        "seq": 1,
        "accuracy": None,
        "duplicate": False,
    }
    rest = _stream(client, 20, start=1)
    assert [r["seq"] for r in rest] == list(range(2, 22))
    assert all(abs(sum(r["probabilities"].values()) - 1) < 1e-9 for r in rest)
    assert rest[-1]["accuracy"] is not None


def test_learn_matches_in_process_model(client):
    """The service's prequential answers equal an in-process model on the same stream."""
    from ensembles import build_model

    client.post("/models", json=SPEC)
    got = _stream(client, 60)
    model = build_model({k: SPEC[k] for k in ("ensemble", "learner", "n_models", "seed")})
    want = [model.predict_learn_one(_ex(i), _label(i)) for i in range(60)]
    assert [r["probabilities"] for r in got] == [dict(w) for w in want]


def test_learn_404_unknown_model(client):
    r = client.post("/learn", json={"model": "nope", "features": {"x": 1}, "label": "a"})
    assert r.status_code == 404 and "nope" in r.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "m", "features": {"x": 1}}, "label"),
        ({"model": "m", "label": "a"}, "features"),
        ({"model": "m", "features": {"x": [1, 2]}, "label": "a"}, "features.x"),
        ({"model": "m", "features": {"x": {"a": 1}}, "label": "a"}, "features.x"),
        ({"model": "m", "features": [1, 2], "label": "a"}, "features"),
        ({"model": "m", "features": {"x": 1}, "label": 1.5}, "label"),
        ({"model": "m", "features": {"x": 1}, "label": "a", "weight": -1}, "weight"),
        ({"model": "m", "features": {"x": 1}, "label": None}, "label"),
        ({"model": "bad name", "features": {"x": 1}, "label": "a"}, "model"),
        ({"model": "m", "examples": [{"features": {"x": 1}}]}, "examples.0.label"),
    ],
)
def test_learn_422_names_the_field(client, body, field):
    client.post("/models", json=SPEC)
    r = client.post("/learn", json=body)
    assert r.status_code == 422, r.text
    assert field in r.json()["detail"]


def test_learn_422_feature_type_mismatch_leaves_no_trace(client):
    client.post("/models", json={**SPEC, "features": {"x": "numeric"}})
    _stream(client, 10)
    r = client.post("/learn", json={"model": "m", "features": {"x": "tall"}, "label": "lo"})
    assert r.status_code == 422 and "x" in r.json()["detail"]
    # a value no kind takes (a number for the categorical "color" is the category "3")
    r = client.post("/learn", json={"model": "m", "features": {"color": [3]}, "label": "lo"})
    assert r.status_code == 422 and "color" in r.json()["detail"]
    d = client.get("/models/m").json()
    assert d["n_seen"] == 10 and d["seq"] == 10
    assert _stream(client, 1, start=10)[0]["seq"] == 11


def test_learn_422_over_a_limit_names_it_and_leaves_no_trace(client):
    r = client.post("/models", json={**SPEC, "limits": {"max_values": 3, "max_classes": 2}})
    assert r.status_code == 201, r.text
    _stream(client, 10)  # colors red, green, blue: 3 values; labels hi, lo
    r = client.post("/learn", json={"model": "m", "features": {"color": "teal"}, "label": "lo"})
    assert r.status_code == 422
    assert "features.color" in r.json()["detail"] and "max_values" in r.json()["detail"]
    r = client.post("/learn", json={"model": "m", "features": {"x": 1.0}, "label": "mid"})
    assert r.status_code == 422
    assert r.json()["detail"].startswith("label") and "max_classes" in r.json()["detail"]
    d = client.get("/models/m").json()
    assert d["n_seen"] == 10 and d["seq"] == 10 and d["spec"]["limits"]["max_values"] == 3
    r = client.post("/models", json={**SPEC, "name": "m2", "limits": {"max_colours": 3}})
    assert r.status_code == 422 and "max_colours" in r.json()["detail"]


def test_learn_422_malformed_json(client):
    r = client.post("/learn", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422


def test_learn_idempotent_retry(client):
    client.post("/models", json=SPEC)
    a = _stream(client, 5, with_ids=True)
    again = client.post(
        "/learn", json={"model": "m", "features": _ex(2), "label": _label(2), "id": "e2"}
    )
    assert again.status_code == 200
    body = again.json()
    assert body["duplicate"] is True and body["seq"] == a[2]["seq"]
    assert body["prediction"] == a[2]["prediction"]
    assert client.get("/models/m").json()["n_seen"] == 5


def test_idempotency_keys_expire_behind_the_window(make_client):
    with make_client(snapshot_every=10, idempotency_window=5) as client:
        created = client.post("/models", json=SPEC)
        assert created.status_code == 201, created.text
        _stream(client, 20, with_ids=True)  # snapshots at 10 and 20 forget keys <= 15

        def retry(i):
            body = {"model": "m", "features": _ex(i), "label": _label(i), "id": f"e{i}"}
            return client.post("/learn", json=body).json()

        assert retry(18)["duplicate"] is True
        assert retry(2)["duplicate"] is False  # forgotten: a new example
        assert client.get("/models/m").json()["n_seen"] == 21
    with make_client(snapshot_every=10, idempotency_window=5) as client:
        assert retry(19)["duplicate"] is True  # the same after a restart
        assert client.get("/models/m").json()["n_seen"] == 21


def test_learn_batch_200(client):
    client.post("/models", json=SPEC)
    exs = [{"features": _ex(i), "label": _label(i), "id": f"b{i}"} for i in range(20)]
    exs.append({"features": _ex(3), "label": _label(3), "id": "b3"})  # repeat inside the batch
    r = client.post("/learn", json={"model": "m", "examples": exs})
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert [x["seq"] for x in res[:20]] == list(range(1, 21))
    assert res[20]["duplicate"] is True and res[20]["seq"] == 4
    # batch == one by one
    with_single = [x["probabilities"] for x in res[:20]]
    client.post("/models", json={**SPEC, "name": "m2"})
    one_by_one = [x["probabilities"] for x in _stream(client, 20, model="m2")]
    assert with_single == one_by_one


def test_learn_batch_422_rejects_whole_batch(client):
    client.post("/models", json={**SPEC, "features": {"x": "numeric"}})
    exs = [{"features": _ex(i), "label": _label(i)} for i in range(5)]
    exs[3]["features"]["x"] = "oops"
    r = client.post("/learn", json={"model": "m", "examples": exs})
    assert r.status_code == 422 and "x" in r.json()["detail"]
    assert client.get("/models/m").json()["n_seen"] == 0


def test_learn_413_batch_over_limit(make_client):
    with make_client(max_batch=3) as client:
        client.post("/models", json=SPEC)
        exs = [{"features": _ex(i), "label": _label(i)} for i in range(4)]
        r = client.post("/learn", json={"model": "m", "examples": exs})
        assert r.status_code == 413 and "3" in r.json()["detail"]
        assert client.get("/models/m").json()["n_seen"] == 0


def test_learn_413_body_over_limit(make_client):
    with make_client(max_body_bytes=2048) as client:
        client.post("/models", json=SPEC)
        big = {"model": "m", "features": {f"f{i}": i for i in range(500)}, "label": "a"}
        r = client.post("/learn", json=big)
        assert r.status_code == 413

        def chunks():  # no content-length: counted while streaming
            yield b'{"model": "m", "features": {'
            for i in range(500):
                yield b'"f%d": %d, ' % (i, i)
            yield b'"z": 1}, "label": "a"}'

        r = client.post("/learn", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413


# ------------------------------------------------------------------ delayed labels
def test_delayed_label_flow(client):
    client.post("/models", json=SPEC)
    _stream(client, 30)
    p = client.get("/predict", params={"model": "m", "x": "5", "color": "red"}).json()
    assert p["prediction_id"]
    r = client.post(
        "/learn", json={"model": "m", "prediction_id": p["prediction_id"], "label": "hi"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["prediction"] == p["prediction"] and body["probabilities"] == p["probabilities"]
    assert body["seq"] == 31 and body["duplicate"] is False
    # a second label for the same prediction is not learned again
    r2 = client.post(
        "/learn", json={"model": "m", "prediction_id": p["prediction_id"], "label": "lo"}
    )
    assert r2.json()["duplicate"] is True
    assert client.get("/models/m").json()["n_seen"] == 31


def test_delayed_label_404_unknown(client):
    client.post("/models", json=SPEC)
    r = client.post("/learn", json={"model": "m", "prediction_id": "nope", "label": "hi"})
    assert r.status_code == 404 and "nope" in r.json()["detail"]


def test_delayed_label_410_expired(make_client):
    with make_client(prediction_ttl=0.2) as client:
        client.post("/models", json=SPEC)
        _stream(client, 3)
        pid = client.get("/predict", params={"model": "m", "x": 1}).json()["prediction_id"]
        time.sleep(0.4)
        r = client.post("/learn", json={"model": "m", "prediction_id": pid, "label": "hi"})
        assert r.status_code == 410 and "expired" in r.json()["detail"]


# ------------------------------------------------------------------ /predict
def test_predict_get_200_types_values(client):
    client.post("/models", json={**SPEC, "features": {"zip": "categorical"}})
    for i in range(40):
        x = {"x": float(i % 7), "zip": "02139" if i % 2 else "10001"}
        client.post("/learn", json={"model": "m", "features": x, "label": _label(i)})
    r = client.get("/predict", params={"model": "m", "x": "6", "zip": "02139"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["prediction"] in ("hi", "lo") and body["prediction_id"]
    from ensembles import build_model  # same stream in process: same answer

    model = build_model({k: SPEC[k] for k in ("ensemble", "learner", "n_models", "seed")})
    model.declare(features={"zip": "categorical"})
    for i in range(40):
        model.learn_one({"x": float(i % 7), "zip": "02139" if i % 2 else "10001"}, _label(i))
    assert body["probabilities"] == model.predict_proba_one({"x": 6.0, "zip": "02139"})


def test_predict_get_numeric_looking_category(client):
    """An undeclared feature learned as categorical stays categorical in a query string."""
    client.post("/models", json=SPEC)
    for i in range(40):
        x = {"x": float(i % 7), "zip": "02139" if i % 2 else "10001"}
        client.post("/learn", json={"model": "m", "features": x, "label": _label(i)})
    r = client.get("/predict", params={"model": "m", "x": "6", "zip": "02139"})
    assert r.status_code == 200, r.text
    want = client.post("/predict", json={"model": "m", "features": {"x": 6.0, "zip": "02139"}})
    assert r.json()["probabilities"] == want.json()["probabilities"]


def test_predict_get_404_422(client):
    assert client.get("/predict", params={"model": "nope", "x": 1}).status_code == 404
    assert client.get("/predict", params={"x": 1}).status_code == 422  # no model
    client.post("/models", json={**SPEC, "features": {"x": "numeric"}})
    r = client.get("/predict", params={"model": "m", "x": "abc"})
    assert r.status_code == 422 and "x" in r.json()["detail"]


def test_predict_post_200_single_and_batch(client):
    client.post("/models", json=SPEC)
    assert (
        client.post("/predict", json={"model": "m", "features": _ex(1)}).json()["probabilities"]
        == {}
    )
    _stream(client, 30)
    one = client.post("/predict", json={"model": "m", "features": _ex(4)}).json()
    many = client.post(
        "/predict", json={"model": "m", "examples": [{"features": _ex(i)} for i in range(4, 8)]}
    ).json()["results"]
    assert len(many) == 4 and many[0]["probabilities"] == one["probabilities"]
    assert client.get("/models/m").json()["n_seen"] == 30  # predicting learns nothing


def test_predict_post_404_413_422(make_client):
    with make_client(max_batch=2) as client:
        assert client.post("/predict", json={"model": "no", "features": {}}).status_code == 404
        client.post("/models", json=SPEC)
        r = client.post("/predict", json={"model": "m", "examples": [{"features": {}}] * 3})
        assert r.status_code == 413
        r = client.post("/predict", json={"model": "m", "features": {"x": [1]}})
        assert r.status_code == 422 and "features.x" in r.json()["detail"]
        r = client.post("/predict", json={"model": "m"})
        assert r.status_code == 422


# ------------------------------------------------------------------ auth
def test_api_key_401_on_every_route_but_health(make_client):
    with make_client(api_key="s3cret") as client:
        routes = [
            ("post", "/models", {"json": SPEC}),
            ("get", "/models", {}),
            ("get", "/models/m", {}),
            ("delete", "/models/m", {}),
            ("get", "/models/m/metrics", {}),
            ("post", "/learn", {"json": {"model": "m", "features": {}, "label": "a"}}),
            ("get", "/predict", {"params": {"model": "m"}}),
            ("post", "/predict", {"json": {"model": "m", "features": {}}}),
            ("get", "/metrics", {}),
        ]
        for method, path, kw in routes:
            assert getattr(client, method)(path, **kw).status_code == 401, path
            bad = {"Authorization": "Bearer nope"}
            assert getattr(client, method)(path, headers=bad, **kw).status_code == 401, path
        ok = {"Authorization": "Bearer s3cret"}
        assert client.post("/models", json=SPEC, headers=ok).status_code == 201
        assert client.get("/models/m", headers=ok).status_code == 200
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200


# ------------------------------------------------------------------ restart and 503
def test_restart_keeps_everything(make_client):
    with make_client(snapshot_every=25) as client:
        client.post("/models", json=SPEC)
        before = _stream(client, 60, with_ids=True)
        desc = client.get("/models/m").json()
        probe = client.post("/predict", json={"model": "m", "features": _ex(3)}).json()
    with make_client(snapshot_every=25) as client:
        after = client.get("/models/m").json()
        assert after["n_seen"] == 60 and after["seq"] == 60
        assert after["metrics"] == desc["metrics"]
        again = client.post("/predict", json={"model": "m", "features": _ex(3)}).json()
        assert again["probabilities"] == probe["probabilities"]
        dup = client.post(
            "/learn", json={"model": "m", "features": _ex(5), "label": _label(5), "id": "e5"}
        )
        assert dup.json()["duplicate"] is True and dup.json()["seq"] == before[5]["seq"]


def test_503_when_store_unreachable(make_client, request):
    if make_client.kind == "sqlite":
        with make_client() as client:
            client.post("/models", json=SPEC)
            _stream(client, 5)
            reg = client.app.state.registry
            db = reg.store._db
            reg.store._db = None  # the database goes away
            r = client.post("/learn", json={"model": "m", "features": _ex(5), "label": "lo"})
            assert r.status_code == 503 and "store" in r.json()["detail"]
            assert client.get("/readyz").status_code == 503
            reg.store._db = db  # it comes back
            assert client.get("/readyz").status_code == 200
            r = client.post("/learn", json={"model": "m", "features": _ex(5), "label": "lo"})
            assert r.status_code == 200 and r.json()["seq"] == 6
        return
    server = request.getfixturevalue("redis_server")
    with make_client(redis_timeout=0.5) as client:
        client.post("/models", json=SPEC)
        _stream(client, 5)
        server.stop()
        try:
            r = client.post("/learn", json={"model": "m", "features": _ex(5), "label": "lo"})
            assert r.status_code == 503 and "store" in r.json()["detail"]
            assert client.post("/models", json={**SPEC, "name": "n"}).status_code == 503
            assert client.get("/readyz").status_code == 503
            assert client.get("/healthz").status_code == 200
        finally:
            server.start()
        assert client.get("/readyz").status_code == 200
        r = client.post("/learn", json={"model": "m", "features": _ex(5), "label": "lo"})
        assert r.status_code == 200 and r.json()["seq"] == 6


def test_readyz_503_until_store_answers(tmp_path):
    from conftest import RedisServer, free_port

    port = free_port()
    settings = Settings(
        redis_url=f"redis://127.0.0.1:{port}/0", startup_timeout=0.3, redis_timeout=0.3
    )
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").status_code == 200
        r = client.get("/readyz")
        assert r.status_code == 503
        assert client.get("/models").status_code == 503
        server = RedisServer(tmp_path / "late-redis", port=port)
        server.start()
        try:
            deadline = time.monotonic() + 15
            while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert client.get("/readyz").status_code == 200
            assert client.get("/models").json() == {"models": [], "next": None}
        finally:
            server.stop()


# ------------------------------------------------------------------ the registry, directly
def _on_registry(settings: Settings, body):
    """Run ``await body(registry, store)`` on a recovered registry with a model ``m`` over one
    numeric feature, on the store ``settings`` select; returns its result."""
    import asyncio

    from app.registry import Registry
    from app.stores import make_store

    spec = {k: SPEC[k] for k in ("ensemble", "learner", "n_models", "seed")}

    async def main():
        store = make_store(settings)
        await store.open(5)
        try:
            reg = Registry(store, settings)
            await reg.recover()
            await reg.create("m", {**spec, "features": {"x": "numeric"}})
            return await body(reg, store)
        finally:
            await store.close()

    return asyncio.run(main())


def test_group_commit_isolates_a_bad_request(make_client, tmp_path, request):
    """Concurrent requests are applied as one group; a bad one fails alone, order is kept."""
    import asyncio

    from app.errors import InvalidInput
    from app.registry import Example

    extra = {}
    if make_client.kind == "redis":
        extra["redis_url"] = request.getfixturevalue("clean_redis_url")
    spec = {k: SPEC[k] for k in ("ensemble", "learner", "n_models", "seed")}

    async def concurrent(reg, store):
        calls = [reg.learn("m", [Example(_ex(i), _label(i), key=f"k{i}")]) for i in range(10)]
        calls.insert(5, reg.learn("m", [Example({"x": "oops"}, "lo")]))
        calls.append(reg.learn("m", [Example(_ex(3), _label(3), key="k3")]))  # a retry
        return await asyncio.gather(*calls, return_exceptions=True)

    res = _on_registry(Settings(data_dir=tmp_path / "direct", **extra), concurrent)
    assert isinstance(res[5], InvalidInput) and "x" in res[5].detail
    ok = [r[0] for i, r in enumerate(res) if i != 5]
    assert [r["seq"] for r in ok[:10]] == list(range(1, 11))
    assert ok[10]["duplicate"] is True and ok[10]["seq"] == 4
    from ensembles import build_model

    model = build_model(spec)
    model.declare(features={"x": "numeric"})
    want = [model.predict_learn_one(_ex(i), _label(i)) for i in range(10)]
    assert [r["probabilities"] for r in ok[:10]] == [dict(w) for w in want]


def test_unload_snapshots_an_idle_model_and_the_next_request_loads_it(tmp_path):
    """``LoadedModels.unload`` (where a memory budget evicts): the dropped model's snapshot holds
    every acknowledged example, and the next request loads it back exactly."""
    from app.registry import Example

    async def unload(reg, store):
        for i in range(40):
            await reg.learn("m", [Example(_ex(i), _label(i))])
        probes = [_ex(i) for i in range(40, 50)]
        before = await reg.predict("m", probes)
        assert await store.get_snapshots("m") == []  # nothing snapshotted yet
        assert await reg.models.unload("m") is True
        assert reg.models.peek("m") is None
        (gen_seq, _), *_ = await store.get_snapshots("m")
        after = await reg.predict("m", probes)  # loaded on demand
        again = await reg.learn("m", [Example(_ex(40), _label(40))])
        return gen_seq, before, after, again[0]["seq"]

    settings = Settings(data_dir=tmp_path / "unload", snapshot_every=10**6)
    gen_seq, before, after, seq = _on_registry(settings, unload)
    assert gen_seq == 40 and seq == 41
    assert [r["probabilities"] for r in after] == [r["probabilities"] for r in before]


def test_tampered_snapshot_is_refused(make_client, tmp_path, request):
    """A latest snapshot that fails its checksum is never loaded: the model falls back to the
    previous generation + the log behind it, with every acknowledged example (test_hardening
    covers the case where no generation is loadable: the model is broken, others work)."""
    import asyncio

    from app.stores import make_store

    with make_client(snapshot_every=10) as client:
        client.post("/models", json=SPEC)
        client.post("/models", json={**SPEC, "name": "other"})
        _stream(client, 25)
        _stream(client, 3, model="other")
        settings = client.app.state.settings

    async def tamper():
        store = make_store(settings)
        await store.open(5)
        try:
            seq, blob = await store.get_snapshot("m")
            bad = bytearray(blob)
            bad[len(bad) // 2] ^= 0xFF
            await store.put_snapshot("m", seq, bytes(bad))
        finally:
            await store.close()

    asyncio.run(tamper())
    with make_client(snapshot_every=10) as client:
        r = client.get("/models/m")
        assert r.status_code == 200 and (r.json()["n_seen"], r.json()["seq"]) == (25, 25)
        assert client.get("/models/other").json()["n_seen"] == 3
        assert client.get("/readyz").status_code == 200


def test_engine_bug_is_a_500_without_internals_and_nothing_is_acknowledged(client, monkeypatch):
    """An engine failure on valid input is a server error (not the client's 422); the detail
    names the model but leaks no traceback, and the model is rebuilt from its log."""
    from ensembles import OnlineBagging

    client.post("/models", json=SPEC)
    _stream(client, 5)

    def broken(self, *a, **k):
        raise ZeroDivisionError("kernel blew up")

    with monkeypatch.context() as mp:
        mp.setattr(OnlineBagging, "predict_learn_one", broken)
        mp.setattr(OnlineBagging, "predict_learn_many", broken)
        r = client.post("/learn", json={"model": "m", "features": _ex(5), "label": _label(5)})
    assert r.status_code == 500
    assert "model m" in r.json()["detail"] and "kernel blew up" not in r.json()["detail"]
    assert client.get("/models/m").json()["n_seen"] == 5
    _stream(client, 1, start=5)
    assert client.get("/models/m").json()["n_seen"] == 6


def test_imbalance_bagging_over_http_survives_a_restart(make_client):
    """``params: {"imbalance": "oob"}``: the spec as given, the model learns, its metrics have
    the class scores, and a restarted service (snapshot + log replay) answers as before."""
    spec = {**SPEC, "params": {"imbalance": "oob"}}
    rows = [{"features": _ex(i), "label": _label(i)} for i in range(300)]
    probe = {"model": "m", "features": _ex(4)}
    with make_client() as client:
        assert client.post("/models", json=spec).status_code == 201
        r = client.post("/learn", json={"model": "m", "examples": rows})
        assert r.status_code == 200, r.text
        d = client.get("/models/m").json()
        assert d["spec"]["params"]["imbalance"] == "oob" and d["n_seen"] == 300
        m = client.get("/models/m/metrics").json()
        assert m["n_scored"] > 0 and 0.0 <= m["balanced_accuracy"] <= 1.0
        assert {c["label"] for c in m["per_class"]["classes"]} <= {"hi", "lo"}
        assert sum(n for _, _, n in m["per_class"]["confusion"]) == m["n_scored"]
        before = client.post("/predict", json=probe).json()
    with make_client() as client:
        after = client.post("/predict", json=probe).json()
        assert after["probabilities"] == before["probabilities"]
        assert client.get("/models/m/metrics").json() == m


def test_imbalance_defaults_over_http_and_a_spec_stored_before_them(tmp_path):
    """``{"imbalance": "uob"}`` gets trees with ``nb_zero_variance="skip"`` and θ = 0.9999,
    both named in the stored spec; a spec stored before that default (no
    ``nb_zero_variance``, rebuilt from the store without a snapshot) keeps its trees'
    ``"point"`` (``ensembles.stored_spec``)."""
    import json
    import sqlite3

    settings = Settings(data_dir=tmp_path / "data", snapshot_interval=3600)
    with TestClient(create_app(settings)) as client:
        assert (
            client.post("/models", json={**SPEC, "params": {"imbalance": "uob"}}).status_code == 201
        )
        params = client.get("/models/m").json()["spec"]["params"]
        assert params["nb_zero_variance"] == "skip" and params["imbalance_decay"] == 0.9999
        old = {**SPEC, "name": "old", "params": {"imbalance": "uob", "imbalance_decay": 0.99,
                                                 "nb_zero_variance": "point"}}  # fmt: skip
        assert client.post("/models", json=old).status_code == 201
    (db,) = (tmp_path / "data").rglob("*.db")
    with sqlite3.connect(db) as con:  # the spec as the code before the default stored it
        (text,) = con.execute("SELECT spec FROM models WHERE name = 'old'").fetchone()
        spec = json.loads(text)
        del spec["params"]["nb_zero_variance"]
        con.execute("UPDATE models SET spec = ? WHERE name = 'old'", (json.dumps(spec),))
        con.execute("DELETE FROM snapshots")
        con.execute("DELETE FROM snapshots_prev")
    with TestClient(create_app(settings)) as client:
        row = {"model": "old", "features": _ex(1), "label": _label(1)}
        assert client.post("/learn", json=row).status_code == 200
        model = client.app.state.registry.models.peek("old").model  # (rebuilt from the spec)
        assert model.learner.nb_zero_variance == "point" and model.imbalance_decay == 0.99
        assert model.spec()["params"]["nb_zero_variance"] == "point"


@pytest.mark.parametrize("ensemble", ["bagging", "boosting", "arf", "srp"])
def test_a_stacked_vote_over_http_survives_a_restart(make_client, ensemble):
    """``params: {"vote": "stacking"}``: the spec as given, the model learns, and a restarted
    service (snapshot + log replay) answers as before."""
    spec = {**SPEC, "ensemble": ensemble, "params": {"vote": "stacking"}}
    rows = [{"features": _ex(i), "label": _label(i)} for i in range(300)]
    probe = {"model": "m", "features": _ex(4)}
    with make_client() as client:
        assert client.post("/models", json=spec).status_code == 201
        r = client.post("/learn", json={"model": "m", "examples": rows})
        assert r.status_code == 200, r.text
        d = client.get("/models/m").json()
        assert d["spec"]["params"]["vote"] == "stacking" and d["n_seen"] == 300
        before = client.post("/predict", json=probe).json()
        assert before["prediction"] == "hi"
    with make_client() as client:
        after = client.post("/predict", json=probe).json()
        assert after["probabilities"] == before["probabilities"]


@pytest.mark.parametrize(
    "options",
    [
        {"params": {"drift": "adwin", "poisson_lambda": 6, "vote": "weighted"}},
        {"ensemble": "boosting", "params": {"drift": "adwin"}},
        {"params": {"drift": "adwin", "poisson_lambda": 6, "output_codes": True}},
        {"ensemble": "boosting", "params": {"drift": "adwin", "lambda_rule": "moa"}},
    ],
)
def test_adaptive_ensembles_over_http_report_drifts_and_diversity(make_client, options):
    """A spec with ``drift`` (bagging, boosting): the model resets members after a flipped
    concept, ``GET /models/{name}`` and Prometheus show the drifts and the diversity, and a
    restarted service (snapshot + log replay) has the same model."""
    spec = {**SPEC, **options}
    flip = [{"features": _ex(i), "label": _label(i) if i < 1500 else ("lo" if _label(i) == "hi" else "hi")}
            for i in range(3000)]  # fmt: skip
    with make_client() as client:
        assert client.post("/models", json=spec).status_code == 201
        for k in range(0, 3000, 500):
            r = client.post("/learn", json={"model": "m", "examples": flip[k : k + 500]})
            assert r.status_code == 200, r.text
        d = client.get("/models/m").json()
        assert d["spec"]["params"]["drift"] == "adwin" and d["n_drifts"] > 0
        assert d["spec"]["params"].items() >= spec["params"].items()  # the spec as given
        assert set(d["diversity"]) >= {"disagreement", "q_statistic", "kappa", "n", "window"}
        assert all("window_accuracy" in m and "drift_error" in m for m in d["members"])
        text = client.get("/metrics").text
        assert f'chorus_model_drifts_total{{model="m"}} {float(d["n_drifts"])}' in text
        assert 'chorus_model_diversity{measure="disagreement",model="m"}' in text
    with make_client() as client:
        again = client.get("/models/m").json()
        assert (again["n_drifts"], again["diversity"], again["members"]) == (
            d["n_drifts"], d["diversity"], d["members"])  # fmt: skip
        plain = client.post("/models", json={**SPEC, "name": "p"}).json()
        assert plain["n_drifts"] is None and plain["diversity"] is None
