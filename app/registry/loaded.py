"""The models this process holds in memory: loaded on demand, snapshotted, dropped.

This is the one place that decides which models are in memory. :meth:`LoadedModels.get` loads a
model the first time it is asked for; :meth:`LoadedModels.unload` snapshots an idle model and drops
it (the next request loads it again, exactly: snapshot + log). A memory budget (evicting the least
recently used idle models) belongs here, on top of those two.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

from app.errors import CorruptSnapshot, ModelBroken, ModelNotFound, StoreUnavailable
from app.registry.common import store_call
from app.registry.handles import Handle
from app.registry.recovery import LogGap, Recovery, Unloadable

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
        self._handles: dict[str, Handle] = {}
        self.broken: dict[str, str] = {}  # model name -> why it could not be loaded
        self._loading: dict[str, asyncio.Lock] = {}

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
        """Hold a model just declared in this process."""
        self._handles[h.name] = h

    def drop(self, name: str) -> None:
        """Forget a model (deleted, or rebuilt from the store on its next use)."""
        self._handles.pop(name, None)

    def mark_broken(self, name: str, reason: str) -> ModelBroken:
        """Record why a model cannot be loaded, drop it; returns the error to raise."""
        self.broken[name] = reason
        self._handles.pop(name, None)
        return ModelBroken(f"model {name!r} is broken: {reason}")

    # ------------------------------------------------------------------ loading
    async def get(self, name: str) -> Handle:
        """The live model, loading it from the store when it is not in memory (also a model
        another process declared); a dirty model is rebuilt first."""
        if name in self.broken:
            raise ModelBroken(f"model {name!r} is broken: {self.broken[name]}")
        h = self._handles.get(name)
        if h is not None:
            if h.dirty:
                async with h.lock:
                    await self.clean(h)
            return h
        lock = self._loading.setdefault(name, asyncio.Lock())
        async with lock:
            h = self._handles.get(name)
            if h is None:
                spec = await store_call(self.store.get_model(name))
                if spec is None:
                    raise ModelNotFound(f"model {name!r} not found")
                h = await self.load(name, spec)
                self._handles[name] = h
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
        """Rebuild a dirty model from the store (the caller holds its lock)."""
        if not h.dirty:
            return
        spec = await store_call(self.store.get_model(h.name))
        if spec is None:
            self.drop(h.name)
            raise ModelNotFound(f"model {h.name!r} not found")
        h.adopt(await self.load(h.name, spec))

    async def catch_up(self, h: Handle) -> None:
        """Apply the log entries other processes appended (takes the model's lock).

        A log trimmed past this process's position (another process snapshotted) shows up as an
        empty tail while the store's last seq is ahead: the model is reloaded from the snapshot.
        """
        async with h.lock:
            try:
                n = await self.recovery.replay(h, keys=True)
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
        try:
            await self.recovery.snapshot(h)
        except ModelNotFound:
            self.drop(h.name)
            raise

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

    async def periodic(self) -> None:
        """Background task: snapshot models whose last snapshot is older than the interval."""
        interval = self.settings.snapshot_interval
        while True:
            await asyncio.sleep(min(interval, 1.0))
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
            if self._handles.get(name) is h:
                self.drop(name)
        return True
