"""Memory accounting counts the schema (issue 42, item 8): a model's feature names, categorical
values and labels are in its ``state_bytes``, in ``max_state_bytes`` and in the memory budget
(``CHORUS_MEMORY_MB``), and the limit's error gives the same number as ``state_bytes``.

The issue's scenario scaled down: models with long feature names, whose text is most of what they
hold. The gauge is compared with a lower bound computed from the names (their total length), not
with RSS (measured for the report: docs/service.md).
"""

from __future__ import annotations

import re
import time

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

pytest.importorskip("ensembles")

from ensembles import OnlineBagging, build_model  # noqa: E402
from learners import HoeffdingTree, LimitError, Limits  # noqa: E402

NAME = 4000  # characters of each feature name
N_FEATURES = 100
N_MODELS = 20


def _names(m: int) -> list[str]:
    return [(f"m{m}-f{j}-" + "n" * NAME)[:NAME] for j in range(N_FEATURES)]


def _gauge(client, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", client.get("/metrics").text, re.M)
    assert m, name
    return float(m.group(1))


@pytest.mark.parametrize("make", [
    lambda lim: OnlineBagging(HoeffdingTree(limits=lim), n_models=3, seed=1),
    lambda lim: HoeffdingTree(limits=lim),
])  # fmt: skip
def test_the_limit_error_and_state_bytes_give_one_number(make):
    """A model refused by ``max_state_bytes`` says how big its state is: that is its
    ``state_bytes``, and it counts the names the model holds."""
    model = make(Limits(max_state_bytes=300_000))
    text = 0
    with pytest.raises(LimitError) as err:
        for i in range(1000):
            x = {(f"e{i}-f{j}-" + "n" * 500)[:500]: float(j) for j in range(10)}
            model.learn_one(x, "ab"[i % 2])
            text += sum(map(len, x))
    m = re.search(r"the model's state is ([\d,]+) bytes", str(err.value))
    assert m, str(err.value)
    said = int(m.group(1).replace(",", ""))
    assert said == model.state_bytes
    assert said > 300_000 and model.state_bytes > text


def test_the_budget_counts_feature_names(tmp_path):
    """20 models of 100 features with 4,000-character names: the budget's gauge is at least the
    names' total length (with the arrays and the per-model overhead they are most of it), each
    model's ``state_bytes`` counts its own names, and a budget below that evicts models."""
    settings = Settings(data_dir=tmp_path / "data", snapshot_interval=3600, memory_mb=8)
    spec = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 2, "seed": 1}
    total = 0
    with TestClient(create_app(settings)) as c:
        for m in range(N_MODELS):
            name = f"wide{m}"
            assert c.post("/models", json={"name": name, **spec}).status_code == 201
            names = _names(m)
            exs = [{"features": {f: float((i + j) % 5) for j, f in enumerate(names)},
                    "label": "ab"[i % 2]} for i in range(4)]  # fmt: skip
            r = c.post("/learn", json={"model": name, "examples": exs})
            assert r.status_code == 200, r.text
            total += sum(map(len, names))
            d = c.get(f"/models/{name}").json()
            assert d["state_bytes"] >= sum(map(len, names)), d["state_bytes"]
        # the evictor is a background task that measures the models it holds as it goes: wait
        # until it has evicted and is within the budget (the gauge can dip below the budget
        # before the models' measured sizes replace their first estimates)
        deadline = time.monotonic() + 30
        while ((_gauge(c, "chorus_models_bytes") > 8 * 2**20
                or _gauge(c, "chorus_models_evicted_total") == 0)
               and time.monotonic() < deadline):  # fmt: skip
            time.sleep(0.05)
        resident = _gauge(c, "chorus_models_bytes")
        evicted = _gauge(c, "chorus_models_evicted_total")
        loaded = _gauge(c, "chorus_models_loaded")
    assert total == N_MODELS * N_FEATURES * NAME
    assert evicted > 0, "a budget below the models' names evicted nothing"
    # the held models' gauge covers at least their names
    assert resident >= loaded * N_FEATURES * NAME, (resident, loaded)


def test_a_models_cost_counts_its_schema():
    """The budget's estimate of one model covers its arrays as allocated and its schema's text
    (the names alone here are 400,000 characters)."""
    from app.registry.handles import MODEL_OVERHEAD, Handle, estimate_cost

    model = build_model({"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 2,
                         "seed": 1})  # fmt: skip
    names = _names(0)
    model.learn_many([{f: float(i + j) for j, f in enumerate(names)} for i in range(4)],
                     ["a", "b", "a", "b"])  # fmt: skip
    arrays = sum(a.nbytes for a in model._settled().bank.T)
    cost = estimate_cost(Handle("m", {}, model))
    assert cost >= MODEL_OVERHEAD + arrays + N_FEATURES * NAME
    assert model.memory_bytes >= arrays + N_FEATURES * NAME
