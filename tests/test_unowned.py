"""The bank's reference-count-free views (``learners.compiled.unowned``): kernels read the state
arrays without touching their reference counts, so the bank must neither keep them alive nor
outlive them, and arrays a kernel grows must come back to Python owned."""

from __future__ import annotations

import gc
import sys

import numpy as np

from ensembles import OnlineBagging
from learners import HoeffdingTree
from learners.compiled import unowned
from tests.streams import mixed_stream


def _bank_of(model: OnlineBagging):
    return model._settled().bank


def test_the_bank_takes_no_reference_to_the_state_arrays() -> None:
    bank = _bank_of(OnlineBagging(HoeffdingTree(), n_models=3, seed=1))
    arrays = list(bank.T)
    before = [sys.getrefcount(a) for a in arrays]
    b2 = bank.view()  # the struct made at _set
    from learners.tree.structs import make_bank

    extra = make_bank(bank.T, bank.params)
    after = [sys.getrefcount(a) for a in arrays]
    assert after == before, "a bank increments its arrays' reference counts (owned, not views)"
    assert b2 is not None and extra is not None


def test_grown_pools_come_back_owned_and_results_match_a_fresh_replay() -> None:
    stream = list(mixed_stream(3_000, seed=5, new_class_at=1_500))
    a = OnlineBagging(HoeffdingTree(grace_period=20), n_models=4, seed=3)
    widths = set()
    for i in range(0, len(stream), 250):
        xs = [x for x, _ in stream[i : i + 250]]
        ys = [y for _, y in stream[i : i + 250]]
        a.predict_learn_many(xs, ys)
        gc.collect()  # frees whatever nothing owns: a view outliving its array would read garbage
        T = _bank_of(a).T
        widths.add(T.wc.shape[1])
        for arr in (T.wc, T.wv, T.gc, T.gv):  # owned by Python, not by a bank that may go away
            assert arr.flags.owndata or arr.base is not None
    assert len(widths) > 1, "the stream never grew the class pools: the test checks nothing"
    b = OnlineBagging(HoeffdingTree(grace_period=20), n_models=4, seed=3)
    b.predict_learn_many([x for x, _ in stream], [y for _, y in stream])  # grows at other times
    sa, sb = a.to_state(), b.to_state()
    assert sa["header"] == sb["header"]
    for k, arr in sb["arrays"].items():
        np.testing.assert_array_equal(sa["arrays"][k], arr, err_msg=k)


def test_unowned_is_the_identity_in_python() -> None:
    x = np.arange(3)
    assert unowned(x) is x
