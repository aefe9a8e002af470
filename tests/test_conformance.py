"""One conformance suite over every learner and ensemble (STYLE.md, "Tests")."""

from __future__ import annotations

import pytest
from river import tree
from streams import mixed_stream

from ensembles import (
    AdaptiveRandomForest,
    OnlineBagging,
    OnlineBoosting,
    Single,
    StreamingRandomPatches,
)
from learners import MLP, DecisionStump, ExactTree, HoeffdingTree, NaiveBayes, RiverLearner
from learners.checks import CHECKS, yield_checks


def leveraging(**options):
    """Leveraging bagging (ADWIN, Poisson(6)) of four small Hoeffding trees, with ``options``."""
    return lambda: OnlineBagging(HoeffdingTree(grace_period=20), n_models=4, seed=3,
                                 drift="adwin", poisson_lambda=6.0, **options)  # fmt: skip


MODELS = {
    "HoeffdingTree": lambda: HoeffdingTree(grace_period=20),
    "NaiveBayes": NaiveBayes,
    "DecisionStump": DecisionStump,
    "RiverLearner(HT)": lambda: RiverLearner(tree.HoeffdingTreeClassifier(grace_period=20)),
    "Single(HT)": lambda: Single(HoeffdingTree(grace_period=20), seed=3),
    "Bagging(HT)": lambda: OnlineBagging(HoeffdingTree(grace_period=20), n_models=4, seed=3),
    "Bagging(NB,average)": lambda: OnlineBagging(NaiveBayes(), n_models=4, seed=3, vote="average"),
    "Bagging(Stump)": lambda: OnlineBagging(DecisionStump(), n_models=4, seed=3),
    "LeveragingBagging(HT,weighted)": leveraging(vote="weighted", window=50),
    "LeveragingBagging(HT,codes)": leveraging(output_codes=True),
    "Bagging(HT,stacking)": lambda: OnlineBagging(
        HoeffdingTree(grace_period=20), n_models=4, seed=3, vote="stacking"
    ),
    "Bagging(HT,oob)": lambda: OnlineBagging(
        HoeffdingTree(grace_period=20, nb_zero_variance="skip"),
        n_models=4,
        seed=3,
        imbalance="oob",
        imbalance_decay=0.9999,
    ),
    "Boosting(NB,stacking)": lambda: OnlineBoosting(
        NaiveBayes(), n_models=4, seed=3, vote="stacking"
    ),
    "Boosting(HT)": lambda: OnlineBoosting(HoeffdingTree(grace_period=20), n_models=4, seed=3),
    "Boosting(NB,moa)": lambda: OnlineBoosting(NaiveBayes(), n_models=4, seed=3, lambda_rule="moa"),
    "Boosting(NB)": lambda: OnlineBoosting(NaiveBayes(), n_models=4, seed=3),
    "Boosting(Stump)": lambda: OnlineBoosting(DecisionStump(), n_models=4, seed=3),
    "AdwinBoosting(HT,majority)": lambda: OnlineBoosting(
        HoeffdingTree(grace_period=20),
        n_models=4,
        seed=3,
        drift="adwin",
        vote="majority",
        window=50,
    ),
    "ARF(HT)": lambda: AdaptiveRandomForest(HoeffdingTree(grace_period=20), n_models=3, seed=3),
    "SRP(HT,subspaces)": lambda: StreamingRandomPatches(
        HoeffdingTree(grace_period=20), n_models=3, seed=3, training="subspaces", vote="average"
    ),
    "ARF(HT,stacking)": lambda: AdaptiveRandomForest(
        HoeffdingTree(grace_period=20), n_models=3, seed=3, vote="stacking"
    ),
    "ExactTree": ExactTree,
    "ExactTree(binary)": lambda: ExactTree(split="binary"),
    "Bagging(ExactTree)": lambda: OnlineBagging(ExactTree(), n_models=3, seed=3),
    "Boosting(ExactTree)": lambda: OnlineBoosting(ExactTree(), n_models=3, seed=3),
    "MLP": MLP,
    "Bagging(MLP)": lambda: OnlineBagging(MLP(n_hidden=4), n_models=3, seed=3),
    "Boosting(MLP)": lambda: OnlineBoosting(MLP(n_hidden=4), n_models=3, seed=3),
    "Bagging(river)": lambda: OnlineBagging(
        RiverLearner(tree.HoeffdingTreeClassifier(grace_period=20)), n_models=3, seed=3
    ),
    "Bagging(river,stacking)": lambda: OnlineBagging(
        RiverLearner(tree.HoeffdingTreeClassifier(grace_period=20)),
        n_models=3,
        seed=3,
        vote="stacking",
    ),
    "Bagging(river,uob)": lambda: OnlineBagging(
        RiverLearner(tree.HoeffdingTreeClassifier(grace_period=20)),
        n_models=3,
        seed=3,
        imbalance="uob",
    ),
    "Boosting(river)": lambda: OnlineBoosting(
        RiverLearner(tree.HoeffdingTreeClassifier(grace_period=20)), n_models=3, seed=3
    ),
}


def stream(n=400, seed=1, **kw):
    return list(mixed_stream(n, seed, **kw))


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
@pytest.mark.parametrize("name", list(MODELS))
def test_conformance(name, check):
    """The published suite (``learners.checks``) over every learner and ensemble."""
    model = MODELS[name]()
    if check not in list(yield_checks(model)):
        pytest.skip(f"{check.__name__} does not apply to {name}")
    check(model)


@pytest.mark.parametrize(
    "name", [k for k in MODELS if not k.startswith(("ExactTree", "RiverLearner"))]
)
def test_rejected_input_leaves_no_trace(name):
    """A batch rejected for a type error (after new features, categories and classes were seen
    in it) changes nothing: same state, same predictions as a model that never saw it."""
    from learners import FeatureTypeError

    a, b = MODELS[name](), MODELS[name]()
    data = stream(150)
    for x, y in data:
        a.learn_one(x, y)
        b.learn_one(x, y)
    bad = [{"x1": 1.0, "brand_new": "cat", "colour": "mauve"}, {"x1": "not a number"}]
    with pytest.raises(FeatureTypeError, match="x1"):
        a.learn_many(bad, ["new_class", "pos"])
    with pytest.raises(FeatureTypeError):
        a.learn_one({"other_new": 2.0, "size": "s", "x1": "3.5x"}, "another_new")
    with pytest.raises(ValueError, match="weight"):  # bad weights: rejected before encoding
        a.learn_many([{"third_new": "v"}, {"x1": 1.0}], ["new_class", "pos"], [1.0, -1.0])
    assert a.to_state()["header"] == b.to_state()["header"]
    for x, y in stream(100, seed=3):
        assert a.predict_learn_one(x, y) == b.predict_learn_one(x, y)
