"""A model on a cold numba cache answers at once from the interpreted twins while its kernels
compile in a subprocess (``learners.jit.compile_elsewhere``, ``ensembles.warm``,
``learners.warm``), then the compiled kernels take over between two calls, bit for bit.

The suite pins ``CHORUS_COMPILE=block`` (``conftest.py``); these tests choose their mode. One
test compiles from an empty cache (a child process: a minute or more of CPU)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from streams import mixed_stream, same

from ensembles import OnlineBagging, build_model
from learners import HoeffdingTree, jit, native

ROOT = Path(__file__).resolve().parents[1]
SPEC = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 5,
        "params": {"grace_period": 30}}  # fmt: skip


@pytest.fixture
def compile_mode():
    """Set the process's compile mode for a test (the suite's is ``block``)."""
    before = jit._COMPILES.mode
    yield jit.set_compile_mode
    jit.set_compile_mode(before)
    jit.set_interpreted(False)


def _job(key: str, spec: dict = SPEC) -> jit.CompileJob:
    return jit.CompileJob(key=key, what="test models", module="ensembles.warm",
                          args=(json.dumps(spec),))  # fmt: skip


def _train(model, data, *, until=None) -> list:
    """Predict-then-learn ``data`` one example at a time, with ``learn_one`` / ``predict_one``
    and a batch every 40 examples; ``until(i)`` may hold the loop at example i. Returns the
    answers."""
    out = []
    for i, (x, y) in enumerate(data):
        if until is not None:
            until(i)
        if i % 40 == 39:
            out += model.predict_learn_many([x], [y])
        elif i % 3 == 0:
            out.append(model.predict_one(x))
            model.learn_one(x, y)
        else:
            out.append(model.predict_learn_one(x, y))
    return out


def test_a_model_trained_across_the_switch_is_the_compiled_model(compile_mode):
    """A real job (its subprocess loads the kernels from the suite's cache): the model answers
    from the twins until the job is done, then from the compiled kernels, and equals a model
    trained compiled throughout, answers and state, bit for bit."""
    data = list(mixed_stream(400, 3, new_class_at=250))
    reference = build_model(SPEC)
    expected = (_train(reference, data), reference.to_state())

    compile_mode("subprocess")
    model = build_model(SPEC)
    future = jit.compile_elsewhere(_job("test-switch"))
    assert future is not None and jit.interpreting()
    modes = []

    def until(i: int) -> None:
        modes.append(jit.interpreting())
        if i == 200:  # the switch, if not yet: it happens between two calls, in another thread
            future.result(timeout=300)

    got = (_train(model, data, until=until), model.to_state())
    assert modes[0] and not modes[-1]  # (both modes ran)
    assert not jit.interpreting() and not jit.compiling()
    assert same(got, expected)


def test_a_failed_subprocess_falls_back_to_this_process(compile_mode, caplog):
    """The subprocess fails (here: a spec it cannot read): the warning says so with the end of
    its stderr, the kernels are loaded (or compiled) in this process, and the switch is
    logged."""
    from ensembles.warm import warm_spec

    compile_mode("subprocess")
    caplog.set_level("INFO", logger="chorus")
    job = jit.CompileJob(key="test-fail", what="test models", module="ensembles.warm",
                         args=("{not json",), load=lambda: warm_spec(SPEC))  # fmt: skip
    jit.compile_elsewhere(job).result(timeout=300)
    assert "in a subprocess failed (exit 1)" in caplog.text and "JSONDecodeError" in caplog.text
    assert "kernels for test models loaded" in caplog.text
    _wait_for_the_switch()
    assert "compiled kernels took over from the interpreted ones" in caplog.text


def _wait_for_the_switch() -> None:
    """(The switch follows a job's result, in the worker thread.)"""
    for _ in range(400):
        if not jit.interpreting():
            return
        time.sleep(0.05)
    raise AssertionError("the compiled kernels did not take over")


def test_thread_mode_compiles_in_this_process(compile_mode, caplog):
    compile_mode("thread")
    caplog.set_level("INFO", logger="chorus")
    jit.compile_elsewhere(_job("test-thread")).result(timeout=300)
    _wait_for_the_switch()
    assert "compiling them in a thread" in caplog.text
    assert "in a subprocess" not in caplog.text


def test_cancelled_before_it_starts_nothing_runs(compile_mode):
    compile_mode("subprocess")
    future = jit.compile_elsewhere(_job("test-cancel"))
    assert jit.interpreting() and jit.compiling()
    jit.cancel_compile("test-cancel")
    assert future.cancelled() and not jit.interpreting() and not jit.compiling()


def test_an_ensemble_drops_its_prototype_learners_job(compile_mode, monkeypatch):
    """A learner whose kernels are not cached asks for a job; an ensemble made from it at once
    drops it (its own kernels are the suite's cache's: no job of its own)."""
    compile_mode("subprocess")
    monkeypatch.setattr(native, "LEARNER_KERNELS", (lambda: None,))  # (never ready)
    tree = HoeffdingTree()
    assert jit.interpreting() and jit.compiling()
    model = OnlineBagging(tree, n_models=2)
    assert not jit.interpreting() and not jit.compiling()
    model.learn_one({"a": 1.0}, "y")
    assert model.predict_one({"a": 1.0}) == "y"


def test_block_and_the_callers_own_mode_start_nothing(compile_mode, monkeypatch):
    compile_mode("block")
    assert jit.compile_elsewhere(_job("test-block")) is None
    compile_mode(None)
    monkeypatch.setenv("CHORUS_COMPILE", "later")
    with pytest.raises(ValueError, match="subprocess, thread, block"):
        jit.compile_elsewhere(_job("test-bad"))
    monkeypatch.setenv("CHORUS_COMPILE", "thread")
    jit.set_interpreted(True)  # (the caller's: compile_elsewhere leaves it to them)
    assert jit.compile_elsewhere(_job("test-theirs")) is None
    assert jit.interpreting() and not jit.compiling()


def _child_mode(queue) -> None:
    queue.put((jit.interpreting(), jit.compiling()))


def test_a_forked_child_runs_compiled_kernels(compile_mode):
    """A process forked while a job runs has no thread to switch it back: it runs compiled."""
    compile_mode("subprocess")
    jit.compile_elsewhere(_job("test-fork"))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_mode, args=(queue,))
    child.start()
    child.join(60)
    assert queue.get(timeout=5) == (False, False)
    assert jit.interpreting()
    jit.cancel_compile("test-fork")


_COLD_CHILD = r"""
import json, logging, sys, time
t0 = time.perf_counter()
logging.basicConfig(level=logging.INFO, format="%(message)s")
sys.path.insert(0, sys.argv[1])
from streams import mixed_stream, same
from ensembles import OnlineBagging
from learners import HoeffdingTree, jit
data = list(mixed_stream(300, 3, new_class_at=200))
model = OnlineBagging(HoeffdingTree(grace_period=30), n_models=3, seed=2)
model.learn_one(*data[0])
first = model.predict_one(data[1][0])
answered = time.perf_counter() - t0
interpreted = jit.interpreting()
answers = [first]
for i, (x, y) in enumerate(data[1:], 1):
    if i == 150:
        while jit.compiling() and time.perf_counter() - t0 < 3300:
            time.sleep(0.2)
    answers.append(model.predict_learn_one(x, y))
switched = time.perf_counter() - t0
reference = OnlineBagging(HoeffdingTree(grace_period=30), n_models=3, seed=2)
reference.learn_one(*data[0])
expected = [reference.predict_one(data[1][0])]
expected += [reference.predict_learn_one(x, y) for x, y in data[1:]]
print(json.dumps({"answered": answered, "interpreted": interpreted, "switched": switched,
                  "compiled": not jit.interpreting(),
                  "same": same((answers, model.to_state()), (expected, reference.to_state()))}))
"""


@pytest.mark.timeout(3600)  # (the compile: 1-3 minutes alone, 30 on a loaded shared machine)
def test_first_answer_on_an_empty_cache_comes_at_once(tmp_path):
    """The one cold compile of this file: a Python user's first ``learn_one`` and
    ``predict_one`` of ``OnlineBagging(HoeffdingTree())`` on an empty numba cache answer from
    the twins (seconds; a blocking compile took minutes), the log says so and, later, that
    the compiled kernels took over; the model then equals one trained compiled throughout.
    (The generous bound is for a loaded machine: ``benchmarks/first_learn.py`` measures.)"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "empty-cache"), PYTHONPATH=str(ROOT))
    env.pop("CHORUS_COMPILE", None)
    out = subprocess.run(  # noqa: S603 - our own code, a fresh process with an empty cache
        [sys.executable, "-c", _COLD_CHILD, str(ROOT / "tests")],
        env=env, capture_output=True, text=True, timeout=3500, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["interpreted"] and got["answered"] < 20, got
    assert got["compiled"] and got["same"], got
    log = out.stderr
    assert "compiling them in a subprocess" in log and "bagging models" in log, log[-3000:]
    assert "native learners" not in log, log[-3000:]  # (the prototype's job was dropped)
    assert "compiled kernels took over from the interpreted ones" in log, log[-3000:]
