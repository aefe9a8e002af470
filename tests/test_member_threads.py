"""Member-parallel batches of online bagging (``threads``): the same predictions and the same
state, bit for bit, for every thread count, on streams that grow every array the members share."""

from __future__ import annotations

import random

import numba as nb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streams import assert_same_state, categorical_stream, mixed_stream

from ensembles import OnlineBagging, OnlineBoosting, backends, build_model, load_state
from ensembles._atomic import take
from learners import DecisionStump, HoeffdingTree, NaiveBayes

LEARNERS = {
    "ht": lambda: HoeffdingTree(grace_period=20, delta=0.01),
    "nb": NaiveBayes,
    "stump": DecisionStump,
}


def wide_stream(n: int, seed: int = 0, n_classes: int = 12, n_values: int = 40):
    """Many classes and many categories, some late: class blocks move and the class-entry
    pools double while the members run."""
    rng = random.Random(seed)
    for i in range(n):
        k = rng.randrange(min(n_classes, 2 + i // 40))  # classes appear over the stream
        x = {
            "c": f"v{(k * 3 + rng.randrange(4)) % n_values}",
            "d": f"w{rng.randrange(n_values)}",
            "u": rng.gauss(float(k), 1.0),
            "v": rng.random(),
        }
        if i > n // 2:
            x[f"late{i % 3}"] = f"z{rng.randrange(n_values)}"
        yield x, f"class{k}"


def agrawal(n: int) -> list:
    from river.datasets import synth

    return list(synth.Agrawal(classification_function=2, seed=7, perturbation=0.05).take(n))


STREAMS = {
    "agrawal": lambda: agrawal(1500),
    "categorical": lambda: list(categorical_stream(1500, seed=3)),
    "mixed": lambda: list(mixed_stream(1500, seed=4, new_class_at=700)),
    "wide": lambda: list(wide_stream(1500, seed=5)),
}


def prequential(model, data, batch: int) -> list[dict]:
    out: list[dict] = []
    for i in range(0, len(data), batch):
        block = data[i : i + batch]
        out += model.predict_learn_many([x for x, _ in block], [y for _, y in block])
    return out


@pytest.mark.parametrize("stream", sorted(STREAMS))
@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_threads_give_the_predictions_and_state_of_one_thread(learner, stream):
    data = STREAMS[stream]()
    models = {t: OnlineBagging(LEARNERS[learner](), n_models=7, seed=11, threads=t)
              for t in (1, 2, 3)}  # fmt: skip
    outs = {t: prequential(m, data, batch=250) for t, m in models.items()}
    probe = [x for x, _ in data[::7]]
    for t in (2, 3):
        assert outs[t] == outs[1], f"threads={t}"
        assert_same_state(models[t], models[1])
    # (predicting fills naive-Bayes caches that the state keeps: every model predicts alike)
    probas = {t: m.predict_proba_many(probe) for t, m in models.items()}
    assert probas[2] == probas[1] and probas[3] == probas[1]
    assert_same_state(models[3], models[1])
    # and the per-example path, which runs in one thread, goes on from either alike
    x, y = data[-1]
    assert models[3].predict_learn_one(x, y) == models[1].predict_learn_one(x, y)


def test_learn_many_with_weights_and_majority_vote():
    data = list(wide_stream(1200, seed=8))
    X, Y = [x for x, _ in data], [y for _, y in data]
    rng = random.Random(2)
    W = [rng.choice([0.0, 0.5, 1.0, 3.0]) for _ in data]
    models = [OnlineBagging(HoeffdingTree(grace_period=30), n_models=6, seed=2, vote="majority",
                            threads=t) for t in (1, 2, 4)]  # fmt: skip
    for m in models:
        m.learn_many(X[:600], Y[:600], W[:600])
    outs = [m.predict_learn_many(X[600:], Y[600:], W[600:]) for m in models]
    assert outs[1] == outs[0] and outs[2] == outs[0]
    assert_same_state(models[1], models[0])
    assert_same_state(models[2], models[0])
    assert models[0].n_seen == sum(w > 0 for w in W)


def test_blocks_of_rows_give_the_same_results(monkeypatch):
    """The kept predictions are bounded by rows per block: many small blocks, same results."""
    data = list(mixed_stream(900, seed=6, new_class_at=300))
    one = OnlineBagging(HoeffdingTree(grace_period=25), n_models=5, seed=4)
    expect = prequential(one, data, batch=450)
    monkeypatch.setattr(backends, "VOTE_BYTES", 5 * 16 * 3 * 7)  # 7 rows of 3 classes a block
    two = OnlineBagging(HoeffdingTree(grace_period=25), n_models=5, seed=4, threads=2)
    assert prequential(two, data, batch=450) == expect
    assert_same_state(two, one)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**63 - 1), stream_seed=st.integers(0, 1000),
       batch=st.integers(1, 400), threads=st.integers(2, 5), n_models=st.integers(1, 9),
       learner=st.sampled_from(sorted(LEARNERS)))  # fmt: skip
