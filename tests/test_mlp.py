"""learners.MLP: learning, the weight rule, deterministic initialisation, state, ensembles."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ensembles import AdaBoost, BatchBagging, OnlineBagging, OnlineBoosting, build_model, load_state
from learners import MLP, LimitError
from learners.checks import mixed_stream
from learners.jit import set_interpreted
from learners.mlp import init_weights, member_seed


def _stream(n: int, seed: int, label) -> list:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = {"x1": rng.uniform(-1, 1), "x2": rng.uniform(-1, 1), "noise": rng.gauss(0, 1)}
        out.append((x, label(x)))
    return out


def _accuracy(model, data) -> float:
    return sum(model.predict_one(x) == y for x, y in data) / len(data)


def test_learns_a_linearly_separable_stream():
    label = lambda x: "a" if x["x1"] + 0.5 * x["x2"] > 0.1 else "b"  # noqa: E731
    model = MLP(init_seed=3)
    for x, y in _stream(3000, 1, label):
        model.learn_one(x, y)
    assert _accuracy(model, _stream(1000, 2, label)) >= 0.95


def test_learns_xor_with_its_hidden_layer():
    """XOR of the signs of two inputs: no linear model gets above ~0.5, one hidden layer can."""
    label = lambda x: (x["x1"] > 0) != (x["x2"] > 0)  # noqa: E731
    model = MLP(n_hidden=8, learning_rate=0.5, init_seed=1)
    for x, y in _stream(20000, 3, label):
        model.learn_one(x, y)
    assert _accuracy(model, _stream(1000, 4, label)) >= 0.9


def test_categorical_one_hot_and_new_class_mid_stream():
    rng = random.Random(5)
    model = MLP(learning_rate=0.3)
    for i in range(4000):
        c = rng.choice("pqrs")
        y = {"p": "one", "q": "two", "r": "one"}.get(c, "three" if i >= 1000 else "one")
        model.learn_one({"c": c}, y)
    assert model.classes == ["one", "two", "three"]
    assert [model.predict_one({"c": c}) for c in "pqrs"] == ["one", "two", "one", "three"]


def _pairs_close(a: MLP, b: MLP) -> float:
    sa, sb = a.to_state()["arrays"], b.to_state()["arrays"]
    return max(float(np.max(np.abs(sa[k] - sb[k]))) for k in sa if sa[k].size)


def _weights(model: MLP) -> list:
    arrays = model.to_state()["arrays"]
    return [arrays[k].tolist() for k in ("w_cat", "b_hid", "w_out", "b_out")]


def test_weight_scales_the_step_and_is_capped():
    """What holds for ``w = k``: for categorical inputs (no running statistics), ``w = k`` is
    exactly one step of ``k * learning_rate``, and weights above ``max_step_weight`` step as
    ``max_step_weight``. It is not ``k`` repeated steps: those differ by O(learning_rate**2)."""
    data = [({"c": random.Random(i).choice("uvw"), "d": "xy"[i % 2]}, "ab"[i % 3 == 0])
            for i in range(300)]  # fmt: skip
    lr = 0.05
    weighted = MLP(learning_rate=lr, max_step_weight=10.0)
    scaled = MLP(learning_rate=3 * lr)
    capped = MLP(learning_rate=lr, max_step_weight=10.0)
    for x, y in data:
        weighted.learn_one(x, y, w=3.0)
        scaled.learn_one(x, y)
        capped.learn_one(x, y, w=30.0)
    assert _weights(weighted) == _weights(scaled)
    w10 = MLP(learning_rate=lr, max_step_weight=10.0)
    for x, y in data:
        w10.learn_one(x, y, w=10.0)
    assert _weights(capped) == _weights(w10)

    def gap(lr: float) -> float:
        once, twice = MLP(learning_rate=lr, max_step_weight=2.0), MLP(learning_rate=lr)
        for x, y in data[:50]:
            once.learn_one(x, y, w=2.0)
            twice.learn_one(x, y)
            twice.learn_one(x, y)
        return _pairs_close(once, twice)

    g1, g2 = gap(1e-2), gap(1e-3)
    assert g1 > 0.0  # not the same rule
    assert g2 < g1 / 30  # second order in the step: ~100x smaller for a 10x smaller step
    default = MLP(learning_rate=lr)  # default cap 1: any w >= 1 is one ordinary step
    unit = MLP(learning_rate=lr)
    for x, y in data:
        default.learn_one(x, y, w=4.0)
        unit.learn_one(x, y)
    assert _weights(default) == _weights(unit)


def test_initialisation_is_a_pure_function_of_seed_and_position():
    whole = init_weights(7, 2, range(0, 8), 5, 0.5)
    assert np.array_equal(whole[4:], init_weights(7, 2, range(4, 8), 5, 0.5))
    assert not np.array_equal(whole, init_weights(8, 2, range(0, 8), 5, 0.5))
    assert np.all(np.abs(whole) <= 0.5) and whole.std() > 0.1
    data = _stream(300, 9, lambda x: x["x1"] > 0)
    fresh, roomy = MLP(init_seed=4), MLP(init_seed=4)
    roomy._grow(50, 50, 20)  # capacity grown early: the same initial values
    other = MLP(init_seed=5)
    for x, y in data:
        fresh.learn_one(x, y)
        roomy.learn_one(x, y)
        other.learn_one(x, y)
    probe = _stream(50, 10, lambda x: x["x1"] > 0)
    assert [fresh.predict_proba_one(x) for x, _ in probe] == [
        roomy.predict_proba_one(x) for x, _ in probe
    ]
    assert [fresh.predict_proba_one(x) for x, _ in probe] != [
        other.predict_proba_one(x) for x, _ in probe
    ]


def test_state_round_trip_continues_bit_identically_across_growth():
    data = _stream(
        400, 11, lambda x: "lo" if x["x1"] < -0.3 else ("mid" if x["x1"] < 0.3 else "hi")
    )
    a = MLP(n_hidden=6)
    for x, y in data[:100]:
        if y != "hi":
            a.learn_one(x, y)
    b = MLP.from_state(a.to_state())
    for i, (x, y) in enumerate(data[100:]):
        x = {**x, "late": float(i)} if i > 50 else x  # a new feature and a new class after load
        assert a.predict_proba_one(x) == b.predict_proba_one(x)
        a.learn_one(x, y)
        b.learn_one(x, y)
    assert "hi" in a.classes
    sa, sb = a.to_state(), b.to_state()
    assert sa["header"] == sb["header"]
    assert all(np.array_equal(sa["arrays"][k], sb["arrays"][k]) for k in sa["arrays"])


def test_interpreted_twin_is_bit_identical():
    data = _stream(200, 12, lambda x: x["x2"] > 0.2)
    compiled = MLP()
    compiled.learn_many([x for x, _ in data], [y for _, y in data])
    set_interpreted(True)
    try:
        twin = MLP()
        twin.learn_many([x for x, _ in data], [y for _, y in data])
        p_twin = [twin.predict_proba_one(x) for x, _ in data[:30]]
    finally:
        set_interpreted(False)
    assert p_twin == [compiled.predict_proba_one(x) for x, _ in data[:30]]


@pytest.mark.parametrize("ensemble", ["bagging", "boosting"])
def test_spec_and_state_of_an_ensemble_of_networks(ensemble):
    model = build_model({"ensemble": ensemble, "learner": "mlp", "n_models": 3, "seed": 2,
                         "params": {"n_hidden": 5, "init_seed": 7}})  # fmt: skip
    assert isinstance(model, OnlineBagging if ensemble == "bagging" else OnlineBoosting)
    data = _stream(300, 13, lambda x: x["x1"] > 0)
    for x, y in data[:200]:
        model.learn_one(x, y)
    copy = load_state(model.to_state())
    for x, y in data[200:]:
        assert copy.predict_proba_one(x) == model.predict_proba_one(x)
        copy.learn_one(x, y)
        model.learn_one(x, y)


def test_ensembles_of_networks_learn():
    label = lambda x: x["x1"] - x["x2"] > 0  # noqa: E731
    train, test = _stream(1500, 14, label), _stream(500, 15, label)
    X, y = [x for x, _ in train], [t for _, t in train]
    for model in (
        OnlineBagging(MLP(), n_models=5, seed=1),
        OnlineBoosting(MLP(), n_models=5, seed=1),
    ):
        model.learn_many(X, y)
        assert _accuracy(model, test) >= 0.9, model
    for model in (BatchBagging(MLP(), n_models=5, seed=1), AdaBoost(MLP(), n_models=5, seed=1)):
        model.fit(X, y)
        assert _accuracy(model, test) >= 0.9, model


def test_invalid_parameters_name_the_valid_range():
    with pytest.raises(ValueError, match="n_hidden"):
        MLP(n_hidden=0)
    with pytest.raises(ValueError, match="learning_rate"):
        MLP(learning_rate=-1.0)
    with pytest.raises(ValueError, match="init_seed"):
        MLP(init_seed=-2)


def test_mlp_models_over_http_survive_a_restart(tmp_path):
    """``"learner": "mlp"`` through the service: created, learned, and recovered exactly (state
    arrays + log replay, no pickle) by a new server on the same store."""
    import warnings

    from app.main import create_app
    from app.settings import Settings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    settings = Settings(data_dir=tmp_path / "data", snapshot_every=25)
    spec = {"name": "net", "ensemble": "bagging", "learner": "mlp", "n_models": 3, "seed": 2}
    x = {"a": 0.3, "b": -1.0, "c": "blue"}
    with TestClient(create_app(settings)) as c:
        assert c.post("/models", json=spec).status_code == 201
        for i in range(40):  # one snapshot at 25, the rest from the log
            row = {"a": (i % 7) / 7, "b": float(i % 3) - 1, "c": ["red", "blue"][i % 2]}
            r = c.post("/learn", json={"model": "net", "features": row, "label": str(i % 7 > 3)})
            assert r.status_code == 200, r.text
        before = c.post("/predict", json={"model": "net", "features": x}).json()
    assert before["probabilities"]
    with TestClient(create_app(settings)) as c:
        after = c.post("/predict", json={"model": "net", "features": x}).json()
        assert c.get("/models/net").json()["n_seen"] == 40
    assert after["probabilities"] == before["probabilities"]


SHARED_INIT = Path(__file__).parent / "data" / "mlp_shared_init.npz"


def _member_arrays(model) -> list[dict]:
    st = model.to_state()
    return [{k.split(".", 1)[1]: v for k, v in st["arrays"].items() if k.startswith(f"m{m}.")}
            for m in range(model.n_models)]  # fmt: skip


@pytest.mark.parametrize("ensemble", ["bagging", "boosting"])
def test_members_start_from_their_own_weights(ensemble):
    """Issue 20: member m's initial weights are keyed by member_seed(init_seed, m); member 0 is
    the base network; the same spec gives the same members, bit for bit, and the state says so."""
    spec = {"ensemble": ensemble, "learner": "mlp", "n_models": 3, "seed": 2,
            "params": {"n_hidden": 4, "init_seed": 7}}  # fmt: skip
    model = build_model(spec)
    fresh = _member_arrays(model)
    base = MLP(n_hidden=4, init_seed=7).to_state()["arrays"]
    assert np.array_equal(fresh[0]["b_hid"], base["b_hid"])
    assert not np.array_equal(fresh[0]["b_hid"], fresh[1]["b_hid"])
    assert not np.array_equal(fresh[1]["b_hid"], fresh[2]["b_hid"])
    seeds = [h["params"]["init_seed"] for h in model.to_state()["header"]["members"]]
    assert seeds == [member_seed(7, m) for m in range(3)] and len(set(seeds)) == 3
    data = list(mixed_stream(400, 5, new_class_at=200))
    X, y = [x for x, _ in data], [t for _, t in data]
    model.learn_many(X[:250], y[:250])
    trained = _member_arrays(model)
    assert not np.array_equal(trained[0]["w_num"], trained[1]["w_num"])
    twin = build_model(spec)
    twin.learn_many(X[:250], y[:250])
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(trained, _member_arrays(twin), strict=True)
               for k in a)  # fmt: skip
    copy = load_state(model.to_state())  # new features and a new class after the load
    assert copy.predict_learn_many(X[250:], y[250:]) == model.predict_learn_many(X[250:], y[250:])


def test_batch_ensembles_give_members_their_own_weights():
    data = _stream(200, 16, lambda x: x["x1"] > 0)
    X, y = [x for x, _ in data], [t for _, t in data]
    bag = BatchBagging(MLP(init_seed=3), n_models=3, seed=1).fit(X, y)
    seeds = [m.init_seed for m in bag._members]
    assert seeds == [member_seed(3, m) for m in range(3)]
    again = BatchBagging(MLP(init_seed=3), n_models=3, seed=1).fit(X, y)
    probe = [x for x, _ in _stream(30, 17, lambda x: True)]
    assert bag.predict_proba_many(probe) == again.predict_proba_many(probe)


def test_saved_ensembles_with_shared_initial_weights_go_on_exactly():
    """``mlp_shared_init.npz``: ensembles of networks saved by the code before issue 20 (members
    sharing init_seed 7) after 200 examples of ``mixed_stream(500, 3, new_class_at=250)``, with
    that code's prequential predictions on the 300 after (a new category and a new class
    among them: weights not used before the save). A saved state keeps its meaning: the
    members keep their shared seed (and their not-yet-used weights) and predict exactly as then."""
    raw = np.load(SHARED_INIT)
    data = list(mixed_stream(500, 3, new_class_at=250))[200:]
    for name in ("bagging", "boosting"):
        header = json.loads(str(raw[f"{name}.header"]))
        arrays = {k[len(name) + 1 :]: raw[k] for k in raw.files
                  if k.startswith(name + ".") and k.count(".") >= 2}  # fmt: skip
        assert {h["params"]["init_seed"] for h in header["members"]} == {7}
        model = load_state({"header": header, "arrays": arrays})
        preds = model.predict_learn_many([x for x, _ in data], [y for _, y in data])
        after = json.loads(str(raw[f"{name}.after"]))
        assert [[list(kv) for kv in sorted(p.items(), key=str)] for p in preds] == after, name
        seeds = [h["params"]["init_seed"] for h in model.to_state()["header"]["members"]]
        assert seeds == [7, 7, 7]


def _distinct(n: int, start: int = 0) -> list[dict]:
    return [{"id": f"v{i}", "x": float(i % 7)} for i in range(start, start + n)]


def test_max_state_bytes_bounds_a_network_fed_100k_distinct_categories():
    """A hostile stream: 100,000 categories never seen before (one-hot rows of the network). The
    state (arrays as allocated + schema text) never exceeds max_state_bytes: a call that would
    take it over is refused whole (``LimitError``, nothing of it learned); what fits goes on."""
    limit = 1_000_000
    net = MLP(limits={"max_state_bytes": limit, "max_values": 200_000})
    refused = 0
    for i, x in enumerate(_distinct(100_000)):
        try:
            net.learn_one(x, i % 2 == 0)
        except LimitError as err:
            assert err.limit == "max_state_bytes" and err.field == "model"
            refused += 1
        assert net.memory_bytes + net._schema.held_bytes() <= limit
    # ~1 MB / (88 bytes of weights + ~135 of schema) per category: near the bound the arrays
    # grow to just what fits (not doubling, which would stop at a power of two)
    assert 94_000 < refused < 96_000
    before = net.to_state()
    with pytest.raises(LimitError, match="max_state_bytes"):  # a batch that would go over
        net.learn_many(_distinct(5_000, start=200_000), [True] * 5_000)
    after = net.to_state()
    assert after["header"] == before["header"]
    assert all(np.array_equal(after["arrays"][k], before["arrays"][k]) for k in after["arrays"])
    net.learn_one({"id": "v3", "x": 2.0}, True)  # known inputs: learned (the state keeps its size)
    assert not np.array_equal(net.to_state()["arrays"]["b_hid"], before["arrays"]["b_hid"])
    assert net.predict_one({"id": "never", "x": 1.0}) in (True, False)
    assert MLP.from_state(net.to_state()).predict_proba_one({"id": "v3"}) == net.predict_proba_one(
        {"id": "v3"}
    )


@pytest.mark.parametrize("ensemble", [OnlineBagging, OnlineBoosting])
def test_max_state_bytes_bounds_an_ensemble_of_networks(ensemble):
    limit = 1_000_000
    model = ensemble(MLP(), n_models=3, seed=1,
                     limits={"max_state_bytes": limit, "max_values": 200_000})  # fmt: skip
    refused = 0
    for i, x in enumerate(_distinct(100_000)):
        try:
            model.learn_one(x, i % 2 == 0)
        except LimitError as err:
            assert err.field == "model"
            refused += 1
    members = model._settled().members
    assert sum(m.memory_bytes for m in members) + model._settled().schema.held_bytes() <= limit
    assert refused > 90_000
    assert model.predict_one({"id": "v1", "x": 1.0}) in (True, False)


_VALUES = ["red", "blue", 0, 1.5, True, None]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_VALUES), st.sampled_from(_VALUES), st.integers(0, 2)),
        min_size=1,
        max_size=8,
    ),  # fmt: skip
    st.sampled_from(["bag", "boost"]),
)
def test_networks_in_an_ensemble_take_its_feature_kinds(rows, kind) -> None:
    """A member sees only the examples its Poisson draws give it: a network that first saw
    ``b = 0`` made ``b`` numeric while the ensemble had made it categorical from ``"red"``, and
    then refused, for good, rows the ensemble accepted (a refused example also left its class in
    the ensemble). Now the ensemble declares each new feature's kind to its members: every row
    it accepts, its members accept, and a refused one leaves no trace."""
    cls = OnlineBagging if kind == "bag" else OnlineBoosting
    model = cls(MLP(n_hidden=3), n_models=3, seed=4)
    learned = []
    for a, b, y in rows:
        x = {"a": a, "b": b}
        before = json.dumps(model.to_state()["header"], sort_keys=True, default=str)
        try:
            model.predict_learn_one(x, y)
        except ValueError:
            assert json.dumps(model.to_state()["header"], sort_keys=True, default=str) == before
            continue
        learned.append(x)
        for seen in learned:
            model.predict_proba_one(seen)  # (a row learned once is never refused afterwards)


def test_a_network_member_that_missed_a_features_first_value() -> None:
    model = OnlineBagging(MLP(n_hidden=3), n_models=2, seed=4)
    for x, y in [({"b": "red"}, 0), ({"b": 0}, 0), ({"b": "red"}, 1)]:
        model.predict_learn_one(x, y)  # (the third raised: member 1 had made b numeric)
    assert set(model.predict_proba_one({"b": "red"})) == {0, 1}
