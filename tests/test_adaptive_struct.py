"""The adaptive ensembles' state as one numba struct (``ensembles._adaptive.AdaptiveStruct``)
and the per-example path around it (``OnlineBagging._reusing_run_one``): one object to unbox per
kernel call, views of the arrays Python reads and saves, made only by compiled calls, and the
members' predictions reused in river's loop."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numba
import numpy as np
import pytest

from ensembles import OnlineBagging, OnlineBoosting
from ensembles import _adaptive as ak
from ensembles.adaptive import PredictionReusingRunner
from learners import HoeffdingTree, jit
from tests.test_drift import flip_stream


def _loop(model, data) -> list:
    out = []
    for x, y in data:
        out.append(model.predict_one(x))
        model.learn_one(x, y)
    return out


@pytest.mark.parametrize("cls", [OnlineBagging, OnlineBoosting])
def test_the_kernels_get_one_struct_over_the_arrays_python_reads(cls) -> None:
    model = cls(HoeffdingTree(), n_models=4, seed=3, drift="adwin", window=50)
    st = model._float_state
    assert isinstance(numba.typeof(st), ak.AdaptiveStructType)  # one object to unbox
    arrays = list(st.arrays) + list(st.arrays.adwin)
    before = [sys.getrefcount(a) for a in arrays]
    _loop(model, flip_stream(600, drift_at=300, seed=4))
    assert "_meminfo" in st.__dict__  # made by the first compiled call
    assert [sys.getrefcount(a) for a in arrays] == before  # views: the struct owns none
    assert st.win_ok is st.arrays.win_ok and st.adwin is st.arrays.adwin  # Python's attributes
    # the kernels wrote the arrays Python reads (and saves): the same memory
    assert st.counters[ak.FILLED] == 50 and st.win_n.sum() > 0 and st.adwin.iv[:, 0].max() > 0
    assert model._float_state is st  # (the ensemble keeps the same object)


def test_interpreted_calls_never_make_the_struct() -> None:
    """A cold numba cache: the twins read the arrays; building the struct would compile."""
    data = list(flip_stream(200, drift_at=100, seed=5))
    twin = OnlineBagging(HoeffdingTree(), n_models=3, seed=1, drift="adwin")
    try:
        jit.set_interpreted(True)
        first = _loop(twin, data[:100])
    finally:
        jit.set_interpreted(False)
    st = twin._float_state  # (as it is: the kept learn is not run)
    assert "_meminfo" not in st.__dict__
    rest = _loop(twin, data[100:])  # compiled from here on
    assert "_meminfo" in st.__dict__
    compiled = OnlineBagging(HoeffdingTree(), n_models=3, seed=1, drift="adwin")
    assert _loop(compiled, data) == first + rest
    assert twin.describe() == compiled.describe()


def test_arrays_of_another_type_are_refused_not_misread() -> None:
    st = OnlineBagging(HoeffdingTree(), n_models=2, seed=1, drift="adwin")._float_state
    wrong = ak.AdaptiveStruct(st.arrays._replace(win_y=st.arrays.win_y.astype(np.int32)))
    with pytest.raises(TypeError, match="adaptive state of type"):
        _ = wrong._meminfo


@pytest.mark.parametrize("cls", [OnlineBagging, OnlineBoosting])
def test_river_loop_flags_the_reuse_of_the_members_predictions(cls) -> None:
    """predict_one(x) then learn_one(x, y): the kernel call that runs the kept learn (the next
    prediction's) is told to reuse the members' predictions of x (``ipar[REUSE]``); a learn of
    a copy of x, or of x after another prediction, is not; the flag is 0 between calls."""
    model = cls(HoeffdingTree(), n_models=3, seed=2, drift="adwin")
    be = model._be
    seen: list[tuple[bool, bool, int]] = []

    def spy(kernel, ipar, fstate, x, y=None, w=0.0, *, predict=True, learn=False,
            label_only=False, defer=False):  # fmt: skip
        seen.append((predict, learn, int(ipar[ak.REUSE])))
        return be.bank.run_one(kernel, ipar, fstate, x, y, w, predict=predict, learn=learn,
                               label_only=label_only, defer=defer)  # fmt: skip

    be.runner = PredictionReusingRunner(SimpleNamespace(
        bank=SimpleNamespace(run_one=spy), kernel=be.kernel, ipar=be.ipar, fstate=be.fstate,
        flush=be.flush))  # fmt: skip
    be.run_one = be.runner.run_one
    data = list(flip_stream(40, drift_at=20, seed=6))
    for i, (x, y) in enumerate(data):
        model.predict_one(x)
        model.learn_one(x if i % 4 else dict(x), y)  # every 4th: a copy (nothing to reuse)
        assert model._int_params[ak.REUSE] == 0
    predictions = [r for p, learn, r in seen if p and not learn]
    learns = [r for p, learn, r in seen if learn]
    # each prediction after a learn of x itself runs that learn with the kept predictions
    assert predictions == [0] + [0 if (i - 1) % 4 == 0 else 1 for i in range(1, 40)]
    assert learns == [0] * 40  # (a deferred learn runs no kernel: its flag is the next call's)
    model.predict_one(data[0][0])
    model.learn_one(data[0][0], data[0][1], w=1.0)
    model.learn_one(data[0][0], data[0][1])  # a learn after a learn: the kept one runs first
    assert seen[-1] == (False, True, 0) and model._int_params[ak.REUSE] == 0
    model.predict_one(data[1][0])
    model.learn_one(data[1][0], data[1][1], w=0.0)  # learns nothing: nothing kept to reuse
    model.predict_one(data[2][0])
    assert seen[-1] == (True, False, 0)
    ref = cls(HoeffdingTree(), n_models=3, seed=2, drift="adwin")
    ref._defer_learns = False
    for i, (x, y) in enumerate(data):
        ref.predict_one(x)
        ref.learn_one(x if i % 4 else dict(x), y)
    ref.predict_one(data[0][0])
    ref.learn_one(data[0][0], data[0][1], w=1.0)
    ref.learn_one(data[0][0], data[0][1])
    ref.predict_one(data[1][0])
    ref.learn_one(data[1][0], data[1][1], w=0.0)
    ref.predict_one(data[2][0])
    assert model.describe() == ref.describe()


@pytest.mark.parametrize("between", ["mutate", "batch", "prime"])
@pytest.mark.parametrize(("cls", "vote"), [(OnlineBagging, "weighted"), (OnlineBagging, "stacking"),
                                           (OnlineBoosting, "stacking")])  # fmt: skip
def test_no_reuse_of_predictions_made_stale_between_predict_and_learn(between, cls, vote) -> None:
    """predict_one(x), then x changed in place, or a batch or a prime run, then learn_one(x, y):
    the members' predictions (and probabilities, for the stacked vote) the kernel kept are not
    of this x in these members any more, and the learn must predict them again: the same model
    as one that learns a copy of x."""
    data = list(flip_stream(900, drift_at=450, seed=8))
    extra = list(flip_stream(20, drift_at=0, seed=9))
    options = {"drift": "adwin", "window": 100, "vote": vote}
    models = [cls(HoeffdingTree(), n_models=4, seed=3, **options) for _ in range(2)]
    answers: list[list] = [[], []]
    for i, (x, y) in enumerate(data):
        for k, model in enumerate(models):
            x_k = dict(x)
            answers[k].append(model.predict_one(x_k))
            if i % 5 == 0:
                if between == "mutate":
                    x_k["x0"], x_k["x1"] = 1.0 - x_k["x0"], 1.0 - x_k["x1"]
                elif between == "batch":
                    model.learn_many([e for e, _ in extra], [c for _, c in extra])
                else:
                    model.prime([e for e, _ in extra[:3]], [c for _, c in extra[:3]])
            model.learn_one(x_k if k == 0 else dict(x_k), y)  # model 1: nothing to reuse
    assert answers[0] == answers[1]
    assert models[0].describe() == models[1].describe()
