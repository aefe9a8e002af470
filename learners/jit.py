"""One compiled specialisation per kernel and argument *type* (compile-time control).

numba compiles a jitted function once per distinct argument-type tuple, and a constant passed by
a caller (``tree_proba(B, B, 0, ...)``, ``sort_to_leaf(..., True)``) is typed as a *literal*
(``Literal[int](0)``), which makes a separate specialisation of the callee and of its whole call
tree. Measured on the cold start of one bagged Hoeffding tree (benchmarks/coldstart.py) this
duplicated ~20 kernels and a third of the compile time, for no measurable speed: LLVM still
propagates constants after inlining. ``one_specialisation`` makes the kernels of a module type
their calls on the arguments' plain types.

Interpreted twins: ``twin(name)`` runs a kernel module's source again with ``njit`` as the
identity, so its kernels run in Python on the same arrays with the same results (tests check bit
for bit). ``set_interpreted(True)`` makes every kernel call (through ``kernel(fn)``) use them: a
server on a cold numba cache answers at once while the compiled kernels are built elsewhere.

Compiling elsewhere: ``compile_elsewhere(job)`` is how a model whose kernels numba's cache does
not hold answers at once (a server's start, a Python user's first ``learn_one``): the kernels
run as their twins while ``python -m <job.module> <job.args>`` compiles them into the cache in
a subprocess; then ``job.load()`` loads them in a thread of this process and they take over,
between two kernel calls. ``CHORUS_COMPILE`` chooses how (``compile_mode``). Which kernels a
model needs and what compiles them is its package's to say (``learners.warm``,
``ensembles.warm``): this module knows only jobs.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from numba.core import config, event, types
from numba.core.registry import CPUDispatcher


def one_specialisation(namespace: dict[str, Any], *, keep_literal: tuple[str, ...] = ()) -> None:
    """Make every numba kernel defined in ``namespace`` (a module's ``globals()``) compile
    calls from other kernels with non-literal argument types.

    Parameters
    ----------
    namespace
        The module's globals; kernels imported from elsewhere are left to their own module.
    keep_literal
        Kernels left as numba makes them: one specialisation per literal argument is wanted
        when a constant argument selects a branch, which numba then prunes (so a caller
        compiles only its own branch).
    """
    name = namespace.get("__name__")
    if isinstance(name, str) and not name.endswith("__interpreted") and name not in KERNEL_MODULES:
        KERNEL_MODULES.append(name)
    for key, obj in list(namespace.items()):
        if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == name:
            if key not in keep_literal:
                _unliteral(obj)


def _unliteral(dispatcher: CPUDispatcher) -> None:
    template = dispatcher.get_call_template  # bound method of this dispatcher

    def get_call_template(args: tuple, kws: dict) -> Any:
        return template(
            tuple(types.unliteral(a) for a in args),
            {k: types.unliteral(v) for k, v in kws.items()},
        )

    dispatcher.get_call_template = get_call_template  # type: ignore[method-assign,assignment]


def purge_stale_cache(module_file: str | Path, deps: tuple[Path, ...]) -> None:
    """numba's on-disk cache is keyed on a kernel's own file only, yet kernels inline those of
    other files (``deps``): when those sources change, drop ``module_file``'s cached machine
    code (call it at import, before the module's kernels load)."""
    here = Path(module_file)
    digest = hashlib.sha256(b"".join(Path(p).read_bytes() for p in deps)).hexdigest()
    cache = here.parent / "__pycache__"
    stamp = cache / f"{here.stem}.deps"
    try:
        if stamp.exists() and stamp.read_text() == digest:
            return
        for f in cache.glob(f"{here.stem}.*.nb[ic]"):
            f.unlink()
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest)
    except OSError:
        pass  # read-only install: the cache cannot be stale relative to the installed sources


# --------------------------------------------------------------------------- optimisation levels
# numba compiles a kernel's callees first, each into machine code of its own, then links their
# LLVM code into the caller's module and optimises (O3) and compiles all of it again. Kernels
# Python calls once per model or per state (constructors, checks: ``compiled_cold``) gain
# nothing from O3 and are compiled at COLD_OPT, with what they alone call. ``NESTED_OPT`` (a
# kernel compiled for a caller) stays numba's level: O1 there saved ~5% of a cold compile's CPU
# (``benchmarks/compiletime.py``) but the batch loops measured 4-13% slower (``benchmarks/ab.py``),
# within a noisy machine's range but not worth the risk; ``CHORUS_NESTED_OPT=1`` to measure it.
COLD_OPT = 1
NESTED_OPT = int(os.environ.get("CHORUS_NESTED_OPT", "3"))
_COLD: set[Any] = set()  # the py_funcs of compiled_cold's kernels


def compiled_cold(*kernels: Any) -> None:
    """Compile ``kernels`` at ``COLD_OPT`` even when Python calls them: kernels run once per
    model or state, whose O3 costs compile time and saves nothing measurable."""
    _COLD.update(getattr(k, "py_func", k) for k in kernels)  # (a twin passes functions)


_config: Any = config  # (numba sets its attributes at import: untyped)


class _NestedOpt(event.Listener):
    """Sets ``config.OPT`` (read by numba's LLVM pass builders) for the duration of each
    compile: ``COLD_OPT`` for a ``compiled_cold`` kernel and its callees, ``NESTED_OPT`` within
    another kernel's compile, numba's level otherwise."""

    def __init__(self) -> None:
        self.levels: list[Any] = []

    def on_start(self, ev: event.Event) -> None:
        self.levels.append(_config.OPT)
        level = int(_config.OPT)
        if ev.data["dispatcher"].py_func in _COLD:
            level = min(level, COLD_OPT)
        elif len(self.levels) > 1:
            level = min(level, NESTED_OPT)
        if level != int(_config.OPT):
            _config.OPT = _config._OptLevel(level)

    def on_end(self, ev: event.Event) -> None:
        _config.OPT = self.levels.pop()


event.register("numba:compile", _NestedOpt())


# --------------------------------------------------------------------------- interpreted twins
# The kernel modules (those that called ``one_specialisation``), in import order; a twin is the
# same source run with ``njit`` as the identity.
KERNEL_MODULES: list[str] = []
_twins: dict[str, ModuleType] = {}


class _Mode:
    interpreted = False  # the process's mode; read on every kernel call, so one attribute


MODE = _Mode()
_here = threading.local()  # a thread's own mode (compiled_here), else the process's


class _NoJit:
    """Stands for ``numba`` (``nb``) in a twin: ``@nb.njit`` and ``@nb.njit(...)`` return the
    function itself and ``nb.literally`` is the identity."""

    @staticmethod
    def njit(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return lambda f: f

    @staticmethod
    def literally(x: Any) -> Any:
        return x


def twin(name: str) -> ModuleType:
    """The interpreted twin of kernel module ``name`` (one of :data:`KERNEL_MODULES`).

    The module's own source is executed again with ``nb.njit`` as the identity, and every kernel
    it imported from another kernel module is replaced by that module's twin, so a twin never
    calls compiled code: it runs the same statements on the same numpy arrays, in Python.
    """
    mod = _twins.get(name)
    if mod is not None:
        return mod
    real = importlib.import_module(name)
    path = str(real.__file__)
    source = Path(path).read_text()
    if "import numba as nb\n" not in source:
        raise RuntimeError(f"{name}: kernels must be declared as nb.njit (import numba as nb)")
    mod = ModuleType(f"{name}__interpreted")
    mod.__dict__.update(__file__=path, __package__=real.__package__, nb=_NoJit)
    code = compile(source.replace("import numba as nb\n", "\n", 1), path, "exec")
    exec(code, mod.__dict__)  # noqa: S102 - our own kernel source, as imported
    for key, value in list(mod.__dict__.items()):
        if isinstance(value, CPUDispatcher):  # a kernel imported from another kernel module
            mod.__dict__[key] = getattr(twin(value.py_func.__module__), value.py_func.__name__)
        elif isinstance(value, ModuleType) and value.__name__ in KERNEL_MODULES:
            mod.__dict__[key] = twin(value.__name__)
    _twins[name] = mod
    return mod


def interpreting() -> bool:
    """Whether kernels run as their interpreted twins (see :func:`set_interpreted`)."""
    return MODE.interpreted and getattr(_here, "interpreted", True)


@contextlib.contextmanager
def compiled_here() -> Iterator[None]:
    """Run compiled kernels in this thread whatever the process's mode (to load or compile them
    in a worker thread while other threads still answer from the twins)."""
    before = getattr(_here, "interpreted", None)
    _here.interpreted = False
    try:
        yield
    finally:
        if before is None:
            del _here.interpreted
        else:
            _here.interpreted = before


def is_cached(fn: Any) -> bool:
    """Whether numba's on-disk cache holds machine code of kernel ``fn`` for its current source
    (then calling it loads in well under a second; otherwise it compiles)."""
    try:
        return bool(fn._cache._cache_file._load_index())  # numba's cache index, empty if stale
    except Exception:  # noqa: BLE001 - another numba layout: assume it compiles
        return False


def set_interpreted(flag: bool) -> None:
    """Run kernels interpreted (``True``: no compilation, Python speed) or compiled.

    Both run the same code on the same arrays, so a model can switch between two calls: the
    service answers from the twins while the compiled kernels are built in another process.
    The mode set here is the caller's: ``compile_elsewhere`` leaves it as it is (it starts
    nothing while the caller's interpreted mode holds, and switches nothing back).
    """
    with _COMPILES.lock:
        _COMPILES.owned = False
        _set_mode(flag)


def _set_mode(flag: bool) -> None:
    if flag:
        for name in KERNEL_MODULES:
            twin(name)
    MODE.interpreted = bool(flag)


def kernel(fn: Any) -> Any:
    """``fn`` (a compiled kernel), or its interpreted twin while :func:`interpreting`."""
    if not (MODE.interpreted and interpreting()):
        return fn
    return twin_of(fn)


class _EntryChecks:
    on = False  # tests: every entry call first checks its arguments' types (see entry_point)


ENTRY_CHECKS = _EntryChecks()


def entry_point(fn: Any, args: tuple) -> Any:
    """The machine code of compiled kernel ``fn`` for the argument types of ``args`` (compiled
    already): a callable that skips numba's per-call type dispatch, else ``fn`` itself.

    numba types every argument of every call before it picks the compiled code; a bank struct
    (a ``StructRef``) is typed in Python, so one call of a 15-argument run kernel cost ~2.0 us
    through ``fn`` and ~0.9 us through its entry point (measured, profile.md). The entry point
    does not check types: a caller may use it only for arguments whose types cannot change
    between its calls (``TreeBank.run_one``: the same buffers, encodings of one dtype and
    shape, the same ``ipar``/``fstate`` objects). ``ENTRY_CHECKS.on`` (set by the tests) makes
    every such call check its argument types against the entry's first.
    """
    try:
        sig = tuple(fn.typeof_pyval(a) for a in args)
        entry = fn.overloads[sig].entry_point
    except Exception:  # noqa: BLE001 - not a compiled dispatcher, or not compiled for these types
        return fn
    if not callable(entry):
        return fn
    if ENTRY_CHECKS.on:
        return _checked_entry(fn, sig, entry)
    return entry


def _checked_entry(fn: Any, sig: tuple, entry: Any) -> Any:
    def checked(*args: Any) -> Any:
        got = tuple(fn.typeof_pyval(a) for a in args)
        if got != sig:
            raise AssertionError(f"{fn.__name__}: entry point of {sig} called with {got}")
        return entry(*args)

    checked.__wrapped__ = entry  # type: ignore[attr-defined]
    return checked


def twin_of(fn: Any) -> Any:
    """The interpreted twin of compiled kernel ``fn`` (whatever the mode)."""
    run = getattr(twin(fn.py_func.__module__), fn.py_func.__name__)

    def quiet(*args: Any) -> Any:
        with np.errstate(over="ignore"):  # the RNG's uint64 arithmetic wraps, as compiled
            return run(*args)

    return quiet


# --------------------------------------------------------------------------- compiling elsewhere
log = logging.getLogger("chorus")
COMPILE_MODES = ("subprocess", "thread", "block")
GATHER_SECONDS = 0.3  # jobs asked for within this of the first start together (or are cancelled)
PROGRESS_SECONDS = 20.0  # a line in the log this often while a subprocess compiles


@dataclass(frozen=True)
class CompileJob:
    """What compiles some kernels into numba's cache and loads them.

    Parameters
    ----------
    key
        Jobs with one key are one job (asking again while it is pending or running adds none).
    what
        What it compiles, for the log (``"bagging models"``).
    module, args
        ``python -m module *args`` compiles the kernels into numba's cache (args of the jobs of
        one module that start together are given to one subprocess); the module's
        ``warm(*args)`` does it.
    load
        Loads them in this process (from the cache: well under a second; on a cold cache it
        compiles them); runs in a worker thread with compiled kernels (``compiled_here``).
        None: the module's ``warm(*args)``.
    kernels
        The kernels it is for, if known: when they are ``ready`` by the time the job starts
        (another job compiled them), it only loads them.
    """

    key: str
    what: str
    module: str
    args: tuple[str, ...]
    load: Callable[[], None] | None = field(default=None, compare=False)
    kernels: tuple = field(default=(), compare=False)


class _Compiles:
    """The jobs of ``compile_elsewhere`` (one per process, behind ``lock``)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.mode: str | None = None  # set_compile_mode's, else CHORUS_COMPILE
        self.pending: list[tuple[CompileJob, Future]] = []
        self.running: list[tuple[CompileJob, Future]] = []
        self.owned = False  # the interpreted mode is ours (we switch it back when done)
        self.driver: threading.Thread | None = None
        self.started = 0.0
        self.proc: subprocess.Popen | None = None


_COMPILES = _Compiles()
_on_purpose = threading.local()  # compiling_on_purpose's flag, per thread


@contextlib.contextmanager
def compiling_on_purpose() -> Iterator[None]:
    """Within (this thread): what is built compiles its kernels here, at its first calls, by the
    caller's choice (the warm-up, ``chorus warmup``, a compile job's process):
    ``compile_elsewhere`` starts no job, whatever ``compile_mode`` says, and
    ``ensembles.backends.note_compile`` does not warn."""
    before = getattr(_on_purpose, "on", False)
    _on_purpose.on = True
    try:
        yield
    finally:
        _on_purpose.on = before


def on_purpose() -> bool:
    """Whether this thread is within :func:`compiling_on_purpose`."""
    return getattr(_on_purpose, "on", False)


def set_compile_mode(mode: str | None) -> None:
    """Override ``CHORUS_COMPILE`` for this process (``None``: the variable again)."""
    if mode is not None and mode not in COMPILE_MODES:
        raise ValueError(f"compile mode must be one of {', '.join(COMPILE_MODES)}, got {mode!r}")
    _COMPILES.mode = mode


def compile_mode() -> str:
    """How a model whose kernels numba's cache does not hold gets them: ``"subprocess"`` (the
    default: compiled in a subprocess while the interpreted twins answer), ``"thread"`` (in a
    thread of this process, while the twins answer: slower, they share the GIL), ``"block"``
    (the first call compiles them, as numba does). ``CHORUS_COMPILE`` or
    ``set_compile_mode``; ``ValueError`` naming the choices for anything else."""
    mode = _COMPILES.mode or os.environ.get("CHORUS_COMPILE", "").strip().lower() or "subprocess"
    if mode not in COMPILE_MODES:
        raise ValueError(f"CHORUS_COMPILE must be one of {', '.join(COMPILE_MODES)}, got {mode!r}")
    return mode


_ready: set = set()  # kernels found in numba's cache (is_cached reads a file)


def ready(fn: Any) -> bool:
    """Whether kernel ``fn`` runs without compiling: compiled (or loaded) in this process
    already, or in numba's on-disk cache."""
    if getattr(fn, "signatures", None) or fn in _ready:
        return True
    if is_cached(fn):
        _ready.add(fn)
        return True
    return False


