"""Compile the engine's kernels before the first request needs them (``chorus serve``, ``chorus
warmup``).

numba compiles a kernel the first time it runs and caches the machine code on disk
(``NUMBA_CACHE_DIR``, default ``__pycache__`` next to the sources). The native learners share one
run kernel per ensemble kind (``bagging``, ``boosting``, ``single``, ``arf``, ``srp``; the learner and its options
are runtime parameters), so warming a kind with one native learner covers every native learner
under it. Two more kernels per kind are not that one (``ensembles.spec.run_kernels``): the
adaptive kernel of the drift options (``drift="adwin"`` / ``"ddm"``, leveraging bagging, the
weighted vote, a window) and the MLP learner's own; warming a kind trains a tiny model of each
(``warm_all``). On a fresh cache this takes tens of seconds per kind
(``benchmarks/coldstart.py``); from the cache, well under one. Meanwhile requests are answered by
the kernels' interpreted twins (``learners.jit``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("chorus")

ENSEMBLES = ("bagging", "boosting", "single", "arf", "srp")  # (ensembles.spec.ENSEMBLES)
TREES_ONLY = ("arf", "srp")  # kinds whose members are Hoeffding trees only
LEARNERS = ("hoeffding_tree", "naive_bayes", "stump", "mlp")
# the learners whose kernels differ: one native learner (they share the ensemble's) and the MLP
KERNEL_LEARNERS = ("hoeffding_tree", "mlp")
# per kind, the ensemble options that run a kernel of their own (a native learner's only)
ADAPTIVE = {
    "bagging": {"drift": "adwin", "vote": "stacking"},
    "boosting": {"drift": "adwin", "vote": "stacking"},
}  # (and the stacked vote's getters)


def parse_kinds(text: str) -> list[str]:
    """The ensemble kinds named by ``CHORUS_WARMUP``.

    Parameters
    ----------
    text
        Comma-separated ensemble kinds (``bagging``, ``boosting``, ``single``, ``arf``,
        ``srp``), ``all`` or
        ``none`` (also empty).

    Returns
    -------
    list of str
        The kinds, in the order given, without repeats.

    Raises
    ------
    ValueError
        For a name that is not a kind, naming the valid choices.
    """
    text = text.strip().lower()
    if text == "all":
        return list(ENSEMBLES)
    if text in ("", "none"):
        return []
    kinds: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if part not in ENSEMBLES:
            raise ValueError(
                f"warmup: unknown ensemble kind {part!r}; choose from "
                f"{', '.join(ENSEMBLES)}, 'all' or 'none'"
            )
        if part not in kinds:
            kinds.append(part)
    return kinds


def warm_kind(ensemble: str, learner: str = "hoeffding_tree", n: int = 120,
              variants: tuple[int, ...] = (0, 1)) -> None:  # fmt: skip
    """Compile (or load from the cache) what a model of this kind runs in the service.

    Trains a tiny model one example at a time and in a batch, predicts, describes it and reloads
    its state, so the run kernel, the state loader and what ``GET /models/{name}`` computes are
    compiled; with a native learner, the same again with the kind's adaptive options
    (``ADAPTIVE``).

    Parameters
    ----------
    ensemble, learner
        The kind (``ensembles.build_model`` names).
    n
        Examples (enough for a Hoeffding tree with ``grace_period=50`` to split).
    variants
        Which of the two models: 0 the kind's plain one, 1 the one with its adaptive options
        (``warm_jobs`` runs them in different processes).
    """
    from ensembles.warm import warm_spec
    from learners import NativeLearner

    params = {"grace_period": 50} if learner == "hoeffding_tree" else {}
    for v in variants:
        if v == 1 and not (ensemble in ADAPTIVE and learner not in ("mlp",)):
            continue  # the adaptive options need a native learner
        variant = {**params, **ADAPTIVE[ensemble]} if v == 1 else params
        spec = {"ensemble": ensemble, "learner": learner,
                "n_models": 1 if ensemble == "single" else 3, "seed": 1, "params": variant}  # fmt: skip
        # (threads=2: the member-parallel batch kernels, CHORUS_THREADS > 1)
        model = warm_spec(spec, threads=2, n=n)
        if not isinstance(model.learner, NativeLearner):
            break  # the adaptive options need a native learner


def warm_all(ensemble: str) -> None:
    """Warm every kernel a model of kind ``ensemble`` may run: one native learner's (with the
    adaptive options) and the MLP's (``KERNEL_LEARNERS``)."""
    for learner in ("hoeffding_tree",) if ensemble in TREES_ONLY else KERNEL_LEARNERS:
        warm_kind(ensemble, learner)


