"""The model manager: one writer per model, log before acknowledgement, snapshots, recovery.

For every model the registry keeps the live ensemble, its last applied log sequence number and
its prequential metrics. ``learn`` runs under the model's :class:`asyncio.Lock`:

1. idempotency keys already applied are answered from memory (``duplicate: true``);
2. the engine predicts then learns the new examples (one compiled call);
3. the examples are appended to the model's log, atomically with their idempotency keys and only
   if the log is still where this process left it (several workers may share a store);
4. only then is the answer returned.

If step 2 or 3 fails (bad input, store unreachable, another writer moved the log) the in-memory
model may have learned something the log does not hold, so it is marked *dirty* and rebuilt from
the store (snapshot + log replay) before it is used again: the served model is always exactly the
model the log describes. Because the engine's randomness is a pure function of (seed, example
number, member), replay reproduces the model bit for bit (ARCHITECTURE §4-5).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson

from app import snapshot as codec
from app import validate
from app.errors import (
    CorruptSnapshot,
    EngineFailure,
    InvalidInput,
    ModelBroken,
    ModelExists,
    ModelNotFound,
    NotCaughtUp,
    NotReady,
    PredictionExpired,
    PredictionNotFound,
    SeqAhead,
    StoreUnavailable,
)
from app.metrics import Prequential
from app.names import NAME_RE, NAME_RULE
from app.river_check import check_river_params
from app.settings import Settings
from app.stores.base import DuplicateKey, Entry, ModelGone, SeqConflict, Store, StoreDown

log = logging.getLogger("chorus.registry")

STORE_ERRORS = (StoreDown,)  # what a store raises when it fails (app.stores.base)
_DUMPS_OPTS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_MAX_ATTEMPTS = 3
_LEASE_TTL = 5.0  # seconds a crashed writer can block the others
_LEASE_WAIT = 10.0
_REPLAY_CHUNK = 1000


def dumps(obj: Any) -> bytes:
    """JSON-encode (orjson; non-string dict keys such as integer labels become strings)."""
    return orjson.dumps(obj, option=_DUMPS_OPTS)


def argmax(proba: dict) -> Any:
    """Most probable label, ties to the first seen; ``None`` for ``{}`` (mirrors the engine)."""
    best, best_p = None, -1.0
    for label, p in proba.items():
        if p > best_p:
            best, best_p = label, p
    return best


def _clean_proba(proba: dict) -> dict:
    for v in proba.values():  # the engine gives Python floats: no copy needed
        if type(v) is float:
            return proba
        break
    return {k: float(v) for k, v in proba.items()}


def is_river_spec(spec: dict[str, Any]) -> bool:
    """Whether a declared spec has river-backed (pickled) members."""
    learner = spec.get("learner")
    return isinstance(learner, str) and learner.startswith("river:")


def _mentions_river(header: Any) -> bool:
    """Whether a decoded snapshot header names a river-backed member anywhere (iterative walk)."""
    stack = [header]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and "RiverLearner" in node:
            return True
    return False


class LogGap(Exception):
    """The log does not continue where the model is (trimmed behind a newer snapshot)."""


class ModelMetrics(Prequential):
    """Prequential accuracy, Cohen's kappa and windowed accuracy of one model's served predictions
    (:class:`app.metrics.Prequential`; its state is stored in snapshots).

    Parameters
    ----------
    window
        Size of the windowed accuracy.
    """

    def update(self, y_true: Any, y_pred: Any) -> None:
        """Score one served prediction; predictions of an untrained model (``None``) are skipped."""
        if y_pred is not None:
            super().update(y_true, y_pred)

    def report(self) -> dict[str, Any]:
        """``{"accuracy", "kappa", "window_accuracy", "n_scored"}`` (``None`` before any score)."""
        return {**self.values(), "n_scored": self.n_scored}


def _settle(fut: asyncio.Future, result: Any = None, exc: BaseException | None = None) -> None:
    if fut.done():  # the client went away
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


def _copy_exc(exc: Exception) -> Exception:
    """A fresh instance per waiting request (one exception object raised in many tasks would
    accumulate their tracebacks)."""
    detail = getattr(exc, "detail", None)
    if detail is not None:
        return type(exc)(detail)
    return StoreUnavailable(f"store unavailable: {exc}")


def _field(exc: Exception) -> str:
    field = getattr(exc, "field", None)  # learners.LimitError names what hit the limit
    if isinstance(field, str):
        return field
    feature = getattr(exc, "feature", None)
    if feature is None:
        return "label"
    return "features" if feature.startswith("<") else f"features.{feature}"


@dataclass(slots=True)
class Example:
    """One example to learn (already validated for shape by the route)."""

    features: dict[str, Any]
    label: Any
    weight: float = 1.0
    key: str | None = None
    served: tuple[Any, dict] | None = None  # (prediction, probabilities) for delayed labels


@dataclass(slots=True)
class Handle:
    """A live model and its bookkeeping."""

    name: str
    spec: dict[str, Any]
    model: Any
    seq: int = 0
    snap_seq: int = 0
    metrics: ModelMetrics = field(default_factory=ModelMetrics)
    keys: dict[str, bytes] = field(default_factory=dict)
    key_order: deque = field(default_factory=deque)  # (seq, key), oldest first
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    dirty: bool = False
    last_snapshot: float = field(default_factory=time.monotonic)
    last_refresh: float = field(default_factory=time.monotonic)
    learned: int = 0
    pending: list = field(default_factory=list)  # [(examples, future)] waiting for the writer
    writer: asyncio.Task | None = None

    @property
    def since_snapshot(self) -> int:
        return self.seq - self.snap_seq


def _engine():
    """Import the engine lazily (the service starts even before a model is declared)."""
    import ensembles
    import learners

    return ensembles, learners


def engine_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The part of a declared spec that ``ensembles.build_model`` takes."""
    keys = ("ensemble", "learner", "n_models", "seed", "params", "limits")
    return {k: spec[k] for k in keys if spec.get(k) is not None}