def compile_elsewhere(job: CompileJob) -> Future | None:
    """Run kernels as their interpreted twins until ``job`` has compiled and loaded them.

    Starts ``python -m job.module *job.args`` (the same interpreter, numba cache and
    ``sys.path``, ``CHORUS_COMPILE=block``) in a worker thread after ``GATHER_SECONDS`` (jobs
    asked for meanwhile start with it; ``cancel_compile`` drops one), then ``job.load()`` in
    that thread, and when no job is left, switches kernels back to compiled (between two
    kernel calls: both give the same results, bit for bit). If the subprocess fails, ``load``
    compiles them in that thread instead. Logged to the ``chorus`` logger: the start (a
    warning: the first calls run at Python speed), progress, the switch with its time.

    Returns a future done when ``job`` is loaded, or None when nothing was started: with
    ``compile_mode() == "block"``, within ``compiling_on_purpose``, or while kernels run
    interpreted at a caller's request (``set_interpreted(True)``). A process forked meanwhile
    runs compiled kernels (its first call compiles or loads them): the worker thread is not
    forked.
    """
    if compile_mode() == "block" or on_purpose():
        return None
    C = _COMPILES
    with C.lock:
        for queued, its in (*C.pending, *C.running):
            if queued.key == job.key:
                return its
        if MODE.interpreted and not C.owned:
            return None  # the caller's interpreted mode (set_interpreted): theirs to end
        if not C.owned:
            _set_mode(True)
            C.owned = True
            C.started = time.perf_counter()
        future: Future = Future()
        C.pending.append((job, future))
        if C.driver is None:
            C.driver = threading.Thread(target=_drive, name="chorus-compile", daemon=True)
            C.driver.start()
    return future


