"""The models this process holds in memory: loaded on demand, snapshotted, dropped.

This is the one place that decides which models are in memory. :meth:`LoadedModels.get` loads a
model the first time it is asked for; :meth:`LoadedModels.unload` snapshots an idle model and drops
it (the next request loads it again, exactly: snapshot + log). With a memory budget
(``CHORUS_MEMORY_MB``) the models are kept in least-recently-used order, each with an estimated
cost (:func:`app.registry.handles.estimate_cost`, refreshed at load, at every snapshot and every
second while it learns); when their sum passes the budget one background task unloads the least
recently used idle models until it fits again. A busy model (a request queued or running, its lock held) or one that must be
rebuilt is never unloaded; its turn comes once it is idle.

A held model is one incarnation of its name (ARCHITECTURE §10): :meth:`LoadedModels.verify`
compares it with the store's, and drops it (deleted) or reloads it (deleted and created again)
when they differ. Reads verify it when it was last checked ``read_staleness`` seconds ago or
more (:mod:`app.registry.reader`); writes need not: the store refuses an append of another
incarnation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from app.errors import CorruptSnapshot, ModelBroken, ModelNotFound, StoreUnavailable
from app.registry.common import WHOLE_MODEL, off_loop, store_call
from app.registry.handles import Handle, arrays_bytes, estimate_cost
from app.registry.outcomes import reconcile
from app.registry.recovery import LogGap, Recovery, Unloadable
from app.stores.base import incarnation_of

log = logging.getLogger("chorus.registry")


class LoadedModels:
    """The live models of one process and the models that could not be loaded.

    Parameters
    ----------
    recovery
        Loads models from the store and snapshots them.
    """

    def __init__(self, recovery: Recovery) -> None:
        self.recovery = recovery
        self.store = recovery.store
        self.settings = recovery.settings
        self._handles: OrderedDict[str, Handle] = OrderedDict()  # least recently used first
        self.broken: dict[str, str] = {}  # model name -> why it could not be loaded
        self._loading: dict[str, asyncio.Lock] = {}
        self.budget = self.settings.memory_mb * 2**20  # bytes; 0 = none
        self.resident_bytes = 0  # sum of the held models' estimated costs
        self.evicted = 0  # models unloaded to fit the budget, since start
        self._evictor: asyncio.Task | None = None
        self.data_id: str | None = None  # the store's data id when first asked (check_data)
        self.lost: str | None = None  # a loss of the store's data not reported by /readyz yet
        self._costed: dict[str, tuple[int, int]] = {}  # name -> (handle id, learned) estimated

    # ------------------------------------------------------------------ what is loaded
    def peek(self, name: str) -> Handle | None:
        """The model if it is in memory (never loads)."""
        return self._handles.get(name)

    def __iter__(self) -> Iterator[Handle]:
        return iter(list(self._handles.values()))

    def __len__(self) -> int:
        return len(self._handles)

    def names(self) -> list[str]:
        """Names of the models in memory."""
        return list(self._handles)

    def add(self, h: Handle) -> None:
        """Hold a model (just declared or loaded) as the most recently used one."""
        if not h.cost:
            h.cost = estimate_cost(h)
        self.drop(h.name)
        self._handles[h.name] = h
        self.resident_bytes += h.cost
        self.check_budget()

    def drop(self, name: str) -> None:
        """Forget a model (deleted, or rebuilt from the store on its next use)."""
        h = self._handles.pop(name, None)
        self._costed.pop(name, None)
        if h is not None:
            self.resident_bytes -= h.cost

    def discard(self, h: Handle) -> None:
        """Forget ``h`` if it is the model held under its name (not a newer incarnation)."""
        if self._handles.get(h.name) is h:
            self.drop(h.name)

    def add_cost(self, h: Handle, nbytes: int) -> None:
        """A held model grew by about ``nbytes`` (e.g. a segment of its id filter) between the
        estimates made at load and snapshot."""
        h.cost += nbytes
        self._recount(h, h.cost - nbytes)

    def _recount(self, h: Handle, old_cost: int) -> None:
        """``h.cost`` changed from ``old_cost``: keep the held models' sum in step (only a held
        handle counts)."""
        if self._handles.get(h.name) is h:
            self.resident_bytes += h.cost - old_cost

    def has_room(self) -> bool:
        """Whether the held models fit the budget (always, without one)."""
        return not self.budget or self.resident_bytes <= self.budget

    def mark_broken(self, name: str, reason: str) -> ModelBroken:
        """Record why a model cannot be loaded, drop it; returns the error to raise."""
        self.broken[name] = reason
        self.drop(name)
        return ModelBroken(f"model {name!r} is broken: {reason}")

    # ------------------------------------------------------------------ loading
    async def get(self, name: str) -> Handle:
        """The live model, loading it from the store when it is not in memory (also a model
        another process declared); a dirty model is rebuilt first."""
        if name in self.broken:
            raise ModelBroken(f"model {name!r} is broken: {self.broken[name]}")
        h = self._handles.get(name)
        if h is not None:
            self._handles.move_to_end(name)
            if not h.dirty:
                return h
            async with h.lock:
                with contextlib.suppress(ModelNotFound):  # its incarnation is gone: dropped,
                    await self.clean(h)  # and the store's model of the name loads below
                    return h
        lock = self._loading.setdefault(name, asyncio.Lock())
        try:
            async with lock:
                h = self._handles.get(name)
                if h is None:
                    spec = await store_call(self.store.get_model(name))
                    if spec is None:
                        raise ModelNotFound(f"model {name!r} not found")
                    h = await self.load(name, spec)
                    self.add(h)
        finally:
            if not lock.locked() and self._loading.get(name) is lock:
                del self._loading[name]  # one lock per model being loaded, not per model ever
        return h

    async def load(self, name: str, spec: dict[str, Any]) -> Handle:
        """Load a model from the store (not yet held); one that cannot be loaded is marked
        broken (:class:`ModelBroken`)."""
        try:
            h = await self.recovery.load(name, spec)
        except Unloadable as exc:
            raise self.mark_broken(name, str(exc)) from exc
        self.broken.pop(name, None)
        return h

    async def clean(self, h: Handle) -> None:
        """Rebuild a dirty model from the store (the caller holds its lock): an append of it whose
        answer was lost is settled first (:func:`app.registry.outcomes.reconcile`); one whose
        incarnation is gone is dropped (:class:`ModelNotFound`), never rebuilt as another."""
        if not h.dirty:
            return
        await reconcile(self.store, h)
        spec = await store_call(self.store.get_model(h.name))
        if spec is None or incarnation_of(spec) != h.incarnation:
            self.discard(h)
            raise ModelNotFound(f"model {h.name!r} not found")
        await self._rebuild(h, spec)

    async def _rebuild(self, h: Handle, spec: dict[str, Any]) -> None:
        """Load ``h`` again from the store, as the model ``spec`` declares."""
        before = h.cost
        h.adopt(await self.load(h.name, spec))
        self._recount(h, before)

    async def verify(self, h: Handle) -> None:
        """Check that ``h`` is the store's incarnation of its name: a model deleted meanwhile
        is dropped (:class:`ModelNotFound`), one deleted and created again is reloaded as the
        new one (under the model's lock, which the check itself does not take)."""
        spec = await store_call(self.store.get_model(h.name))
        if spec is None or incarnation_of(spec) != h.incarnation:
            async with h.lock:
                await self._verify(h)
        h.last_refresh = time.monotonic()

    async def _verify(self, h: Handle) -> None:
        """:meth:`verify`, the caller holding the model's lock."""
        spec = await store_call(self.store.get_model(h.name))
        if spec is None:
            self.discard(h)
            await self.vanished(h.name)
            raise ModelNotFound(f"model {h.name!r} not found")
        if incarnation_of(spec) != h.incarnation:
            log.info("model %s was deleted and created again: loading the new one", h.name)
            h.dirty = True
            await self._rebuild(h, spec)

    async def vanished(self, name: str) -> None:
        """A model this process held is gone from the store: deleted by another process, or
        the store lost its data (:meth:`check_data` tells and logs it)."""
        if await self.check_data() is None:
            log.info("model %s was deleted by another process: dropped from memory", name)

    async def check_data(self) -> str | None:
        """Whether the store still holds the data this process started on (its ``data_id``):
        ``None`` if so (or it cannot tell now), else the loss, logged at ERROR, after dropping
        every model held (they load again on demand: a model still declared comes back, a lost
        one answers 404)."""
        try:
            now = await store_call(self.store.data_id())
        except StoreUnavailable:  # (a Redis Cluster master down: its slots' models say so)
            return None
        if self.data_id is None or now == self.data_id:
            self.data_id = now
            return None
        self.data_id = now
        held = self.names()
        for name in held:
            self.drop(name)
        self.broken.clear()
        shown = ", ".join(held[:10]) + (", ..." if len(held) > 10 else "")
        msg = (
            f"the {self.store.name} store lost its data under the running server (restarted "
            f"empty, flushed or replaced): dropped the {len(held)} model(s) held in memory "
            f"({shown}); those it no longer declares answer 404"
        )
        log.error("%s", msg)
        self.lost = msg
        return msg

    async def catch_up(self, h: Handle) -> None:
        """Check the model's incarnation (:meth:`verify`) and apply the log entries other
        processes appended (takes the model's lock).

        A log trimmed past this process's position (another process snapshotted) shows up as an
        empty tail while the store's last seq is ahead: the model is reloaded from the snapshot.
        """
        async with h.lock:
            await self._verify(h)
            try:
                ids_bytes = h.ids.nbytes
                n = await self.recovery.replay(h, keys=True)
                self.add_cost(h, h.ids.nbytes - ids_bytes)  # other instances' ids
                if n == 0 and await store_call(self.store.last_seq(h.name)) > h.seq:
                    raise LogGap(f"model {h.name!r}: log trimmed past seq {h.seq}")
                h.last_refresh = time.monotonic()
            except LogGap:
                h.dirty = True
                await self.clean(h)
            except CorruptSnapshot as exc:
                raise self.mark_broken(h.name, str(exc)) from exc

    # ------------------------------------------------------------------ snapshots
    async def snapshot(self, h: Handle) -> None:
        """Snapshot a model (the caller holds its lock); a deleted one is dropped."""
        before = h.cost
        try:
            await self.recovery.snapshot(h)  # refreshes h.cost
        except ModelNotFound:
            self.discard(h)
            raise
        self._recount(h, before)
        self.check_budget()

    async def snapshot_quietly(self, h: Handle) -> bool:
        """:meth:`snapshot`, logging a failure instead of raising (the next one retries)."""
        try:
            await self.snapshot(h)
            return True
        except (StoreUnavailable, ModelNotFound) as exc:
            log.warning("snapshot of %s failed: %s", h.name, exc)
        except Exception:  # noqa: BLE001 - the model and the others go on
            log.exception("snapshot of %s failed", h.name)
        return False

    async def snapshot_all(self, *, force: bool = False) -> int:
        """Snapshot every model that changed (all with ``force``); returns how many were written."""
        n = 0
        for h in self:
            if h.dirty or (h.since_snapshot == 0 and not force):
                continue
            async with h.lock:
                if h.dirty or (h.since_snapshot == 0 and not force):
                    continue
                n += await self.snapshot_quietly(h)
        return n

    async def refresh_costs(self) -> None:
        """Estimate again the cost of every held model that learned since its last estimate
        (its arrays and schema grow between snapshots, which estimate it too), its arrays in
        a worker thread (``off_loop``)."""
        for h in self:
            mark = (id(h), h.learned)
            if h.dirty or self._costed.get(h.name) == mark:
                continue
            self._costed[h.name] = mark
            arrays = await off_loop(h, WHOLE_MODEL, arrays_bytes, h)
            before = h.cost
            h.cost = estimate_cost(h, arrays)
            self._recount(h, before)

    async def periodic(self) -> None:
        """Background task: estimate the models that learned again (``refresh_costs``, every
        second), snapshot models whose last snapshot is older than the interval."""
        interval = self.settings.snapshot_interval
        while True:
            await asyncio.sleep(min(interval, 1.0))
            await self.refresh_costs()
            self.check_budget()
            now = time.monotonic()
            for h in self:
                if h.since_snapshot > 0 and not h.dirty and now - h.last_snapshot >= interval:
                    async with h.lock:
                        if h.since_snapshot > 0 and not h.dirty:
                            if not await self.snapshot_quietly(h):
                                h.last_snapshot = now  # retried after another interval

    async def unload(self, name: str) -> bool:
        """Snapshot an idle model (when it changed) and drop it from memory; ``False`` (kept) if
        it is busy, dirty or its snapshot fails. The next request loads it again, exactly."""
        h = self._handles.get(name)
        if h is None:
            return True
        if not h.idle or h.dirty:
            return False
        async with h.lock:
            if h.pending or h.writer is not None or h.dirty:
                return False
            if h.since_snapshot > 0 and not await self.snapshot_quietly(h):
                return False
            if h.pending or h.writer is not None or h.dirty:
                return False  # a request came while the snapshot was written: keep it
            if self._handles.get(name) is h:
                self.drop(name)
        return True

    # ------------------------------------------------------------------ the memory budget
    def check_budget(self) -> None:
        """Start the evictor when the held models are over the budget (not already running):
        called when a model is added, snapshotted or becomes idle, and every second."""
        if self.has_room() or self._evictor is not None:
            return
        try:
            self._evictor = asyncio.get_running_loop().create_task(self._evict())
        except RuntimeError:  # no event loop (a synchronous caller): the next async call evicts
            pass

    async def _evict(self) -> None:
        """Unload least recently used idle models until the held ones fit the budget.

        The most recently used model is never taken (it is the one being served). A model that
        cannot be unloaded now (busy, dirty, its snapshot failed) moves to the recent end and is
        tried again after the others; the task ends when a whole pass frees nothing.
        """
        try:
            tried: set[str] = set()
            while not self.has_room() and len(self._handles) > 1:
                newest = next(reversed(self._handles))  # the one being served: spared
                victim = next((n for n in self._handles if n not in tried), None)  # LRU first
                if victim is None or victim == newest:
                    break
                tried.add(victim)
                if await self.unload(victim):
                    self.evicted += 1
                    tried.discard(victim)
                elif victim in self._handles:
                    self._handles.move_to_end(victim)
        except Exception:  # noqa: BLE001 - eviction is best effort; the models keep serving
            log.exception("evicting models to fit CHORUS_MEMORY_MB failed")
        finally:
            self._evictor = None
