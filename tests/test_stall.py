"""No request stalls the others (issue 42, item 7): a model's engine work runs off the event loop,
one thread at a time per model, the compiled run kernels release the GIL, and one request's
engine work is bounded (``CHORUS_MAX_BATCH_VALUES``, 413 before it starts).

Real SQLite stores, the real engine. Where a test needs the engine to be busy for as long as it
looks, one model's ``predict_learn_many`` waits on a ``threading.Event`` the test sets (with a
timeout, so that code which runs it on the event loop fails instead of hanging).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.registry import Example, Registry
from app.settings import Settings
from app.stores import make_store

pytest.importorskip("ensembles")

SPEC = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 1}


def _on_registry(tmp_path, body):
    """``await body(registry, store)`` on a recovered registry (SQLite) with models ``m`` and
    ``other``, each over one numeric feature ``x`` and trained a little."""

    async def main():
        settings = Settings(data_dir=tmp_path / "data", snapshot_interval=3600)
        store = make_store(settings)
        await store.open(5)
        try:
            reg = Registry(store, settings)
            await reg.recover()
            for name in ("m", "other"):
                await reg.create(name, SPEC)
                exs = [Example({"x": float(i % 7)}, "ab"[i % 7 > 3]) for i in range(50)]
                await reg.learn(name, exs, batch=True)
            return await body(reg, store)
        finally:
            await store.close()

    return asyncio.run(main())


def _hold(model) -> tuple[threading.Event, threading.Event, list[bool]]:
    """Make ``model.predict_learn_many`` wait until the test sets ``release`` (``started`` is set
    when it begins; ``released`` records whether the test released it, or it timed out)."""
    started, release, released = threading.Event(), threading.Event(), []
    real = model.predict_learn_many

    def held(*args, **kwargs):
        started.set()
        released.append(release.wait(15))
        return real(*args, **kwargs)

    model.predict_learn_many = held
    return started, release, released


def test_a_long_learn_leaves_the_event_loop_to_other_models(tmp_path):
    """While one model's engine works on a batch, another model predicts and learns, and the
    same model's prediction waits for its engine (one thread per model); then the batch is
    acknowledged, in the log, in order. On the event loop the batch would block everything
    until it ends (here: its 15 s timeout, and ``released`` says so)."""

    async def body(reg, store):
        h = reg.models.peek("m")
        started, release, released = _hold(h.model)
        exs = [Example({"x": float(i % 7)}, "ab"[i % 7 > 3]) for i in range(300)]
        long = asyncio.create_task(reg.learn("m", exs, batch=True))
        while not started.is_set():
            await asyncio.sleep(0.001)
        # the engine of "m" is busy: other models go on
        (p,) = await reg.predict("other", [{"x": 5.0}])
        (r,) = await reg.learn("other", [Example({"x": 6.0}, "b")])
        same = asyncio.create_task(reg.predict("m", [{"x": 5.0}]))
        for _ in range(20):
            await asyncio.sleep(0)
        same_waited = not same.done()
        release.set()
        results = await long
        (q,) = await same
        return released, p, r, same_waited, results, q, await store.last_seq("m")

    released, p, r, same_waited, results, q, last = _on_registry(tmp_path, body)
    assert released == [True], "the batch ran on the event loop: nothing else was answered"
    assert p["prediction"] in ("a", "b") and r["seq"] == 51
    assert same_waited, "a prediction of the same model ran while its engine was busy"
    assert [x["seq"] for x in results] == list(range(51, 351)) and last == 350
    assert q["prediction"] in ("a", "b")


def test_a_cancelled_request_keeps_its_model_locked_until_its_engine_ends(tmp_path):
    """A learn whose request is cancelled while its engine runs in a thread: the model's engine
    stays held until the thread ends (no second thread on its arrays), the model is rebuilt
    from its log (it may have learned what the log lacks), and nothing unlogged is served."""

    async def body(reg, store):
        h = reg.models.peek("m")
        started, release, released = _hold(h.model)
        exs = [Example({"x": float(i % 7)}, "ab"[i % 7 > 3]) for i in range(300)]
        h.pending.append((exs, asyncio.get_running_loop().create_future(), True))
        writer = asyncio.create_task(reg.writer._drain(h))
        while not started.is_set():
            await asyncio.sleep(0.001)
        writer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writer
        held_after_cancel = h.engine.locked()
        release.set()
        while h.engine.locked():
            await asyncio.sleep(0.001)
        dirty = h.dirty
        d = await reg.describe("m")
        return held_after_cancel, dirty, d["n_seen"], await store.last_seq("m")

    held, dirty, n_seen, last = _on_registry(tmp_path, body)
    assert held, "the engine lock was released while the thread still ran on the model"
    assert dirty, "a model that may have learned unlogged examples was kept as it was"
    assert (n_seen, last) == (50, 50)


def test_compiled_run_kernels_release_the_gil():
    """The run kernels a model's requests run (``ensembles.spec.run_kernels``: each kind's IO run
    kernel, the adaptive ones, bagging's member-parallel one, the MLP's) are compiled with
    ``nogil``, so a thread running one leaves the event loop free."""
    from ensembles.spec import ENSEMBLES, run_kernels

    names = ("_run", "_run_io", "_members")  # (not make_run_io, a constructor)
    runs = {k for kind in ENSEMBLES for k in run_kernels(kind)
            if k.__name__.endswith(names) and not k.__name__.startswith("make_")}  # fmt: skip
    assert len(runs) >= 6, sorted(k.__name__ for k in runs)
    held = sorted(k.__name__ for k in runs if not k.targetoptions.get("nogil"))
    assert not held, f"run kernels holding the GIL: {held}"


def test_one_requests_engine_work_is_bounded_before_it_starts(tmp_path):
    """``CHORUS_MAX_BATCH_VALUES`` bounds the feature values of one request: over it, 413
    naming the field and the limit, and nothing is learned or logged."""
    settings = Settings(data_dir=tmp_path / "data", snapshot_interval=3600, max_batch_values=10)
    with TestClient(create_app(settings)) as c:
        assert c.post("/models", json={"name": "m", **SPEC}).status_code == 201
        exs = [{"features": {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}, "label": "x"}] * 3
        r = c.post("/learn", json={"model": "m", "examples": exs})
        assert r.status_code == 413, r.text
        assert r.json()["detail"].startswith("examples: 12 feature values, over the limit of 10")
        wide = {f"f{i}": 1.0 for i in range(11)}
        r = c.post("/learn", json={"model": "m", "features": wide, "label": "x"})
        assert r.status_code == 413 and r.json()["detail"].startswith("features: 11"), r.text
        r = c.post("/predict", json={"model": "m", "examples": [{"features": wide}]})
        assert r.status_code == 413 and r.json()["detail"].startswith("examples: 11"), r.text
        r = c.get("/predict", params={"model": "m", **{k: "1" for k in wide}})
        assert r.status_code == 413 and r.json()["detail"].startswith("features: 11"), r.text
        d = c.get("/models/m").json()
        assert (d["n_seen"], d["seq"]) == (0, 0)
        # at the limit: learned
        r = c.post("/learn", json={"model": "m", "examples": exs[:2]})
        assert r.status_code == 200, r.text
        assert c.get("/models/m").json()["seq"] == 2
