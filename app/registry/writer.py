"""One writer per model: group commit of predict-then-learn, log before acknowledgement.

``learn`` queues the request on the model; a single writer task per model takes whatever queued
up, and under the model's lock:

1. idempotency keys already applied are answered with their stored answer (``duplicate:
   true``): the model's in-memory filter (:mod:`app.registry.ids`) clears almost every new id
   at once, and the store is asked about the others;
2. the engine predicts then learns the new examples (one compiled call);
3. the examples are appended to the model's log, atomically with their idempotency keys and only
   if the log is still where this process left it (several workers may share a store) and the
   model is still the incarnation this process holds (not deleted, maybe created again: then the
   handle is dropped and the request answers 404, or is tried on the new one by the registry);
4. only then is every request of the group answered.

If step 2 or 3 fails (bad input, store unreachable, another writer moved the log) the in-memory
model may have learned something the log does not hold, so it is marked *dirty* and rebuilt from
the store (snapshot + log replay) before it is used again: the served model is always exactly the
model the log describes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from app import validate
from app.errors import (
    EngineFailure,
    InvalidInput,
    ModelNotFound,
    OutcomeUnknownError,
    StoreUnavailable,
)
from app.registry.common import (
    STORE_ERRORS,
    WHOLE_MODEL,
    clean_proba,
    dumps,
    engine,
    error_field,
    example_field,
    n_values,
    off_loop,
    settle,
    store_call,
)
from app.registry.handles import Example, Handle, arrays_bytes, estimate_cost, key_cost
from app.registry.loaded import LoadedModels
from app.registry.outcomes import settle_lost
from app.registry.recovery import LogGap
from app.stores.base import DuplicateKey, Entry, ModelGone, OutcomeUnknown, SeqConflict

log = logging.getLogger("chorus.registry")

_MAX_ATTEMPTS = 3
_LEASE_TTL = 5.0  # seconds a crashed writer can block the others
_LEASE_WAIT = 10.0


def _copy_exc(exc: Exception) -> Exception:
    """A fresh instance per waiting request (one exception object raised in many tasks would
    accumulate their tracebacks)."""
    detail = getattr(exc, "detail", None)
    if detail is not None:
        return type(exc)(detail)
    return StoreUnavailable(f"store unavailable: {exc}")


def _interrupted(name: str, exc: BaseException) -> str:
    """The answer to the requests of a group whose writer was interrupted mid-write."""
    return (
        f"outcome unknown: the writer of model {name!r} was interrupted while writing this "
        f"request ({exc!r}); it may have been applied. Resend with the same ids (an applied "
        "example is answered duplicate: true), or read the model's seq"
    )


def _fields(ex: Example) -> dict[str, Any]:
    """What the example's log record holds."""
    rec: dict[str, Any] = {"x": ex.features, "y": ex.label, "w": ex.weight}
    if ex.key is not None:
        rec["k"] = ex.key
    if ex.served is not None:
        rec["p"] = ex.served[0]
    return rec


def _record(ex: Example, i: int | None) -> bytes:
    """The example's log record (JSON), or :class:`InvalidInput` naming what cannot be stored
    (as the request names it: ``i`` is its position in a batch, see ``example_field``)."""
    validate.check_label(ex.label, example_field("label", i))
    features = example_field("features", i)
    try:
        return dumps(_fields(ex))
    except orjson.JSONEncodeError as exc:
        validate.check(ex.features, features)
        raise InvalidInput(f"{features}: cannot be stored ({exc})") from None


def _records(exs: list[Example], rows: list[int], many: bool) -> list[bytes]:
    """:func:`_record` of every example (the same bytes): most records are plain JSON (string
    keys, labels within 64 bits) that orjson writes without options; any other goes through
    :func:`_record`, which names what cannot be stored."""
    plain = orjson.dumps
    out = []
    for i, ex in zip(rows, exs, strict=True):
        y = ex.label
        if type(y) is not int or validate.INT64_MIN <= y <= validate.INT64_MAX:
            try:
                out.append(plain(_fields(ex)))
                continue
            except orjson.JSONEncodeError:
                pass
        out.append(_record(ex, i if many else None))
    return out


