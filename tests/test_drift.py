"""Drift adaptation (ADWIN, leveraging bagging), the weighted vote and live diversity."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from ensembles import OnlineBagging, OnlineBoosting, build_model, load_state
from ensembles._adaptive import output_code
from ensembles._kernels import member_predict
from ensembles.adwin import ADWIN
from ensembles.diversity import pair_stats, window_diversity
from learners import HoeffdingTree, NaiveBayes
from learners.compiled import tree_reset
from learners.jit import kernel


def flip_stream(n: int, drift_at: int, seed: int = 0):
    """Three numeric features, y = (x0 + x1 > 1) with 5% noise; from ``drift_at`` on the
    concept is inverted (an abrupt drift)."""
    rng = random.Random(seed)
    for i in range(n):
        x = {f"x{j}": rng.random() for j in range(3)}
        y = (x["x0"] + x["x1"] > 1.0) != (i >= drift_at)
        if rng.random() < 0.05:
            y = not y
        yield x, y


def prequential(model, data) -> np.ndarray:
    ok = []
    for x, y in data:
        ok.append(model.predict_one(x) == y)
        model.learn_one(x, y)
    return np.array(ok, dtype=float)


def windowed(ok: np.ndarray, w: int) -> np.ndarray:
    c = np.concatenate([[0.0], np.cumsum(ok)])
    return (c[w:] - c[:-w]) / w  # [i] = accuracy on examples i .. i+w-1


# ----------------------------------------------------------------------------- ADWIN itself
def test_adwin_no_false_alarm_on_a_stationary_stream():
    rng = np.random.default_rng(7)
    det = ADWIN(delta=0.002)
    changes = det.update_many((rng.random(30_000) < 0.3).astype(float))
    assert changes.sum() == 0 and det.n_changes == 0
    assert det.width == 30_000
    assert abs(det.estimation - 0.3) < 0.01


def test_adwin_detects_a_mean_shift_soon_and_forgets_the_old_mean():
    rng = np.random.default_rng(3)
    det = ADWIN(delta=0.002)
    before = (rng.random(5000) < 0.2).astype(float)
    after = (rng.random(2000) < 0.6).astype(float)
    changes = det.update_many(np.concatenate([before, after]))
    first = int(np.flatnonzero(changes)[0])
    assert 5000 < first < 5000 + 200  # after the shift, within 200 values (checked every 32)
    assert det.width < 2000 + 200  # the old part of the window is gone
    assert abs(det.estimation - 0.6) < 0.05


def test_adwin_hand_made_sequence():
    """100 zeros, then ones, cuts checked at every value (clock 1, min_len 5, delta 0.01).

    Only the cut between the zeros and the k ones can exceed the bound (any other split puts
    ones into W0 or zeros into W1 and narrows the gap), where |u0 - u1| = 1 and, by hand,
    n = 100 + k, v = (k / n)(1 - k / n), dd = ln(2 ln(n) / 0.01), m = 1/96 + 1/(k - 4),
    eps = sqrt(2 m v dd) + 2/3 dd m: k = 12 gives eps = 1.040 (no cut), k = 13 gives
    eps = 0.967 (cut). So the first change is raised by the 13th one."""
    det = ADWIN(delta=0.01, clock=1, min_len=5)
    assert not det.update_many([0.0] * 100).any()
    assert det.width == 100 and det.estimation == 0.0 and det.variance == 0.0
    changes = det.update_many([1.0] * 100)
    assert int(np.flatnonzero(changes)[0]) == 12
    assert det.n_changes == int(changes.sum())
    # only zeros were dropped (from the oldest end): every one is still in the window
    assert det.estimation == pytest.approx(100 / det.width)
    assert det.width < 200


def test_adwin_state_is_bounded_for_long_streams():
    det = ADWIN()
    det.update_many(np.zeros(200_000))
    assert det.width == 200_000
    assert int(det._st.iv[0, 1]) <= 16  # levels in use: log2(200000 / 5) + 1


def _golden_streams():
    rng = np.random.default_rng(11)
    parts = ((6000, 0.2), (3000, 0.5), (4000, 0.1), (3000, 0.12))
    bits = np.concatenate([rng.random(n) < p for n, p in parts]).astype(float)
    yield "bits", bits, {"delta": 0.002}
    yield "bits_clock1", bits[5500:7500], {"delta": 0.05, "clock": 1, "min_len": 5}
    real = np.concatenate([rng.normal(0.0, 1.0, 5000), rng.normal(0.3, 1.0, 5000),
                           rng.normal(0.3, 3.0, 3000)])  # fmt: skip
    yield "real", real, {"delta": 0.01, "clock": 8}


# recorded when every bucket of a check computed ln(2 ln(n) / delta), the variance over n and
# the square root (as MOA does): changes, their count, the final width, a digest of the state
GOLDEN_ADWIN = {
    "bits": ([6111, 6207, 9087, 9119, 9151, 9279], 6, 7008, "d90490277a4cdba9"),
    "bits_clock1": ([573, 574, 576, 593, 602], 5, 1536, "12ce2059c9968700"),
    "real": ([5263, 5271, 5287, 5319, 5327, 10095, 10103, 10111, 10207], 9, 3784,
             "6ae1d8c84dc7cd50"),
}  # fmt: skip


def test_adwin_detections_and_state_are_the_recorded_ones():
    import hashlib

    for name, xs, options in _golden_streams():
        det = ADWIN(**options)
        changes = det.update_many(xs)
        digest = hashlib.sha256(b"".join(a.tobytes() for a in det._st)).hexdigest()[:16]
        got = (np.flatnonzero(changes).tolist()[:12], int(changes.sum()), det.width, digest)
        assert got == GOLDEN_ADWIN[name], name


def test_adwin_cut_is_the_bound_as_written():
    """``_cut`` (its logarithm and variance computed once per check, the square root skipped
    when the linear term alone covers the gap) against eps_cut as the module doc writes it."""
    import math

    from ensembles.adwin import _cut, sqrt_or_nan

    rng = np.random.default_rng(5)
    cuts = 0
    for _ in range(20_000):
        n0, n1 = (float(k) for k in rng.integers(5, 3000, 2))
        n = n0 + n1
        p = rng.random()
        u0 = float(rng.binomial(int(n0), p))
        u1 = float(rng.binomial(int(n1), min(1.0, p + rng.normal(0.0, 0.1) ** 2)))
        variance = n * p * (1 - p) * rng.random() if rng.random() < 0.95 else -1e-12
        delta, min_len = float(rng.choice([0.002, 0.05, 0.3])), 5
        dd = math.log(2.0 * math.log(n) / delta)
        m = 1.0 / (n0 - min_len + 1.0) + 1.0 / (n1 - min_len + 1.0)
        eps = sqrt_or_nan(2.0 * m * (variance / n) * dd) + 2.0 / 3.0 * dd * m
        want = abs(u0 / n0 - u1 / n1) > eps
        assert _cut.py_func(n0, n1, u0, u1, dd, variance / n, min_len) == want
        cuts += want
    assert 1000 < cuts < 19_000  # both answers, many times


# ----------------------------------------------------------------------------- recovery
def recovery(ok: np.ndarray, drift_at: int, w: int = 500) -> tuple[float, int | None]:
    """Windowed accuracy before the drift (examples drift_at - w .. drift_at - 1), and the
    number of examples after the drift at which a window starts that is back within 2 points
    of it (``None``: never)."""
    acc = windowed(ok, w)
    pre = float(acc[drift_at - w])
    back = np.flatnonzero(acc[drift_at:] >= pre - 0.02)
    return pre, int(back[0]) if back.size else None


def test_adwin_bagging_recovers_from_an_abrupt_drift_and_plain_bagging_does_not():
    """Drift after 6000 examples. Bound: 2000 examples (measured: ADWIN + weighted vote is
    back after 730-1810 on seeds 1-3; plain bagging after 2850-4070, ADWIN with the average
    vote after 1860-3640: only one member is reset per change, and the stale majority keeps
    the average vote wrong until the fresh members are many)."""
    data = list(flip_stream(12_000, drift_at=6000, seed=1))
    plain = OnlineBagging(HoeffdingTree(), n_models=10, seed=1)
    adwin = OnlineBagging(HoeffdingTree(), n_models=10, seed=1, drift="adwin")
    weighted = OnlineBagging(HoeffdingTree(), n_models=10, seed=1, drift="adwin", vote="weighted")
    results = {name: recovery(prequential(model, data), 6000)
               for name, model in [("plain", plain), ("adwin", adwin), ("weighted", weighted)]}  # fmt: skip
    for pre, _ in results.values():
        assert pre > 0.88
    bound = 2000
    assert results["weighted"][1] is not None and results["weighted"][1] <= bound
    assert results["plain"][1] is None or results["plain"][1] > bound
    assert results["adwin"][1] is not None
    assert results["plain"][1] is None or results["adwin"][1] < results["plain"][1]
    assert weighted.describe()["n_drifts"] >= 3


def test_leveraging_bagging_recovers_too():
    data = list(flip_stream(9000, drift_at=6000, seed=3))
    model = OnlineBagging(HoeffdingTree(), n_models=10, seed=1, drift="adwin", poisson_lambda=6.0,
                          vote="weighted")  # fmt: skip
    pre, back = recovery(prequential(model, data), 6000)
    assert back is not None and back <= 2000  # measured: 1259
    assert model.describe()["n_drifts"] > 0


# ----------------------------------------------------------------------------- same model
def test_default_is_unchanged_and_the_window_does_not_change_what_is_learned():
    data = list(flip_stream(3000, drift_at=1500, seed=3))
    a = OnlineBagging(HoeffdingTree(grace_period=50), n_models=5, seed=2)
    b = OnlineBagging(HoeffdingTree(grace_period=50), n_models=5, seed=2, window=300)
    assert not a.adaptive and b.adaptive
    assert a.predict_learn_many([x for x, _ in data], [y for _, y in data]) == \
        b.predict_learn_many([x for x, _ in data], [y for _, y in data])  # fmt: skip
    sa, sb = a.to_state()["arrays"], b.to_state()["arrays"]
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)
    assert "diversity" in b.describe() and "diversity" not in a.describe()


@pytest.mark.parametrize(
    "options", [{"drift": "adwin"}, {"drift": "adwin", "poisson_lambda": 6.0, "vote": "weighted"}]
)
def test_state_round_trip_with_detectors_continues_bit_identically(options):
    data = list(flip_stream(5000, drift_at=2000, seed=4))
    model = OnlineBagging(HoeffdingTree(), n_models=6, seed=5, **options)
    for x, y in data[:3000]:
        model.learn_one(x, y)
    assert model.describe()["n_drifts"] > 0
    copies = [load_state(model.to_state()), pickle.loads(pickle.dumps(model))]
    rest = data[3000:]
    want = model.predict_learn_many([x for x, _ in rest], [y for _, y in rest])
    for copy in copies:
        assert copy.predict_learn_many([x for x, _ in rest], [y for _, y in rest]) == want
        assert copy.describe() == model.describe()


def test_same_seed_same_stream_same_model_and_resets():
    data = list(flip_stream(4000, drift_at=2000, seed=5))
    runs = []
    for _ in range(2):
        model = OnlineBagging(NaiveBayes(), n_models=5, seed=9, drift="adwin", poisson_lambda=6.0)
        model.learn_many([x for x, _ in data], [y for _, y in data])
        runs.append(model.describe())
        assert model.n_drifts == runs[-1]["n_drifts"]
        assert model.diversity() == runs[-1]["diversity"]
    assert runs[0] == runs[1]
    assert runs[0]["n_drifts"] > 0
    assert sum(m["resets"] for m in runs[0]["members"]) == runs[0]["n_drifts"]


def test_batch_and_per_row_forms_agree_with_detectors():
    data = list(flip_stream(3000, drift_at=1000, seed=6))
    a = OnlineBagging(HoeffdingTree(), n_models=4, seed=1, drift="adwin", vote="weighted")
    b = a.clone()
    pa = a.predict_learn_many([x for x, _ in data], [y for _, y in data])
    pb = [b.predict_learn_one(x, y) for x, y in data]
    assert pa == pb and a.describe() == b.describe()


def test_specs_carry_the_options():
    spec = {
        "ensemble": "bagging",
        "learner": "hoeffding_tree",
        "n_models": 3,
        "seed": 1,
        "params": {"drift": "adwin", "poisson_lambda": 6, "vote": "weighted", "window": 200},
    }
    model = build_model(spec)
    assert (model.drift, model.poisson_lambda, model.vote, model.window) == (
        "adwin",
        6,
        "weighted",
        200,
    )
    assert build_model(model.spec()).spec() == model.spec()
    plain = build_model({"ensemble": "bagging", "n_models": 3})
    assert set(plain.spec()["params"]) & {"drift", "poisson_lambda", "window"} == set()


@pytest.mark.parametrize(
    "bad, word",
    [
        ({"drift": "ddm2"}, "drift"),
        ({"poisson_lambda": 0}, "poisson_lambda"),
        ({"window": -1}, "window"),
        ({"vote": "best"}, "weighted"),
        ({"drift_delta": 2.0}, "drift_delta"),
    ],
)
def test_invalid_options_name_the_choices(bad, word):
    with pytest.raises(ValueError, match=word):
        OnlineBagging(HoeffdingTree(), **bad)


def test_boosting_has_no_weighted_vote():
    with pytest.raises(ValueError, match="average"):
        OnlineBoosting(HoeffdingTree(), vote="weighted")


# ----------------------------------------------------------------------------- reset kernel
def test_a_reset_member_learns_as_a_fresh_one():
    data = list(flip_stream(11_000, drift_at=20_000, seed=8))
    X = [dict(x, c="abcd"[int(x["x0"] * 4)]) for x, _ in data]  # categorical rows too
    y = [v for _, v in data]
    old, new = slice(0, 6000), slice(6000, 11_000)
    used = OnlineBagging(HoeffdingTree(grace_period=50), n_models=2, seed=0)
    for m in range(2):
        used._member_fit(m, X[old], y[old], np.ones(6000))
    T = used._settled().bank.T
    assert T.n_nodes[0] > 1 and T.n_nodes[1] > 1
    kernel(tree_reset)(used._settled().bank.view(), 0)
    assert T.n_nodes[0] == 1 and T.n_keys[0] == 0 and T.n_nodes[1] > 1
    used._member_fit(0, X[new], y[new], np.ones(5000))
    fresh = OnlineBagging(HoeffdingTree(grace_period=50), n_models=1, seed=0)
    fresh._member_fit(0, X[new], y[new], np.ones(5000))
    assert np.array_equal(used._member_correct(0, X, y), fresh._member_correct(0, X, y))
    n = int(fresh._settled().bank.T.n_nodes[0])
    assert used._settled().bank.T.n_nodes[0] == n > 1


# ----------------------------------------------------------------------------- diversity
def test_pair_statistics_by_hand():
    # 8 examples, truth all class 0; member i right on 0-4, member k right on 2-6
    y = np.zeros(8, np.int64)
    pi = np.array([0, 0, 0, 0, 0, 1, 1, 1])
    pk = np.array([1, 1, 0, 0, 0, 0, 0, 2])
    st = pair_stats(pi, pk, y)
    # N11 = 3 (2,3,4), N00 = 1 (7), N10 = 2 (0,1), N01 = 2 (5,6)
    assert st["disagreement"] == pytest.approx(4 / 8)
    assert st["q"] == pytest.approx((3 * 1 - 2 * 2) / (3 * 1 + 2 * 2))  # -1/7
    # labels alike on 2,3,4: theta1 = 3/8; P_i = (5/8, 3/8, 0), P_k = (5/8, 2/8, 1/8)
    theta2 = 5 / 8 * 5 / 8 + 3 / 8 * 2 / 8
    assert st["kappa"] == pytest.approx((3 / 8 - theta2) / (1 - theta2))


def test_window_diversity_skips_reset_entries_and_undefined_pairs():
    y = np.array([0, 1, 0, 1])
    preds = np.array([[0, 0, 0], [1, 1, 1], [0, 0, 1], [1, 0, 1]])
    valid = np.ones_like(preds, dtype=bool)
    valid[:2, 2] = False  # member 2 was reset after the first two examples
    d = window_diversity(preds, y, valid)
    assert d["member_accuracy"] == [1.0, 0.75, 0.5]
    # (0,1) on all 4: N11=3, N10=1 -> disagreement 1/4; Q = (3*0 - 1*0) / (0 + 0): undefined;
    #   labels 0101 vs 0100: theta1 = 3/4, theta2 = 1/2*3/4 + 1/2*1/4 = 1/2 -> kappa 1/2
    # (0,2) on the last 2: N10=1, N11=1 -> 1/2; Q undefined; labels 01 vs 11: theta1 = 1/2,
    #   theta2 = 1/2*0 + 1/2*1 = 1/2 -> kappa 0
    # (1,2) on the last 2: N10=1, N01=1 -> 1; Q = (0 - 1) / (0 + 1) = -1; labels 00 vs 11:
    #   theta1 = 0, theta2 = 0 -> kappa 0
    assert d["disagreement"] == pytest.approx((1 / 4 + 1 / 2 + 1) / 3)
    assert d["q_statistic"] == pytest.approx(-1.0)
    assert d["kappa"] == pytest.approx((1 / 2 + 0 + 0) / 3)
    assert d["n"] == 4


def test_live_diversity_matches_a_recount_of_the_members_predictions():
    """The window the kernel keeps holds each member's prediction before it learned: recount it
    from outside with the per-member kernel, example by example."""
    data = list(flip_stream(120, drift_at=10_000, seed=9))
    model = OnlineBagging(NaiveBayes(), n_models=3, seed=4, window=50)
    bank = model._settled().bank
    preds, codes = [], []
    for x, y in data:
        out = np.full(1, -1, np.int64)
        row = []
        for m in range(3):
            if bank.schema.n_classes:
                xn, xc, _, _ = bank.schema.encode_rows([x], grow=False)
                kernel(member_predict)(bank.view(), m, xn, xc, bank.schema.n_classes,
                                       bank.schema.code_attr_array, out)  # fmt: skip
            row.append(int(out[0]))
        preds.append(row)
        model.learn_one(x, y)
        codes.append(bank.schema.class_index[y])
    P, labels = np.array(preds[-50:]), np.array(codes[-50:])
    expect = window_diversity(P, labels, np.ones_like(P, dtype=bool))
    d = model.describe()
    assert d["diversity"]["n"] == 50 and d["diversity"]["disagreement"] is not None
    for key in ("disagreement", "q_statistic", "kappa"):
        assert d["diversity"][key] == pytest.approx(expect[key])
    assert [m["window_accuracy"] for m in d["members"]] == pytest.approx(expect["member_accuracy"])


def test_window_diversity_equals_the_pairwise_definitions_on_random_windows():
    rng = np.random.default_rng(11)
    for _ in range(20):
        N, M = int(rng.integers(1, 40)), int(rng.integers(2, 6))
        y = rng.integers(0, 3, N)
        preds = np.where(rng.random((N, M)) < 0.7, y[:, None], rng.integers(-1, 3, (N, M)))
        valid = rng.random((N, M)) < 0.8
        d = window_diversity(preds, y, valid)
        sums = {"disagreement": [], "q": [], "kappa": []}
        for i in range(M):
            for k in range(i + 1, M):
                both = valid[:, i] & valid[:, k]
                st = pair_stats(preds[both, i], preds[both, k], y[both])
                for key in sums:
                    if st[key] is not None:
                        sums[key].append(st[key])
        for key, name in [
            ("disagreement", "disagreement"),
            ("q", "q_statistic"),
            ("kappa", "kappa"),
        ]:
            want = float(np.mean(sums[key])) if sums[key] else None
            assert d[name] == pytest.approx(want), (key, N, M)


@pytest.mark.parametrize(
    "cls, options",
    [
        (OnlineBagging, {"drift": "adwin"}),
        (
            OnlineBagging,
            {"drift": "adwin", "poisson_lambda": 6.0, "vote": "weighted", "window": 100},
        ),
        (OnlineBoosting, {"drift": "adwin"}),
        (OnlineBoosting, {"drift": "adwin", "vote": "majority", "window": 100}),
    ],
)
def test_river_loop_reuses_the_prediction_and_learns_the_same_model(cls, options):
    """predict_one(x) then learn_one(x, y) (adaptive bagging's kernel reuses the members'
    predictions of x; boosting predicts them again: measured no faster with the reuse), the same
    with a copy of x (nothing reused), and predict_learn_one: the same model."""
    data = list(flip_stream(3000, drift_at=1500, seed=12))
    models = [cls(HoeffdingTree(), n_models=5, seed=2, **options) for _ in range(3)]
    preds: list[list] = [[], [], []]
    for x, y in data:
        preds[0].append(models[0].predict_one(x))
        models[0].learn_one(x, y)
        preds[1].append(models[1].predict_one(x))
        models[1].learn_one(dict(x), y)
        p = models[2].predict_learn_one(x, y)
        preds[2].append(max(p, key=p.get) if p else None)
    assert preds[0] == preds[1] == preds[2]
    assert models[0].describe() == models[1].describe() == models[2].describe()
    assert models[0].n_drifts > 0


# ----------------------------------------------------------------------------- DDM
def _ddm_levels(errs):
    from ensembles import ddm

    st = ddm.ddm_state(1)
    out = np.zeros(len(errs), np.int64)
    kernel(ddm.ddm_feed)(st, 0, np.asarray(errs, dtype=np.float64), out)
    return out, st


def test_ddm_hand_made_sequences():
    from ensembles import ddm

    # 50 right, then one wrong: p_min = s_min = 0 so far, and p + s > 0 = p_min + 3 s_min
    levels, _ = _ddm_levels([0.0] * 50 + [1.0])
    assert levels[:50].tolist() == [ddm.NONE] * 50 and levels[50] == ddm.DRIFT
    # fewer than 30 values: never a signal
    assert not _ddm_levels([0.0] * 10 + [1.0] * 19)[0].any()
    # error rate 1/4 (0,0,0,1 repeated): the rate's wobble, about 0.75 / i, stays far below
    # 2 s_min (about 0.043 at i = 400): no warning; then only errors: p + s climbs ~0.0019 a
    # value from 0.27 and passes p_min + 3 s_min within ~40 values, after a warning
    errs = [0.0, 0.0, 0.0, 1.0] * 100 + [1.0] * 100
    levels, st = _ddm_levels(errs)
    assert not levels[:400].any()
    first = int(np.flatnonzero(levels == ddm.DRIFT)[0])
    assert 400 < first < 460
    assert (levels[400:first] == ddm.WARN).any()
    assert st[0, ddm.N] == len(errs) - first - 1  # restarted after the drift


def test_ddm_bagging_recovers_from_an_abrupt_drift():
    data = list(flip_stream(12_000, drift_at=6000, seed=1))
    model = OnlineBagging(HoeffdingTree(), n_models=10, seed=1, drift="ddm", vote="weighted")
    pre, back = recovery(prequential(model, data), 6000)
    # measured: back after 35-77 examples on seeds 1-3 (every member whose detector fires is
    # reset, so nearly all are reset right after the flip; ADWIN bagging resets one per change)
    assert pre > 0.88 and back is not None and back <= 300
    d = model.describe()
    assert d["n_drifts"] >= 1 and all("warning" in m for m in d["members"])
    assert load_state(model.to_state()).describe() == d


# ----------------------------------------------------------------------------- ADWIN boosting
def back_within(ok: np.ndarray, drift_at: int, w: int, tol: float) -> int | None:
    """Examples after the drift at which a window of ``w`` starts whose accuracy is within
    ``tol`` of the window just before the drift (``None``: never)."""
    acc = windowed(ok, w)
    back = np.flatnonzero(acc[drift_at:] >= acc[drift_at - w] - tol)
    return int(back[0]) if back.size else None


@pytest.mark.parametrize("seed", [1, 3])
def test_adwin_boosting_recovers_from_an_abrupt_drift_and_plain_boosting_does_not(seed):
    """Drift after 6000 examples. Bound: 300 examples to a window of 200 within 5 points of
    the pre-drift one (measured on seeds 1-4: ADWIN boosting 41-111, plain boosting 522-647;
    accuracy over the first 500 after the drift 0.76-0.83 vs 0.34-0.39). Plain boosting does
    come back (its later members learn the misclassified examples with large Poisson weights),
    but only once those are many."""
    data = list(flip_stream(9000, drift_at=6000, seed=seed))
    plain = OnlineBoosting(HoeffdingTree(), n_models=10, seed=seed)
    adwin = OnlineBoosting(HoeffdingTree(), n_models=10, seed=seed, drift="adwin")
    ok = {"plain": prequential(plain, data), "adwin": prequential(adwin, data)}
    for run in ok.values():
        assert run[5000:6000].mean() > 0.85
    back = {name: back_within(run, 6000, 200, 0.05) for name, run in ok.items()}
    assert back["adwin"] is not None and back["adwin"] <= 300
    assert back["plain"] is None or back["plain"] > 300
    assert ok["adwin"][6000:6500].mean() > ok["plain"][6000:6500].mean() + 0.2
    d = adwin.describe()
    assert d["n_drifts"] > 0 and sum(m["resets"] for m in d["members"]) == d["n_drifts"]
    assert plain.n_drifts == 0 and "n_drifts" not in plain.describe()


def test_boosting_window_alone_learns_what_plain_boosting_learns():
    """The adaptive kernel without a detector: the same draws, the same updates, the same
    lambda_sc / lambda_sw and trees as ``_kernels.boosting_run`` (the window is extra)."""
    data = list(flip_stream(3000, drift_at=1500, seed=3))
    X, y = [x for x, _ in data], [v for _, v in data]
    for vote in ("average", "majority"):
        a = OnlineBoosting(HoeffdingTree(grace_period=50), n_models=5, seed=2, vote=vote)
        b = OnlineBoosting(
            HoeffdingTree(grace_period=50), n_models=5, seed=2, vote=vote, window=300
        )
        assert not a.adaptive and b.adaptive
        assert a.predict_learn_many(X, y) == b.predict_learn_many(X, y)
        sa, sb = a.to_state()["arrays"], b.to_state()["arrays"]
        assert all(np.array_equal(sa[k], sb[k]) for k in sa)
        assert b.describe()["diversity"]["n"] == 300 and "diversity" not in a.describe()


def test_adwin_boosting_state_round_trip_and_determinism():
    data = list(flip_stream(5000, drift_at=2000, seed=4))
    X, y = [x for x, _ in data], [v for _, v in data]
    model = OnlineBoosting(HoeffdingTree(), n_models=6, seed=5, drift="adwin")
    twin = OnlineBoosting(HoeffdingTree(), n_models=6, seed=5, drift="adwin")
    for x, v in data[:3000]:
        model.learn_one(x, v)
    twin.learn_many(X[:3000], y[:3000])
    assert model.describe() == twin.describe() and model.n_drifts > 0
    copies = [load_state(model.to_state()), pickle.loads(pickle.dumps(model))]
    want = model.predict_learn_many(X[3000:], y[3000:])
    assert [twin.predict_learn_one(x, v) for x, v in data[3000:]] == want
    for copy in copies:
        assert copy.predict_learn_many(X[3000:], y[3000:]) == want
        assert copy.describe() == model.describe() == twin.describe()


def test_adwin_boosting_spec_options_and_errors():
    spec = {"ensemble": "boosting", "learner": "hoeffding_tree", "n_models": 3, "seed": 1,
            "params": {"drift": "adwin", "drift_delta": 0.01, "window": 200}}  # fmt: skip
    model = build_model(spec)
    assert (model.drift, model.drift_delta, model.window) == ("adwin", 0.01, 200)
    assert build_model(model.spec()).spec() == model.spec()
    plain = build_model({"ensemble": "boosting", "n_models": 3})
    assert set(plain.spec()["params"]) & {"drift", "drift_delta", "window"} == set()
    assert not plain.adaptive
    with pytest.raises(ValueError, match="adwin"):
        OnlineBoosting(HoeffdingTree(), drift="ddm")
    with pytest.raises(ValueError, match="drift_delta"):
        OnlineBoosting(HoeffdingTree(), drift="adwin", drift_delta=0.0)
    with pytest.raises(ValueError, match="native"):
        build_model({"ensemble": "boosting", "learner": "mlp", "params": {"drift": "adwin"}})


# ----------------------------------------------------------------------------- output codes
def four_classes(n: int, seed: int = 0):
    """Four classes, one per value of a categorical feature (any split of them in two halves
    is a problem a tree learns at once), a numeric feature of noise, 2% label noise."""
    rng = random.Random(seed)
    for _ in range(n):
        c = rng.randrange(4)
        x = {"q": "klmn"[c], "x1": rng.random()}
        y = "abcd"[c]
        if rng.random() < 0.02:
            y = rng.choice("abcd")
        yield x, y


def test_output_codes_split_each_pair_of_classes_and_are_pure_functions():
    code = kernel(output_code)
    bits = np.array([[code(7, m, c) for c in range(8)] for m in range(200)])
    assert set(np.unique(bits)) == {0, 1}
    assert (bits[:, 0::2] != bits[:, 1::2]).all()  # classes 2j, 2j + 1 on opposite sides
    assert (bits.sum(axis=1) == 4).all()  # so every member splits 8 classes 4 / 4
    assert 0.4 < bits[:, 0].mean() < 0.6 and 0.4 < bits[:, 2].mean() < 0.6  # random per pair
    assert (bits[:, 0] != bits[:, 2]).any() and (bits[:, 0] == bits[:, 2]).any()
    assert bits.tolist() == [[code(7, m, c) for c in range(8)] for m in range(200)]
    assert bits.tolist() == [[output_code.py_func(7, m, c) for c in range(8)] for m in range(200)]
    assert [code(8, m, 0) for m in range(64)] != [code(7, m, 0) for m in range(64)]  # the seed


def member_top(model, m: int, data) -> tuple[np.ndarray, np.ndarray]:
    """Member m's top class code for each row (bits, with output codes) and the rows' class
    codes."""
    backend = model._settled()
    xn, xc, yc = backend.encode_block([x for x, _ in data], [v for _, v in data])
    out = np.empty(len(data), dtype=np.int64)
    kernel(member_predict)(backend.bank.view(), m, xn, xc, backend.bank.schema.n_classes,
                           backend.bank.schema.code_attr_array, out)  # fmt: skip
    return out, yc


def test_output_code_members_learn_their_bits_and_the_vote_decodes():
    """Each member's tree learns the binary problem ``output_code(seed, m, y)``: its predictions
    are bits that match its code of the truth (were the codes ignored in learning, members would
    predict the four classes); the decoded vote is as accurate as the plain one on this easy
    stream (were the codes ignored in the vote, it would read bits as classes 0 and 1)."""
    data = list(four_classes(4000, seed=1))
    coded = OnlineBagging(HoeffdingTree(), n_models=6, seed=3, output_codes=True)
    plain = OnlineBagging(HoeffdingTree(), n_models=6, seed=3)
    ok_coded = prequential(coded, data)
    ok_plain = prequential(plain, data)
    assert ok_coded[2000:].mean() > 0.93 and ok_plain[2000:].mean() > 0.93
    test = list(four_classes(500, seed=2))
    code = kernel(output_code)
    for m in range(6):
        bits, yc = member_top(coded, m, test)
        assert set(bits.tolist()) <= {0, 1}
        assert np.mean(bits == [code(3, m, int(c)) for c in yc]) > 0.85  # chance: 0.5
    assert set(member_top(plain, 0, test)[0].tolist()) == {0, 1, 2, 3}
    assert ok_coded.tolist() != ok_plain.tolist()  # the option changes what is learned


def test_output_codes_state_round_trip_determinism_and_batches():
    """Leveraging bagging with output codes (a class arriving mid-stream too): the same seed and
    stream give the same model one row at a time and in batches; a saved and reloaded (or
    pickled) model continues bit-identically."""
    data = [(x, y if i < 2500 else ("e" if y == "a" else y))
            for i, (x, y) in enumerate(four_classes(5000, seed=4))]  # fmt: skip
    X, y = [x for x, _ in data], [v for _, v in data]
    opts = {"drift": "adwin", "poisson_lambda": 6.0, "output_codes": True}
    model = OnlineBagging(HoeffdingTree(), n_models=6, seed=5, **opts)
    twin = OnlineBagging(HoeffdingTree(), n_models=6, seed=5, **opts)
    for x, v in data[:3000]:
        model.learn_one(x, v)
    twin.learn_many(X[:3000], y[:3000])
    assert model.describe() == twin.describe() and model.n_drifts > 0
    assert model.spec()["params"]["output_codes"] is True
    copies = [load_state(model.to_state()), pickle.loads(pickle.dumps(model))]
    want = model.predict_learn_many(X[3000:], y[3000:])
    assert [twin.predict_learn_one(x, v) for x, v in data[3000:]] == want
    for copy in copies:
        assert copy.output_codes
        assert copy.predict_learn_many(X[3000:], y[3000:]) == want
        assert copy.describe() == model.describe() == twin.describe()
    assert all(sum(p.values()) == pytest.approx(1.0) for p in want if p)
    assert set(want[-1]) == {"a", "b", "c", "d", "e"}


def test_output_codes_spec_and_errors():
    spec = {"ensemble": "bagging", "n_models": 3, "params": {"drift": "adwin",
            "poisson_lambda": 6, "output_codes": True}}  # fmt: skip
    model = build_model(spec)
    assert model.output_codes and model.adaptive
    assert build_model(model.spec()).spec() == model.spec()
    assert "output_codes" not in build_model({"ensemble": "bagging"}).spec()["params"]
    with pytest.raises(ValueError, match="output_codes"):
        OnlineBagging(HoeffdingTree(), output_codes="yes")
    with pytest.raises(ValueError, match="output_codes"):
        build_model({"ensemble": "bagging", "learner": "mlp", "params": {"output_codes": True}})
    with pytest.raises(ValueError, match="output_codes"):
        model.prime([{"x0": 1.0}], ["a"])
    with pytest.raises(ValueError, match="output_codes"):  # bagging's option only
        build_model({"ensemble": "boosting", "params": {"output_codes": True}})


# ----------------------------------------------------------------------------- MOA's lambda rule
@pytest.mark.parametrize(
    "learner, options",
    [("nb", {}), ("nb", {"drift": "adwin", "window": 10}), ("river", {})],
)
def test_lambda_rules_by_hand(learner, options):
    """Three members primed on 4 examples of the only class "a" (so every member is right on
    everything: lambda_sc = 4 each, lambda_sw = 0), then 2 more examples of weight 1.

    Thesis (e_m = 0): lambda = 1, 1/2, 1/4 for members 1-3, on both examples: lambda_sc =
    [6, 5, 4.5]. MOA, lambda *= N / (2 lambda_sc_m), N = 5 then 6: example 1, member 1
    lambda_sc = 5, lambda 1 * 5 / 10 = 1/2; member 2 lambda_sc = 4.5, lambda 1/2 * 5 / 9 = 5/18;
    member 3 lambda_sc = 4 + 5/18. Example 2: lambda_sc = 6, lambda 6 / 12 = 1/2; 5, 1/2 * 6 / 10
    = 3/10; 4 + 5/18 + 3/10."""
    from river import naive_bayes

    from learners import RiverLearner

    def make(rule):
        base = NaiveBayes() if learner == "nb" else RiverLearner(naive_bayes.GaussianNB())
        return OnlineBoosting(base, n_models=3, seed=1, lambda_rule=rule, **options)

    X = [{"x": float(i)} for i in range(6)]
    models = {rule: make(rule).prime(X[:4], ["a"] * 4) for rule in ("thesis", "moa")}
    for model in models.values():
        assert model._lam_sc.tolist() == [4.0, 4.0, 4.0] and model._lam_sw.tolist() == [0, 0, 0]
        for x in X[4:]:
            model.learn_one(x, "a")
    assert models["thesis"]._lam_sc.tolist() == [6.0, 5.0, 4.5]
    assert models["moa"]._lam_sc.tolist() == pytest.approx([6.0, 5.0, 4 + 5 / 18 + 3 / 10])
    assert models["moa"]._lam_sw.tolist() == [0, 0, 0]
    assert models["moa"]._lam[2, 0] == 6.0
    again = load_state(models["moa"].to_state())  # N is in the state
    assert again._lam[2, 0] == 6.0 and again.lambda_rule == "moa"


def test_lambda_rule_state_spec_and_errors():
    data = list(flip_stream(4000, drift_at=2000, seed=4))
    X, y = [x for x, _ in data], [v for _, v in data]
    model = OnlineBoosting(HoeffdingTree(), n_models=5, seed=5, drift="adwin", lambda_rule="moa")
    thesis = OnlineBoosting(HoeffdingTree(), n_models=5, seed=5, drift="adwin")
    model.learn_many(X[:3000], y[:3000])
    thesis.learn_many(X[:3000], y[:3000])
    assert model.n_drifts > 0
    assert not np.array_equal(model._lam_sc, thesis._lam_sc)
    assert "boost.seen" in model.to_state()["arrays"]
    assert "boost.seen" not in thesis.to_state()["arrays"]  # default states are unchanged
    copy = load_state(model.to_state())
    want = model.predict_learn_many(X[3000:], y[3000:])
    assert copy.predict_learn_many(X[3000:], y[3000:]) == want
    assert copy.describe() == model.describe()
    assert build_model(model.spec()).spec() == model.spec()
    assert model.spec()["params"]["lambda_rule"] == "moa"
    assert "lambda_rule" not in thesis.spec()["params"]
    with pytest.raises(ValueError, match="lambda_rule"):
        OnlineBoosting(HoeffdingTree(), lambda_rule="adaboost")
