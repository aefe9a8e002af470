"""Streams of batches (``predict_learn_batches``, ``learn_batches``): the answers and the model of
``predict_learn_many`` / ``learn_many`` called batch after batch, bit for bit, for every model
kind and thread count, while the schema grows mid-stream (new classes, categories, features),
and when a batch is refused (earlier batches learned and answered, the refused one leaves no
trace and names its row, no later batch is read). Online bagging with threads overlaps the
batches (``ensembles.stream``): the calling thread encodes batch i+1 while the members learn
batch i."""

from __future__ import annotations

import random
import sys
import threading
import time

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streams import assert_same_state

from ensembles import OnlineBagging, OnlineBoosting, Single, backends, stream
from learners import (
    DecisionStump,
    FeatureTypeError,
    HoeffdingTree,
    LabelError,
    LimitError,
    Limits,
    NaiveBayes,
    WeightError,
)

MODELS = {
    "bag_ht": lambda t: OnlineBagging(
        HoeffdingTree(grace_period=20, delta=0.01), n_models=5, seed=3, threads=t
    ),  # fmt: skip
    "bag_nb": lambda t: OnlineBagging(NaiveBayes(), n_models=4, seed=5, threads=t),
    "bag_stump_majority": lambda t: OnlineBagging(
        DecisionStump(), n_models=3, seed=7, vote="majority", threads=t
    ),  # fmt: skip
    "bag_adwin": lambda t: OnlineBagging(
        NaiveBayes(), n_models=3, seed=2, drift="adwin", threads=t
    ),  # fmt: skip
    "boost_ht": lambda t: OnlineBoosting(HoeffdingTree(grace_period=20), n_models=3, seed=4),
    "single_nb": lambda t: Single(NaiveBayes(), seed=1),
    "ht": lambda t: HoeffdingTree(grace_period=20),
}


