"""Challengers (issue 38): candidates that learn a model's stream from the same log entries, the
leaderboard with McNemar's test, promotion (manual and by the policy), and their durability.

Real stores only (SQLite files, a spawned ``redis-server``); the kill -9 cycles are in
``tests/test_challengers_crash.py``.
"""

from __future__ import annotations

import asyncio
import json
import random
import warnings

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from app.main import create_app
from app.metrics import mcnemar
from app.registry import Example
from app.registry.challengers import full_state
from app.settings import Settings
from app.testing import open_registry

pytest.importorskip("ensembles")

SPEC = {"name": "m", "ensemble": "single", "learner": "stump", "seed": 7}
CHALLENGERS = [
    {"name": "ht", "ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 1,
     "params": {"grace_period": 20}},
    {"name": "nb3", "ensemble": "bagging", "learner": "naive_bayes", "n_models": 3, "seed": 2},
]  # fmt: skip


def _ex(i: int) -> dict:
    rnd = random.Random(i)
    return {"a": rnd.random(), "b": rnd.choice("pqrs"), "c": rnd.gauss(0, 1)}


def _label(i: int) -> str:
    x = _ex(i)
    return "yes" if x["a"] > 0.5 and x["c"] > 0 else "no"  # two features: a stump cannot


@pytest.fixture(params=["sqlite", "redis"])
def make_settings(request, tmp_path):
    base = {"data_dir": tmp_path / "data", "snapshot_interval": 3600, "redis_url": None}
    if request.param == "redis":
        base["redis_url"] = request.getfixturevalue("clean_redis_url")
    return lambda **kw: Settings(**{**base, **kw})


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path / "d", snapshot_interval=3600))) as c:
        yield c


# ------------------------------------------------------------------ HTTP
def test_learn_fans_out_and_the_champion_serves(client):
    r = client.post("/models", json={**SPEC, "challengers": CHALLENGERS})
    assert r.status_code == 201, r.text
    assert [c["name"] for c in r.json()["spec"]["challengers"]] == ["ht", "nb3"]
    for i in range(30):  # single examples
        r = client.post("/learn", json={"model": "m", "features": _ex(i), "label": _label(i)})
        assert r.status_code == 200
    batch = [{"features": _ex(i), "label": _label(i)} for i in range(30, 80)]
    assert client.post("/learn", json={"model": "m", "examples": batch}).status_code == 200
    pid = client.post("/predict", json={"model": "m", "features": _ex(80)}).json()["prediction_id"]
    r = client.post("/learn", json={"model": "m", "prediction_id": pid, "label": _label(80)})
    assert r.status_code == 200 and r.json()["seq"] == 81  # no extra log entries
    lb = client.get("/models/m/leaderboard").json()
    assert lb["champion"] == "initial" and lb["seq"] == 81
    names = [c["name"] for c in lb["candidates"]]
    assert names == ["initial", "ht", "nb3"]
    for c in lb["candidates"]:
        assert c["learned"] == 81 and c["skipped"] == 0
        assert c["metrics"]["n_scored"] <= 81 and c["memory_bytes"] > 0
        assert c["examples_per_s"] > 0
    champ, ht = lb["candidates"][0], lb["candidates"][1]
    assert champ["mcnemar"] is None
    m = ht["mcnemar"]
    assert m["b"] + m["c"] == m["n"] <= 81
    assert m["p_value"] == mcnemar(m["b"], m["c"])["p_value"]
    # the served prediction is the champion's: a model alone with the champion's spec agrees
    spec_alone = {**SPEC, "name": "alone"}
    client.post("/models", json=spec_alone)
    client.post("/learn", json={"model": "alone", "examples": batch[:0] + [
        {"features": _ex(i), "label": _label(i)} for i in range(81)]})  # fmt: skip
    a = client.post("/predict", json={"model": "alone", "features": _ex(999)}).json()
    b = client.post("/predict", json={"model": "m", "features": _ex(999)}).json()
    assert a["probabilities"] == b["probabilities"]


