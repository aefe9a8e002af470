"""OOB / UOB's defaults (issue 40): ``imbalance_decay`` 0.9999 and Hoeffding trees with
``nb_zero_variance="auto"`` made ``"skip"`` under ``imbalance``; specs and states saved before
(which did not name the trees' rule) keep ``"point"``; models without ``imbalance`` unchanged."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ensembles
from ensembles import OnlineBagging, Single, build_model, load_state, stored_spec
from learners import HoeffdingTree, NaiveBayes


def rare_stream(n: int, seed: int, share_cut: float = 17.0) -> list:
    """Two uniform features in [0, 10]; "pos" when their sum is above ``share_cut`` (4.5 % at
    17): a rare class that oversampled leaves know from one heavily weighted value."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = {"a": rng.uniform(0, 10), "b": rng.uniform(0, 10)}
        out.append((x, "pos" if x["a"] + x["b"] > share_cut else "neg"))
    return out


def run(model, stream) -> list:
    """Prequential: the probabilities predicted before learning each row."""
    return [_predict_then_learn(model, x, y) for x, y in stream]


def _predict_then_learn(model, x, y) -> dict:
    proba = model.predict_proba_one(x)
    model.learn_one(x, y)
    return proba


def tree() -> HoeffdingTree:
    return HoeffdingTree(grace_period=50)


@pytest.mark.parametrize("mode", ["oob", "uob"])
def test_the_defaults_are_skip_and_0_9999_and_named_in_the_spec(mode):
    model = OnlineBagging(tree(), n_models=5, seed=3, imbalance=mode)
    assert model.imbalance_decay == 0.9999
    assert model.learner.nb_zero_variance == "skip"
    params = model.spec()["params"]
    assert params["nb_zero_variance"] == "skip" and params["imbalance_decay"] == 0.9999
    explicit = OnlineBagging(HoeffdingTree(grace_period=50, nb_zero_variance="skip"),
                             n_models=5, seed=3, imbalance=mode, imbalance_decay=0.9999)  # fmt: skip
    stream = rare_stream(1500, 1)
    assert run(model, stream) == run(explicit, stream)
    # (and the rule matters on this stream: the old defaults answer otherwise)
    old = OnlineBagging(HoeffdingTree(grace_period=50, nb_zero_variance="point"), n_models=5,
                        seed=3, imbalance=mode, imbalance_decay=0.99)  # fmt: skip
    assert run(old, stream) != run(explicit, stream)


def test_a_named_rule_is_kept_and_written_under_imbalance():
    """``"point"`` given with ``imbalance`` stays (a plain tree's spec leaves it out; an
    imbalance spec must name it, or a rebuild would take ``"auto"``'s ``"skip"``)."""
    model = OnlineBagging(HoeffdingTree(grace_period=50, nb_zero_variance="point"), n_models=3,
                          seed=2, imbalance="oob")  # fmt: skip
    assert model.learner.nb_zero_variance == "point"
    assert model.spec()["params"]["nb_zero_variance"] == "point"
    back = build_model(model.spec())
    assert back.learner.nb_zero_variance == "point" and back.spec() == model.spec()
    stream = rare_stream(800, 4)
    assert run(back, stream) == run(model, stream)


def test_models_without_imbalance_keep_the_point_mass_and_their_specs():
    for model in (OnlineBagging(tree(), n_models=3, seed=1), Single(tree())):
        assert "nb_zero_variance" not in model.spec()["params"]
        assert model.learner.nb_zero_variance == "auto"
    stream = rare_stream(1500, 2)
    auto = OnlineBagging(tree(), n_models=3, seed=1)
    point = OnlineBagging(HoeffdingTree(grace_period=50, nb_zero_variance="point"), n_models=3,
                          seed=1)  # fmt: skip
    assert run(auto, stream) == run(point, stream)
    assert auto.spec() == point.spec()


def test_a_learner_without_the_rule_is_left_alone():
    model = OnlineBagging(NaiveBayes(), n_models=3, seed=1, imbalance="oob")
    assert "nb_zero_variance" not in model.spec()["params"]
    assert stored_spec(model.spec()) == model.spec()


def _old_state(mode: str) -> tuple[OnlineBagging, dict, list]:
    """A state as the code before the ``"auto"`` rule saved it: trees at ``"point"``, which
    its spec did not name, and its decay (0.99, then the default) named."""
    model = OnlineBagging(HoeffdingTree(grace_period=50, nb_zero_variance="point"), n_models=5,
                          seed=7, imbalance=mode, imbalance_decay=0.99)  # fmt: skip
    stream = rare_stream(2000, 9)
    run(model, stream[:100])
    state = model.to_state()
    del state["header"]["spec"]["params"]["nb_zero_variance"]
    return model, state, stream[100:]