def test_threads_are_bit_identical_for_any_seed_and_batch(seed, stream_seed, batch, threads,
                                                          n_models, learner):  # fmt: skip
    data = list(wide_stream(500, seed=stream_seed, n_classes=6, n_values=15))
    a = OnlineBagging(LEARNERS[learner](), n_models=n_models, seed=seed)
    b = OnlineBagging(LEARNERS[learner](), n_models=n_models, seed=seed, threads=threads)
    assert prequential(b, data, batch) == prequential(a, data, batch)
    assert_same_state(b, a)


def test_threads_is_an_execution_setting_not_part_of_the_model():
    model = OnlineBagging(NaiveBayes(), n_models=3, seed=1, threads=2)
    assert model.threads == 2
    assert "threads" not in model.spec()["params"]
    model.learn_many([{"x": float(i)} for i in range(20)], [i % 2 for i in range(20)])
    again = load_state(model.to_state())
    assert again.threads == 1
    again.threads = 3
    assert again.threads == 3
    assert again.predict_proba_many([{"x": 3.0}]) == model.predict_proba_many([{"x": 3.0}])
    # boosting has the setting too (a batch still runs in one thread: members are sequential)
    boost = OnlineBoosting(NaiveBayes(), n_models=3, seed=1)
    boost.threads = 2
    assert boost.threads == 2
    with pytest.raises(ValueError, match="threads"):
        build_model({"ensemble": "bagging", "learner": "naive_bayes",
                     "params": {"threads": 2}})  # fmt: skip
    # more threads than members: as many as there are members (one member: the calling thread)
    alone = OnlineBagging(NaiveBayes(), n_models=1, seed=1, threads=4)
    assert alone.predict_learn_many(
        [{"x": float(i)} for i in range(20)], [i % 2 for i in range(20)]
    )


@pytest.mark.parametrize("bad", [0, -1, 257, 1.5, True, "2", None])
def test_invalid_threads_are_refused(bad):
    with pytest.raises(ValueError, match="threads must be an integer"):
        OnlineBagging(NaiveBayes(), n_models=3, threads=bad)
    model = OnlineBagging(NaiveBayes(), n_models=3)
    with pytest.raises(ValueError, match="threads must be an integer"):
        model.threads = bad


@pytest.mark.parametrize("options", [{"drift": "adwin"}, {"vote": "weighted"},
                                     {"poisson_lambda": 6.0}])  # fmt: skip
def test_adaptive_bagging_runs_its_batches_serially_with_the_same_results(options):
    data = list(mixed_stream(600, seed=9))
    a = OnlineBagging(HoeffdingTree(grace_period=30), n_models=4, seed=3, **options)
    b = OnlineBagging(HoeffdingTree(grace_period=30), n_models=4, seed=3, threads=2, **options)
    assert prequential(b, data, 200) == prequential(a, data, 200)
    assert_same_state(b, a)


