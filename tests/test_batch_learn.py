"""Batched ``POST /learn`` (issue 19's fast path: orjson parsing, answers and metrics per batch,
one log row per batch on SQLite) answers, logs and refuses exactly as one example at a time."""

from __future__ import annotations

import itertools
import json
import math
import random
import re

import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.main import create_app
from app.routes.schemas import LearnRequest, plain_batch
from app.settings import Settings
from tests import test_service as _svc

make_client = _svc.make_client  # the same fixture: both stores, a second client is a restart

SPEC = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 7}


def _as(desc: dict, name: str) -> dict:
    """A model's description under another name, without what only names its life (each
    create starts a new incarnation): two models that learned alike compare equal."""
    spec = {k: v for k, v in desc["spec"].items() if k != "incarnation"}
    return {**desc, "name": name, "spec": spec}


def _examples(n: int, seed: int = 5) -> list[dict]:
    """Numeric and categorical features, a feature and a class that appear late, missing
    features, integer and float values, weights (0, 2.5, the integer 2), ids repeated within and
    across batches."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = {"a": rng.random() * 100, "b": rng.randint(-5, 5), "c": rng.choice("pqr")}
        if i > n // 2:
            x["late"] = rng.random()
        if rng.random() < 0.1:
            del x["a"]
        ex = {"features": x, "label": rng.choice(["lo", "hi"] + (["mid"] if i > n // 3 else []))}
        if rng.random() < 0.2:
            ex["weight"] = rng.choice([0, 0.0, 2.5, 2])
        if rng.random() < 0.3:
            ex["id"] = f"e{rng.randint(0, n // 4)}"
        out.append(ex)
    return out


def _log(client, name: str) -> list[tuple[int, bytes]]:
    store = client.app.state.registry.store  # read on the app's own event loop
    rows = client.portal.call(store.read, name, 0, 10**6)
    return [(seq, bytes(rec)) for seq, rec in rows]


def test_batches_answer_and_log_as_single_examples(make_client):
    """The same stream as single requests and as batches of 1 to 97: identical answers (every
    field, as JSON), log records, metrics, and models after a restart."""
    stream = _examples(400)
    with make_client() as c:
        for name in ("one", "many"):
            assert c.post("/models", json={**SPEC, "name": name}).status_code == 201
        singles = []
        for ex in stream:
            r = c.post("/learn", json={"model": "one", **ex})
            assert r.status_code == 200, r.text
            singles.append({k: v for k, v in r.json().items() if k != "accuracy"})
        batched, i = [], 0
        for size in itertools.cycle([1, 7, 50, 97, 2, 33]):
            chunk = stream[i : i + size]
            if not chunk:
                break
            r = c.post("/learn", json={"model": "many", "examples": chunk})
            assert r.status_code == 200, r.text
            batched += r.json()["results"]
            assert r.json()["accuracy"] == c.get("/models/many").json()["metrics"]["accuracy"]
            i += size
        assert orjson.dumps(batched) == orjson.dumps(singles)
        assert any(r["duplicate"] for r in batched) and any(not r["duplicate"] for r in batched)
        assert _log(c, "many") == _log(c, "one") and len(_log(c, "one")) == batched[-1]["seq"]
        one, many = c.get("/models/one").json(), c.get("/models/many").json()
        assert _as(many, "one") == _as(one, "one")
    with make_client() as c:  # recovery replays the batch rows as the single rows
        one, many = c.get("/models/one").json(), c.get("/models/many").json()
        assert _as(many, "one") == _as(one, "one")
        ex = {"features": {"a": 3.0, "c": "q"}, "label": "hi"}
        a = c.post("/learn", json={"model": "one", **ex}).json()
        b = c.post("/learn", json={"model": "many", "examples": [ex]}).json()
        assert {**b["results"][0], "accuracy": b["accuracy"]} == a


def test_snapshots_inside_batches_recover_exactly(make_client):
    """Snapshots every 30 examples, batches of 45 (repeated ids inside): the log holds exactly
    the entries after the oldest snapshot kept, and after a restart the model equals one that
    learned the stream in one process."""
    stream = _examples(300, seed=9)
    with make_client(snapshot_every=30) as c:
        assert c.post("/models", json={**SPEC, "name": "m"}).status_code == 201
        for i in range(0, 270, 45):
            r = c.post("/learn", json={"model": "m", "examples": stream[i : i + 45]})
            assert r.status_code == 200, r.text
        log, seq = _log(c, "m"), c.get("/models/m").json()["seq"]
        assert log and log[0][0] > 1  # trimmed
        assert [s for s, _ in log] == list(range(log[0][0], seq + 1))
    with make_client(snapshot_every=10**6) as c:
        r = c.post("/learn", json={"model": "m", "examples": stream[270:]})
        after = r.json()["results"]
        desc = c.get("/models/m").json()
    with make_client(snapshot_every=10**6) as c:
        assert c.post("/models", json={**SPEC, "name": "ref"}).status_code == 201
        c.post("/learn", json={"model": "ref", "examples": stream[:270]})
        ref = c.post("/learn", json={"model": "ref", "examples": stream[270:]}).json()["results"]
        assert orjson.dumps(after) == orjson.dumps(ref)
        assert _as(desc, "ref") == _as(c.get("/models/ref").json(), "ref")


# ---------------------------------------------------------------- hostile bodies
_BIG = 2**70
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-_BIG, _BIG),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), 2**64, -(2**63) - 1, 10**400, 1e308, -0.0]),
    st.text(max_size=12),
    st.just("x" * 10_000),
    st.just("\ud800"),
    st.booleans(),
    st.none(),
    st.lists(st.integers(-3, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
keys = st.one_of(st.text(max_size=8), st.sampled_from(["", "é", "日本", "a.b", "\x00", "\ud83d"]))
labels = st.one_of(
    st.sampled_from(["lo", "hi"]),
    st.integers(-_BIG, _BIG),
    st.booleans(),
    st.floats(allow_nan=True),
    st.none(),
    st.text(max_size=4),
    st.just("y" * 10_000),
)
example = st.fixed_dictionaries(
    {"features": st.dictionaries(keys, values, max_size=4), "label": labels},
    optional={
        "weight": st.one_of(st.floats(allow_nan=True), st.integers(-3, _BIG), st.booleans()),
        "id": st.one_of(st.text(max_size=3), st.just("i" * 201), st.none(), st.integers()),
        "extra": st.integers(),
    },
)
# valid examples with now and then one field not: what the parse must sort out one by one
plain_example = st.fixed_dictionaries(
    {
        "features": st.dictionaries(
            keys,
            st.one_of(st.floats(-1e300, 1e300), st.integers(-(2**62), 2**62), st.text())
            | st.sampled_from([2**63, 2**64, -(2**63) - 1, 1e19, None, True]),
            max_size=4,
        ),
        "label": st.one_of(st.text(max_size=3), st.integers(-(2**62), 2**62), st.booleans())
        | st.sampled_from([1.0, None, 2**64, [1]]),
    },
    optional={
        "weight": st.one_of(st.floats(-1, 1e300), st.integers(-1, 2**62), st.booleans()),
        "id": st.one_of(st.text(max_size=201), st.none(), st.integers(0, 3)),
        "extra": st.none(),
    },
)
batch = st.one_of(
    st.lists(plain_example, min_size=1, max_size=6),
    st.lists(st.one_of(example, plain_example), min_size=1, max_size=6),
    st.lists(st.one_of(example, st.integers(), st.none()), min_size=0, max_size=3),
)


finite = st.floats(-1e300, 1e300) | st.integers(-(2**62), 2**62)
valid_example = st.fixed_dictionaries(
    {
        "features": st.fixed_dictionaries(
            {},
            optional={
                "a": finite,
                "b": finite | st.none(),
                "c": st.text(max_size=5),
                "é": finite,
                "日本": st.text(max_size=3) | st.just("z" * 10_000),
            },
        ),
        "label": st.sampled_from(["lo", "hi", "mid", "日本", ""]),
    },
    optional={
        "weight": st.floats(0, 10) | st.integers(0, 3),
        "id": st.text(min_size=1, max_size=200) | st.none(),
    },
)


@st.composite
def one_hostile_field(draw) -> list:
    """A valid batch, then (most of the time) one field of one example made hostile."""
    exs = draw(st.lists(valid_example, min_size=1, max_size=6))
    if draw(st.integers(0, 4)):
        ex = exs[draw(st.integers(0, len(exs) - 1))]
        field = draw(st.sampled_from(["features", "label", "weight", "id", "extra", "whole"]))
        if field == "features":
            ex["features"][draw(keys)] = draw(values)
        elif field == "label":
            ex["label"] = draw(labels)
        elif field == "weight":
            ex["weight"] = draw(st.floats() | st.integers(-3, _BIG) | st.booleans() | st.none())
        elif field == "id":
            ex["id"] = draw(st.text(max_size=3) | st.just("i" * 201) | st.integers())
        elif field == "extra":
            ex["extra"] = 1
        else:
            exs[exs.index(ex)] = draw(st.integers() | st.none() | example)
    return exs


def _body(examples: list, model: str = "m") -> bytes:
    """JSON as a client library writes it (Python's json: NaN and Infinity as bare words,
    lone surrogates escaped, integers of any size)."""
    return json.dumps({"model": model, "examples": examples}).encode()


@settings(max_examples=400, deadline=None)
@given(examples=batch, model=st.sampled_from(["m", "bad name", ".m", "m" * 65]))
def test_the_orjson_parse_takes_only_what_pydantic_takes_and_reads_it_the_same(examples, model):
    raw = _body(examples, model)
    fast = plain_batch(raw)
    if fast is None:
        return  # pydantic decides (and writes any 422), as before
    slow = LearnRequest.model_validate_json(raw)
    assert fast[0] == slow.model and slow.examples is not None
    assert len(fast[1]) == len(slow.examples)
    for ex, want in zip(fast[1], slow.examples, strict=True):
        got = {"features": ex.features, "label": ex.label, "weight": ex.weight, "id": ex.key}
        want = {"weight": 1.0, "id": None, **want}
        for k, v in got.items():  # repr: 1, 1.0 and True differ; key order counts
            assert repr(v) == repr(want[k])


_BAD = {  # what makes example k of a batch bad, and the field the 422 must name
    "type": ({"features": {"x": "oops", "c": "u"}, "label": "a"}, "features.x"),
    "label_kind": ({"features": {"x": 1.0}, "label": 5}, "label"),
    "infinite": ({"features": {"x": 1e999}, "label": "a"}, "features.x"),
    "huge_int_category": ({"features": {"c": 10**400}, "label": "a"}, "features.c"),
    "huge_int": ({"features": {"x": 10**400}, "label": "a"}, "features.x"),
    "weight": ({"features": {"x": 1.0}, "label": "a", "weight": -1}, "weight"),
}


@pytest.mark.parametrize("bad", sorted(_BAD))
def test_a_refused_batch_names_the_example(make_client, bad):
    """The 422 of a batch names the refused example's position and field (the engine says
    which row), whichever path parsed it, with ids answered from memory before it; nothing of
    the batch is learned or logged. A single request names the field alone."""
    rng = random.Random(bad)
    with make_client() as c:
        c.post("/models", json={**SPEC, "name": "m"})
        first = {"model": "m", "features": {"x": 0.5, "c": "v"}, "label": "a", "id": "seen"}
        assert c.post("/learn", json=first).status_code == 200
        for n in (1, 2, 7, 40):
            k = rng.randrange(n)
            exs = [{"features": {"x": float(i), "c": "v"}, "label": "ab"[i % 2]} for i in range(n)]
            if n > 1 and k != 0:
                exs[0] = {**exs[0], "id": "seen"}  # answered from memory, not learned again
            exs[k] = _BAD[bad][0]
            r = c.post("/learn", content=_body(exs), headers={"content-type": "application/json"})
            assert r.status_code == 422, r.text
            assert r.json()["detail"].startswith(f"examples.{k}.{_BAD[bad][1]}"), (k, r.text)
            described = c.get("/models/m").json()
            assert described["seq"] == 1 and described["n_seen"] == 1
            rows = json.dumps(
                {"model": "m", "examples": [{"features": e["features"]} for e in exs]}
            )
            p = c.post("/predict", content=rows, headers={"content-type": "application/json"})
            if bad in ("label_kind", "weight"):
                assert p.status_code == 200, p.text
            else:
                assert p.status_code == 422, p.text
                assert p.json()["detail"].startswith(f"examples.{k}.{_BAD[bad][1]}"), p.text
        one = json.dumps({"model": "m", **_BAD[bad][0]}).encode()
        r = c.post("/learn", content=one, headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["detail"].startswith(_BAD[bad][1]), r.text
        one = json.dumps({"model": "m", "features": _BAD[bad][0]["features"]}).encode()
        p = c.post("/predict", content=one, headers={"content-type": "application/json"})
        if bad in ("label_kind", "weight"):
            assert p.status_code == 200, p.text
        else:  # (a huge integer was a 500 here: float() overflowed in the engine)
            assert p.status_code == 422 and p.json()["detail"].startswith(_BAD[bad][1]), p.text


def test_plain_batches_take_the_orjson_path():
    raw = _body(_examples(20))
    assert plain_batch(raw) is not None
    assert plain_batch(raw.replace(b'"examples"', b'"label": 1, "examples"')) is None
    assert plain_batch(_body([{"features": {"x": 2**64}, "label": 1}])) is None


# what a 4xx starts with: the field, or the body as a whole (not JSON: pydantic's message)
_FIELD = re.compile(r"(Invalid JSON|body|model|examples(\.\d+)?(\.(features|label|weight|id)\b)?)")


@pytest.fixture(scope="module")
def shared_client(tmp_path_factory):
    settings_ = Settings(data_dir=tmp_path_factory.mktemp("hostile"), snapshot_interval=3600)
    with TestClient(create_app(settings_)) as client:
        yield client


_names = itertools.count()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(examples=one_hostile_field())
def test_hostile_batches_get_a_4xx_naming_the_field_or_the_single_answers(shared_client, examples):
    """NaN and infinities, integers beyond 64 bits, 10 kB strings, unicode and lone-surrogate
    keys, mixed types, extra fields: never a 5xx; a 4xx names the field and leaves the model as
    it was; a 200 answers what the same examples sent one at a time answer."""
    c = shared_client
    name = f"h{next(_names)}"
    for n in (name, name + "s"):
        assert c.post("/models", json={**SPEC, "name": n}).status_code == 201
    c.post("/learn", json={"model": name, "features": {"a": 1.0}, "label": "lo"})
    c.post("/learn", json={"model": name + "s", "features": {"a": 1.0}, "label": "lo"})
    r = c.post(
        "/learn", content=_body(examples, name), headers={"content-type": "application/json"}
    )
    assert r.status_code < 500, r.text
    if r.status_code != 200:
        assert r.status_code in (413, 422), r.text
        assert _FIELD.match(r.json()["detail"]), r.json()["detail"]
        assert c.get(f"/models/{name}").json()["seq"] == 1
        return
    singles = []
    for ex in examples:
        body = json.dumps({"model": name + "s", **ex}).encode()
        one = c.post("/learn", content=body, headers={"content-type": "application/json"})
        assert one.status_code == 200, one.text
        singles.append({k: v for k, v in one.json().items() if k != "accuracy"})
    got = r.json()["results"]
    assert len(got) == len(singles)
    for a, b in zip(got, singles, strict=True):
        assert a.keys() == b.keys() and a["seq"] == b["seq"] and a["duplicate"] == b["duplicate"]
        assert repr(a["prediction"]) == repr(b["prediction"])
        assert a["probabilities"].keys() == b["probabilities"].keys()
        for k, p in a["probabilities"].items():
            assert p == b["probabilities"][k] or (
                math.isnan(p) and math.isnan(b["probabilities"][k])
            )