# ------------------------------------------------------------------ compiling in parallel
# A cold warm-up is numba compiling kernels, one core's work at a time. The models it trains
# (``jobs``: per kind, the native learner's plain and adaptive models and the MLP's) run mostly
# different top-level kernels, so ``warm_jobs`` trains them in ``CHORUS_WARMUP_JOBS`` processes
# (default: the cores, at most 2). The kernels they share (a tree's learn and predict, the state
# loader) must not compile twice: each process compiles a kernel of ours holding a file lock
# named after it (``locked_compiles``), and a process that waited finds it in numba's cache.
# Locks are taken in call order (a caller's, then its callees'), and kernels do not recurse, so
# two processes cannot wait for each other.


def jobs(kinds: Iterable[str], learners: Iterable[str] | None = None) -> list[tuple[str, str, int]]:
    """The models ``warm_all`` trains for ``kinds`` (or, with ``learners``, ``warm_kind`` for
    each of those learners), as ``(kind, learner, variant)``: the plain native models first
    (they compile the tree kernels every model shares), then the MLP's (which share none, so a
    second process has work at once), then the adaptive ones (which find the tree kernels in
    the cache by then)."""
    out: list[tuple[str, str, int]] = []
    for kind in kinds:
        names = learners if learners is not None else KERNEL_LEARNERS
        for learner in ("hoeffding_tree",) if kind in TREES_ONLY else names:
            for v in (0, 1) if kind in ADAPTIVE and learner != "mlp" else (0,):
                out.append((kind, learner, v))
    order = {"hoeffding_tree": 0, "mlp": 1}
    return sorted(out, key=lambda j: (j[2], order.get(j[1], 2)))  # (stable)


def warm_processes() -> int:
    """``CHORUS_WARMUP_JOBS``, else the cores (at most 2: numba's compiler holds ~1 GB each)."""
    text = os.environ.get("CHORUS_WARMUP_JOBS", "")
    if text.strip():
        return max(1, int(text))
    return max(1, min(2, len(os.sched_getaffinity(0))))


def warm_jobs(todo: list[tuple[str, str, int]], processes: int | None = None) -> None:
    """Train the models of ``todo`` (``jobs``) in ``processes`` subprocesses at a time
    (``warm_processes``), sharing what they compile through numba's cache; in this process when
    one. Raises ``RuntimeError`` naming the jobs that failed."""
    processes = warm_processes() if processes is None else processes
    if processes <= 1 or len(todo) <= 1:
        for kind, learner, v in todo:
            warm_kind(kind, learner, variants=(v,))
        return
    import subprocess
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    with tempfile.TemporaryDirectory(prefix="chorus-warmup-") as locks:
        env = dict(os.environ, CHORUS_WARMUP_LOCKS=locks)

        def run(job: tuple[str, str, int]) -> int:
            argv = [sys.executable, "-m", "app.warmup", "--job", ":".join(map(str, job))]
            return subprocess.run(argv, env=env, stdout=subprocess.DEVNULL).returncode

        with ThreadPoolExecutor(processes) as pool:
            codes = list(pool.map(run, todo))
    failed = [":".join(map(str, j)) for j, rc in zip(todo, codes, strict=True) if rc]
    if failed:
        raise RuntimeError(f"warm-up failed for {', '.join(failed)}")


