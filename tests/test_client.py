"""The Python client: typed results, error mapping, bounded retries that stay idempotent.

Transport behaviour (503s, dropped connections) is scripted with ``httpx.MockTransport``; the
client against the real service is exercised in ``test_replay.py`` and ``test_cli.py``.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from app.client import (
    AsyncChorusClient,
    ChorusClient,
    Conflict,
    Gone,
    LearnResult,
    ModelInfo,
    NotFound,
    Unauthorized,
    Unavailable,
    ValidationFailed,
)

LEARNED = {"prediction": "a", "probabilities": {"a": 0.75, "b": 0.25}, "seq": 7, "accuracy": 0.5}


class Script:
    """A fake server: answers requests from a list of responses/exceptions, records requests."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        status, body = step
        return httpx.Response(
            status, json=body, headers={"Retry-After": "1"} if status == 503 else {}
        )

    def bodies(self):
        return [json.loads(r.content) if r.content else None for r in self.requests]


def client(script, **kw):
    kw.setdefault("retries", 3)
    return ChorusClient(
        "http://chorus.test", transport=httpx.MockTransport(script), backoff=0, max_backoff=0, **kw
    )


def test_learn_returns_typed_result_and_generates_an_id():
    script = Script((200, {**LEARNED, "duplicate": False}))
    with client(script) as c:
        r = c.learn("m1", {"age": 31, "dept": "cs"}, "a")
    assert isinstance(r, LearnResult)
    assert (r.prediction, r.seq, r.duplicate, r.probabilities["a"]) == ("a", 7, False, 0.75)
    (body,) = script.bodies()
    assert body["model"] == "m1" and body["label"] == "a"
    assert body["features"] == {"age": 31, "dept": "cs"}
    assert isinstance(body["id"], str) and len(body["id"]) >= 16 and r.id == body["id"]


def test_503_is_retried_with_the_same_idempotency_key():
    script = Script(
        (503, {"detail": "store unavailable"}),
        (503, {"detail": "store unavailable"}),
        (200, {**LEARNED, "duplicate": False}),
    )
    with client(script) as c:
        r = c.learn("m1", {"x": 1}, "a")
    ids = [b["id"] for b in script.bodies()]
    assert len(ids) == 3 and len(set(ids)) == 1 and r.id == ids[0]


def test_ambiguous_failure_of_learn_is_retried_and_answered_as_duplicate():
    script = Script(
        httpx.ReadTimeout("server too slow"),  # the example may or may not have been learned
        (200, {**LEARNED, "duplicate": True}),
    )
    with client(script) as c:
        r = c.learn("m1", {"x": 1}, "a", id="row-1")
    assert r.duplicate and [b["id"] for b in script.bodies()] == ["row-1", "row-1"]


def test_retries_are_bounded():
    script = Script(*[(503, {"detail": "store unavailable"})] * 3)
    with client(script, retries=2) as c, pytest.raises(Unavailable) as info:
        c.learn("m1", {"x": 1}, "a")
    assert len(script.requests) == 3 and info.value.status == 503
    assert "store unavailable" in str(info.value)


def test_connection_refused_is_retried_then_reported():
    script = Script(*[httpx.ConnectError("refused")] * 2)
    with client(script, retries=1) as c, pytest.raises(Unavailable) as info:
        c.list_models()
    assert len(script.requests) == 2 and info.value.status is None
    assert "cannot reach" in str(info.value)


def test_list_models_follows_the_pages():
    """``GET /models`` answers a page and the next page's ``after``; the client asks until
    ``next`` is null (sync and async)."""

    def pages():
        desc = {"spec": {}, "n_seen": 0, "classes": []}
        return Script(
            (200, {"models": [{**desc, "name": "a"}, {**desc, "name": "b"}], "next": "b"}),
            (200, {"models": [{**desc, "name": "c"}], "next": None}),
        )

    script = pages()
    with client(script) as c:
        assert [m.name for m in c.list_models()] == ["a", "b", "c"]
    assert [dict(r.url.params) for r in script.requests] == [{}, {"after": "b"}]

    async def go(script):
        transport = httpx.MockTransport(script)
        async with AsyncChorusClient("http://chorus.test", transport=transport) as c:
            return [m.name for m in await c.list_models()]

    script = pages()
    assert asyncio.run(go(script)) == ["a", "b", "c"] and len(script.requests) == 2


def test_model_creation_is_not_blindly_repeated_after_an_ambiguous_failure():
    script = Script(httpx.ReadTimeout("slow"), (201, {}))
    with client(script) as c, pytest.raises(Unavailable):
        c.create_model("m1", ensemble="bagging", learner="hoeffding_tree", n_models=3)
    assert len(script.requests) == 1


def test_connect_error_before_sending_is_retried_even_for_creation():
    desc = {"name": "m1", "spec": {"ensemble": "bagging"}, "n_seen": 0, "classes": []}
    script = Script(httpx.ConnectError("refused"), (201, desc))
    with client(script) as c:
        info = c.create_model("m1", n_models=3, features={"a": "numeric"}, classes=["x", "y"])
    assert isinstance(info, ModelInfo) and info.name == "m1" and info.metrics.accuracy is None
    body = script.bodies()[-1]
    assert body["features"] == {"a": "numeric"} and body["classes"] == ["x", "y"]
    assert body["n_models"] == 3 and "seed" not in body  # omitted: the server's default


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, Unauthorized), (404, NotFound), (409, Conflict), (410, Gone), (422, ValidationFailed)],
)
def test_errors_map_to_typed_exceptions_without_retrying(status, error):
    script = Script((status, {"detail": "features.age: not a number"}))
    with client(script) as c, pytest.raises(error) as info:
        c.predict("m1", {"age": "x"})
    assert info.value.status == status and info.value.detail == "features.age: not a number"
    assert len(script.requests) == 1


