"""What makes a cold compile cheaper changes no result: the heap sort of a list's pending items,
the optimisation level of nested compiles, the warm-up's jobs and their file locks."""

from __future__ import annotations

import os
import subprocess
import sys

import numba as nb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba.core import config, event

from app import warmup
from learners import jit
from learners.tree import rows


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), unique=True, max_size=40))
def test_order_of_is_argsort_of_distinct_keys(keys):
    a = np.array(keys, dtype=np.int64)
    expected = np.argsort(a)
    assert rows.order_of(a).tolist() == expected.tolist()
    assert jit.twin_of(rows.order_of)(a).tolist() == expected.tolist()


def test_cold_kernels_compile_at_cold_opt_and_the_level_is_restored():
    seen: dict[str, int] = {}

    class Spy(event.Listener):
        def on_start(self, ev: event.Event) -> None:  # (after learners.jit's: registered later)
            seen[ev.data["dispatcher"].py_func.__name__] = int(config.OPT)

        def on_end(self, ev: event.Event) -> None:
            pass

    @nb.njit
    def callee(x):
        return x + 1

    @nb.njit
    def caller(x):
        return callee(x) * 2

    @nb.njit
    def cold_callee(x):
        return x - 1

    @nb.njit
    def cold(x):
        return cold_callee(x) * 3

    jit.compiled_cold(cold)
    before = config.OPT
    spy = Spy()
    event.register("numba:compile", spy)
    try:
        assert caller(2) == 6 and cold(2) == 3
    finally:
        event.unregister("numba:compile", spy)
    assert config.OPT is before
    low = min(int(before), jit.COLD_OPT)
    assert seen == {"callee": min(int(before), jit.NESTED_OPT), "caller": int(before),
                    "cold_callee": low, "cold": low}  # fmt: skip


def test_jobs_cover_every_model_warm_all_trains():
    assert warmup.jobs(["bagging"]) == [
        ("bagging", "hoeffding_tree", 0),
        ("bagging", "mlp", 0),
        ("bagging", "hoeffding_tree", 1),
    ]
    assert warmup.jobs(["arf", "single"]) == [
        ("arf", "hoeffding_tree", 0),
        ("single", "hoeffding_tree", 0),
        ("single", "mlp", 0),
    ]
    everything = warmup.jobs(warmup.ENSEMBLES, warmup.LEARNERS)
    assert len({(k, learner) for k, learner, _ in everything}) == 14  # chorus warmup's kinds
    assert len(everything) == len(set(everything))


def test_warm_processes(monkeypatch):
    monkeypatch.setenv("CHORUS_WARMUP_JOBS", "3")
    assert warmup.warm_processes() == 3
    monkeypatch.setenv("CHORUS_WARMUP_JOBS", "0")
    assert warmup.warm_processes() == 1
    monkeypatch.delenv("CHORUS_WARMUP_JOBS")
    assert 1 <= warmup.warm_processes() <= 2


def test_a_failed_job_is_named(monkeypatch):
    with pytest.raises(RuntimeError, match="warm-up failed for nosuchkind:hoeffding_tree:0"):
        warmup.warm_jobs([("nosuchkind", "hoeffding_tree", 0), ("single", "nope", 0)], 2)


def test_locked_compiles_reenter_and_leave_a_lock_per_kernel(tmp_path):
    """A process holding a kernel's lock compiles the kernels it calls (their own locks; the
    same name again is not waited for), on an empty cache."""
    code = (
        "import sys\nfrom app.warmup import locked_compiles\nlocked_compiles(sys.argv[1])\n"
        "import numpy as np\nfrom learners.tree import rows\n"
        "print(rows.order_of(np.array([3, 1, 2])).tolist())"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[0] == "[1, 2, 0]"
    locks = sorted(p.name for p in tmp_path.glob("*.lock"))
    assert locks == ["learners.tree.rows.order_of.lock", "learners.tree.rows.sift_down.lock"]
