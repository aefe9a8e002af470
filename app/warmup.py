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
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
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


def warm_kind(ensemble: str, learner: str = "hoeffding_tree", n: int = 120) -> None:
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
    """
    from ensembles.warm import warm_spec
    from learners import NativeLearner

    params = {"grace_period": 50} if learner == "hoeffding_tree" else {}
    variants = [params, {**params, **ADAPTIVE.get(ensemble, {})}]
    for variant in variants[: 1 + (ensemble in ADAPTIVE)]:
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
    for name in sys.argv[1:]:
        warm_all(name)