def test_add_promote_remove_and_errors(client):
    assert client.post("/models", json=SPEC).status_code == 201
    lb = client.get("/models/m/leaderboard").json()
    assert lb["candidates"] == [] and lb["champion"] is None
    r = client.post("/models/m/challengers", json={"challengers": CHALLENGERS[:1]})
    assert r.status_code == 201 and r.json()["seq"] == 1  # one control entry
    for i in range(20):
        client.post("/learn", json={"model": "m", "features": _ex(i), "label": _label(i)})
    # 4xx naming the field
    bad = [
        ({"challengers": [{"name": "ht"}]}, "challengers.0.name"),  # taken
        ({"challengers": [{"name": "initial"}]}, "challengers.0.name"),  # the champion's
        ({"challengers": [{"name": "x", "params": {"grace_period": -3}}]}, "challengers.0.params"),
        ({"challengers": [{"name": "x", "ensemble": "nope"}]}, "challengers.0.ensemble"),
        ({"challengers": [{"name": "a b"}]}, "challengers.0.name"),
        ({"challengers": [{"name": "x", "bogus": 1}]}, "challengers.0.bogus"),
        ({"challengers": [{"name": f"c{i}"} for i in range(8)]}, "challengers"),  # over 8
        ({"promotion": {"window": 0}}, "promotion.window"),
    ]
    for body, field in bad:
        r = client.post("/models/m/challengers", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["detail"].startswith(field), (body, r.text)
    assert client.post("/models/nope/challengers", json={"challengers": []}).status_code == 404
    assert client.post("/models/m/promote", json={"challenger": "zz"}).status_code == 404
    assert client.post("/models/m/promote", json={}).status_code == 422
    r = client.post("/models/m/promote", json={"challenger": "ht"})
    assert r.status_code == 200, r.text
    lb = r.json()
    assert lb["champion"] == "ht" and lb["promotions"] == 1 and lb["seq"] == 22
    assert [c["name"] for c in lb["candidates"]] == ["ht", "initial"]
    # a retry of the same promotion changes nothing
    assert client.post("/models/m/promote", json={"challenger": "ht"}).json()["seq"] == 22
    d = client.get("/models/m").json()
    assert d["n_seen"] == 20  # ht learned every example since it joined
    assert client.delete("/models/m/challengers/zz").status_code == 404
    assert client.delete("/models/m/challengers/initial").status_code == 204
    assert [c["name"] for c in client.get("/models/m/leaderboard").json()["candidates"]] == [
        "ht"
    ]  # fmt: skip
    assert client.delete("/models/m").status_code == 204
    assert client.get("/models/m/leaderboard").status_code == 404


def test_create_with_too_many_or_duplicate_challengers_is_refused(client):
    r = client.post("/models", json={**SPEC, "challengers": [CHALLENGERS[0], CHALLENGERS[0]]})
    assert r.status_code == 422 and r.json()["detail"].startswith("challengers.1.name")
    many = [{"name": f"c{i}", "learner": "naive_bayes"} for i in range(9)]
    r = client.post("/models", json={**SPEC, "challengers": many})
    assert r.status_code == 422 and "CHORUS_MAX_CHALLENGERS" in r.json()["detail"]
    r = client.post("/models", json={**SPEC, "champion": "ht", "challengers": CHALLENGERS})
    assert r.status_code == 422 and r.json()["detail"].startswith("challengers.0.name")
    assert client.get("/models/m").status_code == 404


def test_a_challenger_that_refuses_an_example_skips_it(client):
    tight = {"name": "tight", "learner": "naive_bayes", "n_models": 2,
             "limits": {"max_features": 2, "over_limit": "reject"}}  # fmt: skip
    assert client.post("/models", json={**SPEC, "challengers": [tight]}).status_code == 201
    for i in range(10):
        r = client.post("/learn", json={"model": "m", "features": _ex(i), "label": _label(i)})
        assert r.status_code == 200
    c = client.get("/models/m/leaderboard").json()["candidates"]
    assert c[0]["learned"] == 10 and c[1]["skipped"] == 10 and c[1]["learned"] == 0


@hsettings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    body=st.dictionaries(
        st.sampled_from(["challengers", "promotion", "x"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(
                    st.sampled_from(
                        [
                            "name",
                            "ensemble",
                            "learner",
                            "n_models",
                            "params",
                            "window",
                            "alpha",
                            "seed",
                            "limits",
                        ]
                    ),
                    inner,
                    max_size=4,
                )
            ),  # fmt: skip
            max_leaves=8,
        ),
        max_size=2,
    )
)
def test_hostile_challenger_bodies_are_4xx_never_500(client, body):
    if client.get("/models/m").status_code == 404:
        client.post("/models", json=SPEC)
    raw = json.dumps(body)  # NaN and Infinity too
    r = client.post(
        "/models/m/challengers", content=raw, headers={"content-type": "application/json"}
    )
    assert r.status_code in (201, 422), r.text
    if r.status_code == 201:  # keep room for the next ones
        for c in r.json()["candidates"][1:]:
            client.delete(f"/models/m/challengers/{c['name']}")