def test_server_runs_batches_with_chorus_threads(tmp_path):
    """``CHORUS_THREADS`` reaches the models the server creates and loads; batched answers are
    those of a one-thread server."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    data = list(mixed_stream(600, seed=12, new_class_at=300))
    spec = {"name": "m", "ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 5,
            "seed": 3, "params": {"grace_period": 30}}  # fmt: skip

    def answers(threads: int, where: str) -> tuple[list, int, int]:
        settings = Settings(data_dir=tmp_path / where, threads=threads, warmup="none")
        with TestClient(create_app(settings)) as client:
            assert client.post("/models", json=spec).status_code == 201
            for i in range(0, 400, 100):
                batch = [{"features": x, "label": y} for x, y in data[i : i + 100]]
                r = client.post("/learn", json={"model": "m", "examples": batch})
                assert r.status_code == 200, r.text
            created = client.app.state.registry.models.peek("m").model.threads
        with TestClient(create_app(settings)) as client:  # recovered from the store
            probe = [{"features": x} for x, _ in data[400:]]
            r = client.post("/predict", json={"model": "m", "examples": probe})
            assert r.status_code == 200, r.text
            loaded = client.app.state.registry.models.peek("m").model.threads
        results = [{k: v for k, v in res.items() if k != "prediction_id"}
                   for res in r.json()["results"]]  # fmt: skip
        return results, created, loaded

    one, *_ = answers(1, "one")
    two, created, loaded = answers(2, "two")
    assert (created, loaded) == (2, 2)
    assert two == one


def test_warmup_compiles_the_parallel_kernels():
    """``chorus warmup`` / the server's start-up warm what a server with CHORUS_THREADS > 1 runs
    (in a fresh process: what this one compiled does not count)."""
    import subprocess
    import sys

    code = ("from app.warmup import warm_kind\nfrom ensembles import _kernels\nwarm_kind('bagging')\n"
            "print(*(len(getattr(_kernels, k).signatures) for k in ('bagging_members', "
            "'make_room', 'bagging_votes', 'pool_generation')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1", "1", "1"]


def test_member_orders_give_each_thread_its_group_then_the_others_from_their_ends():
    assert [o.tolist() for o in backends.member_orders(10, 2)] == [
        [0, 1, 2, 3, 4, 9, 8, 7, 6, 5],
        [5, 6, 7, 8, 9, 4, 3, 2, 1, 0],
    ]
    assert [o.tolist() for o in backends.member_orders(7, 3)] == [
        [0, 1, 3, 6, 2, 5, 4],
        [2, 3, 6, 1, 5, 0, 4],
        [4, 5, 6, 1, 3, 0, 2],
    ]
    for M in range(2, 13):
        for T in range(2, M + 1):
            orders = backends.member_orders(M, T)
            assert len(orders) == T
            for g, order in enumerate(orders):
                assert sorted(order.tolist()) == list(range(M))  # every member, once
                own = list(range(g * M // T, (g + 1) * M // T))
                assert order[: len(own)].tolist() == own


@nb.njit(nogil=True)
def take_many(counts, got):
    """``got[i] = take(counts, 1)`` for every i (a kernel at module level: numba's registries
    keep weak references to a kernel, which a test's local one would leave dangling)."""
    for i in range(got.shape[0]):
        got[i] = take(counts, 1)


def test_threads_take_a_counter_each_value_once():
    """``take`` is atomic in a kernel: two threads taking four million values from one counter
    between them get each value exactly once (which a plain read and write fails only when the
    threads run at the same time on two cores: its machine code says so on a busy machine)."""
    import threading

    counts = np.zeros(2, np.int64)
    take_many(counts, np.zeros(1, np.int64))  # (compiled before the threads start)
    functions = next(iter(take_many.inspect_llvm().values())).split("\ndefine ")
    (body,) = [f for f in functions[1:] if "take_many" in (head := f.split("\n")[0])
               and "cpython" not in head and "cfunc" not in head]  # (not its wrappers)  # fmt: skip
    assert "atomicrmw add" in body
    counts[:] = 0
    got = [np.zeros(2_000_000, np.int64) for _ in range(2)]
    start = threading.Barrier(2)

    def run(out: np.ndarray) -> None:
        start.wait()
        take_many(counts, out)

    threads = [threading.Thread(target=run, args=(g,)) for g in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts.tolist() == [0, 4_000_000]
    assert np.array_equal(np.sort(np.concatenate(got)), np.arange(4_000_000))
    # (the interpreted twins' take: the same counting, in Python)
    assert take(counts, 0) == 0 and counts[0] == 1


@pytest.mark.parametrize("slow", ["worker", "caller"])
def test_a_thread_that_is_late_leaves_its_members_to_the_others(monkeypatch, slow):
    """A thread that starts its phase late (descheduled, on a busy machine) finds its members
    taken by the thread already running: all the rows are done by the other, with the results
    of one thread."""
    import threading

    data = list(mixed_stream(700, seed=13, new_class_at=350))
    one = OnlineBagging(HoeffdingTree(grace_period=25), n_models=6, seed=5)
    expect = prequential(one, data, batch=175)
    caller = threading.get_ident()
    real = backends._kernels.bagging_members
    rows = {"caller": 0, "worker": 0}

    other_done = threading.Semaphore(0)  # one release per call of the other thread

    def members(*args) -> None:
        who = "caller" if threading.get_ident() == caller else "worker"
        if who == slow:  # starts once the other's call of the same phase is done with every
            # member (a sleep of 0.1 s was not always enough on a loaded machine)
            assert other_done.acquire(timeout=60)
        progress = args[16]
        before = int(progress.sum())
        real(*args)
        rows[who] += int(progress.sum()) - before
        if who != slow:
            other_done.release()

    # (compiled first: a thread compiling the kernel would hold the other back for seconds)
    prequential(OnlineBagging(HoeffdingTree(), n_models=6, threads=2), data[:175], batch=175)
    monkeypatch.setattr(backends._kernels, "bagging_members", members)
    two = OnlineBagging(HoeffdingTree(grace_period=25), n_models=6, seed=5, threads=2)
    assert prequential(two, data, batch=175) == expect
    assert_same_state(two, one)
    assert rows[slow] == 0 and rows[next(k for k in rows if k != slow)] > 0