def locked_compiles(directory: str) -> None:
    """From now on this process compiles each kernel of the kernel modules holding an exclusive
    file lock in ``directory`` named after it (see the comment above ``jobs``)."""
    import fcntl

    from numba.core.dispatcher import Dispatcher

    from learners.jit import KERNEL_MODULES

    compile_ = Dispatcher.compile
    held: set[str] = set()  # this process's (a lock is not re-entrant across file objects)

    def compile(self: Dispatcher, sig: Any) -> Any:
        func = self.py_func
        name = f"{func.__module__}.{func.__qualname__}"
        if func.__module__ not in KERNEL_MODULES or "<" in name or name in held:
            return compile_(self, sig)
        with open(Path(directory) / f"{name}.lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            held.add(name)
            try:
                return compile_(self, sig)  # (loads from the cache what another compiled)
            finally:
                held.discard(name)
                fcntl.flock(fh, fcntl.LOCK_UN)

    Dispatcher.compile = compile  # type: ignore[method-assign]


@dataclass
class Warmup:
    """Progress of the start-up compilation, as ``/readyz`` reports it."""

    kinds: list[str] = field(default_factory=list)
    done: int = 0
    finished: bool = False
    interpreted: bool = False  # answering from the interpreted kernels while they compile
    seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    task: asyncio.Task | None = field(default=None, repr=False)  # what start() began
    job_key: str = ""  # its job of learners.jit.compile_elsewhere, if any

    def status(self) -> str:
        """One line for ``/readyz`` and the log."""
        if self.finished:
            return f"engine kernels ready ({len(self.kinds)} kind(s), {self.seconds:.1f} s)"
        if self.interpreted:
            return (
                f"engine kernels compiling in a subprocess ({time.perf_counter() - self.started:.0f}"
                " s so far; cached for the next start): answering from the interpreted kernels"
            )
        current = self.kinds[self.done] if self.done < len(self.kinds) else "-"
        return (
            f"loading engine kernels: {current} ({self.done + 1}/{len(self.kinds)}, "
            f"{time.perf_counter() - self.started:.0f} s so far; cached for the next start)"
        )

    def start(self, kinds: Iterable[str]) -> asyncio.Task:
        """Begin warming ``kinds``; the server keeps answering meanwhile (a second call returns
        the task of the first: the kinds are those of the first call).

        From numba's cache the kernels load in a worker thread in well under a second, and
        ``/readyz`` is 503 until then. On a cold cache they compile in a subprocess (``python -m
        app.warmup``, on another core) while the interpreted twins of the same kernels
        (``learners.jit``: same arrays, same results, Python speed) answer; they take over
        before this returns, so what runs next in this process compiles nothing: start-up calls
        it before recovery, whose snapshot loads and log replays would otherwise compile their
        kernels here first (a minute after a crash). When the subprocess is done, the compiled
        kernels are loaded and take over, between two kernel calls.
        """
        if self.task is not None:
            return self.task
        from ensembles import kernels_cached
        from learners import jit

        self.kinds = list(dict.fromkeys(kinds))
        self.started = time.perf_counter()
        cold = [k for k in self.kinds if not kernels_cached(k)]
        job = None
        if cold:  # (learners.jit: the subprocess, the twins meanwhile, the switch; not with
            # CHORUS_COMPILE=block: then the kernels compile here, /readyz 503 until they do)
            self.job_key = "app.warmup:" + ",".join(cold)
            job = jit.compile_elsewhere(jit.CompileJob(
                key=self.job_key, what=f"{', '.join(cold)} models", module="app.warmup",
                args=tuple(cold), load=self._load))  # fmt: skip
            self.interpreted = job is not None
        self.task = asyncio.create_task(self._run(job))
        return self.task

    def _load(self) -> None:
        """Load (or compile) every kind's kernels, in a worker thread with compiled kernels."""
        for i, kind in enumerate(self.kinds):
            self.done = i
            log.info("loading engine kernels for %s models (%d/%d)", kind, i + 1, len(self.kinds))
            t = time.perf_counter()
            try:
                warm_all(kind)
            except Exception:  # noqa: BLE001 - a failed warm-up must not stop the service
                log.exception("warm-up of %s failed; its first request compiles instead", kind)
            self.seconds = time.perf_counter() - self.started
            log.info("%s kernels ready in %.1f s", kind, time.perf_counter() - t)

    async def _run(self, job: Any) -> None:
        from learners import jit

        try:
            if job is not None:
                await asyncio.wrap_future(job)
            else:
                await asyncio.to_thread(_compiled_here, self._load)
        except asyncio.CancelledError:
            jit.cancel_compile(self.job_key)  # (its subprocess stops with the server)
            raise
        except Exception:  # noqa: BLE001 - (logged by the job) the first requests compile
            pass
        self.interpreted = False
        self.done = len(self.kinds)
        self.finished = True
        log.info("%s", self.status())

    @property
    def engine(self) -> str:
        """``"interpreted"`` while the twins answer, else ``"compiled"``."""
        return "interpreted" if self.interpreted else "compiled"

    @property
    def serving(self) -> bool:
        """Whether requests can be answered: kernels loaded, or their interpreted twins in use."""
        return self.finished or self.interpreted


def _compiled_here(load: Any) -> None:
    from learners.jit import compiled_here

    with compiled_here():
        load()


if __name__ == "__main__":  # python -m app.warmup bagging boosting ... (compiles into the cache)
    if sys.argv[1:2] == ["--job"]:  # one of warm_jobs' processes
        if os.environ.get("CHORUS_WARMUP_LOCKS"):
            locked_compiles(os.environ["CHORUS_WARMUP_LOCKS"])
        kind, learner, variant = sys.argv[2].split(":")
        warm_kind(kind, learner, variants=(int(variant),))
    else:
        warm_jobs(jobs(sys.argv[1:]))