@pytest.mark.parametrize("mode", ["oob", "uob"])
def test_a_state_saved_before_the_auto_rule_loads_with_its_old_behaviour(mode):
    model, state, rest = _old_state(mode)
    back = load_state(state)
    assert back.learner.nb_zero_variance == "point" and back.imbalance_decay == 0.99
    assert run(back, rest) == run(model, rest)
    # (without the migration its trees would take "skip", which answers otherwise here)
    _, state, rest = _old_state(mode)
    state["header"]["spec"]["params"]["nb_zero_variance"] = "skip"
    assert run(load_state(state), rest) != run(_old_state(mode)[0], rest)


def test_a_stored_spec_without_the_rule_is_rebuilt_with_the_point_mass():
    """``ensembles.stored_spec`` (the service's rebuild of a stored spec without a snapshot)."""
    old = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 1,
           "params": {"grace_period": 50, "imbalance": "uob", "imbalance_decay": 0.99}}  # fmt: skip
    model = build_model(stored_spec(old))
    assert model.learner.nb_zero_variance == "point"
    assert build_model(old).learner.nb_zero_variance == "skip"  # (a user's spec: the new default)
    assert old["params"] == {"grace_period": 50, "imbalance": "uob", "imbalance_decay": 0.99}


@settings(max_examples=60, deadline=None)  # (building models: no per-example time limit)
@given(
    mode=st.sampled_from([None, "oob", "uob"]),
    rule=st.sampled_from([None, "auto", "point", "skip"]),
    decay=st.one_of(st.none(), st.floats(0.5, 0.99999)),
    ensemble=st.sampled_from(["bagging", "boosting", "single", "arf"]),
    learner=st.sampled_from(["hoeffding_tree", "naive_bayes"]),
)
def test_stored_spec_is_the_identity_on_every_spec_chorus_writes_now(
    mode, rule, decay, ensemble, learner
):
    """A spec written by ``spec()`` now names everything its rebuild needs: ``stored_spec``
    leaves it as it is, and the rebuilt model writes the same spec."""
    params: dict = {}
    if learner == "hoeffding_tree" and rule is not None:
        params["nb_zero_variance"] = rule
    if ensemble == "bagging" and mode is not None:
        params["imbalance"] = mode
        if decay is not None:
            params["imbalance_decay"] = decay
    if ensemble == "arf" and learner != "hoeffding_tree":
        return
    spec = {"ensemble": ensemble, "learner": learner, "params": params,
            "n_models": 1 if ensemble == "single" else 2}  # fmt: skip
    model = build_model(spec)
    written = model.spec()
    assert stored_spec(written) == written
    assert build_model(stored_spec(written)).spec() == written
    if mode is not None and ensemble == "bagging" and learner == "hoeffding_tree":
        assert written["params"]["nb_zero_variance"] == (rule if rule in ("point", "skip")
                                                         else "skip")  # fmt: skip


@given(
    params=st.dictionaries(
        st.sampled_from(["grace_period", "imbalance", "imbalance_decay", "nb_zero_variance"]),
        st.sampled_from([None, "oob", "uob", "point", "skip", 0.9, 50]),
    ),
    learner=st.sampled_from([None, "hoeffding_tree", "naive_bayes", "stump"]),
    ensemble=st.sampled_from([None, "bagging", "boosting", ["bagging"]]),
)
def test_stored_spec_fills_the_point_mass_only_where_an_old_spec_left_it_out(
    params, learner, ensemble
):
    spec: dict = {"params": dict(params)}
    if learner is not None:
        spec["learner"] = learner
    if ensemble is not None:
        spec["ensemble"] = ensemble
    before = {k: (dict(v) if isinstance(v, dict) else v) for k, v in spec.items()}
    out = stored_spec(spec)
    assert spec == before  # (not mutated)
    legacy = (
        ensemble in (None, "bagging") and learner in (None, "hoeffding_tree")
        and params.get("imbalance") is not None and "nb_zero_variance" not in params
    )  # fmt: skip
    if legacy:
        assert out == {**spec, "params": {**params, "nb_zero_variance": "point"}}
    else:
        assert out == spec


def test_stored_spec_is_exported():
    assert ensembles.stored_spec is stored_spec
