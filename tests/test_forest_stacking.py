"""The forests' stacked vote (``AdaptiveRandomForest`` / ``StreamingRandomPatches`` with
``vote="stacking"``): the meta-learner of ``ensembles.stacking`` learns from what the members'
foreground trees said *before* they learned an example (a leaky reference is detected), a
member's input is whatever tree is its foreground tree, and the state is saved and
checked; forest states saved before the forests took the option load and go on as then. (The
kernel against ``ForestReference`` with the stacked vote: ``tests/test_forest.py``,
``test_kernel_is_the_reference``; the state's round trip, pickle, deepcopy and replay, a new
class mid-stream: ``tests/test_stacking.py``, ``test_state_round_trips_and_replays_bit_identically``.)"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streams import CALL_PATTERNS, learn_by, mixed_stream, same

from ensembles import (
    AdaptiveRandomForest,
    StreamingRandomPatches,
    build_model,
    load_state,
    stacking,
)
from ensembles import _forest as fk
from ensembles._rng import poisson
from ensembles.forest import ForestReference
from ensembles.stacking import INIT

FORESTS = {"arf": AdaptiveRandomForest, "srp": StreamingRandomPatches}
LAMBDA = 0.05  # (a rate at which a member may draw k = 0 several examples in a row)


# --------------------------------------------------------------------------- no leakage
class LeakyForestReference(ForestReference):
    """Stacking done wrong: the trees learn x first, then the meta-learner learns from their
    probabilities of x (what the test below must detect)."""

    def learn_one(self, x, y, w=1.0) -> None:
        meta, self.meta = self.meta, None  # (the trees learn, the meta-learner not yet)
        try:
            super().learn_one(x, y, w)
        finally:
            self.meta = meta
        assert meta is not None
        meta.learn(self._stacked_inputs(x), self.classes.index(y), w)


def _quiet_first_member_seed(examples: int) -> int:
    """A seed whose member 0 draws k = 0 on examples 0 .. examples - 2 and k > 0 on the last
    (the forests' Poisson(LAMBDA) weights)."""
    for seed in range(100_000):
        ks = [poisson(LAMBDA, seed, seq, 0) for seq in range(examples)]
        if all(k == 0 for k in ks[:-1]) and ks[-1] > 0:
            return seed
    raise AssertionError("no such seed")


ROWS = [({"x1": 0.2, "x2": 1.0}, "neg"), ({"x1": 1.5, "x2": 0.1}, "pos"),
        ({"x1": 0.1, "x2": 0.9}, "neg"), ({"x1": 1.7, "x2": 0.2}, "pos")]  # fmt: skip


def _member0_learned(weights: np.ndarray) -> np.ndarray:
    """What the meta-learner learned on member 0's probabilities: its weights on them (every
    output class) minus their initial ones."""
    n = weights.shape[0]
    return weights[:, :n] - INIT * np.eye(n)


def _forest(kind: str, seed: int):
    return FORESTS[kind](n_models=3, seed=seed, poisson_lambda=LAMBDA, vote="stacking")


@pytest.mark.parametrize("how", CALL_PATTERNS)
@pytest.mark.parametrize("kind", ["arf", "srp"])
def test_the_meta_learner_learns_what_the_trees_said_before_learning(kind, how) -> None:
    """No leakage, checked where it shows exactly (as ``test_stacking.py`` for bagging).
    Member 0 draws k = 0 on the first three examples and k > 0 on the fourth: before
    learning each example its tree has never learned anything and gives no probabilities,
    so the meta-learner's weights on member 0's inputs stay exactly as they started, in the
    kernel for every call pattern and in ``ForestReference``. Fed the trees' probabilities
    *after* they learn (``LeakyForestReference``), member 0's tree gives P(y) = 1 for the
    fourth example and those weights move: the check detects a leak."""
    seed = _quiet_first_member_seed(len(ROWS))
    forest = _forest(kind, seed)
    learn_by(forest, ROWS, how)
    assert forest.n_seen == len(ROWS)
    forest._settled()
    weights = forest._stack_arrays()["stack.weights"]
    assert weights.shape == (2, 3 * 2 + 1) and not _member0_learned(weights).any(), weights
    assert (weights[:, -1] != 0.0).all()  # (it learned: both biases moved)
    assert forest.describe()["meta_learner"]["learned"] == len(ROWS)
    assert int(forest._bank.T.n_nodes[0]) == 1  # (member 0's tree learned the last one only)
    honest, leaky = ForestReference(_forest(kind, seed)), LeakyForestReference(_forest(kind, seed))
    for ref in (honest, leaky):
        for x, y in ROWS:
            ref.learn_one(x, y)
    assert honest.meta is not None and leaky.meta is not None
    assert not _member0_learned(honest.meta.weights).any()
    assert _member0_learned(leaky.meta.weights).any()  # the leak shows: this test detects it
    np.testing.assert_allclose(weights, honest.meta.weights, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- the vote
def test_the_meta_learner_replaces_the_accuracy_weighting() -> None:
    """Once it has learned, the answer is the meta-learner's softmax over the members'
    foreground-tree probabilities (recomputed here by ``stacking.MetaLearner`` from the saved
    weights and the explanation's member probabilities), not the accuracy-weighted vote of
    the same trees; before any example, no answer."""
    data = list(mixed_stream(800, 6))
    X, y = [x for x, _ in data[:600]], [t for _, t in data[:600]]
    model = AdaptiveRandomForest(n_models=3, seed=2, vote="stacking")
    assert model.predict_proba_one(data[0][0]) == {}
    model.learn_many(X, y)
    weighted = AdaptiveRandomForest(n_models=3, seed=2)
    weighted.learn_many(X, y)
    assert same(model.to_state()["arrays"]["forest.slots"],
                weighted.to_state()["arrays"]["forest.slots"])  # (the same trees) # fmt: skip
    meta = stacking.MetaLearner(3)
    saved = model.to_state()["arrays"]
    meta.weights, meta.learned = saved["stack.weights"], int(saved["stack.learned"][0])
    differ = 0
    for x, _ in data[600:]:
        proba = model.predict_proba_one(x)
        members = model.predict_explain_one(x)["members"]
        p = meta.proba(meta.inputs([d["probabilities"] for d in members], model.classes))
        assert [proba[c] for c in model.classes] == pytest.approx(p.tolist(), abs=1e-12)
        differ += proba != weighted.predict_proba_one(x)
    assert differ > 150  # (another vote than the forest's own)


def test_a_replaced_tree_is_its_members_input() -> None:
    """At a drift the member's new foreground tree (another slot of the bank) is its input:
    what the meta-learner keeps for the member is that tree's probabilities, and the weights
    it learned for the member stay."""
    r = np.random.default_rng(3)
    data = []
    for i in range(4000):
        x = {f"f{j}": float(r.random()) for j in range(4)}
        data.append((x, (x["f1"] + x["f2"] > 1.0) != (i >= 2000)))
    model = AdaptiveRandomForest(n_models=3, seed=1, vote="stacking")
    model.predict_learn_many([x for x, _ in data], [y for _, y in data])
    st = model._float_state
    assert st.events[fk.DRIFTS].sum() > 0
    moved = [m for m in range(3) if st.slots[fk.FG, m] != m]
    assert moved, st.slots  # (a member whose tree is in its other slot)
    x = {"f0": 0.5, "f1": 0.9, "f2": 0.8, "f3": 0.1}
    members = model.predict_explain_one(x)["members"]  # (each member's foreground tree)
    kept = st.meta.meta_x  # (what the prediction kept for the meta-learner)
    for m in range(3):
        want = [members[m]["probabilities"].get(c, 0.0) for c in model.classes]
        assert kept[m, :2].tolist() == want, (m, kept[m], want)
    weights = model._stack_arrays()["stack.weights"]
    assert not np.array_equal(weights[:, :-1], INIT * np.tile(np.eye(2), 3))


# --------------------------------------------------------------------------- state
def test_a_forged_or_missing_meta_learner_is_refused_naming_the_array() -> None:
    model = AdaptiveRandomForest(n_models=2, seed=1, vote="stacking")
    for x, t in mixed_stream(200, 3):
        model.learn_one(x, t)
    good = model.to_state()
    load_state(good)
    for name, forge in [("stack.weights", lambda a: a.__setitem__("stack.weights", np.zeros((2, 4)))),
                        ("stack.weights", lambda a: a["stack.weights"].__setitem__((0, 0), 1e300)),
                        ("stack.learned", lambda a: a["stack.learned"].__setitem__(0, 10**6)),
                        ("stack.weights is missing", lambda a: a.pop("stack.weights"))]:  # fmt: skip
        arrays = {k: v.copy() for k, v in good["arrays"].items()}
        forge(arrays)
        with pytest.raises(ValueError, match=name.replace(".", r"\.")):
            load_state({"header": good["header"], "arrays": arrays})


# --------------------------------------------------------------------------- older states
OLD_STATES = Path(__file__).parent / "data" / "forest_state_v4.npz"


def test_forest_states_saved_before_the_stacked_vote_go_on_exactly() -> None:
    """``forest_state_v4.npz``: an ARF (weighted vote) and an SRP (average vote) saved by the
    code before the forests took ``vote="stacking"`` (main at 5be8c6a, interpreted kernels)
    after 200 examples of ``mixed_stream(500, 3, new_class_at=250)``, with that code's
    prequential predictions on the 300 after: they load, predict exactly as then (a new class
    among them), and save no meta-learner."""
    raw = np.load(OLD_STATES)
    data = list(mixed_stream(500, 3, new_class_at=250))[200:]
    for name in ("arf", "srp"):
        header = json.loads(str(raw[f"{name}.header"]))
        arrays = {k[len(name) + 1 :]: raw[k] for k in raw.files
                  if k.startswith(name + ".") and not k.endswith((".header", ".after"))}  # fmt: skip
        model = load_state({"header": header, "arrays": arrays})
        assert same(model.to_state()["arrays"], arrays)
        preds = model.predict_learn_many([x for x, _ in data], [y for _, y in data])
        after = json.loads(str(raw[f"{name}.after"]))
        assert [[list(kv) for kv in sorted(p.items(), key=str)] for p in preds] == after, name
        assert not any(k.startswith("stack.") for k in model.to_state()["arrays"])


# --------------------------------------------------------------------------- specs
@pytest.mark.parametrize("kind", ["arf", "srp"])
def test_specs_take_the_stacked_vote(kind) -> None:
    model = build_model({"ensemble": kind, "n_models": 3, "params": {"vote": "stacking"}})
    assert model.vote == "stacking" and model.spec()["params"]["vote"] == "stacking"
    assert build_model(model.spec()).spec() == model.spec()
    with pytest.raises(ValueError, match=r"vote must be one of \['average', 'stacking', "):
        build_model({"ensemble": kind, "params": {"vote": "majority"}})
    assert "meta_learner" not in FORESTS[kind](n_models=2).describe()
