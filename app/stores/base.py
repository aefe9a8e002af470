"""The store protocol (ARCHITECTURE §6): per-model ordered log, snapshots, idempotency keys."""

from __future__ import annotations

import functools
import inspect
import secrets
from typing import Any, NamedTuple, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")


class StoreError(Exception):
    """Base class of store-level outcomes the registry reacts to."""


class StoreConfigError(StoreError):
    """The store cannot work as configured (bad URL, wrong kind of server, unreachable cluster at
    start-up): retrying will not help, so start-up fails with this message."""


class SeqConflict(StoreError):
    """The log moved on since this process last applied it (another writer); nothing was written.

    Parameters
    ----------
    current
        The log's last sequence number.
    """

    def __init__(self, current: int) -> None:
        super().__init__(f"log is at {current}")
        self.current = current


class DuplicateKey(StoreError):
    """An idempotency key in the batch is already in the store; nothing was written."""

    def __init__(self, key: str) -> None:
        super().__init__(f"idempotency key {key!r} already applied")
        self.key = key


class ModelGone(StoreError):
    """The model was deleted (by another process), or is another incarnation of its name than
    the one the call names; nothing was written."""


class StoreDown(StoreError):
    """The store did not answer or failed (connection, timeout, disk, locked database): the
    operation may be retried. Stores raise this for their driver's errors (``DRIVER_ERRORS``),
    so nothing above the store protocol handles redis-py or sqlite3 exceptions."""


def new_incarnation() -> str:
    """A new incarnation id: every create of a model starts one (ARCHITECTURE §10)."""
    return secrets.token_hex(8)


def incarnation_of(spec: dict[str, Any]) -> str:
    """The incarnation id a stored spec carries; ``""`` for a model created before incarnations
    (a legacy one: it keeps that id until it is deleted)."""
    return str(spec.get("incarnation") or "")


class OutcomeUnknown(StoreDown):
    """An append was sent but its answer never came (a timeout, a connection lost after the
    call went out): the store may have applied it, or may still apply it later. The append
    carried ``token``; the store's ``resolve(name, token, expected_seq, n)`` says what became of
    it and makes sure it is never applied afterwards if it was not (stores whose failed appends
    always wrote nothing, as SQLite's transactions, never raise this).

    Parameters
    ----------
    token, expected_seq, n
        The append's request token, the seq it was conditional on and how many entries it had.
    """

    def __init__(self, message: str, token: str, expected_seq: int, n: int) -> None:
        super().__init__(message)
        self.token, self.expected_seq, self.n = token, expected_seq, n


class StoreCorrupt(StoreDown):
    """The store answered, but the data asked for cannot be read (a damaged page, a truncated
    file): retrying will not help. A model whose data it is cannot load (it is marked broken);
    ``chorus doctor`` checks a store and salvages what can be read. A store says which of its
    driver's errors mean this with a static ``corrupt(exc) -> bool``."""


def raises_store_errors(cls: type[T]) -> type[T]:
    """Class decorator of a store: its public coroutine methods raise :class:`StoreDown` (from
    the driver's exception) for any of the class's ``DRIVER_ERRORS``.

    The tuple is read from the instance's class at call time, so a subclass's methods inherited
    from its base translate the subclass's own errors too.
    """
    for name, fn in list(vars(cls).items()):
        if name.startswith("_") or not inspect.iscoroutinefunction(fn):
            continue

        def wrap(fn: Any) -> Any:
            @functools.wraps(fn)
            async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    return await fn(self, *args, **kwargs)
                except type(self).DRIVER_ERRORS as exc:
                    corrupt = getattr(type(self), "corrupt", None)
                    kind = StoreCorrupt if corrupt is not None and corrupt(exc) else StoreDown
                    raise kind(f"{self.name} store: {type(exc).__name__}: {exc}") from exc

            return method

        setattr(cls, name, wrap(fn))
    return cls


class Entry(NamedTuple):
    """One log entry to append (a named tuple: a batch makes 1,000 of them, and a frozen
    dataclass took three times as long to build).

    Parameters
    ----------
    record
        The encoded example (features, label, weight, ...), replayed in order on recovery.
    key
        Optional idempotency key, recorded atomically with the entry (with the entry's seq, by
        which it is forgotten).
    response
        What to answer a retry of ``key`` with (encoded); stored only when ``key`` is set.
    """

    record: bytes
    key: str | None = None
    response: bytes | None = None


