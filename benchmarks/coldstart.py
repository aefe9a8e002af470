"""Cold start: what the first answer costs on a fresh machine (empty numba cache).

Each measurement runs in a fresh subprocess whose ``NUMBA_CACHE_DIR`` is an empty temporary
directory (cold) or the directory a previous cold run filled (warm):

* ``engine``: time to ``import ensembles``, then the first ``predict_learn_one`` and the first
  ``predict_proba_one`` of every model kind (ensemble x learner), in a fixed order, so each row
  shows what that kind adds; and numba's own compile time per kernel (``numba:compile`` events).
* ``serve``: ``chorus serve`` on a free port with an empty store; time until ``/readyz`` is 200,
  until the first ``POST /learn`` + ``GET /predict`` of a new model are answered, and until the
  compiled kernels take over from the interpreted ones (``/readyz``'s ``engine``).
* ``restart`` (only with ``--only restart``): ``chorus serve`` on a store whose server was killed
  (SIGKILL) after ``--rows`` examples, so recovery loads a snapshot and replays the log past it
  (an upgrade or a fresh container meeting a crashed store); time until ready, the recovered
  model's first answers, and until the compiled kernels take over.

Run: ``nice -n 10 python benchmarks/coldstart.py`` (a few minutes on 2 cores; ``--only serve``
or ``--only engine`` for one part). Prints tables in Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from app.testing import free_port as _free_port

ROOT = Path(__file__).resolve().parent.parent

KINDS = [
    (e, learner)
    for e in ("bagging", "boosting", "single")
    for learner in ("hoeffding_tree", "naive_bayes", "stump")
]

_ENGINE_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from numba.core import event
compiles = {}
class L(event.Listener):
    stack = []
    def on_start(self, ev):
        self.stack.append(time.perf_counter())
    def on_end(self, ev):
        name = ev.data["dispatcher"].py_func.__qualname__
        compiles[name] = compiles.get(name, 0.0) + time.perf_counter() - self.stack.pop()
event.register("numba:compile", L())
import ensembles
rows = {"import": time.perf_counter() - t0}
x = {"a": 1.5, "b": "u"}
for e, learner in json.loads(sys.argv[1]):
    model = ensembles.build_model({"ensemble": e, "learner": learner, "n_models": 1 if e == "single" else 3, "seed": 1})
    t = time.perf_counter()
    model.predict_learn_one(x, "y")
    t1 = time.perf_counter()
    model.predict_proba_one(x)
    rows[f"{e}:{learner}"] = (t1 - t, time.perf_counter() - t1)
print(json.dumps({"rows": rows, "compiles": compiles}))
"""


EXTRA_ENV: dict[str, str] = {}  # e.g. NUMBA_OPT from --numba-opt


def _env(cache: str) -> dict:
    return dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(ROOT), **EXTRA_ENV)