def growing_stream(n: int, seed: int = 0, *, n_classes: int = 6, late_at: int = 150):
    """Rows whose schema grows all along: classes appear over the stream, categorical values
    keep coming, and features appear late (numeric and categorical), some rows miss some."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        k = rng.randrange(min(n_classes, 2 + i // 60))
        x: dict = {"u": rng.gauss(float(k), 1.0), "c": f"v{(k + rng.randrange(3)) % (3 + i // 50)}"}
        if rng.random() < 0.8:
            x["v"] = rng.random()
        if i >= late_at:
            x[f"late{i % 3}"] = rng.gauss(float(k) * (i % 3), 1.0)
            x["cat_late"] = f"w{rng.randrange(2 + i // 100)}"
        rows.append((x, f"class{k}"))
    return rows


def batches_of(data: list, sizes: list[int], weights: bool = False) -> list[tuple]:
    out, i, j = [], 0, 0
    while i < len(data):
        block = data[i : i + sizes[j % len(sizes)]]
        X, y = [x for x, _ in block], [y for _, y in block]
        out.append((X, y, [1.0 + (r % 3) * 0.5 for r in range(len(X))]) if weights else (X, y))
        i += len(block)
        j += 1
    return out


def assert_same_model(a, b) -> None:
    assert_same_state(a, b)
    assert a.n_seen == b.n_seen if hasattr(a, "n_seen") else True


def sequential(model, batches: list[tuple]) -> list:
    return [model.predict_learn_many(*b) for b in batches]


class Pulled:
    """An iterable of batches that counts how many were taken from it."""

    def __init__(self, batches: list[tuple]) -> None:
        self.batches, self.taken = batches, 0

    def __iter__(self):
        for b in self.batches:
            self.taken += 1
            yield b


@pytest.fixture(autouse=True)
def _cores_to_spare(monkeypatch):
    """Streams overlap batches only with a core to spare beside the member threads
    (``backends.PIPELINE_CORES``); these tests run on 2 cores and overlap them anyway (a test
    below sets it back)."""
    monkeypatch.setattr(backends, "PIPELINE_CORES", 64)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_stream_gives_the_answers_and_model_of_batch_calls(kind, threads):
    data = growing_stream(900, seed=1)
    batches = batches_of(data, [100, 70, 200, 30, 64, 63])
    want_model = MODELS[kind](1)
    want = sequential(want_model, batches)
    model = MODELS[kind](threads)
    got = list(model.predict_learn_batches(iter(batches)))
    assert got == want
    assert_same_model(model, want_model)
    learned, want_learned = MODELS[kind](threads), MODELS[kind](1)
    for b in batches:
        want_learned.learn_many(*b)
    assert learned.learn_batches(batches) is None
    assert_same_model(learned, want_learned)


def count_starts(monkeypatch) -> list[int]:
    """The rows of each batch a stream starts in its own thread (``CompiledBackend.start``)."""
    started: list[int] = []
    start = backends.CompiledBackend.start

    def counting(self, staged, *, predict):
        started.append(len(staged[1]))
        return start(self, staged, predict=predict)

    monkeypatch.setattr(backends.CompiledBackend, "start", counting)
    return started


def test_bagging_with_threads_overlaps_the_batches(monkeypatch):
    """The pipelined path runs (its batches start in the stream's thread), and the batches too
    small for parallel members go through the batch call, in order."""
    started = count_starts(monkeypatch)
    batches = batches_of(growing_stream(500, seed=2), [100, 30, 150, 64, 63, 93])
    want = sequential(MODELS["bag_ht"](1), batches)
    assert list(MODELS["bag_ht"](2).predict_learn_batches(batches)) == want
    assert started == [100, 150, 64, 93]  # not the batches of 30 and 63 rows (< 64)


@pytest.mark.parametrize("cores", [2, 3])
def test_without_a_core_to_spare_a_stream_runs_the_batch_calls(monkeypatch, cores):
    """With as many cores as member threads (2 threads on this 2-core machine: the calling
    thread's encoding took a core from the members, slower than the batch calls), a stream runs
    the batch calls in order; with a core more it overlaps them."""
    monkeypatch.setattr(backends, "PIPELINE_CORES", cores)
    started = count_starts(monkeypatch)
    batches = batches_of(growing_stream(300, seed=4), [100, 200])
    want = sequential(MODELS["bag_nb"](1), batches)
    assert list(MODELS["bag_nb"](2).predict_learn_batches(batches)) == want
    assert started == ([] if cores == 2 else [100, 200])
    monkeypatch.setattr(backends, "PIPELINE_CORES", None)  # this machine's own count
    assert backends.usable_cores() >= 1


def test_the_next_batch_is_encoded_while_the_members_learn(monkeypatch):
    """The overlap itself: batch i's members wait (in the stream's thread) until the calling
    thread has encoded batch i+1; a stream that waited for the members before encoding the
    next batch would leave them waiting (here: until a timeout, then the test fails)."""
    batches = batches_of(growing_stream(600, seed=8), [100])
    encoded = [threading.Event() for _ in batches]
    overlapped: list[bool] = []
    stage, start = backends.CompiledBackend.stage, backends.CompiledBackend.start

    def staging(self, X, ys, ws):
        staged = stage(self, X, ys, ws)
        encoded[sum(e.is_set() for e in encoded)].set()
        return staged

    def starting(self, staged, *, predict):
        members, i = start(self, staged, predict=predict), len(overlapped)
        overlapped.append(False)

        def waiting():
            last = i + 1 == len(batches)
            overlapped[i] = last or encoded[i + 1].wait(timeout=10)
            return members()

        return waiting

    monkeypatch.setattr(backends.CompiledBackend, "stage", staging)
    monkeypatch.setattr(backends.CompiledBackend, "start", starting)
    want = sequential(MODELS["bag_nb"](1), batches)
    assert list(MODELS["bag_nb"](2).predict_learn_batches(batches)) == want
    assert overlapped == [True] * len(batches)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), stream_seed=st.integers(0, 1000),
       sizes=st.lists(st.sampled_from([20, 64, 65, 90, 130, 200]), min_size=1, max_size=5),
       threads=st.integers(2, 4), learner=st.sampled_from(["ht", "nb", "stump"]),
       late_at=st.integers(0, 400), weights=st.booleans())  # fmt: skip
def test_streams_whose_schema_grows_mid_stream_match_the_batch_calls(
    seed, stream_seed, sizes, threads, learner, late_at, weights
):
    make = {"ht": lambda: HoeffdingTree(grace_period=15, delta=0.05), "nb": NaiveBayes,
            "stump": DecisionStump}[learner]  # fmt: skip
    data = growing_stream(600, seed=stream_seed, n_classes=8, late_at=late_at)
    batches = batches_of(data, sizes, weights=weights)
    want_model = OnlineBagging(make(), n_models=5, seed=seed)
    want = sequential(want_model, batches)
    model = OnlineBagging(make(), n_models=5, seed=seed, threads=threads)
    assert list(model.predict_learn_batches(batches)) == want
    assert_same_model(model, want_model)


BAD_ROWS = {
    "string_for_numeric": ({"u": "oops", "c": "v0"}, "class0", 1.0, FeatureTypeError),
    "label_of_another_type": ({"u": 1.0, "c": "v0"}, 7, 1.0, LabelError),
    "negative_weight": ({"u": 1.0, "c": "v0"}, "class0", -1.0, WeightError),
    "not_a_dict": (["u", 1.0], "class0", 1.0, FeatureTypeError),
    "too_many_classes": ({"u": 1.0, "c": "v0"}, "class_new", 1.0, LimitError),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("bad", sorted(BAD_ROWS))
def test_a_refused_batch_leaves_no_trace_after_the_earlier_batches(bad, threads):
    x, y, w, error = BAD_ROWS[bad]
    data = growing_stream(700, seed=3, n_classes=6)
    batches = batches_of(data, [100], weights=True)
    k, row = 4, 37  # batch 4's row 37 is bad; it also brings new features and categories
    X, Y, W = (list(part) for part in batches[k])
    X[row], Y[row], W[row] = x, y, w
    X[5] = {**X[5], "new_in_refused": "zz", "c": "new_value"}
    batches[k] = (X, Y, W)

    def make(t):
        limits = Limits(max_classes=6) if bad == "too_many_classes" else None
        return OnlineBagging(HoeffdingTree(grace_period=20), n_models=4, seed=9, threads=t,
                             limits=limits)  # fmt: skip

    want_model = make(1)
    want = sequential(want_model, batches[:k])
    with pytest.raises(error) as sequential_error:
        want_model.predict_learn_many(*batches[k])
    before = want_model.to_state()
    model = make(threads)
    pulled = Pulled(batches)
    answers = model.predict_learn_batches(pulled)
    got = [next(answers) for _ in range(k)]
    assert got == want
    with pytest.raises(error) as raised:
        next(answers)
    assert getattr(raised.value, "row", None) == getattr(sequential_error.value, "row", None)
    assert str(raised.value) == str(sequential_error.value)
    if bad != "negative_weight":
        assert raised.value.row == row
    assert pulled.taken == k + 1  # no batch after the refused one was read
    assert_same_model(model, want_model)
    assert model.to_state()["header"] == before["header"]
    # the model goes on as the batch calls' model does, without the refused batch
    rest = batches[k + 1 :]
    assert list(model.predict_learn_batches(rest)) == sequential(want_model, rest)
    assert_same_model(model, want_model)

    learned, want_learned = make(threads), make(1)
    for b in batches[:k]:
        want_learned.learn_many(*b)
    with pytest.raises(error) as raised:
        learned.learn_batches(Pulled(batches))
    assert getattr(raised.value, "row", None) == getattr(sequential_error.value, "row", None)
    assert_same_model(learned, want_learned)


def test_a_batch_over_max_state_bytes_is_refused_as_the_batch_call_refuses_it():
    data = growing_stream(2000, seed=4)
    batches = batches_of(data, [100])
    limits = Limits(max_state_bytes=300_000)

    def make(t):
        return OnlineBagging(HoeffdingTree(grace_period=10, delta=0.2), n_models=4, seed=2,
                             threads=t, limits=limits)  # fmt: skip

    want_model, want, want_error = make(1), [], None
    for b in batches:
        try:
            want.append(want_model.predict_learn_many(*b))
        except LimitError as exc:
            want_error = exc
            break
    assert want_error is not None, "the stream must reach the limit"
    model = make(2)
    got = []
    with pytest.raises(LimitError) as raised:
        for answers in model.predict_learn_batches(batches):
            got.append(answers)
    assert got == want
    assert str(raised.value) == str(want_error)
    assert_same_model(model, want_model)


def test_a_batch_the_members_cannot_start_fails_as_the_batch_call_fails(monkeypatch):
    """An engine error when a batch starts (here: ``MemoryError`` for the batch of 77 rows)
    comes after the earlier batches' answers, and leaves the model as the batch call leaves it."""
    from learners.compiled import TreeBank

    start = TreeBank.start_encoded

    def failing(self, kernel, ipar, fstate, xn, *args, **kw):
        if xn.shape[0] == 77:
            raise MemoryError("no room")
        return start(self, kernel, ipar, fstate, xn, *args, **kw)

    monkeypatch.setattr(TreeBank, "start_encoded", failing)
    batches = batches_of(growing_stream(500, seed=9, late_at=250), [100, 100, 77, 100])
    want_model = MODELS["bag_ht"](1)
    want = sequential(want_model, batches[:2])
    with pytest.raises(MemoryError):
        want_model.predict_learn_many(*batches[2])
    model = MODELS["bag_ht"](2)
    answers = model.predict_learn_batches(batches)
    assert [next(answers), next(answers)] == want
    with pytest.raises(MemoryError):
        next(answers)
    assert_same_model(model, want_model)


def test_dataframes_and_weights_give_what_the_batch_calls_give():
    data = growing_stream(600, seed=5, late_at=10**9)
    frames = [(pd.DataFrame(b[0], index=range(i * 1000, i * 1000 + len(b[0]))), pd.Series(b[1]),
               b[2]) for i, b in enumerate(batches_of(data, [150, 120], weights=True))]  # fmt: skip
    want_model = MODELS["bag_nb"](1)
    want = [want_model.predict_learn_many(*b) for b in frames]
    model = MODELS["bag_nb"](2)
    got = list(model.predict_learn_batches(frames))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        pd.testing.assert_frame_equal(g, w)
    assert_same_model(model, want_model)


def test_closing_a_stream_early_learns_the_batch_it_took(monkeypatch):
    start = backends.CompiledBackend.start

    def slow(self, staged, *, predict):  # members that take a while: closing must wait
        members = start(self, staged, predict=predict)
        return lambda: time.sleep(0.2) or members()

    monkeypatch.setattr(backends.CompiledBackend, "start", slow)
    batches = batches_of(growing_stream(800, seed=6), [100])
    want_model = MODELS["bag_ht"](1)
    sequential(want_model, batches[:4])  # answered 3, taken 4
    model = MODELS["bag_ht"](2)
    pulled = Pulled(batches)
    answers = model.predict_learn_batches(pulled)
    for _ in range(3):
        next(answers)
    answers.close()
    assert pulled.taken == 4
    assert_same_model(model, want_model)


def test_the_switch_interval_is_restored_when_the_last_of_two_streams_ends():
    before = sys.getswitchinterval()
    first, second = MODELS["bag_nb"](2), MODELS["bag_ht"](2)
    a = first.predict_learn_batches(batches_of(growing_stream(300, seed=7), [100]))
    b = second.predict_learn_batches(batches_of(growing_stream(300, seed=8), [100]))
    next(a)
    next(b)
    list(a)
    assert sys.getswitchinterval() == pytest.approx(min(before, stream.SWITCH_INTERVAL))
    list(b)
    assert sys.getswitchinterval() == pytest.approx(before)


def test_the_switch_interval_is_restored():
    before = sys.getswitchinterval()
    model = MODELS["bag_nb"](2)
    answers = model.predict_learn_batches(batches_of(growing_stream(300, seed=7), [100]))
    next(answers)
    assert sys.getswitchinterval() == pytest.approx(min(before, stream.SWITCH_INTERVAL))
    list(answers)
    assert sys.getswitchinterval() == pytest.approx(before)


def test_a_batch_is_two_or_three_parts():
    model = MODELS["bag_nb"](2)
    with pytest.raises(ValueError, match=r"\(X, y\) or \(X, y, w\)"):
        list(model.predict_learn_batches([([{"u": 1.0}],)]))
