"""Start-up compilation: ``/readyz`` says what is being compiled until the kernels are ready."""

from __future__ import annotations

import threading
import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import app.main
import app.warmup
import ensembles
from app.main import create_app
from app.settings import Settings
from app.warmup import parse_kinds


def test_parse_kinds():
    assert parse_kinds("all") == ["bagging", "boosting", "single", "arf", "srp"]
    assert parse_kinds(" none ") == [] and parse_kinds("") == []
    assert parse_kinds("boosting, bagging,boosting") == ["boosting", "bagging"]
    with pytest.raises(ValueError, match="unknown ensemble kind 'forest'.*bagging, boosting"):
        parse_kinds("bagging,forest")
    with pytest.raises(ValueError, match="warmup"):
        Settings(warmup="forest")


def test_every_kind_is_known_where_the_service_names_kinds():
    """The kinds of ``ensembles.spec.ENSEMBLES`` are those the warm-up, replay and the create
    route accept (each keeps its own tuple: app.warmup imports no numba at start)."""
    from typing import get_args

    from app.replay import ENSEMBLES as REPLAY
    from app.routes.schemas import ModelCreate
    from ensembles.spec import ENSEMBLES

    kinds = set(ENSEMBLES)
    assert set(app.warmup.ENSEMBLES) == kinds == set(REPLAY)
    assert set(get_args(ModelCreate.model_fields["ensemble"].annotation)) == kinds


def test_readyz_503_while_compiling(tmp_path, monkeypatch, caplog):
    release = threading.Event()
    warmed: list[str] = []

    def slow_warm(kind: str) -> None:
        assert release.wait(30)
        warmed.append(kind)

    monkeypatch.setattr(app.warmup, "warm_all", slow_warm)
    monkeypatch.setattr(app.main, "WARMUP_WAIT", 0.01)
    monkeypatch.setattr(ensembles, "kernels_cached", lambda kind: True)  # the cached-kernel path
    caplog.set_level("INFO", logger="chorus")
    settings = Settings(data_dir=tmp_path / "d", warmup="single,bagging")
    with TestClient(create_app(settings)) as client:
        r = client.get("/readyz")
        assert r.status_code == 503
        assert r.json()["detail"].startswith("loading engine kernels: single (1/2")
        assert client.get("/healthz").status_code == 200
        release.set()
        for _ in range(500):
            if client.get("/readyz").status_code == 200:
                break
            release.wait(0.01)
        assert client.get("/readyz").json() == {"status": "ready", "engine": "compiled"}
    assert warmed == ["single", "bagging"]
    assert "loading engine kernels for single models (1/2)" in caplog.text


def test_stored_models_kinds_are_warmed(tmp_path, monkeypatch):
    settings = Settings(data_dir=tmp_path / "d", warmup="none")
    with TestClient(create_app(settings)) as client:
        spec = {"name": "b", "ensemble": "boosting", "learner": "stump", "n_models": 2}
        assert client.post("/models", json=spec).status_code == 201
    warmed: list[str] = []
    monkeypatch.setattr(app.warmup, "warm_all", warmed.append)
    with TestClient(create_app(settings)) as client:
        assert client.get("/readyz").status_code == 200
    assert warmed == ["boosting"]


# Kernels a process has compiled or loaded so far: signatures per numba dispatcher of the kernel
# modules (child scripts' ``loaded()``).
_LOADED = """
def loaded():
    out = {}
    for name in jit.KERNEL_MODULES:
        for key, obj in vars(sys.modules[name]).items():
            if isinstance(obj, CPUDispatcher):
                out[f"{name}.{key}"] = len(obj.signatures)
    return out
"""