def cancel_compile(key: str) -> None:
    """Drop the job ``key``: if it has not started (a learner that became an ensemble's
    prototype: the ensemble's job compiles what it runs), or it is running (a server that
    stops: its subprocess is stopped when no other job shares it). With no job left, kernels
    run compiled again at once."""
    C = _COMPILES
    with C.lock:
        for job, future in [(j, f) for j, f in C.pending if j.key == key]:
            C.pending.remove((job, future))
            future.cancel()
        for job, future in C.running:
            if job.key == key:
                future.cancel()
        if C.running and all(f.cancelled() for _, f in C.running) and C.proc is not None:
            with contextlib.suppress(ProcessLookupError):  # (app.warmup's warm_jobs children)
                os.killpg(C.proc.pid, signal.SIGTERM)
        if C.owned and not C.pending and not C.running:
            _set_mode(False)
            C.owned = False


def compiling() -> bool:
    """Whether a job of ``compile_elsewhere`` is pending or running."""
    C = _COMPILES
    with C.lock:
        return bool(C.pending or C.running)


def _drive() -> None:
    """The worker thread: runs the pending jobs, then switches kernels back to compiled."""
    C = _COMPILES
    time.sleep(GATHER_SECONDS)
    while True:
        with C.lock:
            jobs = C.running = C.pending
            C.pending = []
            if not jobs:
                C.driver = None
                if C.owned:  # (logged first: whoever sees the switch finds it in the log)
                    log.info("compiled kernels took over from the interpreted ones, %.1f s after "
                             "these began answering", time.perf_counter() - C.started)  # fmt: skip
                    _set_mode(False)
                    C.owned = False
                return
        for module in dict.fromkeys(j.module for j, _ in jobs):
            group = [(j, f) for j, f in jobs if j.module == module]
            try:
                _run_group(module, group)
            except BaseException as exc:  # noqa: BLE001 - every waiter hears of it
                for _, f in group:
                    if not f.done():
                        f.set_exception(exc)
        with C.lock:
            C.running = []