def _predict_learn(
    model: Any, X: list[dict], exs: list[Example]
) -> tuple[list | None, Exception | None, bool]:
    """The engine's predict-then-learn of ``exs`` (``X`` their features), in one call (run by
    :func:`~app.registry.common.off_loop`): ``(probabilities, None, False)``, or ``(None, the
    engine's error, whether it learned anything all the same)``."""
    n_before = model.n_seen
    try:
        if len(exs) == 1:
            return [model.predict_learn_one(X[0], exs[0].label, w=exs[0].weight)], None, False
        return (
            model.predict_learn_many(X, [ex.label for ex in exs], [ex.weight for ex in exs]),
            None,
            False,
        )
    except Exception as exc:  # noqa: BLE001 - the caller raises it, as if here
        return None, exc, model.n_seen != n_before


def _predict_learn_all(
    h: Any, X: list[dict], exs: list[Example]
) -> tuple[list | None, Exception | None, bool]:
    """:func:`_predict_learn` by the champion, then the same rows by every challenger
    (:meth:`~app.registry.challengers.Board.learn`, which never raises) when it learned them."""
    t0 = time.perf_counter()
    probas, exc, learned = _predict_learn(h.model, X, exs)
    if probas is not None:
        ys, ws = [ex.label for ex in exs], [ex.weight for ex in exs]
        h.board.learn(X, ys, ws, probas, time.perf_counter() - t0)
    return probas, exc, learned


