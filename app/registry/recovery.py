"""Stored bytes to a live model and back: snapshot + log replay, and snapshots with log trims.

Recovery is exact because the engine's randomness is a pure function of (seed, example number,
member): replaying the log behind a snapshot reproduces the model bit for bit (ARCHITECTURE §4-5).
This module holds no model itself (:class:`~app.registry.loaded.LoadedModels` does).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson

from app import snapshot as codec
from app.errors import CorruptSnapshot, ModelNotFound, StoreDamaged, StoreUnavailable
from app.registry import challengers
from app.registry.common import (
    STORE_ERRORS,
    WHOLE_MODEL,
    engine,
    engine_spec,
    is_river_spec,
    n_values,
    off_loop,
    store_call,
)
from app.registry.handles import Handle, ModelMetrics, arrays_bytes, estimate_cost
from app.settings import Settings
from app.stores.base import ModelGone, Store, incarnation_of

log = logging.getLogger("chorus.registry")

_MAX_ATTEMPTS = 3
_REPLAY_CHUNK = 1000
# how the reason of a model broken by damaged store data begins (``/readyz`` counts them)
DAMAGED = "the store cannot read this model's data"


def learn_rows(h: Handle, X: list[dict], ys: list, ws: list) -> list[dict]:
    """Predict-then-learn rows by the champion (its probabilities returned) and then by every
    challenger (:meth:`~app.registry.challengers.Board.learn`): the one engine step of a live
    learn and of a replay (engine work: under the model's engine lock)."""
    if h.board is None:
        return h.model.predict_learn_many(X, ys, ws)
    t0 = time.perf_counter()
    probas = h.model.predict_learn_many(X, ys, ws)
    h.board.learn(X, ys, ws, probas, time.perf_counter() - t0)
    return probas


class LogGap(Exception):
    """The log does not continue where the model is (trimmed behind a newer snapshot)."""


class Unloadable(Exception):
    """No stored generation of the model can be loaded (the reason is the message)."""


def mentions_river(header: Any) -> bool:
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


class Recovery:
    """Loads models from one store (newest verified snapshot + log tail) and snapshots them.

    Parameters
    ----------
    store
        The durable store.
    settings
        Service settings (snapshot key, metrics window, idempotency window).
    """

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self._key = settings.snapshot_key.encode() if settings.snapshot_key else None
        self.replaying: tuple[str, int] | None = None  # (model, log entries so far) of a replay

    @property
    def signs(self) -> bool:
        """Whether snapshots are HMAC-signed (``CHORUS_SNAPSHOT_KEY`` is set)."""
        return self._key is not None

    async def load(self, name: str, spec: dict[str, Any]) -> Handle:
        """Load a model, retrying when a newer snapshot lands meanwhile; :class:`Unloadable`
        when no stored generation verifies and replays."""
        for _ in range(_MAX_ATTEMPTS):
            try:
                return await self._load(name, spec)
            except CorruptSnapshot as exc:
                raise Unloadable(str(exc)) from exc
            except StoreDamaged as exc:  # a damaged page: only the models it holds fail
                raise Unloadable(
                    f"{DAMAGED} ({exc.detail}); check and salvage the store with `chorus doctor`"
                ) from exc
            except LogGap as exc:  # a newer snapshot landed between our two reads: again
                reason = str(exc)
        raise Unloadable(reason)

    async def _load(self, name: str, spec: dict[str, Any]) -> Handle:
        """Newest snapshot that verifies and loads (checksum first) + replay of the log tail.

        A rejected snapshot falls back to the previous generation: the log is trimmed only
        behind the oldest one kept, so nothing acknowledged is lost.
        """
        gens = await store_call(self.store.get_snapshots(name))
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
        ensembles, _ = engine()
        window = self.settings.metrics_window
        try:
            if blob is not None:
                state, meta = codec.decode(blob, self._key)
                if not self._key and mentions_river(state["header"]):
                    # a plain checksum anyone can recompute: never decode pickled members
                    raise CorruptSnapshot(
                        "snapshot has river-backed (pickled) members but is not HMAC-signed; "
                        "refused without decoding (set CHORUS_SNAPSHOT_KEY)"
                    )
                inc = meta.get("incarnation", incarnation_of(spec))  # (none: a legacy snapshot)
                if inc != incarnation_of(spec):
                    raise CorruptSnapshot(f"snapshot of another incarnation of {name!r} ({inc})")
                state, board = challengers.load_board(
                    state, meta.get("board"), threads=self.settings.threads, metrics_window=window
                )
                model = ensembles.load_state(state)
                if board is not None:
                    board.champion.model = model
                seq = int(meta["seq"])
                metrics = ModelMetrics.from_json(meta.get("metrics"), window)
            else:
                if is_river_spec(spec) and not self._key:
                    raise CorruptSnapshot("river-backed model needs CHORUS_SNAPSHOT_KEY")
                # (the stored spec with the defaults it was written under: ensembles.stored_spec)
                model = ensembles.build_model(ensembles.stored_spec(engine_spec(spec)))
                model.declare(features=spec.get("features"), classes=spec.get("classes"))
                model.threads = self.settings.threads
                board = challengers.initial_board(
                    spec, model, signs=self.signs, threads=self.settings.threads,
                    metrics_window=window,
                )  # fmt: skip
                seq, metrics = 0, ModelMetrics(window)
        except CorruptSnapshot:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the stored bytes are, only this model fails
            raise CorruptSnapshot(f"stored state cannot be loaded: {exc!r}"[:500]) from exc
        model.threads = self.settings.threads  # (an execution setting: not in the state)
        h = Handle(name, spec, model, seq=seq, snap_seq=seq, metrics=metrics, board=board)
        t0 = time.perf_counter()
        n = await self.replay(h)
        log.info("model %s: %s, %d log entries replayed in %.1f s", name,
                 f"snapshot at seq {seq} loaded" if blob is not None else "no snapshot", n,
                 time.perf_counter() - t0)  # fmt: skip
        # after the replay: every id of an entry the model applied is in the store by now (the
        # append wrote both at once); entries appended later add theirs when they are replayed
        h.ids.add_all(await store_call(self.store.key_names(name)), h.seq)
        h.cost = estimate_cost(h)
        return h

    async def replay(self, h: Handle, *, keys: bool = False) -> int:
        """Apply the log after ``h.seq`` to ``h.model`` in order; returns how many entries.

        With ``keys`` the ids of replayed keyed entries join the model's filter of seen ids
        (used when catching up with entries another process appended). ``replaying`` says how
        far it is meanwhile (``/readyz`` during start-up).
        """
        self.replaying = (h.name, 0)
        try:
            return await self._replay(h, keys)
        finally:
            self.replaying = None

    async def _replay(self, h: Handle, keys: bool) -> int:
        _, learners = engine()
        n = 0
        while True:
            rows = await store_call(self.store.read(h.name, h.seq, _REPLAY_CHUNK))
            if not rows:
                return n
            recs = []
            for s, raw in rows:
                if s != h.seq + len(recs) + 1:
                    raise LogGap(f"model {h.name!r}: log gap at {h.seq + len(recs) + 1}")
                try:
                    recs.append(orjson.loads(raw))
                except orjson.JSONDecodeError as exc:  # damaged bytes: this model only fails
                    raise CorruptSnapshot(f"log entry {s} is not a record: {exc}"[:500]) from exc
            start = 0
            for j, r in enumerate([*recs, None]):
                if r is not None and not challengers.is_control(r):
                    continue
                if j > start:  # the examples before this control record (or the chunk's end)
                    await self._replay_examples(h, recs[start:j], keys, learners)
                if r is not None:
                    await self._replay_control(h, r)
                start = j + 1
            n += len(recs)
            self.replaying = (h.name, n)

    async def _replay_examples(self, h: Handle, recs: list[dict], keys: bool, learners) -> None:
        """Predict-then-learn a run of example records (every candidate: ``learn_rows``)."""
        X = [r["x"] for r in recs]
        try:
            probas = await off_loop(
                h, n_values(X) * (h.board.size if h.board else 1), learn_rows, h, X,
                [r["y"] for r in recs], [r.get("w", 1.0) for r in recs],
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - a log entry the engine refuses (or not one)
            first, last = h.seq + 1, h.seq + len(recs)
            raise CorruptSnapshot(
                f"log entries {first}..{last} cannot be replayed: {exc!r}"[:500]
            ) from exc
        for j, (r, proba) in enumerate(zip(recs, probas, strict=True)):
            pred = r["p"] if "p" in r else learners.argmax_label(proba)
            h.metrics.update(r["y"], pred)
            if keys and "k" in r:
                h.ids.add(r["k"], h.seq + j + 1)
        h.seq += len(recs)

    async def _replay_control(self, h: Handle, rec: dict) -> None:
        """Apply one control record (challengers added or removed, a promotion)."""
        try:
            await off_loop(h, WHOLE_MODEL, self.apply_control, h, rec)
        except Exception as exc:  # noqa: BLE001 - a record this server cannot apply
            raise CorruptSnapshot(
                f"log entry {h.seq + 1} (control) cannot be replayed: {exc!r}"[:500]
            ) from exc
        h.seq += 1

    def apply_control(self, h: Handle, rec: dict) -> None:
        """:func:`app.registry.challengers.apply_control` with this server's settings."""
        challengers.apply_control(
            h, rec, signs=self.signs, threads=self.settings.threads,
            metrics_window=self.settings.metrics_window,
        )  # fmt: skip

    @staticmethod
    def _meta(h: Handle, **extra: Any) -> dict[str, Any]:
        """The app metadata a snapshot blob carries beside the state."""
        return {"name": h.name, "incarnation": h.incarnation, "seq": h.seq,
                "metrics": h.metrics.to_json(), **extra}  # fmt: skip

    def encode(self, h: Handle, **extra: Any) -> bytes:
        """The model's snapshot blob (header + arrays, checksummed or HMAC-signed)."""
        state, board = challengers.full_state(h)
        return codec.encode(state, self._meta(h, board=board, **extra), self._key)

    async def encode_off_loop(self, h: Handle) -> bytes:
        """``encode(h)`` in worker threads: ``to_state`` (engine work: it copies what the
        model's arrays hold now, under the model's ``engine`` lock, see ``off_loop``; nothing
        learns while the model's lock is held, the caller's), then the bytes work (joining the
        arrays, the checksum or HMAC) on that copy, which nobody writes."""
        state, board = await off_loop(h, WHOLE_MODEL, challengers.full_state, h)
        meta = self._meta(h, board=board)
        return await asyncio.to_thread(codec.encode, state, meta, self._key)

    async def snapshot(self, h: Handle) -> None:
        """Write the model's snapshot and trim the log behind it (lock held by the caller);
        :class:`ModelNotFound` if the model was deleted meanwhile."""
        seq = h.seq
        blob = await self.encode_off_loop(h)
        horizon = seq - self.settings.idempotency_window
        try:
            if h.unsaved_ids:  # durability none: the ids learned since the last snapshot
                await self.store.put_keys(
                    h.name,
                    [(k, s, r) for k, (s, r) in h.unsaved_ids.items() if s > horizon],
                    h.incarnation,
                )
            oldest = await self.store.put_snapshot(h.name, seq, blob, h.incarnation)
            await self.store.trim(h.name, oldest, h.incarnation)  # behind the oldest one kept
        except ModelGone:
            raise ModelNotFound(f"model {h.name!r} not found") from None
        except STORE_ERRORS as exc:
            raise StoreUnavailable(f"store unavailable: {exc}") from exc
        h.snap_seq = seq
        h.last_snapshot = time.monotonic()
        h.unsaved_ids.clear()
        await self._forget_old_keys(h, horizon)
        # the arrays now, the ids' filter after forgetting
        h.cost = estimate_cost(h, await off_loop(h, WHOLE_MODEL, arrays_bytes, h))

    async def _forget_old_keys(self, h: Handle, horizon: int) -> None:
        """Drop the ids of entries at or before ``horizon`` (behind the window): from the store
        first, then the filter's segments that hold only such ids (so the filter always knows
        every id the store has, and a retry is answered, not learned again)."""
        if horizon <= 0 or not len(h.ids):  # an empty filter: the store holds no ids either
            return
        try:
            await self.store.forget_keys(h.name, horizon)
        except STORE_ERRORS as exc:
            log.warning("model %s: old idempotency keys kept for now: %s", h.name, exc)
            return
        h.ids.forget_upto(horizon)