def _run_group(module: str, group: list[tuple[CompileJob, Future]]) -> None:
    """Compile the jobs of one module in one subprocess (``compile_mode() == "subprocess"``),
    then load each of them (compiling it here if the subprocess failed)."""
    what = ", ".join(j.what for j, _ in group)
    t0 = time.perf_counter()
    live = [f for _, f in group if not f.cancelled()]
    mode = compile_mode()
    if all(j.kernels and all(ready(k) for k in j.kernels) for j, _ in group):
        mode = "load"  # (a job before compiled them into the cache)
    else:
        log.warning("numba's cache has no kernels for %s: compiling them %s (a minute or two; "
                    "cached for the next run); answering from the interpreted kernels meanwhile",
                    what, "in a subprocess" if mode == "subprocess" else "in a thread")  # fmt: skip
    if mode == "subprocess":
        rc, tail = _subprocess(module, tuple(a for j, _ in group for a in j.args), what)
        if all(f.cancelled() for f in live):
            return
        if rc == 0:
            log.info("compiled the kernels for %s in %.1f s (subprocess); loading them",
                     what, time.perf_counter() - t0)  # fmt: skip
        else:
            log.warning("compiling the kernels for %s in a subprocess failed (exit %s): "
                        "compiling them in this process instead, the interpreted kernels answer "
                        "meanwhile%s", what, rc, f"\n{tail}" if tail else "")  # fmt: skip
    for job, future in group:
        if future.cancelled():
            continue
        t = time.perf_counter()
        try:
            with compiled_here():
                if job.load is not None:
                    job.load()
                else:
                    importlib.import_module(job.module).warm(*job.args)
        except Exception as exc:  # noqa: BLE001 - the model compiles on first compiled use
            log.exception("loading the compiled kernels for %s failed", job.what)
            future.set_exception(exc)
            continue
        log.info("kernels for %s loaded in %.1f s", job.what, time.perf_counter() - t)
        future.set_result(time.perf_counter() - _COMPILES.started)