# A fresh process serves the first requests of models of every kernel family after the start-up
# warm-up; it prints the kernels that compiled (or loaded from numba's cache) during those
# requests, which a complete warm-up leaves none of.
_FIRST_REQUESTS = r"""
import json, sys, tempfile, time, warnings
from pathlib import Path
warnings.simplefilter("ignore")
from fastapi.testclient import TestClient
from numba.core.registry import CPUDispatcher
from app.main import create_app
from app.settings import Settings
from learners import jit

{LOADED}
specs = json.loads(sys.argv[1])
settings = Settings(data_dir=Path(tempfile.mkdtemp()) / "d", warmup=",".join(
    dict.fromkeys(s["ensemble"] for s in specs)))
with TestClient(create_app(settings)) as client:
    for _ in range(3000):  # a cold cache: the kernels compile in a subprocess first
        if client.get("/readyz").json().get("engine") == "compiled":
            break
        time.sleep(0.1)
    before = loaded()
    for i, spec in enumerate(specs):
        name = f"m{i}"
        assert client.post("/models", json={"name": name, **spec}).status_code == 201
        for j in range(3):
            r = client.post("/learn", json={"model": name, "features": {"a": j, "b": "uv"[j % 2]},
                                            "label": "yn"[j % 2]})
            assert r.status_code == 200, r.text
        assert client.get(f"/predict?model={name}&a=1&b=u").status_code == 200
        assert client.get(f"/models/{name}").status_code == 200
        assert client.get(f"/models/{name}/metrics").status_code == 200
    assert client.get("/metrics").status_code == 200
    after = loaded()
print(json.dumps(sorted(k for k in after if after[k] > before.get(k, 0))))
""".replace("{LOADED}", _LOADED)

FIRST_REQUEST_MODELS = [
    {"ensemble": "bagging", "learner": "hoeffding_tree"},
    {"ensemble": "bagging", "learner": "hoeffding_tree", "params": {"drift": "adwin"}},
    {"ensemble": "bagging", "learner": "naive_bayes",
     "params": {"drift": "ddm", "poisson_lambda": 6.0, "vote": "weighted"}},
    {"ensemble": "bagging", "learner": "mlp"},
    {"ensemble": "boosting", "learner": "hoeffding_tree"},
    {"ensemble": "boosting", "learner": "stump", "params": {"drift": "adwin"}},
    {"ensemble": "boosting", "learner": "mlp"},
    {"ensemble": "bagging", "learner": "hoeffding_tree",
     "params": {"drift": "adwin", "poisson_lambda": 6.0, "output_codes": True}},
    {"ensemble": "boosting", "learner": "hoeffding_tree", "params": {"lambda_rule": "moa"}},
    {"ensemble": "boosting", "learner": "mlp", "params": {"lambda_rule": "moa"}},
]  # fmt: skip


def test_first_requests_compile_nothing_after_the_warm_up():
    """After the start-up warm-up of their kinds, the first requests (learn, predict, describe,
    metrics, Prometheus) of ADWIN / DDM / leveraging bagging, ADWIN boosting, MLP and plain
    models run only kernels the warm-up loaded: none compiles or loads in a request."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_REQUESTS, json.dumps(FIRST_REQUEST_MODELS)],
        env=dict(os.environ, PYTHONPATH=str(root)), cwd=root, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    cold = json.loads(out.stdout.strip().splitlines()[-1])
    assert cold == [], f"kernels left out of the warm-up: {cold}"


def test_readiness_waits_for_every_kernel_a_kind_may_run():
    """``kernels_cached`` (what start-up and ``/readyz`` check) covers the drift-adaptive, MLP
    and member-parallel kernels as well as the kind's own: a cache holding only the serial ones
    must not count as warm, or the first batch under CHORUS_THREADS > 1 compiles in the server."""
    from ensembles._adaptive import adaptive_run_io, boosting_adaptive_run_io
    from ensembles._kernels import bagging_members, bagging_run_io, bagging_votes, make_room
    from ensembles.spec import run_kernels
    from learners.compiled import make_run_io
    from learners.mlp import mlp_run

    bagging = set(run_kernels("bagging"))
    assert {bagging_run_io, adaptive_run_io, make_run_io} <= bagging  # (what the bank calls)
    assert {bagging_members, make_room, bagging_votes, mlp_run} <= bagging
    assert {boosting_adaptive_run_io, mlp_run} <= set(run_kernels("boosting"))


# A restart on an empty numba cache (a new version, a fresh container) after a crash: recovery
# loads each snapshot and replays the log past it. It must run on the interpreted kernels, so
# that nothing compiles in the server's process before it is ready (it took a minute: the load
# checks' kernels, then the replay's run kernel). The child patches the warm-up's compile
# subprocess (learners.jit's) to never finish, so the compiled kernels cannot take over meanwhile.
_RESTART_COLD = r"""
import json, sys, threading, time, warnings
from pathlib import Path
warnings.simplefilter("ignore")
from fastapi.testclient import TestClient
from numba.core.registry import CPUDispatcher
import app.warmup
from app.main import create_app
from app.settings import Settings
from learners import jit

