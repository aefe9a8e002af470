"""NaiveBayes online == batch naive Bayes; DecisionStump online == batch stump on categorical data."""

from __future__ import annotations

import math
import random
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import categorical_stream, mixed_stream

from learners import DecisionStump, NaiveBayes


def batch_naive_bayes(data, x):
    """Naive Bayes fitted from scratch on weighted (x, y, w) rows, formulas as documented."""
    W = defaultdict(float)
    cat = defaultdict(float)  # (feature, value, class) -> weight
    catw = defaultdict(float)  # (feature, class) -> weight
    values = defaultdict(set)
    num = defaultdict(list)  # (feature, class) -> [(value, w)]
    num_all = defaultdict(list)
    for xi, y, w in data:
        W[y] += w
        for k, v in xi.items():
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            if isinstance(v, str):
                cat[k, v, y] += w
                catw[k, y] += w
                values[k].add(v)
            else:
                num[k, y].append((float(v), w))
                num_all[k].append((float(v), w))
    logp = {c: math.log(wc) for c, wc in W.items() if wc > 0}
    for k, v in x.items():
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if isinstance(v, str):
            if v not in values[k]:
                continue  # unseen category: skipped
            for c in logp:
                logp[c] += math.log((cat[k, v, c] + 1.0) / (catw[k, c] + len(values[k])))
        else:
            obs = num_all[k]
            if not obs:
                continue
            if len({t for t, _ in obs}) == 1:
                continue  # a single value over all classes: uninformative, skipped
            for c in logp:
                rows = num[k, c]
                if not rows:
                    continue
                wc = sum(w for _, w in rows)
                values_c = {t for t, _ in rows}
                # (one value: the mean is that value, exactly, as the engine's running mean;
                # sum(w * t) / wc can miss it by a rounding, e.g. w = 1e6)
                m = next(iter(values_c)) if len(values_c) == 1 else sum(w * t for t, w in rows) / wc
                var = sum(w * (t - m) ** 2 for t, w in rows) / (wc - 1.0) if wc > 1 else 0.0
                if wc <= 1 or len(values_c) == 1:  # zero variance: point mass at m
                    logp[c] += 0.0 if float(v) == m else -math.inf
                    continue
                logp[c] += (
                    -0.5 * (float(v) - m) ** 2 / var
                    - 0.5 * math.log(var)
                    - 0.5 * math.log(2 * math.pi)
                )
    mx = max(logp.values())
    if mx == -math.inf:  # every class has density 0: the class distribution
        tot = sum(W.values())
        return {c: wc / tot for c, wc in W.items() if wc > 0}
    e = {c: math.exp(lp - mx) for c, lp in logp.items()}
    z = sum(e.values())
    return {c: v / z for c, v in e.items()}


@pytest.mark.parametrize("seed", [0, 1])
def test_naive_bayes_online_equals_batch(seed):
    rng = random.Random(seed)
    data = [
        (x, y, rng.choice([1.0, 2.0, 0.5, rng.uniform(0.1, 3.0)]))
        for x, y in mixed_stream(600, seed, new_class_at=400)
    ]
    nb = NaiveBayes()
    probes = [x for x, _ in mixed_stream(40, seed + 100)] + [{"colour": "never"}, {"x1": 2.0}]
    for i, (x, y, w) in enumerate(data):
        nb.learn_one(x, y, w=w)
        if i in (5, 50, 399, 401, 599):
            for probe in probes:
                online = nb.predict_proba_one(probe)
                batch = batch_naive_bayes(data[: i + 1], probe)
                assert set(online) >= set(batch)
                for c, p in batch.items():
                    assert online[c] == pytest.approx(p, abs=1e-9), (i, probe, c)


def assert_matches_batch(nb, data, probes, where):
    for probe in probes:
        online = nb.predict_proba_one(probe)
        batch = batch_naive_bayes(data, probe)
        assert set(online) >= set(batch), (where, probe)
        for c, p in batch.items():
            assert online[c] == pytest.approx(p, abs=1e-9), (where, c, online, batch)


