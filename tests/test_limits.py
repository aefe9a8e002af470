"""Bounded models (issue 11): hostile input gives a result or a clear error, never a crash; state
grows at most linearly with the examples; limits are enforced before anything is learned."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ensembles import OnlineBagging, OnlineBoosting, Single, build_model, load_state
from learners import MLP, DecisionStump, HoeffdingTree, LimitError, Limits, NaiveBayes, ParamError
from learners.native import PARAM_BOUNDS

SMALL = {"max_features": 12, "max_values": 25, "max_classes": 6, "max_nodes": 60,
         "max_state_bytes": 400_000}  # fmt: skip
MODELS = {
    "single_ht": lambda lim: Single(HoeffdingTree(grace_period=10), limits=lim),
    "bagging_ht": lambda lim: OnlineBagging(
        HoeffdingTree(grace_period=10), n_models=3, seed=1, limits=lim
    ),  # fmt: skip
    "bagging_nb": lambda lim: OnlineBagging(NaiveBayes(), n_models=3, seed=2, limits=lim),
    "boosting_stump": lambda lim: OnlineBoosting(DecisionStump(), n_models=3, seed=3, limits=lim),
    "ht": lambda lim: HoeffdingTree(grace_period=10, limits=lim),
    "mlp": lambda lim: MLP(n_hidden=3, limits=lim),
    "bagging_mlp": lambda lim: OnlineBagging(MLP(n_hidden=3), n_models=2, seed=4, limits=lim),
}

names = st.one_of(st.sampled_from(["a", "b", "c", "é", "日本", ""]), st.text(max_size=30),
                  st.sampled_from("xyz").map(lambda c: c * 10_000))  # fmt: skip
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(
        lambda v: v if not math.isfinite(v) else max(-1e100, min(1e100, v))
    ),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    st.none(),
    st.sampled_from(["red", "green", "blue", "ünï", "\x00", ""]),
    st.text(max_size=20),
    st.sampled_from("ab").map(lambda c: c * 10_000 + "é"),
)
examples = st.tuples(st.dictionaries(names, values, max_size=8),
                     st.one_of(st.integers(0, 20), st.sampled_from(["yes", "no", "ø"]),
                               st.booleans()))  # fmt: skip


def _check_proba(p: dict) -> None:
    assert isinstance(p, dict)
    if p:
        assert all(0.0 <= v <= 1.0 for v in p.values())
        assert math.isclose(sum(p.values()), 1.0, rel_tol=1e-9)


@pytest.mark.parametrize("name", list(MODELS))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(examples, min_size=1, max_size=15))
def test_hostile_streams_give_results_or_clear_errors(name, stream):
    model = MODELS[name](SMALL)
    for x, y in stream:
        before = model.to_state()["header"]
        try:
            p = model.predict_learn_one(x, y)
        except ValueError as exc:  # FeatureTypeError, LabelError, LimitError: nothing learned
            assert str(exc)
            assert model.to_state()["header"] == before
            continue
        _check_proba(p)
    again = load_state(model.to_state())
    probe = {"a": 0.5, "b": "red"}
    try:
        assert again.predict_proba_one(probe) == model.predict_proba_one(probe)
    except ValueError:
        pass  # a probe of the wrong kind for the features the model saw


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(50, 400))
def test_state_round_trip_after_random_streams(seed, n):
    import random

    rng = random.Random(seed)

    def ex(i: int) -> tuple[dict, str]:
        x = {"n": rng.random(), "c": f"v{rng.randrange(50)}", f"f{rng.randrange(5)}": rng.random()}
        return x, "abc"[(i + (x["n"] > 0.5)) % 3]

    data = [ex(i) for i in range(n + 100)]
    a = OnlineBagging(HoeffdingTree(grace_period=20), n_models=3, seed=seed)
    a.learn_many([x for x, _ in data[:n]], [y for _, y in data[:n]])
    b = load_state(a.to_state())
    rest = data[n:]
    assert a.predict_learn_many(*zip(*rest)) == b.predict_learn_many(*zip(*rest))
    sa, sb = a.to_state(), b.to_state()
    assert sa["header"] == sb["header"]
    assert sa["arrays"].keys() == sb["arrays"].keys()
    assert all((sa["arrays"][k] == sb["arrays"][k]).all() for k in sa["arrays"])


def _high_cardinality(n: int, seed: int = 0):
    """Example i: a categorical ``id`` seen once (n distinct values), two numeric features."""
    import random

    rng = random.Random(seed)
    for i in range(n):
        a, b = rng.random(), rng.random()
        yield {"id": f"id{i}", "a": a, "b": b}, a + b > 1.0


@settings(max_examples=5, deadline=None)
@given(n=st.integers(200, 3000), seed=st.integers(0, 100))
def test_state_grows_at_most_linearly(n, seed):
    model = OnlineBagging(HoeffdingTree(grace_period=50), n_models=5, seed=seed)
    data = list(_high_cardinality(n, seed))
    model.learn_many([x for x, _ in data], [y for _, y in data])
    # members x (a leaf and its rows per example) + the schema's strings: linear in n
    assert model.state_bytes <= 20_000 + 5 * 1_200 * n


def test_20000_distinct_values_keep_state_small():
    """20,000 distinct values of one feature, 5 trees: dense per-leaf blocks over the vocabulary
    took members x leaves x 20,000 x classes x 8 bytes (> 30 MB with 20 leaves); sparse rows
    take what the leaves saw."""
    model = OnlineBagging(HoeffdingTree(grace_period=50, max_nodes=200), n_models=5, seed=1)
    data = list(_high_cardinality(20_000))
    model.learn_many([x for x, _ in data], [y for _, y in data])
    assert len(model._settled().bank.schema.cat_values[0]) == 20_000
    assert model.state_bytes < 8_000_000
    assert model.predict_one({"id": "id5", "a": 0.9, "b": 0.9}) is True


def test_limits_are_checked_before_learning():
    model = OnlineBagging(HoeffdingTree(), n_models=2, limits={"max_features": 2})
    model.learn_one({"a": 1.0, "b": "x"}, "p")
    header = model.to_state()["header"]
    with pytest.raises(LimitError, match="max_features") as err:
        model.learn_many([{"a": 2.0}, {"a": 1.0, "c": 3.0}], ["p", "q"])
    assert err.value.field == "features" and err.value.limit == "max_features"
    assert model.to_state()["header"] == header  # the first row was not learned either
    with pytest.raises(LimitError, match="max_classes"):
        Single(NaiveBayes(limits={"max_classes": 1}), limits=None).learn_many([{}, {}], ["a", "b"])


def test_over_limit_values_share_one_other_value():
    model = Single(DecisionStump(), limits={"max_values": 2, "over_limit": "other"})
    for v, y in [("a", 0), ("b", 1), ("c", 2), ("d", 2), ("a", 0)]:
        model.learn_one({"v": v}, y)
    assert model.predict_one({"v": "zzz"}) == 2  # any value past the limit is "other"
    assert model.predict_one({"v": "b"}) == 1
    spec = model.spec()
    assert spec["limits"]["over_limit"] == "other"
    assert build_model(spec).limits == spec["limits"]


def test_max_state_bytes_stops_learning_not_predicting():
    model = OnlineBagging(HoeffdingTree(), n_models=2, limits={"max_state_bytes": 20_000})
    with pytest.raises(LimitError, match="max_state_bytes") as err:
        for i in range(5_000):
            model.learn_one({"id": f"v{i}", "x": float(i % 7)}, i % 2)
    assert err.value.field == "model"
    assert (
        model._settled().bank.nbytes + model._settled().bank.schema.text_bytes < 60_000
    )  # one example past it
    assert model.predict_proba_one({"x": 3.0})


def test_a_full_tree_sends_values_without_a_branch_to_one_other_branch():
    tree = HoeffdingTree(grace_period=20, max_nodes=8, tau=0.5, leaf_prediction="mc")
    for i in range(3000):
        c = f"c{i % 40}"
        tree.learn_one({"c": c}, (i % 40) < 20)
    assert tree.describe_tree()["n_nodes"] <= 8 + 1  # + the shared "other" branch
    assert tree.predict_one({"c": "never-seen"}) in (True, False)


def test_invalid_limits_name_the_valid_ones():
    with pytest.raises(ValueError, match="max_colours"):
        HoeffdingTree(limits={"max_colours": 3})
    with pytest.raises(ValueError, match="over_limit"):
        Limits(over_limit="drop")
    with pytest.raises(ValueError, match="max_values"):
        build_model({"learner": "naive_bayes", "limits": {"max_values": 0}})


@pytest.mark.parametrize("param", sorted(PARAM_BOUNDS))
@given(excess=st.floats(min_value=1.0, max_value=1e300) | st.just(math.nan))
@settings(max_examples=20, deadline=None)
def test_size_params_beyond_their_bound_raise_param_error(param, excess):
    """The engine owns its parameter bounds (the service only maps ParamError to a 422)."""
    value = excess if math.isnan(excess) else PARAM_BOUNDS[param] * (1 + excess)
    with pytest.raises(ParamError) as err:
        HoeffdingTree(**{param: value})
    assert err.value.param == param and param in str(err.value)
    HoeffdingTree(**{param: int(PARAM_BOUNDS[param])})  # the bound itself is accepted


# ----------------------------------------------------------------------------- sample weights
HOSTILE_WEIGHTS = [1.0, 2.5, 0.0, 5e-324, 1e-300, 1e12]  # 1e12 = learners.MAX_WEIGHT
WEIGHTED = {
    "nb": lambda: NaiveBayes(),
    "ht": lambda: HoeffdingTree(grace_period=20),
    "stump": lambda: DecisionStump(),
    "bag_nb": lambda: OnlineBagging(NaiveBayes(), n_models=3, seed=1),
    "bag_ht": lambda: OnlineBagging(HoeffdingTree(grace_period=20), n_models=3, seed=1),
    "leveraging": lambda: OnlineBagging(
        HoeffdingTree(grace_period=20), n_models=3, seed=1, drift="adwin", poisson_lambda=6.0
    ),  # fmt: skip
    "boost_ht": lambda: OnlineBoosting(HoeffdingTree(grace_period=20), n_models=3, seed=1),
    "boost_nb_moa": lambda: OnlineBoosting(NaiveBayes(), n_models=3, seed=1, lambda_rule="moa"),
    "boost_adwin": lambda: OnlineBoosting(
        HoeffdingTree(grace_period=20), n_models=3, seed=1, drift="adwin"
    ),  # fmt: skip
    "mlp": lambda: MLP(n_hidden=3),
}


@pytest.mark.parametrize("name", sorted(WEIGHTED))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6))
def test_extreme_weights_never_break_a_model(name, seed):
    """Weights from 5e-324 to MAX_WEIGHT, mixed: every answer stays a distribution and learning
    goes on. (Boosting divided by zero forever after one example of weight 1e300, and bagging
    answered NaN after one of 1.7e308.)"""
    import random

    rng = random.Random(seed)
    model = WEIGHTED[name]()
    for _ in range(150):
        x = {"a": rng.gauss(0.0, 1.0), "c": rng.choice("pqr")}
        model.learn_one(x, rng.randrange(3), w=rng.choice(HOSTILE_WEIGHTS))
        _check_proba(model.predict_proba_one(x))


@pytest.mark.parametrize("w", [1e12 * (1 + 2**-52), 1e13, 1e300, 1.7e308, math.inf, -1.0, math.nan])
def test_weights_beyond_the_bound_are_refused_and_change_nothing(w):
    from learners import MAX_WEIGHT, WeightError

    assert w > MAX_WEIGHT or not w >= 0
    for model in (NaiveBayes(), OnlineBoosting(HoeffdingTree(), n_models=3, seed=1)):
        model.learn_one({"a": 1.0}, "p")
        before = model.to_state()
        with pytest.raises(WeightError):
            model.learn_one({"a": 2.0}, "q", w=w)
        with pytest.raises(WeightError) as many:
            model.learn_many([{"a": 2.0}, {"a": 3.0}], ["q", "p"], [1.0, w])
        assert many.value.row == 1
        after = model.to_state()
        assert before["header"] == after["header"]


def test_boosting_lambda_stays_finite_where_e_m_rounds_to_0_or_1():
    """lambda / (2 (1 - e_m)) with e_m rounded to 1, lambda / (2 e_m) with e_m ~ 1e-300, a NaN:
    each gives a finite lambda <= LAMBDA_MAX (MOA's draw saturates at 2^31 - 1), never an error."""
    import numpy as np

    from ensembles import _kernels
    from learners.jit import kernel

    step, cap = kernel(_kernels.boost_step), kernel(_kernels.capped_lambda)
    for rule in (_kernels.LAMBDA_THESIS, _kernels.LAMBDA_MOA):
        lams = np.zeros((3, 2))
        lams[1, 0] = 1e300  # member 0 wrong with weight 1e300: e_0 = 1 in floating point
        lams[2, 0] = 1e300
        got = step(lams, 0, 1.0, True, rule)
        assert 0.0 < got <= _kernels.LAMBDA_MAX
        lams[:] = 0.0
        lams[0, 1] = 1e300  # member 1 always right: e_1 = 1e-300 / 1e300
        lams[2, 0] = 1e300
        got = step(lams, 1, 1e-300, False, rule)
        assert 0.0 < got <= _kernels.LAMBDA_MAX
        lams[:] = 0.0  # lambda 0 (underflowed) on a member with nothing yet (after a reset)
        assert step(lams, 0, 0.0, True, rule) == step(lams, 1, 0.0, False, rule) == 0.0
    assert cap(math.nan) == cap(math.inf) == _kernels.LAMBDA_MAX and cap(3.5) == 3.5