def engine(cache: str) -> dict:
    """One engine child process on ``cache``; returns its timings."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _ENGINE_CHILD, json.dumps(KINDS)],
        env=_env(cache),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["total"] = time.perf_counter() - t0
    return res


def _call(url: str, body: dict | None = None, timeout: float = 120.0) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {}


# ``--model`` of the ``serve`` part: the model the first requests create (``params`` of its spec)
MODELS: dict[str, dict[str, Any]] = {
    "bagging": {"ensemble": "bagging", "learner": "hoeffding_tree"},
    "adwin-bagging": {"ensemble": "bagging", "learner": "hoeffding_tree",
                      "params": {"drift": "adwin"}},
    "mlp-bagging": {"ensemble": "bagging", "learner": "mlp"},
    "adwin-boosting": {"ensemble": "boosting", "learner": "hoeffding_tree",
                       "params": {"drift": "adwin"}},
}  # fmt: skip


def _first_answer(base: str, name: str, i: int) -> float:
    """Seconds of one ``POST /learn`` and one ``GET /predict`` of model ``name``."""
    t = time.perf_counter()
    body = {"model": name, "features": {"a": i, "b": "uv"[i % 2]}, "label": "yn"[i % 2]}
    _call(base + "/learn", body, timeout=300)
    with urllib.request.urlopen(f"{base}/predict?model={name}&a={i}&b=v", timeout=300) as r:
        r.read()
    return time.perf_counter() - t


def serve(cache: str, model: str = "bagging") -> dict:
    """``chorus serve`` on an empty store; seconds from launch to ready and to first answers.

    ``first learn`` / ``first predict``: the first requests of a new model of kind ``model``
    (``MODELS``), answered by the interpreted kernels when the cache is cold;
    ``first answer, compiled``: its first learn + predict once the compiled kernels are in use
    (a kernel left out of the warm-up compiles, or loads from the cache, in this request)."""
    data = tempfile.mkdtemp(prefix="chorus-cold-data-")
    proc, base, t0 = _start(cache, data)
    res: dict[str, float] = {}
    try:
        _wait_ready(proc, base, t0, res)
        spec = {"name": "m", "n_models": 10, "seed": 1, **MODELS[model]}
        _call(base + "/models", spec)
        status, _ = _call(
            base + "/learn", {"model": "m", "features": {"a": 1, "b": "u"}, "label": "y"}
        )
        res["first learn"] = time.perf_counter() - t0
        with urllib.request.urlopen(base + "/predict?model=m&a=2&b=v", timeout=120) as r:
            r.read()
        res["first predict"] = time.perf_counter() - t0
        _until_compiled(base, t0, res)
        _call(base + "/models", dict(spec, name="m2"))
        res["first answer, compiled"] = _first_answer(base, "m2", 1)
        res["second answer, compiled"] = _first_answer(base, "m2", 2)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)
    return res


def _wait_ready(proc: subprocess.Popen, base: str, t0: float, res: dict[str, float]) -> None:
    """Poll ``/readyz`` until 200, noting ``listening`` and ``ready`` (seconds after ``t0``)."""
    while True:
        try:
            status, _ = _call(base + "/readyz", timeout=1.0)
            if "listening" not in res:
                res["listening"] = time.perf_counter() - t0
            if status == 200:
                res["ready"] = time.perf_counter() - t0
                return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if proc.poll() is not None or time.perf_counter() - t0 > 300:
            raise RuntimeError("server did not become ready")
        time.sleep(0.05)


def _until_compiled(base: str, t0: float, res: dict[str, float]) -> None:
    """Poll ``/readyz`` until its engine is not the interpreted one (at most 600 s after ``t0``),
    noting ``compiled kernels in use``."""
    while time.perf_counter() - t0 < 600:
        _, body = _call(base + "/readyz", timeout=5.0)
        if body.get("engine") != "interpreted":
            res["compiled kernels in use"] = time.perf_counter() - t0
            return
        time.sleep(0.2)


def _start(cache: str | None, data: str) -> tuple[subprocess.Popen, str, float]:
    port = _free_port()
    env = _env(cache) if cache is not None else dict(os.environ, PYTHONPATH=str(ROOT))
    env["CHORUS_DATA_DIR"] = data
    env.pop("CHORUS_REDIS_URL", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    return proc, f"http://127.0.0.1:{port}", t0


def crashed_store(rows: int) -> str:
    """A data directory whose server was killed (SIGKILL) after learning ``rows`` examples of an
    OzaBag(HT, 10) model (three numbers, a category of 3,000 values, three classes; 1,000 a
    request): its newest snapshot is at the last multiple of ``CHORUS_SNAPSHOT_EVERY`` (10,000),
    the rest is in the log. Made with this checkout's own numba cache (``chorus warmup``'s)."""
    import random

    data = tempfile.mkdtemp(prefix="chorus-crashed-")
    proc, base, t0 = _start(None, data)
    try:
        _wait_ready(proc, base, t0, {})
        _call(base + "/models", {"name": "m", "n_models": 10, "seed": 1, **MODELS["bagging"]})
        rng = random.Random(1)
        for _ in range(0, rows, 1000):
            ex = [{"features": {"a": rng.random(), "b": rng.random(), "c": rng.random(),
                                "z": str(rng.randrange(3000))}, "label": str(rng.randrange(3))}
                  for _ in range(1000)]  # fmt: skip
            status, _ = _call(base + "/learn", {"model": "m", "examples": ex}, timeout=300)
            if status != 200:
                raise RuntimeError(f"learn answered {status}")
    finally:
        proc.kill()
        proc.wait(30)
    return data


def restart(cache: str, store: str) -> dict:
    """``chorus serve`` on a copy of ``store`` (``crashed_store``): seconds from launch to ready
    (every model recovered: snapshot loaded, log replayed), to the first predict and learn of
    the recovered model, and until the compiled kernels are in use."""
    data = tempfile.mkdtemp(prefix="chorus-restart-")
    shutil.copytree(store, data, dirs_exist_ok=True)
    proc, base, t0 = _start(cache, data)
    res: dict[str, float] = {}
    try:
        _wait_ready(proc, base, t0, res)
        with urllib.request.urlopen(base + "/predict?model=m&a=0.5&b=0.5&c=0.5&z=7",
                                    timeout=300) as r:  # fmt: skip
            r.read()
        res["first predict"] = time.perf_counter() - t0
        _call(base + "/learn", {"model": "m", "features": {"a": 0.1, "b": 0.2, "c": 0.3,
                                                          "z": "1"}, "label": "1"})  # fmt: skip
        res["first learn"] = time.perf_counter() - t0
        _until_compiled(base, t0, res)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)
    return res


def cold_then_warm(measure: Callable[[str], Any], runs: int = 2) -> tuple[Any, ...]:
    """``measure`` run on a fresh numba cache directory, then again on the cache it filled
    (``runs`` times in all)."""
    cache = tempfile.mkdtemp(prefix="numba-cold-")
    try:
        return tuple(measure(cache) for _ in range(runs))
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def after_cli_warmup(measure: Callable[[str], Any]) -> Any:
    """``measure`` run on a numba cache directory filled by ``chorus warmup`` alone (what the
    Docker image ships)."""
    cache = tempfile.mkdtemp(prefix="numba-warmup-")
    try:
        subprocess.run([sys.executable, "-m", "app.cli", "warmup"], env=_env(cache), cwd=ROOT,
                       check=True, capture_output=True)  # fmt: skip
        return measure(cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def table(title: str, *columns: str) -> None:
    """Print a markdown section title and the head of its table."""
    print(f"{title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--only",
        choices=["engine", "serve", "restart"],
        default=None,
        help="one part (default: engine and serve; restart only when named)",
    )
    ap.add_argument("--rows", type=int, default=35_000,
                    help="restart part: examples learned before the crash (35000: 5,000 in the "
                    "log past the last snapshot)")  # fmt: skip
    ap.add_argument("--model", choices=sorted(MODELS), default="bagging",
                    help="the model the serve part's first requests create")  # fmt: skip
    ap.add_argument("--cache", choices=["cold-then-warm", "cli-warmup"], default="cold-then-warm",
                    help="serve part: the second run on the cache the first filled, or on one "
                    "filled by `chorus warmup` alone")  # fmt: skip
    ap.add_argument("--numba-opt", choices=["0", "1", "2", "3"], default=None,
                    help="NUMBA_OPT of the measured processes (numba's default: 3)")  # fmt: skip
    args = ap.parse_args()
    if args.numba_opt is not None:
        EXTRA_ENV["NUMBA_OPT"] = args.numba_opt
        print(f"NUMBA_OPT={args.numba_opt}\n")
    if args.only in (None, "engine"):
        cold, warm = cold_then_warm(engine)
        table("## Engine, one process per column (seconds)", "step", "cold cache", "warm cache")
        print(f"| import ensembles | {cold['rows']['import']:.2f} | {warm['rows']['import']:.2f} |")
        for e, learner in KINDS:
            k = f"{e}:{learner}"
            c, w = cold["rows"][k], warm["rows"][k]
            print(f"| first learn, then predict: {k} | {c[0]:.2f} + {c[1]:.2f} "
                  f"| {w[0]:.2f} + {w[1]:.2f} |")  # fmt: skip
        print(f"| whole process | {cold['total']:.2f} | {warm['total']:.2f} |")
        table("\n## numba compile time per kernel, cold cache (seconds, >= 0.05 s)", "kernel",
              "compile s")  # fmt: skip
        for name, s in sorted(cold["compiles"].items(), key=lambda kv: -kv[1]):
            if s >= 0.05:
                print(f"| {name} | {s:.2f} |")
        print(f"| total (inclusive of nested) | {sum(cold['compiles'].values()):.2f} |")
    if args.only in (None, "serve"):
        if args.cache == "cold-then-warm":
            cold, warm = cold_then_warm(partial(serve, model=args.model))
            heads = ("cold numba cache", "warm numba cache")
        else:
            cold = cold_then_warm(partial(serve, model=args.model), runs=1)[0]
            warm = after_cli_warmup(partial(serve, model=args.model))
            heads = ("cold numba cache", "cache of `chorus warmup`")
        table(f"\n## `chorus serve` on an empty store, a new {args.model} model, seconds after "
              "launch", "event", *heads)  # fmt: skip
        for k in ("listening", "ready", "first learn", "first predict", "compiled kernels in use"):
            print(f"| {k} | {cold.get(k, float('nan')):.2f} | {warm.get(k, float('nan')):.2f} |")
        for k in ("first answer, compiled", "second answer, compiled"):
            print(f"| {k} (learn + predict, seconds it took) | {cold.get(k, float('nan')):.2f} | "
                  f"{warm.get(k, float('nan')):.2f} |")  # fmt: skip

    if args.only == "restart":
        store = crashed_store(args.rows)
        try:
            cold, warm = cold_then_warm(partial(restart, store=store))
        finally:
            shutil.rmtree(store, ignore_errors=True)
        table(f"\n## `chorus serve` after a crash: OzaBag(HT, 10), {args.rows:,} examples learned, "
              "seconds after launch", "event", "cold numba cache", "warm numba cache")  # fmt: skip
        for k in ("listening", "ready", "first predict", "first learn", "compiled kernels in use"):
            print(f"| {k} | {cold.get(k, float('nan')):.2f} | {warm.get(k, float('nan')):.2f} |")


if __name__ == "__main__":
    main()