@runtime_checkable
class Store(Protocol):
    """What the registry needs from a durable store.

    Sequence numbers start at 1 and count the entries ever appended to a model's log; a snapshot
    records the sequence number it includes, and ``trim`` drops entries at or below it.
    All methods raise the backend's connection errors when the store is unreachable.

    A model's identity is its name *and* its incarnation (``incarnation_of(spec)``, a new one at
    every create): the writes that take ``incarnation`` write nothing when the stored model is
    another incarnation (``None``: not checked), so a process holding a deleted life of a name
    cannot write into the next one.
    """

    name: str

    async def open(self, timeout: float) -> None:
        """Connect, waiting (bounded) until the store answers."""

    async def close(self) -> None:
        """Release connections."""

    async def ping(self) -> bool:
        """Whether the store answers right now."""

    async def data_id(self) -> str:
        """An id of the store's data, made when the store first answers it and never removed:
        another id means the data was lost or replaced (a Redis restarted empty)."""

    async def create_model(self, name: str, spec: dict[str, Any]) -> bool:
        """Record a model (its incarnation is ``incarnation_of(spec)``); ``False`` if the name is
        taken."""

    async def get_model(self, name: str) -> dict[str, Any] | None:
        """The declared spec of a model, or ``None``."""

    async def list_models(self) -> dict[str, dict[str, Any]]:
        """All declared models, name -> spec."""

    async def delete_model(self, name: str) -> bool:
        """Drop a model with its log, snapshot, keys and predictions; ``False`` if unknown."""

    async def append(
        self, name: str, entries: list[Entry], expected_seq: int, incarnation: str | None = None
    ) -> int:
        """Append entries atomically if the log's last sequence number is ``expected_seq`` (and
        the model is that incarnation).

        Returns the new last sequence number. Raises :class:`SeqConflict`,
        :class:`DuplicateKey` or :class:`ModelGone` having written nothing.
        """

    async def read(self, name: str, after_seq: int, limit: int = 1000) -> list[tuple[int, bytes]]:
        """Up to ``limit`` log entries with sequence number > ``after_seq``, in order."""

    async def last_seq(self, name: str) -> int:
        """The log's last sequence number (0 when empty)."""

    async def put_snapshot(
        self, name: str, seq: int, blob: bytes, incarnation: str | None = None
    ) -> int:
        """Store the model's snapshot that includes the log up to ``seq`` (:class:`ModelGone`
        when the model is gone or another incarnation).

        The previous generation is kept (a newer ``seq`` shifts the current snapshot to
        *previous*; the same ``seq`` replaces the current one; an older one is ignored).
        Returns the ``seq`` of the oldest snapshot kept: the log may be trimmed up to it only.
        """

    async def get_snapshot(self, name: str) -> tuple[int, bytes] | None:
        """The latest snapshot ``(seq, blob)`` or ``None``."""

    async def get_snapshots(self, name: str) -> list[tuple[int, bytes]]:
        """Every kept snapshot generation ``(seq, blob)``, newest first (at most two)."""

    async def trim(self, name: str, upto_seq: int, incarnation: str | None = None) -> None:
        """Drop log entries with sequence number <= ``upto_seq`` (only behind a snapshot;
        nothing when the model is another incarnation)."""

    async def get_answers(self, name: str, keys: list[str]) -> dict[str, bytes]:
        """The stored responses of those of ``keys`` the model remembers (one round trip)."""

    async def key_names(self, name: str) -> list[str]:
        """Every idempotency key the model remembers (for its in-memory filter at load)."""

    async def put_keys(
        self, name: str, items: list[tuple[str, int, bytes]], incarnation: str | None = None
    ) -> None:
        """Remember ``(key, seq, response)`` items, keeping any key already there (durability
        ``none`` records its ids at each snapshot); :class:`ModelGone` if the model is gone or
        another incarnation."""

    async def forget_keys(self, name: str, upto_seq: int) -> None:
        """Drop the idempotency keys of entries at or before ``upto_seq`` (behind the window)."""

    async def put_prediction(self, name: str, pid: str, blob: bytes, ttl: float) -> None:
        """Keep a served prediction for at least ``ttl`` seconds (a delayed label may follow)."""

    async def put_predictions(
        self, items: list[tuple[str, str, bytes]], ttl: float, *, max_per_model: int | None = None
    ) -> set[str]:
        """Keep several ``(model, pid, blob)`` predictions in one round trip / transaction.

        With ``max_per_model`` a model keeps at most that many predictions: the oldest go first.
        Returns the names of the models whose predictions were *not* kept because the part of
        the store that holds them is down (a Redis Cluster master); raises :class:`StoreDown`
        when none could be kept.
        """

    async def get_prediction(self, name: str, pid: str) -> bytes | None:
        """A kept prediction, or ``None``."""

    async def acquire_writer(self, name: str, token: str, ttl: float) -> bool:
        """Take (or extend) the model's writer lease for ``ttl`` seconds; ``False`` if another
        process holds it. Only used when several processes write one model."""

    async def release_writer(self, name: str, token: str) -> None:
        """Give the lease back (only if ``token`` still holds it)."""