# ------------------------------------------------------------------ durability
_registry = open_registry


def _states(h) -> list:
    state, meta = full_state(h)
    return [state["header"], {k: v.copy() for k, v in state["arrays"].items()}, meta]


def _assert_same(a: list, b: list) -> None:
    assert a[0] == b[0] and a[2] == b[2]
    assert a[1].keys() == b[1].keys()
    for k in a[1]:
        assert np.array_equal(a[1][k], b[1][k], equal_nan=True), k


def _board(lb: dict) -> dict:
    """The leaderboard without what measures this process (time, arrays as allocated)."""
    for c in lb["candidates"]:
        c.pop("engine_seconds"), c.pop("examples_per_s"), c.pop("memory_bytes")
    return lb


@pytest.mark.parametrize("snapshot_every", [10_000, 37])
def test_recovery_is_bit_exact(make_settings, snapshot_every):
    """Examples, challengers added, a promotion by hand and by the policy, snapshots in between
    (or none): a new registry on the store holds the same candidates, bit for bit."""
    settings = make_settings(snapshot_every=snapshot_every)

    async def run():
        async with _registry(settings) as reg:
            await reg.create("m", {k: v for k, v in SPEC.items() if k != "name"})
            for i in range(0, 60, 3):
                await reg.learn("m", [Example(_ex(j), _label(j)) for j in range(i, i + 3)])
            await reg.add_challengers("m", CHALLENGERS, {"window": 40, "min_examples": 30,
                                                         "alpha": 0.05}, True)  # fmt: skip
            for i in range(60, 400):
                await reg.learn("m", [Example(_ex(i), _label(i), 1.0, f"k{i}")])
            assert (await reg.leaderboard("m"))["promotions"] == 1  # the policy's
            await reg.promote("m", (await reg.leaderboard("m"))["candidates"][1]["name"])
            await reg.learn("m", [Example(_ex(i), _label(i)) for i in range(400, 700)], batch=True)
            h = reg.models.peek("m")
            live = _states(h)
            lb = _board(await reg.leaderboard("m"))
            # the log's numbers count the control records (the add, each promotion) too;
            # examples learned (Prometheus' chorus_examples_learned_total) do not
            assert h.seq == 700 + 1 + lb["promotions"] and _learned(reg) == 700
        assert lb["promotions"] >= 2  # by the policy (a stump cannot learn it), then by hand
        async with _registry(settings) as reg:
            h = await reg.models.get("m")
            _assert_same(live, _states(h))
            assert _learned(reg) == 700
            again = _board(await reg.leaderboard("m"))
            for a, b in zip(again.pop("candidates"), lb.pop("candidates"), strict=True):
                assert a.keys() == b.keys()
                for k in a:
                    assert a[k] == b[k], (a["name"], k)
            assert again == lb

    asyncio.run(run())


def test_auto_promotion_picks_the_better_challenger(client):
    policy = {"window": 200, "min_examples": 200, "alpha": 0.01, "margin": 0.02}
    body = {**SPEC, "challengers": CHALLENGERS[:1], "promotion": policy}
    assert client.post("/models", json=body).status_code == 201
    for i in range(0, 1500, 100):
        exs = [{"features": _ex(j), "label": _label(j)} for j in range(i, i + 100)]
        assert client.post("/learn", json={"model": "m", "examples": exs}).status_code == 200
    lb = client.get("/models/m/leaderboard").json()
    assert lb["champion"] == "ht" and lb["promotions"] == 1, lb
    # the hysteresis: naive Bayes never wins the XOR back
    assert lb["candidates"][1]["name"] == "initial"


