"""One label policy, one value policy, unknown features reported (HTTP, SQLite store)."""

from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from ensembles import OnlineBagging
from learners import HoeffdingTree, LabelError


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("data"), warmup="none")
    with TestClient(create_app(settings)) as c:
        yield c


def _model(client, name, **spec):
    client.delete(f"/models/{name}")
    r = client.post("/models", json={"name": name, "n_models": 3, **spec})
    assert r.status_code == 201, r.text
    return name


def _learn(client, model, label, features=None):
    body = {"model": model, "features": features or {"a": 1.0}, "label": label}
    return client.post("/learn", json=body)


def _no_dup_keys(text: str) -> dict:
    def hook(pairs):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), f"duplicate JSON keys in {text}"
        return dict(pairs)

    return json.loads(text, object_pairs_hook=hook)


@pytest.mark.parametrize(
    ("first", "other", "words"),
    [
        ("yes", 1, "labels are strings (its first label was 'yes'), not integers"),
        ("1", 1, "labels are strings"),
        (1, "1", "labels are integers (its first label was 1), not strings"),
        (1, True, "labels are integers (its first label was 1), not booleans"),
        (True, 1, "labels are booleans"),
    ],
)
def test_label_type_fixed_by_first_label(client, first, other, words):
    m = _model(client, "lab")
    assert _learn(client, m, first).status_code == 200
    r = _learn(client, m, other)
    assert r.status_code == 422 and words in r.json()["detail"]
    batch = {"model": m, "examples": [{"features": {"a": 2.0}, "label": first},
                                      {"features": {"a": 3.0}, "label": other}]}  # fmt: skip
    assert client.post("/learn", json=batch).status_code == 422
    assert client.get(f"/models/{m}").json()["classes"] == [first]  # nothing half-learned
    assert client.get(f"/models/{m}").json()["n_seen"] == 1


def test_empty_and_declared_labels(client):
    m = _model(client, "emp")
    r = _learn(client, m, "")
    assert r.status_code == 422 and "empty string is not a label" in r.json()["detail"]
    r = client.post("/models", json={"name": "mixed", "classes": ["a", 1]})
    assert r.status_code == 422 and "labels are strings" in r.json()["detail"]
    m = _model(client, "decl", classes=[0, 1])
    r = _learn(client, m, "0")
    assert r.status_code == 422 and "labels are integers" in r.json()["detail"]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from(["1", 1, True, "", "yes", 0, False, "0"]), min_size=1, max_size=8))
def test_class_keys_unique_and_one_type(client, labels):
    m = _model(client, "keys")
    kept = []
    for y in labels:
        r = _learn(client, m, y)
        if r.status_code == 200:
            kept.append(y)
            _no_dup_keys(r.text)
        else:
            assert r.status_code == 422
    classes = client.get(f"/models/{m}").json()["classes"]
    assert len({type(c) for c in classes}) <= 1
    assert len(classes) == len({json.dumps(c) for c in classes})
    _no_dup_keys(client.get(f"/predict?model={m}&a=1").text)


def test_engine_label_policy():
    model = OnlineBagging(HoeffdingTree(), n_models=2, seed=1)
    model.learn_one({"a": 1.0}, 1)
    with pytest.raises(LabelError, match="not booleans"):
        model.learn_one({"a": 1.0}, True)
    with pytest.raises(LabelError, match="not strings"):
        model.learn_many([{"a": 1.0}], ["1"])
    model.learn_one({"a": 1.0}, 2.0)  # an integral float is the int 2
    assert model.classes == [1, 2]


POST, GET = "post", "get"


