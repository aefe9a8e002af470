"""``?explain=true`` on ``GET``/``POST /predict``, ``GET /models/{name}/importance`` and the
client's ``predict(..., explain=True)`` / ``importance``, against the real app (SQLite store)."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.client import ChorusClient, ValidationFailed
from app.main import create_app
from app.settings import Settings
from ensembles.explain import recompute

SPEC = {"name": "m", "ensemble": "boosting", "learner": "hoeffding_tree", "n_models": 3,
        "seed": 7, "params": {"grace_period": 5, "delta": 0.3, "tau": 0.2}}  # fmt: skip


@pytest.fixture
def client(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", snapshot_interval=3600)
    with TestClient(create_app(settings)) as c:
        yield c


def _learn(client, n=120, model="m"):
    for i in range(n):
        x = {"x": float(i % 7), "color": ["red", "green", "blue"][i % 3]}
        r = client.post("/learn", json={"model": model, "features": x,
                                        "label": "hi" if i % 7 >= 3 else "lo"})  # fmt: skip
        assert r.status_code == 200, r.text


def test_get_and_post_explain_reproduce_the_prediction(client):
    client.post("/models", json=SPEC)
    _learn(client)
    plain = client.get("/predict", params={"model": "m", "x": "5", "color": "red"}).json()
    assert "explanation" not in plain  # opt-in
    r = client.get("/predict", params={"model": "m", "x": "5", "color": "red", "explain": "true"})
    assert r.status_code == 200, r.text
    body = r.json()
    e = body["explanation"]
    assert body["probabilities"] == plain["probabilities"] == e["probabilities"]
    assert recompute(e) == body["probabilities"]  # through JSON too: bit for bit
    assert e["vote"]["rule"] == "boosting" and len(e["members"]) == 3
    assert e["prediction"] == body["prediction"] and e["margin"] >= 0
    assert any(d["tree"]["path"] for d in e["members"])  # the trees split on x
    step = next(d["tree"]["path"][0] for d in e["members"] if d["tree"]["path"])
    assert step["feature"] in ("x", "color") and step["branch"] is not None
    one = client.post("/predict?explain=true",
                      json={"model": "m", "features": {"x": 5.0, "color": "red"}})  # fmt: skip
    assert (
        one.status_code == 200 and one.json()["explanation"]["probabilities"] == e["probabilities"]
    )
    many = client.post("/predict?explain=1", json={"model": "m", "examples": [
        {"features": {"x": float(i)}} for i in range(3)]})  # fmt: skip
    assert many.status_code == 200
    for res in many.json()["results"]:
        assert recompute(res["explanation"]) == res["probabilities"]


def test_explain_422_names_the_field_and_output_codes_explain(client):
    client.post("/models", json=SPEC)
    r = client.get("/predict", params={"model": "m", "x": "1", "explain": "maybe"})
    assert r.status_code == 422 and r.json()["detail"].startswith("explain:")
    r = client.post("/predict?explain=yes", json={"model": "m", "features": {"x": 1}})
    assert r.status_code == 422 and r.json()["detail"].startswith("explain:")
    codes = {**SPEC, "name": "codes", "ensemble": "bagging",
             "params": {"output_codes": True}}  # fmt: skip
    assert client.post("/models", json=codes).status_code == 201
    _learn(client, 10, "codes")
    r = client.post("/predict?explain=true", json={"model": "codes", "features": {"x": 1}})
    assert r.status_code == 200, r.text  # output codes: the members' bits, decoded
    e = r.json()["explanation"]
    assert e["vote"]["rule"] == "output_codes" and recompute(e) == r.json()["probabilities"]
    assert client.get("/predict", params={"model": "nope", "explain": "true"}).status_code == 404


def test_importance_200_404_422(client):
    client.post("/models", json=SPEC)
    _learn(client)
    r = client.get("/models/m/importance")
    assert r.status_code == 200, r.text
    imp = r.json()
    assert imp["splits"] > 0 and imp["members"] == 3
    assert imp["merit"] > 0 and imp["merit_unknown"] == 0 and imp["criterion"] == "info_gain"
    assert set(imp["features"]) <= {"x", "color"}
    top = next(iter(imp["features"]))
    by_merit = max(imp["features"], key=lambda f: imp["features"][f]["merit"])
    metrics = client.get("/metrics").text
    assert f'chorus_model_feature_importance{{feature="{top}",model="m"}}' in metrics
    assert f'chorus_model_feature_merit_share{{feature="{by_merit}",model="m"}}' in metrics
    assert client.get("/models/nope/importance").status_code == 404
    r = client.get("/models/m/importance", params={"decay": 0})
    assert r.status_code == 422 and "decay" in r.text
    mlp = {"name": "mlp", "ensemble": "single", "learner": "mlp"}
    assert client.post("/models", json=mlp).status_code == 201
    _learn(client, 3, "mlp")
    r = client.get("/models/mlp/importance")
    assert r.status_code == 422 and r.json()["detail"].startswith("model:")


def test_importance_half_life_200_and_422(client):
    client.post("/models", json=SPEC)
    _learn(client)
    r = client.get("/models/m/importance", params={"half_life": 50})
    assert r.status_code == 200, r.text
    imp = r.json()
    assert imp["half_life"] == 50.0 and imp["examples"] == 120
    d = next(iter(imp["features"].values()))
    assert 0.0 < d["recent_splits"] <= d["splits"] and d["recent_share"] is not None
    assert client.get("/models/m/importance").json()["half_life"] is None
    both = client.get("/models/m/importance", params={"half_life": 50, "decay": 0.5})
    assert both.status_code == 200, both.text
    for bad in ("0", "-3", "nan", "inf", "soon", ""):
        r = client.get("/models/m/importance", params={"half_life": bad})
        assert r.status_code == 422 and "half_life" in r.text, (bad, r.text)
    r = client.get("/models/m/importance", params={"decay": "1.5", "half_life": "10"})
    assert r.status_code == 422 and "decay" in r.text


def test_client_explain_and_importance(client):
    client.post("/models", json=SPEC)
    _learn(client)

    def forward(request: httpx.Request) -> httpx.Response:
        return client.request(request.method, request.url.path, params=request.url.params,
                              content=request.content,
                              headers={k: v for k, v in request.headers.items()
                                       if k.lower() != "host"})  # fmt: skip

    with ChorusClient("http://chorus.test", transport=httpx.MockTransport(forward)) as c:
        p = c.predict("m", {"x": 5.0, "color": "red"}, explain=True)
        assert p.explanation is not None and recompute(p.explanation) == p.probabilities
        assert c.predict("m", {"x": 5.0}).explanation is None
        imp = c.importance("m")
        assert imp["splits"] > 0
        assert c.importance("m", decay=0.5)["features"]
        recent = c.importance("m", half_life=30.0)
        assert recent["half_life"] == 30.0 and recent["merit"] == imp["merit"]
        with pytest.raises(ValidationFailed):
            c.importance("m", decay=2.0)
        with pytest.raises(ValidationFailed):
            c.importance("m", half_life=-1.0)


def test_replay_importance_prints_the_top_features(tmp_path):
    from typer.testing import CliRunner

    from app.cli import app

    rows = ["x,color,noise,y"] + [
        f"{i % 10},{'uvw'[i % 3]},{(i * 7) % 13},{'hi' if i % 10 >= 5 else 'lo'}"
        for i in range(600)
    ]
    (tmp_path / "s.csv").write_text("\n".join(rows) + "\n")
    args = ["replay", str(tmp_path / "s.csv"), "--local", "--create", "bagging:hoeffding_tree:3",
            "-p", "grace_period=20", "--importance"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "top features" in result.output and "x" in result.output
    assert "merit" in result.output
    result = CliRunner().invoke(app, [*args, "--json", "--half-life", "200"])
    imp = json.loads(result.output)["importance"]
    assert imp["features"]["x"]["splits"] >= 1 and imp["features"]["x"]["merit"] > 0
    assert imp["half_life"] == 200.0 and imp["features"]["x"]["recent_merit"] > 0
    result = CliRunner().invoke(app, [*args, "--half-life", "200"])
    assert result.exit_code == 0 and "top features" in result.output, result.output
    result = CliRunner().invoke(app, [*args, "--half-life", "0"])
    assert result.exit_code != 0 and "--half-life" in result.output


def test_calendar_because_line(client):
    from examples.calendar_assistant.chorus_api import because

    client.post("/models", json=SPEC)
    _learn(client)
    answer = client.post("/predict?explain=true",
                         json={"model": "m", "features": {"x": 5.0, "color": "red"}})  # fmt: skip
    e = answer.json()["explanation"]
    text = because(e)
    assert text is not None and text.startswith("because ")
    assert f"({len(e['agreeing'])} of 3 models agree)" in text
    assert "x >" in text or "x ≤" in text or "color is" in text
    assert because(None) is None and because({"prediction": None}) is None
    one = {**e, "members": e["members"][:1], "agreeing": e["agreeing"][:1]}
    assert "models agree" not in because(one)


HOSTILE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324, 0.0, -0.0]),
    st.text(max_size=30),
    st.booleans(),
    st.none(),
    st.integers(-(2**70), 2**70),
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("hostile"), snapshot_interval=3600)
    with TestClient(create_app(settings)) as c:
        c.post("/models", json={**SPEC, "ensemble": "arf", "n_models": 2})
        _learn(c, 150)
        yield c


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(features=st.dictionaries(st.sampled_from(["x", "color", "new", "explain", ""]), HOSTILE,
                                max_size=4),
       flag=st.sampled_from(["true", "1", "TRUE", "false", "nope", "", "\u00e9"]))  # fmt: skip
def test_hostile_features_explain_200_or_422(trained, features, flag):
    """Whatever the features and the flag: a 200 whose explanation gives its probabilities back,
    or a 422 naming a field; never a 500."""
    r = trained.post(f"/predict?explain={flag}",
                     content=json.dumps({"model": "m", "features": features}),
                     headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code in (200, 422), r.text
    if r.status_code == 422:
        assert isinstance(r.json()["detail"], str | list)
        return
    body = r.json()
    if flag.lower() in ("true", "1"):
        assert recompute(body["explanation"]) == body["probabilities"]
    q = {k: ("" if v is None else str(v)) for k, v in features.items() if k not in ("model",)}
    g = trained.get("/predict", params={"model": "m", **q, "explain": "true"})
    assert g.status_code in (200, 422), g.text


def test_integer_and_boolean_labels_recompute_from_json(client):
    for name, labels in (("ints", (1, 0)), ("bools", (True, False))):
        spec = {**SPEC, "name": name, "ensemble": "bagging", "params": {"vote": "stacking"}}
        assert client.post("/models", json=spec).status_code == 201
        for i in range(80):
            r = client.post("/learn", json={"model": name, "features": {"x": float(i % 7)},
                                            "label": labels[i % 7 >= 3]})  # fmt: skip
            assert r.status_code == 200
        body = client.post("/predict?explain=true",
                           json={"model": name, "features": {"x": 5.0}}).json()  # fmt: skip
        got = recompute(body["explanation"])  # labels are JSON keys ("1", "true") in the answer
        probs = body["probabilities"]
        assert {json.dumps(c) for c in got} == set(probs)
        assert all(abs(got[c] - probs[json.dumps(c)]) <= 1e-12 for c in got)  # (stacked vote)