@pytest.mark.parametrize("seed", [0, 1])
def test_naive_bayes_with_hundreds_of_categorical_features_equals_batch(seed):
    """The category likelihoods are multiplied and the product's log taken once (nb_proba);
    with 400 features of 30 values the product (about 1e-560) would underflow to 0 unless it is
    folded into the log first, and every class would look impossible."""
    rng = random.Random(seed)
    data = []
    for _ in range(300):
        y = rng.choice("abc")
        bias = "abc".index(y)
        x = {f"f{j}": f"v{(rng.randrange(30) + bias * (j % 10 == 0)) % 30}" for j in range(400)}
        data.append((x, y, rng.choice([1.0, 0.5, 2.0])))
    nb = NaiveBayes()
    for x, y, w in data:
        nb.learn_one(x, y, w=w)
    probes = [x for x, _, _ in data[:5]] + [{f"f{j}": "v3" for j in range(400)}]
    assert_matches_batch(nb, data, probes, seed)
    # not degenerate: some answer is not (nearly) certain
    assert min(max(nb.predict_proba_one(p).values()) for p in probes) < 1 - 1e-6


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_naive_bayes_categorical_likelihoods_equal_batch(data):
    """Any categorical stream, any weights in the engine's range: the product form of the
    category likelihoods answers as the sum of their logs does (to 1e-9)."""
    n_features = data.draw(st.integers(1, 120), label="features")
    n_values = data.draw(st.integers(1, 8), label="values")
    classes = data.draw(st.integers(1, 4), label="classes")
    weights = st.sampled_from([1e-300, 1e-6, 0.5, 1.0, 3.0, 1e6, 1e12])
    rows = data.draw(st.lists(st.tuples(
        st.lists(st.integers(-1, n_values - 1), min_size=n_features, max_size=n_features),
        st.integers(0, classes - 1), weights), min_size=1, max_size=40), label="rows")  # fmt: skip
    stream = [({f"f{j}": f"v{v}" for j, v in enumerate(vals) if v >= 0}, f"c{y}", w)
              for vals, y, w in rows]  # fmt: skip
    nb = NaiveBayes()
    for x, y, w in stream:
        nb.learn_one(x, y, w=w)
    assert_matches_batch(nb, stream, [x for x, _, _ in stream[:6]], len(stream))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_naive_bayes_gaussian_likelihoods_equal_batch(data):
    """Any numeric stream whose features live at scales from 1e-140 to 1e140 (variances from
    about 1e-280 to 1e280), many features or few, weights from 0.5 to 1e12: the
    variances' logs taken once per class, of their product folded whenever it leaves
    [1e-150, 1e150] (nb_proba), answer as the sum of one log per class and feature does (to
    1e-9)."""
    n_features = data.draw(st.integers(1, 60), label="features")
    scales = data.draw(st.lists(st.sampled_from([1e-140, 1e-60, 1e-8, 1.0, 1e8, 1e60, 1e140]),
                                min_size=n_features, max_size=n_features), label="scales")  # fmt: skip
    classes = data.draw(st.integers(1, 4), label="classes")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    n_rows = data.draw(st.integers(2, 40), label="rows")
    # (not 1e-300: w (x - mean)^2 then underflows, and the engine's running M2 and the
    # reference's sum underflow to 0 on different rows; the categorical property takes 1e-300)
    weights = data.draw(st.sampled_from([[0.5, 1.0, 2.0, 1e6], [0.5, 1.0, 1e12]]), label="w")
    rng = random.Random(seed)
    stream = []
    for _ in range(n_rows):
        y = rng.randrange(classes)
        x = {f"n{j}": scale * rng.gauss(y, 1.0) for j, scale in enumerate(scales)}
        stream.append((x, f"c{y}", rng.choice(weights)))
    nb = NaiveBayes()
    for x, y, w in stream:
        nb.learn_one(x, y, w=w)
    assert_matches_batch(nb, stream, [x for x, _, _ in stream[:6]], len(stream))


def entropy(d):
    tot = sum(d.values())
    return -sum(v / tot * math.log2(v / tot) for v in d.values() if v > 0) if tot > 0 else 0.0