@pytest.mark.parametrize(
    ("raw", "query", "ok"),
    [("NaN", "nan", True), ("Infinity", "inf", False), ("-Infinity", "-inf", False),
     ("1e999", "1e999", False)],
)  # fmt: skip
def test_one_value_policy(client, raw, query, ok):
    """NaN is a missing value and infinities are 422, in GET, POST and batches alike."""
    m = _model(client, "val")
    assert _learn(client, m, "y", {"a": 1.0, "b": 2.0}).status_code == 200
    bodies = {
        "learn": ("/learn", f'{{"model":"{m}","features":{{"a":{raw}}},"label":"y"}}'),
        "batch": ("/learn", f'{{"model":"{m}","examples":[{{"features":{{"a":{raw}}},"label":"y"}}]}}'),
        "predict": ("/predict", f'{{"model":"{m}","features":{{"a":{raw}}}}}'),
    }  # fmt: skip
    codes = {
        k: client.post(url, content=b, headers={"content-type": "application/json"}).status_code
        for k, (url, b) in bodies.items()
    }
    codes["get"] = client.get(f"/predict?model={m}&a={query}").status_code
    codes["get_new_feature"] = client.get(f"/predict?model={m}&b=2&c={query}").status_code
    want = 200 if ok else 422
    assert codes == dict.fromkeys(codes, want)


def test_number_for_categorical_feature(client):
    m = _model(client, "cat")
    assert _learn(client, m, "y", {"room": "12"}).status_code == 200
    assert _learn(client, m, "n", {"room": "b1"}).status_code == 200
    post = client.post("/predict", json={"model": m, "features": {"room": 12}}).json()
    get = client.get(f"/predict?model={m}&room=12").json()
    assert post["probabilities"] == get["probabilities"]
    assert _learn(client, m, "y", {"room": 12.0}).status_code == 200  # the category "12"
    assert client.get(f"/models/{m}").json()["n_seen"] == 3


def test_ignored_features_reported(client):
    m = _model(client, "ign")
    assert _learn(client, m, "y", {"age": 3.0, "dept": "cs"}).status_code == 200
    r = client.get(f"/predict?model={m}&age=3&dpet=cs").json()
    assert r["ignored_features"] == ["dpet"]
    r = client.post("/predict", json={"model": m, "features": {"age": 1, "dept": "x"}}).json()
    assert r["ignored_features"] == []
    body = {"model": m, "examples": [{"features": {"zz": 1}}, {"features": {"age": 1}}]}
    res = client.post("/predict", json=body).json()["results"]
    assert [x["ignored_features"] for x in res] == [["zz"], []]


@pytest.mark.parametrize("name", [".", "..", ".hidden", "a/b", "a b", "é", "x" * 65, "a%2Fb", ""])
def test_model_names_a_url_cannot_carry_are_rejected(client, name):
    r = client.post("/models", json={"name": name})
    assert r.status_code == 422 and "name" in r.json()["detail"], r.text
    assert name not in [m["name"] for m in client.get("/models").json()["models"]]


@pytest.mark.parametrize("name", ["a.b", "-x", "_", "x" * 64, "v1.2-rc_3"])
def test_model_names_accepted_are_reachable(client, name):
    m = _model(client, name)
    assert client.get(f"/models/{m}").status_code == 200
    assert client.get(f"/predict?model={m}").status_code == 200
    assert client.delete(f"/models/{m}").status_code == 204


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=80))
def test_name_from_makes_valid_names(text):
    from app.names import NAME_RE, name_from

    assert NAME_RE.match(name_from(text))


def test_client_create_model_exist_ok(tmp_path):
    from _live_server import live_server

    from app.client import ChorusClient, Conflict

    with live_server(tmp_path / "d", warmup="none") as url, ChorusClient(url) as chorus:
        first = chorus.create_model("ex", n_models=2)
        with pytest.raises(Conflict):
            chorus.create_model("ex", n_models=2)
        again = chorus.create_model("ex", n_models=3, exist_ok=True)
        assert again.name == first.name and again.spec == first.spec
        chorus.learn("ex", {"a": 1.0}, "y")
        assert chorus.predict("ex", {"a": 1.0, "typo": 2}).ignored_features == ["typo"]