class Registry:
    """All models of one process, on top of one :class:`~app.stores.base.Store`.

    Parameters
    ----------
    store
        The durable store.
    settings
        Service settings (durability, snapshot policy, TTLs, limits).
    """

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.handles: dict[str, Handle] = {}
        self.broken: dict[str, str] = {}  # model name -> why it could not be loaded
        self.ready = False
        self._loading: dict[str, asyncio.Lock] = {}
        self._key = settings.snapshot_key.encode() if settings.snapshot_key else None
        self._token = secrets.token_hex(8)  # this process, for writer leases
        self._kept: list[tuple[str, str, bytes, asyncio.Future]] = []
        self._keeper: asyncio.Task | None = None

    # ----------------------------------------------------------------- lifecycle
    async def recover(self) -> None:
        """Load every declared model (snapshot + log replay); then the registry is ready."""
        specs = await self._store(self.store.list_models())
        for name, spec in specs.items():
            if name not in self.handles:
                try:
                    self.handles[name] = await self._load_checked(name, spec)
                except ModelBroken as exc:
                    log.error("%s", exc.detail)
        self.ready = True
        log.info("recovered %d model(s) from the %s store", len(self.handles), self.store.name)

    async def snapshot_all(self, *, force: bool = False) -> int:
        """Snapshot every model that changed (all with ``force``); returns how many were written."""
        n = 0
        for h in list(self.handles.values()):
            if h.dirty or (h.since_snapshot == 0 and not force):
                continue
            async with h.lock:
                if h.dirty or (h.since_snapshot == 0 and not force):
                    continue
                try:
                    await self._snapshot(h)
                    n += 1
                except (StoreUnavailable, ModelNotFound) as exc:
                    log.warning("snapshot of %s failed: %s", h.name, exc)
                except Exception:  # noqa: BLE001 - the other models still get theirs
                    log.exception("snapshot of %s failed", h.name)
        return n

    async def periodic(self) -> None:
        """Background task: snapshot models whose last snapshot is older than the interval."""
        interval = self.settings.snapshot_interval
        while True:
            await asyncio.sleep(min(interval, 1.0))
            now = time.monotonic()
            for h in list(self.handles.values()):
                if h.since_snapshot > 0 and not h.dirty and now - h.last_snapshot >= interval:
                    async with h.lock:
                        if h.since_snapshot > 0 and not h.dirty:
                            try:
                                await self._snapshot(h)
                            except (StoreUnavailable, ModelNotFound) as exc:
                                log.warning("snapshot of %s failed: %s", h.name, exc)
                                h.last_snapshot = now
                            except Exception:  # noqa: BLE001 - keep the loop alive
                                log.exception("snapshot of %s failed", h.name)
                                h.last_snapshot = now

    # ----------------------------------------------------------------- models
    async def create(self, name: str, spec: dict[str, Any]) -> Handle:
        """Declare a model (``build_model`` validates the spec; 409 if the name is taken)."""
        self._check_ready()
        if not NAME_RE.match(name):
            raise InvalidInput(f"name: {name!r} is not a model name ({NAME_RULE})")
        ensembles, learners = _engine()
        features, classes = spec.get("features"), spec.get("classes")
        for fld, value in spec.items():
            validate.check(value, fld)
        if is_river_spec(spec):
            check_river_params(spec["learner"], dict(spec.get("params") or {}))
        try:
            model = ensembles.build_model(engine_spec(spec))
            model.declare(features=features, classes=classes)
        except learners.ParamError as exc:  # the engine's own bounds (learners.native)
            raise InvalidInput(f"params.{exc.param}: {exc}") from exc
        except (ValueError, TypeError, KeyError, ImportError, OverflowError) as exc:
            raise InvalidInput(f"spec: {exc}") from exc
        if is_river_spec(spec) and not self._key:
            raise InvalidInput(
                "learner: river-backed models are snapshotted with pickle, so they need "
                "CHORUS_SNAPSHOT_KEY (an HMAC key kept outside the store) to be set on the server"
            )
        stored = {**model.spec(), "features": features, "classes": classes}
        if not await self._store(self.store.create_model(name, stored)):
            raise ModelExists(f"model {name!r} already exists")
        h = Handle(name, stored, model, metrics=ModelMetrics(self.settings.metrics_window))
        self.handles[name] = h
        return h

    async def delete(self, name: str) -> None:
        """Drop a model with everything stored about it."""
        self._check_ready()
        h = self.handles.get(name)
        if h is not None:
            async with h.lock:
                gone = await self._store(self.store.delete_model(name))
                self.handles.pop(name, None)
        else:
            gone = await self._store(self.store.delete_model(name))
        self.broken.pop(name, None)
        if not gone:
            raise ModelNotFound(f"model {name!r} not found")

    async def names(self) -> list[str]:
        """Every declared model (also those declared by other processes on the same store)."""
        self._check_ready()
        return list(await self._store(self.store.list_models()))

    async def get(self, name: str) -> Handle:
        """The live model, loading it from the store if another process declared it."""
        self._check_ready()
        if name in self.broken:
            raise ModelBroken(f"model {name!r} is broken: {self.broken[name]}")
        h = self.handles.get(name)
        if h is not None:
            if h.dirty:
                async with h.lock:
                    await self._ensure_clean(h)
            return h
        lock = self._loading.setdefault(name, asyncio.Lock())
        async with lock:
            h = self.handles.get(name)
            if h is None:
                spec = await self._store(self.store.get_model(name))
                if spec is None:
                    raise ModelNotFound(f"model {name!r} not found")
                h = await self._load_checked(name, spec)
                self.handles[name] = h
        return h

    async def fresh(self, name: str, min_seq: int | None = None, *, always: bool = False) -> Handle:
        """The model for a read: caught up with the log within the freshness bound.

        With a shared store the model applies the other processes' entries when it was last
        caught up more than ``read_staleness`` seconds ago (``always``: on every call). With
        ``min_seq`` it waits (up to ``min_seq_wait`` seconds) until it has applied at least that
        log sequence number, then answers :class:`NotCaughtUp` (503).
        """
        h = await self.get(name)
        shared = self.settings.shared_store and self.settings.durability == "log"
        behind = min_seq is not None and h.seq < min_seq
        if shared and (
            always or behind or time.monotonic() - h.last_refresh >= self.settings.read_staleness
        ):
            h = await self.refresh(h)
        if min_seq is None or h.seq >= min_seq:
            return h
        last = await self._store(self.store.last_seq(name))
        if min_seq > last:
            raise SeqAhead(
                f"min_seq: {min_seq} is beyond model {name!r}'s log (last seq {last}); pass a "
                "seq that a write returned"
            )
        deadline = time.monotonic() + self.settings.min_seq_wait
        while time.monotonic() < deadline:
            await asyncio.sleep(0.01)
            h = await self.get(name)
            if shared:
                h = await self.refresh(h)
            if h.seq >= min_seq:
                return h
        raise NotCaughtUp(
            f"min_seq: model {name!r} is at seq {h.seq}, {min_seq} not reached within "
            f"{self.settings.min_seq_wait:g} s; retry"
        )

    async def refresh(self, h: Handle) -> Handle:
        """With other writing processes, apply their log entries before answering a read.

        A log trimmed past this process's position (another process snapshotted) shows up as an
        empty tail while the store's last seq is ahead: the model is reloaded from the snapshot.
        """
        if self.settings.shared_store and self.settings.durability == "log":
            async with h.lock:
                try:
                    n = await self._replay(h, keys=True)
                    if n == 0 and await self._store(self.store.last_seq(h.name)) > h.seq:
                        raise LogGap(f"model {h.name!r}: log trimmed past seq {h.seq}")
                    h.last_refresh = time.monotonic()
                except LogGap:
                    h.dirty = True
                    await self._ensure_clean(h)
                except CorruptSnapshot as exc:
                    self.broken[h.name] = str(exc)
                    self.handles.pop(h.name, None)
                    raise ModelBroken(f"model {h.name!r} is broken: {exc}") from exc
        return h

    def describe(self, h: Handle) -> dict[str, Any]:
        """The model description of the HTTP API."""
        d = h.model.describe()
        return {
            "name": h.name,
            "spec": h.spec,
            "n_seen": int(d.get("n_seen", h.model.n_seen)),
            "seq": h.seq,
            "classes": list(d.get("classes", [])),
            "state_bytes": int(d.get("state_bytes", 0)),
            "metrics": h.metrics.report(),
            "members": list(d.get("members", [])),
            "n_drifts": d.get("n_drifts"),  # adaptive bagging only (issue 18)
            "diversity": d.get("diversity"),
            "status": "ok",
            "reason": None,
        }

    async def describe_broken(self, name: str) -> dict[str, Any] | None:
        """What ``GET /models`` lists for a broken model (``None`` if it is not broken)."""
        if name not in self.broken:
            return None
        spec = await self._store(self.store.get_model(name))
        return {
            "name": name,
            "spec": spec or {},
            "n_seen": None,
            "seq": None,
            "classes": [],
            "state_bytes": None,
            "metrics": None,
            "members": [],
            "status": "broken",
            "reason": self.broken[name],
        }

    # ----------------------------------------------------------------- learning
    async def learn(self, name: str, examples: list[Example]) -> list[dict[str, Any]]:
        """Predict-then-learn ``examples`` in order; the answer comes after the log append.

        Returns one result per example: ``{"prediction", "probabilities", "seq", "duplicate"}``.

        Requests for one model are queued and applied by a single writer task: whatever queued
        up while the previous group was being written goes through the engine in one compiled
        call and into the log in one append (group commit), then every request gets its answer.
        Order, results and the log are the same as one request at a time (the engine's batch
        call equals the row-by-row calls); a group with a bad request is redone one by one, so
        only that request fails.
        """
        h = await self.get(name)
        fut = asyncio.get_running_loop().create_future()
        h.pending.append((examples, fut))
        if h.writer is None:
            h.writer = asyncio.create_task(self._write(h))
        return await fut

    async def _write(self, h: Handle) -> None:
        """The model's single writer: drain the queue group by group."""
        try:
            async with h.lock:
                while h.pending:
                    group, h.pending = h.pending, []
                    await self._apply_group(h, group)
                    if h.since_snapshot >= self.settings.snapshot_every and not h.dirty:
                        await asyncio.sleep(0)  # let the answered requests go out first
                        await self._snapshot_quietly(h)
                h.writer = None  # no await between the empty check and this: nothing is missed
        except BaseException as exc:  # never leave a request hanging
            h.writer = None
            for _, fut in h.pending:
                if not fut.done():
                    fut.set_exception(StoreUnavailable(f"writer failed: {exc!r}"))
            h.pending = []
            raise

    async def _apply_group(self, h: Handle, group: list) -> None:
        flat = [ex for exs, _ in group for ex in exs]
        try:
            results = await self._learn_retrying(h, flat)
        except InvalidInput as exc:
            if len(group) == 1:
                _settle(group[0][1], exc=exc)
                return
            for exs, fut in group:  # isolate the bad request(s)
                try:
                    _settle(fut, await self._learn_retrying(h, exs))
                except Exception as one:  # noqa: BLE001 - goes to that request
                    _settle(fut, exc=one)
            return
        except Exception as exc:  # noqa: BLE001 - store down etc.: every request of the group
            for _, fut in group:
                _settle(fut, exc=_copy_exc(exc))
            return
        i = 0
        for exs, fut in group:
            _settle(fut, results[i : i + len(exs)])
            i += len(exs)

    async def _learn_retrying(self, h: Handle, examples: list[Example]) -> list[dict[str, Any]]:
        if self.settings.shared_store and self.settings.durability == "log":
            # other processes write this model too: take the model's writer lease, apply their
            # entries, then learn and append; the conditional append stays the safety net
            await self._lease(h)
            try:
                return await self._learn_attempts(h, examples, catch_up=True)
            finally:
                with contextlib.suppress(*STORE_ERRORS):
                    await self.store.release_writer(h.name, self._token)
        return await self._learn_attempts(h, examples, catch_up=False)

    async def _lease(self, h: Handle) -> None:
        deadline = time.monotonic() + _LEASE_WAIT
        delay = 0.0005
        while not await self._store(self.store.acquire_writer(h.name, self._token, _LEASE_TTL)):
            if time.monotonic() > deadline:
                raise StoreUnavailable(f"model {h.name!r}: another process holds the writer lease")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)

    async def _learn_attempts(
        self, h: Handle, examples: list[Example], catch_up: bool
    ) -> list[dict[str, Any]]:
        for _ in range(_MAX_ATTEMPTS):
            await self._ensure_clean(h)
            if catch_up:
                try:
                    await self._replay(h, keys=True)
                except LogGap:  # another process snapshotted and trimmed past us: reload
                    h.dirty = True
                    await self._ensure_clean(h)
                except Exception:
                    h.dirty = True
                    raise
            try:
                return await self._learn_locked(h, examples)
            except (SeqConflict, DuplicateKey) as exc:
                log.info("model %s: %s; catching up with the log", h.name, exc)
                h.dirty = True
            except ModelGone:
                self.handles.pop(h.name, None)
                raise ModelNotFound(f"model {h.name!r} not found") from None
        raise StoreUnavailable(f"model {h.name!r}: concurrent writers kept moving the log; retry")

    async def _learn_locked(self, h: Handle, examples: list[Example]) -> list[dict[str, Any]]:
        _, learners = _engine()
        results: list[dict[str, Any] | None] = [None] * len(examples)
        todo: list[int] = []
        first_of: dict[str, int] = {}
        for i, ex in enumerate(examples):
            if ex.key is not None:
                if ex.key in h.keys:
                    results[i] = {**orjson.loads(h.keys[ex.key]), "duplicate": True}
                    continue
                if ex.key in first_of:  # repeated inside this batch: answered like a retry
                    continue
                first_of[ex.key] = i
            todo.append(i)
        if todo:
            # the log records first: whatever the store cannot hold is refused before learning
            many = len(examples) > 1
            raws = [self._record(examples[i], f"examples.{i}." if many else "") for i in todo]
            X = [examples[i].features for i in todo]
            Y = [examples[i].label for i in todo]
            W = [examples[i].weight for i in todo]
            n_before = h.model.n_seen
            try:
                if len(todo) == 1:
                    probas = [h.model.predict_learn_one(X[0], Y[0], w=W[0])]
                else:
                    probas = h.model.predict_learn_many(X, Y, W)
            except (learners.FeatureTypeError, learners.LabelError, ValueError) as exc:
                # the engine rejects a batch before learning any of it (the schema rolls back);
                # should it ever have learned part of it, rebuild the model from the log
                if h.model.n_seen != n_before and self.settings.durability == "log":
                    h.dirty = True
                raise InvalidInput(f"{_field(exc)}: {exc}") from exc
            except Exception as exc:  # noqa: BLE001 - an engine bug, not the client's input
                log.exception("model %s: engine failed on learn", h.name)
                h.dirty = self.settings.durability == "log"  # unknown state: rebuild from the log
                raise EngineFailure(
                    f"model {h.name}: internal engine error while learning (logged on the "
                    "server); nothing was acknowledged and the model is rebuilt from its log"
                ) from exc
            entries, fresh = [], []
            try:
                for j, i in enumerate(todo):
                    ex = examples[i]
                    proba = _clean_proba(probas[j])
                    if ex.served is not None:
                        pred, proba = ex.served
                    else:
                        pred = argmax(proba)
                    out = {"prediction": pred, "probabilities": proba, "seq": h.seq + j + 1}
                    resp = dumps(out) if ex.key is not None else None
                    entries.append(Entry(raws[j], ex.key, resp))
                    fresh.append((i, out, resp))
            except Exception as exc:  # learned but not loggable: an engine bug, rebuild
                log.exception("model %s: engine answer cannot be encoded", h.name)
                h.dirty = self.settings.durability == "log"
                raise EngineFailure(
                    f"model {h.name}: internal error while encoding the answer (logged on the "
                    "server); nothing was acknowledged and the model is rebuilt from its log"
                ) from exc
            if self.settings.durability == "log":
                try:
                    new_seq = await self.store.append(h.name, entries, h.seq)
                except STORE_ERRORS as exc:
                    h.dirty = True
                    raise StoreUnavailable(f"store unavailable, nothing applied: {exc}") from exc
                except BaseException:  # a conflict, a cancelled request or a store bug: the model
                    h.dirty = True  # learned what the log may lack, so it is rebuilt from the log
                    raise
            else:
                new_seq = h.seq + len(entries)
            h.seq = new_seq
            h.learned += len(entries)
            for i, out, resp in fresh:
                ex = examples[i]
                h.metrics.update(ex.label, out["prediction"])
                if ex.key is not None:
                    h.keys[ex.key] = resp
                    h.key_order.append((out["seq"], ex.key))
                results[i] = {**out, "duplicate": False}
        for i, ex in enumerate(examples):
            if results[i] is None:  # a key repeated inside the batch
                results[i] = {**results[first_of[ex.key]], "duplicate": True}
        return results  # type: ignore[return-value]

    @staticmethod
    def _record(ex: Example, prefix: str) -> bytes:
        """The example's log record (JSON), or :class:`InvalidInput` naming what cannot be stored."""
        validate.check_label(ex.label, f"{prefix}label")
        rec: dict[str, Any] = {"x": ex.features, "y": ex.label, "w": ex.weight}
        if ex.key is not None:
            rec["k"] = ex.key
        if ex.served is not None:
            rec["p"] = ex.served[0]
        try:
            return dumps(rec)
        except orjson.JSONEncodeError as exc:
            validate.check(ex.features, f"{prefix}features")
            raise InvalidInput(f"{prefix}features: cannot be stored ({exc})") from None

    async def learn_delayed(
        self, name: str, prediction_id: str, label: Any, key: str | None = None
    ) -> dict[str, Any]:
        """Learn the features kept by ``/predict`` under ``prediction_id`` with their label.

        Each prediction id is learned at most once (it doubles as the idempotency key); the
        prediction that was actually served is the one scored.
        """
        h = await self.get(name)
        raw = await self._store(self.store.get_prediction(name, prediction_id))
        if raw is None:
            raise PredictionNotFound(
                f"prediction_id {prediction_id!r} not found for model {name!r}"
            )
        kept = orjson.loads(raw)
        if kept["exp"] < time.time():
            raise PredictionExpired(
                f"prediction_id {prediction_id!r} expired (TTL {self.settings.prediction_ttl:g} s)"
            )
        served = (kept["p"], kept["proba"])
        ex = Example(kept["x"], label, 1.0, key or f"pid:{prediction_id}", served)
        (result,) = await self.learn(h.name, [ex])
        return result

    # ----------------------------------------------------------------- predicting
    async def predict(
        self,
        name: str,
        X: list[dict[str, Any]],
        raw: dict[str, str] | None = None,
        *,
        min_seq: int | None = None,
    ) -> list[dict[str, Any]]:
        """Predict without learning; keeps the features for a delayed label when configured.

        ``raw`` holds the query-string values of a single ``GET /predict`` row: a feature the
        model knows as categorical (say a zip code) that looked numeric is retried as text.
        The model is caught up with the log as :meth:`fresh` describes (``min_seq``).
        """
        h = await self.fresh(name, min_seq)
        _, learners = _engine()
        try:
            try:
                probas = [h.model.predict_proba_one(x) for x in X]
            except learners.FeatureTypeError as exc:
                f = exc.feature
                v = X[0].get(f)
                if not raw or f not in raw or not isinstance(v, float) or math.isinf(v):
                    raise
                X = [{**X[0], f: raw[f]}]
                return await self.predict(name, X, {k: v for k, v in raw.items() if k != f})
        except InvalidInput:
            raise  # from the retry as text
        except (learners.FeatureTypeError, learners.LabelError, ValueError) as exc:
            raise InvalidInput(f"{_field(exc)}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - an engine bug, not the client's input
            log.exception("model %s: engine failed on predict", name)
            raise EngineFailure(
                f"model {name}: internal engine error while predicting (logged on the server)"
            ) from exc
        ttl = self.settings.prediction_ttl
        results, waits = [], []
        loop = asyncio.get_running_loop()
        for x, proba in zip(X, probas, strict=True):
            proba = _clean_proba(proba)
            pred = argmax(proba)
            result = {"prediction": pred, "probabilities": proba, "prediction_id": None,
                      "ignored_features": [f for f in x if h.model.knows_feature(f) is False]}  # fmt: skip
            if self.settings.keep_predictions:
                pid = secrets.token_urlsafe(12)
                try:
                    blob = dumps({"x": x, "p": pred, "proba": proba, "exp": time.time() + ttl})
                except orjson.JSONEncodeError as exc:
                    validate.check(x, "features")
                    raise InvalidInput(f"features: cannot be stored ({exc})") from None
                if len(blob) > self.settings.max_kept_bytes:  # served, not kept
                    results.append(result)
                    continue
                fut = loop.create_future()
                self._kept.append((name, pid, blob, fut))
                waits.append((result, pid, fut))
            results.append(result)
        if waits:
            if self._keeper is None:
                self._keeper = asyncio.create_task(self._keep_predictions())
            for result, pid, fut in waits:
                if await fut:
                    result["prediction_id"] = pid
        return results

    async def _keep_predictions(self) -> None:
        """Single task writing kept predictions, a group per store call (group commit)."""
        try:
            while self._kept:
                group, self._kept = self._kept, []
                try:
                    await self.store.put_predictions(
                        [(n, p, b) for n, p, b, _ in group],
                        self.settings.prediction_ttl,
                        max_per_model=self.settings.max_kept_predictions,
                    )
                    ok = True
                except STORE_ERRORS as exc:
                    log.warning("%d prediction(s) not kept: %s", len(group), exc)
                    ok = False
                for *_, fut in group:
                    _settle(fut, ok)
            self._keeper = None
        except BaseException:
            self._keeper = None
            for *_, fut in self._kept:
                _settle(fut, False)
            self._kept = []
            raise

    def typed_query(self, h: Handle, params: dict[str, str]) -> dict[str, Any]:
        """Type query-string values: declared or learned kinds first, then numeric-looking strings
        -> float."""
        declared = h.spec.get("features") or {}
        x: dict[str, Any] = {}
        for k, v in params.items():
            kind = declared.get(k) or h.model.feature_kind(k)
            if kind == "categorical":  # a learned zip code "02139" stays that text
                x[k] = v
            elif kind == "numeric":
                try:
                    x[k] = float(v)
                except ValueError:
                    raise InvalidInput(f"{k}: declared numeric, got {v!r}") from None
            elif v == "":
                x[k] = None
            else:  # 'nan' is missing and 'inf' rejected, as JSON NaN / Infinity are
                try:
                    x[k] = float(v)
                except ValueError:
                    x[k] = v
        return x

    # ----------------------------------------------------------------- internals
    def _check_ready(self) -> None:
        if not self.ready:
            raise NotReady("recovering models from the store; not ready yet")

    async def _store(self, coro):
        try:
            return await coro
        except STORE_ERRORS as exc:
            raise StoreUnavailable(f"store unavailable: {exc}") from exc

    async def _ensure_clean(self, h: Handle) -> None:
        """Rebuild a dirty model from the store (the lock is held by the caller)."""
        if not h.dirty:
            return
        spec = await self._store(self.store.get_model(h.name))
        if spec is None:
            self.handles.pop(h.name, None)
            raise ModelNotFound(f"model {h.name!r} not found")
        fresh = await self._load_checked(h.name, spec)
        h.spec, h.model, h.seq, h.snap_seq = fresh.spec, fresh.model, fresh.seq, fresh.snap_seq
        h.metrics, h.keys, h.key_order = fresh.metrics, fresh.keys, fresh.key_order
        h.dirty = False

    async def _load_checked(self, name: str, spec: dict[str, Any]) -> Handle:
        """Load a model; one that cannot be loaded is marked broken (:class:`ModelBroken`)."""
        for _ in range(_MAX_ATTEMPTS):
            try:
                h = await self._load(name, spec)
                self.broken.pop(name, None)
                return h
            except CorruptSnapshot as exc:
                reason = str(exc)
                break
            except LogGap as exc:  # a newer snapshot landed between our two reads: again
                reason = str(exc)
        self.broken[name] = reason
        self.handles.pop(name, None)
        raise ModelBroken(f"model {name!r} is broken: {reason}")

    async def _load(self, name: str, spec: dict[str, Any]) -> Handle:
        """Newest snapshot that verifies and loads (checksum first) + replay of the log tail.

        A rejected snapshot falls back to the previous generation: the log is trimmed only
        behind the oldest one kept, so nothing acknowledged is lost. A :class:`LogGap` (a newer
        snapshot landed meanwhile) propagates so the caller starts over.
        """
        gens = await self._store(self.store.get_snapshots(name))
        rejected: list[str] = []
        for gen_seq, blob in gens:  # newest first
            try:
                return await self._load_from(name, spec, blob)
            except CorruptSnapshot as exc:
                log.error("model %s: snapshot at seq %d rejected: %s", name, gen_seq, exc)
                rejected.append(f"snapshot at seq {gen_seq}: {exc}")
        if rejected:
            raise CorruptSnapshot("; ".join(rejected))
        return await self._load_from(name, spec, None)

    async def _load_from(self, name: str, spec: dict[str, Any], blob: bytes | None) -> Handle:
        """One snapshot generation (or none: a fresh model) + replay of the log behind it."""
        ensembles, _ = _engine()
        window = self.settings.metrics_window
        try:
            if blob is not None:
                state, meta = codec.decode(blob, self._key)
                if not self._key and _mentions_river(state["header"]):
                    # a plain checksum anyone can recompute: never decode pickled members
                    raise CorruptSnapshot(
                        "snapshot has river-backed (pickled) members but is not HMAC-signed; "
                        "refused without decoding (set CHORUS_SNAPSHOT_KEY)"
                    )
                model = ensembles.load_state(state)
                seq = int(meta["seq"])
                m = ModelMetrics.from_json(meta.get("metrics"), window)
            else:
                if is_river_spec(spec) and not self._key:
                    raise CorruptSnapshot("river-backed model needs CHORUS_SNAPSHOT_KEY")
                model = ensembles.build_model(engine_spec(spec))
                model.declare(features=spec.get("features"), classes=spec.get("classes"))
                seq, m = 0, ModelMetrics(window)
        except CorruptSnapshot:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the stored bytes are, only this model fails
            raise CorruptSnapshot(f"stored state cannot be loaded: {exc!r}"[:500]) from exc
        h = Handle(name, spec, model, seq=seq, snap_seq=seq, metrics=m)
        await self._replay(h)
        h.keys = await self._store(self.store.get_keys(name))
        h.key_order = deque(sorted((orjson.loads(v)["seq"], k) for k, v in h.keys.items()))
        return h

    async def _replay(self, h: Handle, *, keys: bool = False) -> int:
        """Apply the log after ``h.seq`` to ``h.model`` in order; returns how many entries.

        With ``keys`` the idempotency answers of replayed keyed entries are rebuilt too (used
        when catching up with entries another process appended).
        """
        n = 0
        while True:
            rows = await self._store(self.store.read(h.name, h.seq, _REPLAY_CHUNK))
            if not rows:
                return n
            recs = []
            for s, raw in rows:
                if s != h.seq + len(recs) + 1:
                    raise LogGap(f"model {h.name!r}: log gap at {h.seq + len(recs) + 1}")
                recs.append(orjson.loads(raw))
            try:
                probas = h.model.predict_learn_many(
                    [r["x"] for r in recs], [r["y"] for r in recs], [r.get("w", 1.0) for r in recs]
                )
            except Exception as exc:  # noqa: BLE001 - a log entry the engine refuses
                raise CorruptSnapshot(
                    f"log entries {h.seq + 1}..{h.seq + len(recs)} cannot be replayed: {exc!r}"[
                        :500
                    ]
                ) from exc
            for j, (r, proba) in enumerate(zip(recs, probas, strict=True)):
                pred = r["p"] if "p" in r else argmax(proba)
                h.metrics.update(r["y"], pred)
                if keys and "k" in r:
                    out = {"prediction": pred, "probabilities": _clean_proba(proba)}
                    h.keys[r["k"]] = dumps({**out, "seq": h.seq + j + 1})
                    h.key_order.append((h.seq + j + 1, r["k"]))
            h.seq += len(recs)
            n += len(recs)

    async def _snapshot_quietly(self, h: Handle) -> None:
        try:
            await self._snapshot(h)
        except (StoreUnavailable, ModelNotFound) as exc:
            log.warning("snapshot of %s failed: %s", h.name, exc)
        except Exception:  # noqa: BLE001 - learning goes on; the next snapshot retries
            log.exception("snapshot of %s failed", h.name)

    async def _snapshot(self, h: Handle) -> None:
        """Write the model's snapshot and trim the log behind it (lock held by the caller)."""
        state = h.model.to_state()
        meta = {"name": h.name, "seq": h.seq, "metrics": h.metrics.to_json()}
        blob = codec.encode(state, meta, self._key)
        seq = h.seq
        try:
            oldest = await self.store.put_snapshot(h.name, seq, blob)
            await self.store.trim(h.name, oldest)  # behind the oldest generation kept
        except ModelGone:
            self.handles.pop(h.name, None)
            raise ModelNotFound(f"model {h.name!r} not found") from None
        except STORE_ERRORS as exc:
            raise StoreUnavailable(f"store unavailable: {exc}") from exc
        h.snap_seq = seq
        h.last_snapshot = time.monotonic()
        await self._forget_old_keys(h)

    async def _forget_old_keys(self, h: Handle) -> None:
        """Drop idempotency keys older than the window: from the store first, then memory (so
        memory always holds every key the store has, and a retry is answered, not refused)."""
        horizon = h.seq - self.settings.idempotency_window
        old = []
        while h.key_order and h.key_order[0][0] <= horizon:
            old.append(h.key_order.popleft())
        if not old:
            return
        try:
            await self.store.forget_keys(h.name, [k for _, k in old])
        except STORE_ERRORS as exc:
            log.warning("model %s: old idempotency keys kept for now: %s", h.name, exc)
            h.key_order.extendleft(reversed(old))
            return
        for _, k in old:
            h.keys.pop(k, None)