def never(module, args, what):
    threading.Event().wait()
    return 0, ""

jit._subprocess = never

{LOADED}
probes = json.loads(sys.argv[2])
settings = Settings(data_dir=Path(sys.argv[1]), warmup="none")
with TestClient(create_app(settings)) as client:
    for _ in range(600):
        r = client.get("/readyz")
        if r.status_code == 200:
            break
        time.sleep(0.1)
    ready = r.json()
    seen = {m: client.get(f"/models/{m}").json()["n_seen"] for m in ("bag", "boost")}
    answers = [client.get("/predict", params={"model": m, **p}).json()["probabilities"]
               for m in ("bag", "boost") for p in probes]
    compiled = sorted(k for k, n in loaded().items() if n)
print(json.dumps({"ready": ready, "seen": seen, "answers": answers, "compiled": compiled}))
""".replace("{LOADED}", _LOADED)


def test_recovery_on_a_cold_cache_compiles_nothing_in_the_server(tmp_path):
    """A server killed after learning (snapshots every 100 examples, 50 more in the log), then
    started on an empty numba cache: ready with the interpreted kernels, every acknowledged
    example recovered, answers bit for bit those of the server before the crash, and no kernel
    compiled (or loaded) in its process."""
    import json
    import os
    import random
    import subprocess
    import sys
    from pathlib import Path

    import httpx

    from app.testing import ChorusServer

    root = Path(__file__).resolve().parents[1]
    data = tmp_path / "data"
    server = ChorusServer({"CHORUS_DATA_DIR": str(data), "CHORUS_SNAPSHOT_EVERY": "100",
                           "CHORUS_SNAPSHOT_INTERVAL": "3600", "CHORUS_WARMUP": "none"})  # fmt: skip
    rng = random.Random(7)
    probes = [{"a": str(rng.random()), "c": rng.choice("pqr")} for _ in range(4)]
    specs = {"bag": {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3,
                     "seed": 1, "params": {"grace_period": 20}},
             "boost": {"ensemble": "boosting", "learner": "naive_bayes", "n_models": 3,
                       "seed": 2, "params": {"drift": "adwin"}}}  # fmt: skip
    server.start(timeout=300)
    try:
        with httpx.Client(base_url=server.url, trust_env=False, timeout=300) as c:
            for name, spec in specs.items():
                assert c.post("/models", json={"name": name, **spec}).status_code == 201
                for _ in range(5):
                    ex = [{"features": {"a": rng.gauss(0, 1), "c": rng.choice("pqr")},
                           "label": rng.choice("xyz")} for _ in range(50)]  # fmt: skip
                    r = c.post("/learn", json={"model": name, "examples": ex})
                    assert r.status_code == 200, r.text
            before = [c.get("/predict", params={"model": m, **p}).json()["probabilities"]
                      for m in specs for p in probes]  # fmt: skip
        server.kill9()
    finally:
        server.stop()
    cache = tmp_path / "empty-numba-cache"
    cache.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", _RESTART_COLD, str(data), json.dumps(probes)],
        env=dict(os.environ, PYTHONPATH=str(root), NUMBA_CACHE_DIR=str(cache)), cwd=root,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ready"] == {"status": "ready", "engine": "interpreted"}
    assert got["seen"] == {"bag": 250, "boost": 250}
    assert got["answers"] == before
    assert got["compiled"] == [], f"compiled in the server's process: {got['compiled']}"


def test_readyz_and_the_log_say_how_far_recovery_is(tmp_path, monkeypatch, caplog):
    """A start-up that replays a long log answers ``/readyz`` 503 with the model it is on and the
    entries replayed so far, and logs each model's recovery (snapshot, entries, seconds)."""
    import asyncio

    from app.registry import Registry
    from app.stores import make_store

    settings = Settings(data_dir=tmp_path / "d", warmup="none", startup_timeout=0.0)
    with TestClient(create_app(settings)) as client:
        for name in ("a", "b"):
            spec = {"name": name, "ensemble": "bagging", "learner": "naive_bayes", "n_models": 2}
            assert client.post("/models", json=spec).status_code == 201
        for k in range(0, 2500, 500):  # (at most 1,000 examples a request)
            ex = [{"features": {"x": i % 7}, "label": "yn"[i % 2]} for i in range(k, k + 500)]
            assert client.post("/learn", json={"model": "b", "examples": ex}).status_code == 200

        async def crash(self, force=False):  # the shutdown's snapshots: as if killed
            return 0

        monkeypatch.setattr(Registry, "snapshot_all", crash)
    store = make_store(settings)
    read, reads, release = store.read, [], threading.Event()

    async def slow_read(name, after_seq, limit=1000):
        reads.append((name, after_seq))
        if name == "b" and after_seq >= 1000:  # hold the replay after its first chunk
            await asyncio.to_thread(release.wait, 30)
        return await read(name, after_seq, limit)

    store.read = slow_read
    caplog.set_level("INFO", logger="chorus.registry")
    with TestClient(create_app(settings, store)) as client:
        r = client.get("/readyz")
        assert r.status_code == 503
        assert r.json()["detail"] == (
            "recovering models from the store: model 2 of 2 (b: 1,000 log entries replayed)"
        )
        release.set()
        for _ in range(500):
            if client.get("/readyz").status_code == 200:
                break
            release.wait(0.01)
        assert client.get("/models/b").json()["n_seen"] == 2500
    assert "model a: no snapshot, 0 log entries replayed" in caplog.text
    assert "model b: no snapshot, 2500 log entries replayed in" in caplog.text