def test_batch_learn_carries_one_id_per_example_and_keeps_order():
    results = [{**LEARNED, "seq": i, "duplicate": i == 2} for i in (1, 2, 3)]
    script = Script((200, {"results": results, "accuracy": 0.6}))
    with client(script) as c:
        out = c.learn_many(
            "m1",
            [
                ({"x": 1}, "a"),
                {"features": {"x": 2}, "label": "b", "id": "k2"},
                ({"x": 3}, "a", 2.0),
            ],
            ids=["k1", None, None],
        )
    rows = script.bodies()[0]["examples"]
    assert [r["id"] for r in rows][:2] == ["k1", "k2"] and rows[2]["id"]
    assert rows[2]["weight"] == 2.0 and "weight" not in rows[0]
    assert [r.seq for r in out.results] == [1, 2, 3]
    assert [r.duplicate for r in out.results] == [False, True, False]
    assert out.accuracy == 0.6 and out.results[0].id == "k1"


def test_predict_and_delayed_label_and_metrics():
    script = Script(
        (200, {"prediction": "b", "probabilities": {"b": 1.0}, "prediction_id": "p-1"}),
        (200, {**LEARNED, "duplicate": False}),
        (200, {"accuracy": 1.0, "kappa": None, "window_accuracy": 1.0, "n_scored": 1}),
    )
    with client(script, api_key="s3cret") as c:
        p = c.predict("m1", {"x": 1})
        r = c.label("m1", p.prediction_id, "b")
        m = c.metrics("m1")
    assert p.prediction_id == "p-1" and r.prediction == "a" and m.n_scored == 1
    assert script.bodies()[1] == {"model": "m1", "prediction_id": "p-1", "label": "b"}
    assert all(r.headers["authorization"] == "Bearer s3cret" for r in script.requests)
    assert [r.url.path for r in script.requests] == ["/predict", "/learn", "/models/m1/metrics"]


def test_async_client_retries_the_same_way():
    script = Script(
        httpx.ConnectError("refused"),
        (503, {"detail": "down"}),
        (200, {**LEARNED, "duplicate": False}),
    )

    async def go():
        async with AsyncChorusClient(
            "http://chorus.test",
            transport=httpx.MockTransport(script),
            backoff=0,
            max_backoff=0,
        ) as c:
            return await c.learn("m1", {"x": 1}, "a")

    r = asyncio.run(go())
    assert r.prediction == "a" and len({b["id"] for b in script.bodies() if b}) == 1
    assert len(script.requests) == 3


def test_invalid_retry_count():
    with pytest.raises(ValueError, match="retries"):
        ChorusClient("http://x", retries=-1)


# ------------------------------------------------------------------ against the real service


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from _live_server import live_server

    with live_server(tmp_path_factory.mktemp("store"), api_key="k3y") as url:
        yield url


def test_live_round_trip_with_auth(server):
    with ChorusClient(server, retries=0) as anonymous, pytest.raises(Unauthorized):
        anonymous.list_models()
    with ChorusClient(server, api_key="k3y") as c:
        info = c.create_model("live", ensemble="bagging", learner="naive_bayes", n_models=3)
        assert info.n_seen == 0 and info.spec["n_models"] == 3
        with pytest.raises(Conflict):
            c.create_model("live")
        first = c.learn("live", {"t": 20.0, "o": "sunny"}, "yes", id="r1")
        assert first.prediction is None and not first.duplicate
        assert c.learn("live", {"t": 20.0, "o": "sunny"}, "yes", id="r1").duplicate
        batch = c.learn_many("live", [({"t": 30.0, "o": "rain"}, "no"), ({"t": 21.0}, "yes")])
        assert [r.duplicate for r in batch.results] == [False, False]
        assert [r.seq for r in batch.results] == [first.seq + 1, first.seq + 2]
        p = c.predict("live", {"t": 22.0, "o": "sunny"})
        assert p.prediction == "yes" and p.prediction_id
        labelled = c.label("live", p.prediction_id, "yes")
        assert labelled.prediction == "yes" and c.label("live", p.prediction_id, "yes").duplicate
        assert c.get_model("live").n_seen == 4
        assert c.metrics("live").n_scored == 3
        with pytest.raises(ValidationFailed, match="features"):
            c.learn("live", {"t": [1, 2]}, "yes")
        c.delete_model("live")
        with pytest.raises(NotFound):
            c.get_model("live")


def test_live_async_client(server):
    async def go():
        async with AsyncChorusClient(server, api_key="k3y") as c:
            await c.create_model("alive", ensemble="single", learner="naive_bayes", n_models=1)
            results = await asyncio.gather(
                *(c.learn("alive", {"x": float(i)}, "ab"[i % 2], id=f"k{i}") for i in range(8))
            )
            again = await c.learn("alive", {"x": 0.0}, "a", id="k0")
            return results, again, (await c.get_model("alive")).n_seen

    results, again, n_seen = asyncio.run(go())
    assert n_seen == 8 and again.duplicate and sorted(r.seq for r in results) == list(range(1, 9))