def batch_stump(data, x):
    """The ID3 stump on categorical data: multiway split on the best-gain attribute."""
    root = defaultdict(float)
    branches = defaultdict(lambda: defaultdict(float))  # (feature, value) -> class dist
    features = []
    for xi, y, w in data:
        root[y] += w
        for k, v in xi.items():
            if k not in features:
                features.append(k)
            if v is not None:
                branches[k, v][y] += w
    h = entropy(root)
    best, best_gain = None, 1e-12
    for f in features:
        dists = [d for (k, _), d in branches.items() if k == f]
        tot = sum(sum(d.values()) for d in dists)
        if len([d for d in dists if sum(d.values()) > 0]) < 2:
            continue
        gain = h - sum(sum(d.values()) / tot * entropy(d) for d in dists)
        if gain > best_gain + 1e-12:
            best, best_gain = f, gain
    dist = root
    if best is not None and x.get(best) is not None and sum(branches[best, x[best]].values()) > 0:
        dist = branches[best, x[best]]
    tot = sum(dist.values())
    return {c: v / tot for c, v in dist.items() if v > 0}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stump_online_equals_batch_on_categorical(seed):
    rng = random.Random(seed)
    data = [
        (x, y, rng.choice([1.0, 2.0, 3.0]))
        for x, y in categorical_stream(400, seed, n_values=3 + seed)
    ]
    stump = DecisionStump()
    probes = [x for x, _ in categorical_stream(30, seed + 50, n_values=5)]
    for i, (x, y, w) in enumerate(data):
        stump.learn_one(x, y, w=w)
        if i % 37 == 0 or i == len(data) - 1:
            for probe in probes:
                online = {c: p for c, p in stump.predict_proba_one(probe).items() if p > 0}
                batch = batch_stump(data[: i + 1], probe)
                assert set(online) == set(batch), (i, probe)
                for c, p in batch.items():
                    assert online[c] == pytest.approx(p, abs=1e-9)


def test_naive_bayes_zero_variance_never_gives_nan():
    """A class seen once has zero variance: far from its value every class has density 0."""
    nb = NaiveBayes()
    nb.learn_one({"x": 1.0}, "a")
    assert nb.predict_proba_one({"x": 5.0}) == {"a": 1.0}
    nb.learn_one({"x": 3.0}, "b", w=2.0)
    p = nb.predict_proba_one({"x": 100.0})
    assert all(0.0 <= v <= 1.0 for v in p.values()) and sum(p.values()) == pytest.approx(1.0)
    nb = NaiveBayes()
    nb.learn_one({"x": 1.0}, "a")
    nb.learn_one({"x": 1.0}, "b", w=2.0)  # all mass at 1.0: no pooled variance either
    assert nb.predict_proba_one({"x": 7.0}) == pytest.approx({"a": 1 / 3, "b": 2 / 3})


@pytest.mark.parametrize("value", [1.9e154, -1e200, 1e300, 1.7e308])
def test_a_huge_value_of_an_uninformative_feature_gives_no_nan(value):
    """A feature every class saw at one value (zero pooled variance) tells nothing: its term is
    exactly 0. Computed, it was NaN once z * z overflowed (|z| > 1.3e154), so every
    probability was NaN and predict_one / predict_many disagreed on the label."""
    from learners import HoeffdingTree

    for model in (NaiveBayes(), HoeffdingTree()):
        model.learn_one({}, 0)
        model.learn_one({"n": 0.0}, 1)
        p = model.predict_proba_one({"n": value})
        assert p == model.predict_proba_one({"n": 1.0}) == {0: 0.5, 1: 0.5}
        assert model.predict_one({"n": value}) == model.predict_many([{"n": value}])[0] == 0


def test_naive_bayes_zero_variance_class_is_a_point_mass_not_a_spike():
    """A feature constant within one class (a pixel always 0 for it) must not outvote the rest.

    Class ``a`` always has ``pix == 0``; class ``b`` has ``pix == 0`` half the time. With a tiny
    variance floor (the old rule) ``a``'s density at 0 is ~1e5 and every ``b`` with ``pix == 0``
    is called ``a`` whatever ``g`` says; as a point mass (density 1, MOA's rule) ``g`` decides.
    """
    rng = random.Random(3)
    nb = NaiveBayes()
    correct = n = 0
    for i in range(2000):
        y = rng.choice("ab")
        pix = 0.0 if y == "a" or rng.random() < 0.5 else rng.uniform(0.0, 1.0)
        x = {"pix": pix, "g": rng.gauss(0.0 if y == "a" else 3.0, 1.0)}
        if i >= 100:
            correct += nb.predict_one(x) == y
            n += 1
        nb.learn_one(x, y)
    assert correct / n > 0.88  # Bayes rate on g alone ~0.93; the spike rule gives ~0.7
    assert nb.predict_one({"pix": 0.0, "g": 3.0}) == "b"
    assert nb.predict_one({"pix": 0.0, "g": 0.0}) == "a"