def test_a_python_user_is_told_once_that_the_first_call_compiles(tmp_path):
    """With ``CHORUS_COMPILE=block``, on an empty numba cache, building a model logs (once per
    run kernel and process) that its first call compiles and that ``chorus warmup`` does it
    ahead; a second model of the same kind says nothing more, nor does one built by the
    warm-up (``compiling_on_purpose``).
    Nothing is learned, so the child compiles only what building a model does."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "from ensembles import OnlineBagging, OnlineBoosting, Single, compiling_on_purpose\n"
        "from learners import NaiveBayes\n"
        "with compiling_on_purpose():\n"  # (the warm-up: silent)
        "    Single(NaiveBayes())\n"
        "OnlineBagging(NaiveBayes(), n_models=2); OnlineBagging(NaiveBayes(), n_models=3)\n"
        "OnlineBoosting(NaiveBayes(), n_models=2)\n"
    )
    cache = tmp_path / "empty-numba-cache"
    cache.mkdir()
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                         text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(root), NUMBA_CACHE_DIR=str(cache),
                                  CHORUS_COMPILE="block"))  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [ln for ln in out.stderr.splitlines() if "compiling the engine's kernels" in ln]
    assert len(lines) == 2, out.stderr[-2000:]  # bagging's run kernel, then boosting's
    assert all("chorus warmup" in ln for ln in lines)
    assert "bagging" in lines[0] and "boosting" in lines[1]


def test_the_warm_up_compiles_in_its_own_processes(monkeypatch):
    """``chorus warmup`` and the server's compile job must fill numba's cache before they exit:
    the tiny models ``warm_spec`` builds (within ``compiling_on_purpose``) compile their
    kernels in the process that trains them, whatever the compile mode. With the first-learn
    default (a job elsewhere per cold model, interpreted twins meanwhile) a cold
    ``chorus warmup`` returned before the cache was filled."""
    from ensembles.warm import warm_spec
    from learners import jit

    monkeypatch.setattr(jit, "ready", lambda fn: False)  # as on an empty numba cache
    job = jit.CompileJob(key="test", what="test", module="test", args=())
    for mode in ("subprocess", "thread"):
        jit.set_compile_mode(mode)
        try:
            with jit.compiling_on_purpose():
                assert jit.compile_elsewhere(job) is None
            model = warm_spec({"ensemble": "bagging", "learner": "hoeffding_tree"}, n=40)
            assert model.n_seen > 0
            assert not jit.compiling() and not jit.MODE.interpreted  # no job was started
        finally:
            jit.cancel_compile(job.key)
            jit.set_compile_mode("block")  # (the suite's: conftest.py)