class ModelWriter:
    """Applies learn requests to the models of one process, a group at a time.

    Parameters
    ----------
    models
        The loaded models (and through them the store and the settings).
    """

    def __init__(self, models: LoadedModels) -> None:
        self.models = models
        self.store = models.store
        self.settings = models.settings
        self._token = secrets.token_hex(8)  # this process, for writer leases

    async def learn(
        self, h: Handle, examples: list[Example], *, batch: bool = False
    ) -> list[dict[str, Any]]:
        """Queue ``examples`` on the model; the answer comes once they are in the log.

        Order, results and the log are the same as one request at a time (the engine's batch
        call equals the row-by-row calls); a group with a bad request is redone one by one, so
        only that request fails. ``batch``: a request's ``examples`` (for the errors' names).
        """
        fut = asyncio.get_running_loop().create_future()
        h.pending.append((examples, fut, batch))
        if h.writer is None:
            h.writer = asyncio.create_task(self._drain(h))
        return await fut

    async def _drain(self, h: Handle) -> None:
        """The model's single writer: drain the queue group by group."""
        group: list = []
        try:
            async with h.lock:
                while h.pending:
                    group, h.pending = h.pending, []
                    await self._apply_group(h, group)
                    group = []
                    if h.since_snapshot >= self.settings.snapshot_every and not h.dirty:
                        await asyncio.sleep(0)  # let the answered requests go out first
                        await self.models.snapshot_quietly(h)
                h.writer = None  # no await between the empty check and this: nothing is missed
            self.models.check_budget()  # idle now: it may be evicted
        except BaseException as exc:  # never leave a request hanging
            # (a cancellation or an error that is not a request's own ends the writer between
            # two awaits: the group it was writing may be in the log or not)
            h.writer = None
            h.dirty = h.dirty or bool(group)  # rebuilt from the log before it is used again
            for _, fut, _ in group:
                settle(fut, exc=OutcomeUnknownError(_interrupted(h.name, exc)))
            for _, fut, _ in h.pending:
                settle(fut, exc=StoreUnavailable(f"store unavailable, nothing applied: the "
                                                 f"model's writer failed ({exc!r})"))  # fmt: skip
            h.pending = []
            raise

    async def _apply_group(self, h: Handle, group: list) -> None:
        flat = [ex for exs, _, _ in group for ex in exs]
        try:
            results = await self._learn_leased(h, flat, len(group) > 1 or group[0][2])
        except InvalidInput as exc:
            if len(group) == 1:
                settle(group[0][1], exc=exc)
                return
            for exs, fut, batch in group:  # isolate the bad request(s)
                try:
                    settle(fut, await self._learn_leased(h, exs, batch))
                except Exception as one:  # noqa: BLE001 - goes to that request
                    settle(fut, exc=one)
            return
        except Exception as exc:  # noqa: BLE001 - store down etc.: every request of the group
            for _, fut, _ in group:
                settle(fut, exc=_copy_exc(exc))
            return
        i = 0
        for exs, fut, _ in group:
            settle(fut, results[i : i + len(exs)])
            i += len(exs)

    async def _learn_leased(
        self, h: Handle, examples: list[Example], batch: bool
    ) -> list[dict[str, Any]]:
        return await self._leased(
            h, lambda catch_up: self._learn_attempts(h, examples, batch, catch_up=catch_up)
        )

    async def _leased(self, h: Handle, attempts: Callable[[bool], Awaitable[Any]]) -> Any:
        """``attempts(catch_up)`` holding the model's writer lease when processes share the
        store (``catch_up``: apply their entries first), else at once."""
        if not (self.settings.shared_store and self.settings.durability == "log"):
            return await attempts(False)
        # other processes write this model too: take the model's writer lease, apply their
        # entries, then learn and append; the conditional append stays the safety net
        deadline = time.monotonic() + _LEASE_WAIT
        delay = 0.0005
        while not await store_call(self.store.acquire_writer(h.name, self._token, _LEASE_TTL)):
            if time.monotonic() > deadline:
                raise StoreUnavailable(f"model {h.name!r}: another process holds the writer lease")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.02)
        try:
            return await attempts(True)
        finally:
            with contextlib.suppress(*STORE_ERRORS):
                await self.store.release_writer(h.name, self._token)

    async def _learn_attempts(
        self, h: Handle, examples: list[Example], batch: bool, *, catch_up: bool
    ) -> list[dict[str, Any]]:
        for _ in range(_MAX_ATTEMPTS):
            await self.models.clean(h)
            if catch_up:
                try:
                    ids_bytes = h.ids.nbytes
                    await self.models.recovery.replay(h, keys=True)
                    self.models.add_cost(h, h.ids.nbytes - ids_bytes)  # other instances' ids
                except LogGap:  # another process snapshotted and trimmed past us: reload
                    h.dirty = True
                    await self.models.clean(h)
                except Exception:
                    h.dirty = True
                    raise
            try:
                return await self._learn_locked(h, examples, batch)
            except (SeqConflict, DuplicateKey) as exc:
                log.info("model %s: %s; catching up with the log", h.name, exc)
                h.dirty = True
            except ModelGone:  # deleted, maybe created again: not this incarnation's log
                self.models.discard(h)
                raise ModelNotFound(f"model {h.name!r} not found") from None
        raise StoreUnavailable(f"model {h.name!r}: concurrent writers kept moving the log; retry")

    async def _learn_locked(
        self, h: Handle, examples: list[Example], batch: bool
    ) -> list[dict[str, Any]]:
        results: list[dict[str, Any] | None] = [None] * len(examples)
        many = batch or len(examples) > 1  # errors name examples.<i>.<field>
        if all(ex.key is None for ex in examples):  # no ids: every example is new, in order
            todo = list(range(len(examples)))
            await self._learn_new(h, examples, todo, results, many)
            return results  # type: ignore[return-value]
        first_of: dict[str, int] = {}
        maybe: dict[str, int] = {}  # ids the filter may have seen: the store knows
        keys = [ex.key for ex in examples]
        seen = h.ids.maybe_many(keys) if len(keys) > 8 else None  # type: ignore[arg-type]
        for i, ex in enumerate(examples):
            if ex.key is not None and ex.key not in first_of:
                first_of[ex.key] = i
                unsaved = h.unsaved_ids.get(ex.key)
                if unsaved is not None:
                    results[i] = {**orjson.loads(unsaved[1]), "duplicate": True}
                elif seen[i] if seen is not None else ex.key in h.ids:
                    maybe[ex.key] = i
        if maybe:
            found = await store_call(self.store.get_answers(h.name, list(maybe)))
            for key, answer in found.items():
                results[maybe[key]] = {**orjson.loads(answer), "duplicate": True}
        todo = [
            i
            for i, ex in enumerate(examples)
            if results[i] is None and (ex.key is None or first_of[ex.key] == i)
        ]  # a key repeated inside this batch is answered like a retry of its first occurrence
        if todo:
            await self._learn_new(h, [examples[i] for i in todo], todo, results, many)
        for i, ex in enumerate(examples):
            if results[i] is None:  # a key repeated inside the batch
                results[i] = {**results[first_of[ex.key]], "duplicate": True}  # type: ignore[index]
        return results  # type: ignore[return-value]

    async def _learn_new(
        self, h: Handle, exs: list[Example], rows: list[int], results: list, many: bool
    ) -> None:
        """Log records, predict-then-learn, append, then bookkeeping; ``results[rows[j]]`` gets
        the answer to ``exs[j]``."""
        _, learners = engine()
        # the log records first: whatever the store cannot hold is refused before learning
        raws = _records(exs, rows, many)
        log_durable = self.settings.durability == "log"
        X = [ex.features for ex in exs]
        learned = True  # unknown until the engine answers
        try:
            if h.board is None:
                probas, exc, learned = await off_loop(
                    h, n_values(X), _predict_learn, h.model, X, exs
                )
            else:
                size = n_values(X) * h.board.size
                probas, exc, learned = await off_loop(h, size, _predict_learn_all, h, X, exs)
            if exc is not None:
                raise exc
        except (learners.FeatureTypeError, learners.LabelError, ValueError) as exc:
            # the engine rejects a batch before learning any of it (the schema rolls back);
            # should it ever have learned part of it, rebuild the model from the log
            if learned and log_durable:
                h.dirty = True
            raise InvalidInput(f"{error_field(exc, rows if many else None)}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - an engine bug, not the client's input
            log.exception("model %s: engine failed on learn", h.name)
            h.dirty = log_durable  # unknown state: rebuild from the log
            raise EngineFailure(
                f"model {h.name}: internal engine error while learning (logged on the "
                "server); nothing was acknowledged and the model is rebuilt from its log"
            ) from exc
        except BaseException:  # cancelled while the engine ran on: what it learned is unknown
            h.dirty = log_durable
            raise
        seq0 = h.seq
        argmax_label = learners.argmax_label
        entries, outs, preds, keyed = [], [], [], []  # keyed: (j, key, stored answer)
        try:
            for j, (ex, proba) in enumerate(zip(exs, probas, strict=True)):
                if ex.served is None:
                    proba = clean_proba(proba)
                    pred = argmax_label(proba)
                else:
                    pred, proba = ex.served
                seq = seq0 + j + 1
                if ex.key is None:
                    entries.append(Entry(raws[j]))
                else:
                    resp = dumps({"prediction": pred, "probabilities": proba, "seq": seq})
                    entries.append(Entry(raws[j], ex.key, resp))
                    keyed.append((j, ex.key, resp))
                preds.append(pred)
                outs.append({"prediction": pred, "probabilities": proba, "seq": seq,
                             "duplicate": False})  # fmt: skip
        except Exception as exc:  # learned but not loggable: an engine bug, rebuild
            log.exception("model %s: engine answer cannot be encoded", h.name)
            h.dirty = log_durable
            raise EngineFailure(
                f"model {h.name}: internal error while encoding the answer (logged on the "
                "server); nothing was acknowledged and the model is rebuilt from its log"
            ) from exc
        if log_durable:
            try:
                new_seq = await self.store.append(h.name, entries, h.seq, h.incarnation)
            except OutcomeUnknown as exc:  # sent, unanswered: applied, fenced, or unknown
                new_seq = await settle_lost(self.store, h, exc)
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
        h.metrics.update_many([ex.label for ex in exs], preds)
        kept = h.ids.add_many([k for _, k, _ in keyed], [seq0 + j + 1 for j, _, _ in keyed])
        if not log_durable:  # no log holds them: the next snapshot records them in the store
            for j, key, resp in keyed:
                h.unsaved_ids[key] = (seq0 + j + 1, resp)
                kept += key_cost(key, resp)
        if len(rows) == len(results):  # every example of the request is new: rows are 0..n-1
            results[:] = outs
        else:
            for i, out in zip(rows, outs, strict=True):
                results[i] = out
        if kept:  # the memory budget sees the ids as they come (the writer re-checks when idle)
            self.models.add_cost(h, kept)
        if h.board is not None and h.board.policy is not None:
            winner = h.board.due()
            if winner is not None:  # the policy's promotion: a control record of its own
                log.info("model %s: auto-promoting challenger %s", h.name, winner)
                try:
                    await self._append_control(h, {"op": "promote", "name": winner, "auto": True})
                except StoreUnavailable as exc:
                    log.warning("model %s: auto-promotion not applied: %s", h.name, exc)
                except Exception:  # noqa: BLE001 - the examples are answered all the same
                    log.exception("model %s: auto-promotion failed", h.name)
                    h.dirty = True

    # ----------------------------------------------------------------- control records
    async def control(self, h: Handle, make: Callable[[Handle], dict[str, Any] | None]) -> None:
        """Append a control record (challengers, a promotion: :mod:`app.registry.challengers`)
        to the model's log and apply it, in the model's write order (its lock, its lease).
        ``make(h)`` builds the record from the model as it is then (under the lock), raising
        :class:`InvalidInput` when the request does not fit it, or ``None``: nothing to do."""
        async with h.lock:
            await self._leased(h, lambda catch_up: self._control_attempts(h, make, catch_up))

    async def _control_attempts(self, h: Handle, make: Callable, catch_up: bool) -> None:
        for _ in range(_MAX_ATTEMPTS):
            await self.models.clean(h)
            if catch_up:
                try:
                    await self.models.recovery.replay(h, keys=True)
                except Exception:
                    h.dirty = True
                    raise
            rec = make(h)
            if rec is None:
                return
            try:
                return await self._append_control(h, rec)
            except (SeqConflict, DuplicateKey) as exc:
                log.info("model %s: %s; catching up with the log", h.name, exc)
                h.dirty = True
            except ModelGone:
                self.models.discard(h)
                raise ModelNotFound(f"model {h.name!r} not found") from None
        raise StoreUnavailable(f"model {h.name!r}: concurrent writers kept moving the log; retry")

    async def _append_control(self, h: Handle, rec: dict[str, Any]) -> None:
        """Append a checked control record, then apply it (the caller holds the lock)."""
        if self.settings.durability == "log":
            try:
                new_seq = await self.store.append(h.name, [Entry(dumps(rec))], h.seq, h.incarnation)
            except OutcomeUnknown as exc:
                new_seq = await settle_lost(self.store, h, exc)  # applied, else raises
            except STORE_ERRORS as exc:
                raise StoreUnavailable(f"store unavailable, nothing applied: {exc}") from exc
        else:
            new_seq = h.seq + 1
        try:
            await off_loop(h, WHOLE_MODEL, self.models.recovery.apply_control, h, rec)
            arrays = await off_loop(h, WHOLE_MODEL, arrays_bytes, h)
        except BaseException:
            h.dirty = True  # logged but not applied here: rebuilt from the log
            raise
        h.seq = new_seq
        self.models.add_cost(h, estimate_cost(h, arrays) - h.cost)
