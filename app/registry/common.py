"""Small helpers every part of the registry shares (JSON, store calls, engine access)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from app.errors import StoreDamaged, StoreUnavailable
from app.stores.base import StoreCorrupt, StoreDown

# Feature values an engine call may take on the event loop itself: a thread hop costs ~50-100 us,
# more than such a call, and nothing waits behind it for longer (issue 42: no request stalls
# the others). Anything larger runs in a worker thread (off_loop).
INLINE_VALUES = 256
WHOLE_MODEL = 1 << 62  # the size of engine work over a whole model's state (never on the loop)

STORE_ERRORS = (StoreDown,)  # what a store raises when it fails (app.stores.base)
_DUMPS_OPTS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def dumps(obj: Any) -> bytes:
    """JSON-encode (orjson; non-string dict keys such as integer labels become strings)."""
    return orjson.dumps(obj, option=_DUMPS_OPTS)


def clean_proba(proba: dict) -> dict:
    """The probabilities as Python floats (the engine already gives them: then no copy)."""
    for v in proba.values():
        if type(v) is float:
            return proba
        break
    return {k: float(v) for k, v in proba.items()}


def engine():
    """``(ensembles, learners)``, imported lazily (the service starts before the engine loads)."""
    import ensembles
    import learners

    return ensembles, learners


def engine_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The part of a declared spec that ``ensembles.build_model`` takes."""
    keys = ("ensemble", "learner", "n_models", "seed", "params", "limits")
    return {k: spec[k] for k in keys if spec.get(k) is not None}


def is_river_spec(spec: dict[str, Any]) -> bool:
    """Whether a declared spec has river-backed (pickled) members."""
    learner = spec.get("learner")
    return isinstance(learner, str) and learner.startswith("river:")


def example_field(field: str, i: int | None) -> str:
    """How a request names ``field`` of its example ``i`` (a batch's ``examples.<i>.<field>``;
    ``i`` None: a single example's ``field``)."""
    return field if i is None else f"examples.{i}.{field}"


def error_field(exc: Exception, rows: list[int] | None = None) -> str:
    """The request field an engine error is about (``label``, ``features.<name>``, ...); with
    ``rows`` (a batch: the request position of each row the engine got) prefixed by the
    example's, ``examples.<i>.``, when the engine says which row (``exc.row``, a ``*_many``
    call) or got one row. What is about the whole model (``model``) is not prefixed."""
    field = getattr(exc, "field", None)  # learners.LimitError names what hit the limit
    if not isinstance(field, str):
        feature = getattr(exc, "feature", None)
        if feature is None:
            field = "label"
        else:
            field = "features" if feature.startswith("<") else f"features.{feature}"
    if rows is None or field == "model":
        return field
    row = getattr(exc, "row", None)
    if row is None and len(rows) == 1:
        row = 0
    if not isinstance(row, int) or not 0 <= row < len(rows):
        return field
    return example_field(field, rows[row])


async def store_call(coro):
    """Await a store call; its failure becomes :class:`StoreUnavailable` (503), or
    :class:`StoreDamaged` when the store cannot read its own data."""
    try:
        return await coro
    except StoreCorrupt as exc:
        raise StoreDamaged(f"store damaged: {exc}") from exc
    except STORE_ERRORS as exc:
        raise StoreUnavailable(f"store unavailable: {exc}") from exc


def settle(fut: asyncio.Future, result: Any = None, exc: BaseException | None = None) -> None:
    """Answer a waiting request (nothing if its client went away)."""
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


def n_values(rows: Any) -> int:
    """Feature values of ``rows`` (dicts): the size of an engine call."""
    return sum(map(len, rows))


async def off_loop(h: Any, size: int, fn: Any, *args: Any) -> Any:
    """``fn(*args)``, engine work on model ``h`` (``size`` feature values), off the event loop.

    Every use of a model's engine (learn, predict, replay, its state for a snapshot or a
    description) goes through here, holding the model's ``engine`` lock, so at most one thread
    runs on one model (its arrays have one writer) while other models' requests and
    ``/healthz`` go on: the compiled run kernels release the GIL. A call of at most
    :data:`INLINE_VALUES` values on a model nobody uses runs here, on the loop, at once (a
    thread hop would cost more than it); nothing else can start on that model meanwhile.
    """
    lock: asyncio.Lock = h.engine
    if size <= INLINE_VALUES and not lock.locked():
        return fn(*args)
    await lock.acquire()
    try:
        fut = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    except BaseException:
        lock.release()
        raise
    # the lock is released when the thread ends, not when its caller stops waiting (a
    # cancelled request): a thread cannot be stopped, and no other may start on the model
    fut.add_done_callback(lambda _: lock.release())
    return await asyncio.shield(fut)