# ------------------------------------------------------------------ client, CLI, Prometheus
def _learned(reg) -> int:
    """Model m's examples learned, as /metrics reports them."""
    return {name: n for name, n, *_ in reg.gauges()}["m"]


def test_client_cli_and_prometheus(tmp_path):
    from _live_server import live_server
    from typer.testing import CliRunner

    from app.cli import app as cli
    from app.client import ChorusClient, NotFound, ValidationFailed

    runner = CliRunner()
    with live_server(tmp_path) as url, ChorusClient(url) as chorus:
        chorus.create_model("m", ensemble="single", learner="stump", seed=7,
                            challengers=CHALLENGERS[:1], champion="stump")  # fmt: skip
        lb = chorus.add_challengers("m", [CHALLENGERS[1]], promotion={"window": 100})
        assert [c["name"] for c in lb["candidates"]] == ["stump", "ht", "nb3"]
        assert lb["policy"]["window"] == 100
        with pytest.raises(ValidationFailed, match="challengers.0.name"):
            chorus.add_challengers("m", [CHALLENGERS[1]])
        chorus.learn_many("m", [(_ex(i), _label(i)) for i in range(300)])
        r = runner.invoke(cli, ["models", "leaderboard", "m", "--server", url])
        assert r.exit_code == 0, r.output
        assert "champion" in r.output and "nb3" in r.output and "promotion auto" in r.output
        r = runner.invoke(cli, ["models", "challenge", "m", "nb1", "--spec", "single:naive_bayes",
                                "--server", url])  # fmt: skip
        assert r.exit_code == 0, r.output
        r = runner.invoke(cli, ["models", "promote", "m", "nb1", "--server", url])
        assert r.exit_code == 0 and "champion nb1" in r.output, r.output
        assert chorus.promote("m", "nb1")["champion"] == "nb1"  # a retry: nothing changes
        with pytest.raises(NotFound):
            chorus.promote("m", "nope")
        chorus.remove_challenger("m", "nb3")
        lb = chorus.leaderboard("m")
        assert [c["name"] for c in lb["candidates"]] == ["nb1", "ht", "stump"]
        text = httpx.get(f"{url}/metrics", timeout=10).text
        assert 'chorus_candidate_accuracy{candidate="ht",model="m",role="challenger"}' in text
        assert 'chorus_model_promotions_total{model="m"}' in text
        # export / import carry every candidate
        snap = tmp_path / "m.chorus"
        r = runner.invoke(cli, ["export", "m", str(snap), "--data-dir", str(tmp_path)])
        assert r.exit_code == 0, r.output
        r = runner.invoke(cli, ["import", str(snap), "--name", "m2", "--data-dir", str(tmp_path)])
        assert r.exit_code == 0, r.output
        a, b = _board(chorus.leaderboard("m")), _board(chorus.leaderboard("m2"))
        assert a.pop("model") == "m" and b.pop("model") == "m2"
        assert a.pop("seq") <= b.pop("seq") and a == b