def _subprocess(module: str, args: tuple[str, ...], what: str) -> tuple[int, str]:
    """Run ``python -m module *args``; its exit code and the end of its stderr."""
    import numba

    env = dict(os.environ, CHORUS_COMPILE="block")  # (it compiles: no job of its own)
    cache_dir = getattr(numba.config, "CACHE_DIR", "")  # (NUMBA_CACHE_DIR, or as set here)
    if cache_dir:
        env["NUMBA_CACHE_DIR"] = str(cache_dir)
    root = Path(importlib.import_module(module.split(".")[0]).__file__ or ".").resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(  # noqa: S603 - our own module, this interpreter
            [sys.executable, "-m", module, *args], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True,  # (a group: cancel_compile stops its job processes too)
        )  # fmt: skip
        _COMPILES.proc = proc
        try:
            while True:
                try:
                    rc = proc.wait(timeout=PROGRESS_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    log.info("still compiling the kernels for %s in process %d (%.0f s so far)",
                             what, proc.pid, time.perf_counter() - t0)  # fmt: skip
        finally:
            _COMPILES.proc = None
        err.seek(0)
        tail = err.read()[-3000:].decode(errors="replace").strip()
    return rc, tail


def _after_fork_in_child() -> None:
    """A forked child has no worker thread: its kernels run compiled (its first call compiles
    or loads them from the cache the parent's job fills)."""
    global _COMPILES
    owned = _COMPILES.owned
    mode = _COMPILES.mode
    _COMPILES = _Compiles()
    _COMPILES.mode = mode
    if owned:
        MODE.interpreted = False


def _at_exit() -> None:
    proc = _COMPILES.proc
    if proc is not None and proc.poll() is None:
        log.info("process %d goes on compiling the engine's kernels into numba's cache, for the "
                 "next run", proc.pid)  # fmt: skip


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
