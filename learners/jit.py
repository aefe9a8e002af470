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
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import threading
from collections.abc import Iterator
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
    """
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