def test_replay_compare_gives_the_same_leaderboard_locally_and_on_a_server(tmp_path):
    """``chorus replay FILE --compare SPEC ...``: the same leaderboard offline and on a server
    (the same board code, the same engines, the same stream), auto-promotion included."""
    from _live_server import live_server
    from typer.testing import CliRunner

    from app.cli import app as cli

    path = tmp_path / "s.csv"
    rows = ["a,b,c,y"] + [f"{x['a']},{x['b']},{x['c']},{_label(i)}"
                          for i, x in ((i, _ex(i)) for i in range(600))]  # fmt: skip
    path.write_text("\n".join(rows) + "\n")
    args = ["replay", str(path), "--create", "single:stump", "--seed", "3", "--compare",
            "bagging:hoeffding_tree:3,bagging:naive_bayes:2", "--compare", "single:naive_bayes",
            "--auto-promote", "100", "--batch", "50", "--json", "--no-progress"]  # fmt: skip
    runner = CliRunner()
    r = runner.invoke(cli, [*args, "--local"])
    assert r.exit_code == 0, r.output
    local = json.loads(r.stdout)
    with live_server(tmp_path / "store") as url:
        r = runner.invoke(cli, [*args, "--server", url, "--model", "s"])
        assert r.exit_code == 0, r.output
        served = json.loads(r.stdout)
    a, b = _board(local["leaderboard"]), _board(served["leaderboard"])
    assert a.pop("model") == "local" and b.pop("model") == "s"
    assert a.pop("seq") == b.pop("seq")
    cands = a.pop("candidates")
    for x, y in zip(cands, b.pop("candidates"), strict=True):
        assert x.keys() == y.keys()
        for k in x:
            assert x[k] == y[k], (x["name"], k)
    assert a == b
    assert a["promotions"] >= 1 and [c["name"] for c in cands[1:]] != [
        "bagging-hoeffding_tree-3",
        "bagging-naive_bayes-2",
        "single-naive_bayes",
    ]  # promoted
    assert local["accuracy"] == served["accuracy"]  # the served predictions, the same
    bad = runner.invoke(cli, ["replay", str(path), "--local", "--compare", "nope:x"])
    assert bad.exit_code == 2 and "nope:x" in bad.output


def test_challengers_count_in_the_memory_budget(client):
    reg = client.app.state.registry
    assert client.post("/models", json={**SPEC, "name": "a"}).status_code == 201
    assert (
        client.post("/models", json={**SPEC, "name": "b", "challengers": CHALLENGERS}).status_code
        == 201
    )
    for m in ("a", "b"):
        exs = [{"features": _ex(i), "label": _label(i)} for i in range(300)]
        assert client.post("/learn", json={"model": m, "examples": exs}).status_code == 200
    asyncio.run(reg.snapshot_all(force=True))  # (refreshes the estimates)
    a, b = reg.models.peek("a").cost, reg.models.peek("b").cost
    lb = client.get("/models/b/leaderboard").json()
    challengers = sum(c["memory_bytes"] for c in lb["candidates"][1:])
    assert b - a >= challengers > 0


def test_two_processes_sharing_a_store_apply_each_others_control_records(make_settings):
    """With a shared store (several workers), a challenger added and a promotion made by one
    process are applied, in log order, by the other before it learns or reads."""
    settings = make_settings(shared_store=True, read_staleness=0.0)

    async def run():
        async with _registry(settings) as one, _registry(settings) as two:
            await one.create("m", {k: v for k, v in SPEC.items() if k != "name"})
            await two.learn("m", [Example(_ex(i), _label(i)) for i in range(40)], batch=True)
            await one.add_challengers("m", CHALLENGERS[:1])
            await two.learn("m", [Example(_ex(i), _label(i)) for i in range(40, 80)], batch=True)
            await one.promote("m", "ht")
            await two.learn("m", [Example(_ex(i), _label(i)) for i in range(80, 120)], batch=True)
            a, b = _board(await one.leaderboard("m")), _board(await two.leaderboard("m"))
            assert a == b and a["champion"] == "ht" and a["seq"] == 122
            assert [c["learned"] for c in a["candidates"]] == [80, 80]  # since the board began
            _assert_same(_states(one.models.peek("m")), _states(two.models.peek("m")))

    asyncio.run(run())


def test_the_champion_keeps_its_name_when_challengers_come_later(client):
    assert client.post("/models", json={**SPEC, "champion": "stump"}).status_code == 201
    assert client.get("/models/m/leaderboard").json()["candidates"] == []
    r = client.post("/models/m/challengers", json={"challengers": CHALLENGERS[:1]})
    assert [c["name"] for c in r.json()["candidates"]] == ["stump", "ht"]
    r = client.post("/models/m/challengers", json={"challengers": [{"name": "stump"}]})
    assert r.status_code == 422 and r.json()["detail"].startswith("challengers.0.name")
