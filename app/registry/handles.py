"""What the registry keeps per model: the live ensemble and its bookkeeping (:class:`Handle`)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from app.metrics import Prequential
from app.registry.ids import SeenIds
from app.stores.base import incarnation_of

# What a model costs in memory besides its state arrays: the Python objects, the compiled bank's
# struct and its index arrays, the handle. Measured with benchmarks/many_models.py: ~110-150 KiB of
# RSS per small OzaBag(NB, 10) model whose arrays hold ~14 kB (110-190 KiB measured).
MODEL_OVERHEAD = 160 * 1024
KEY_OVERHEAD = 120  # an id held until the next snapshot: dict entry, tuple, two bytes objects


def key_cost(key: str, answer: bytes) -> int:
    """Estimated bytes of one id held in memory with its answer (durability ``none`` holds the
    ids learned since the last snapshot; the store records them at the snapshot)."""
    return len(key) + len(answer) + KEY_OVERHEAD


def model_bytes(model: Any) -> int:
    """Bytes a loaded model's arrays take in memory: its ``memory_bytes`` (native learners and
    their ensembles: the arrays as allocated, with the row index, and the schema: names,
    values, labels), else twice its saved state
    (arrays grow by doubling). The saved state is compact (live rows only, int32 where values
    fit): a loaded tree ensemble takes about four times its ``state_bytes``."""
    mb = getattr(model, "memory_bytes", None)
    return int(mb) if mb is not None else 2 * int(model.state_bytes)


def arrays_bytes(h: Handle) -> int:
    """``model_bytes`` of the model's engine, and of its challengers' engines with their
    scores (:mod:`app.registry.challengers`): engine work, under the engine lock."""
    board = h.board
    return model_bytes(h.model) + (board.nbytes() if board is not None else 0)


def estimate_cost(h: Handle, arrays: int | None = None) -> int:
    """Estimated bytes a loaded model holds: its arrays and schema (``model_bytes``, or
    ``arrays`` when the caller measured it), its filter of seen ids and the ids not yet in the
    store (durability ``none``), and :data:`MODEL_OVERHEAD`."""
    unsaved = sum(key_cost(k, v) for k, (_, v) in h.unsaved_ids.items())
    if arrays is None:
        arrays = arrays_bytes(h)
    return MODEL_OVERHEAD + arrays + h.ids.nbytes + unsaved


class ModelMetrics(Prequential):
    """The prequential scores of one model's *served* predictions: a
    :class:`app.metrics.Prequential` (same ``window`` parameter, state stored in snapshots) that
    skips the ``None`` an untrained model serves.

    Examples
    --------
    >>> m = ModelMetrics(window=10)
    >>> m.update("a", "a")
    >>> m.update("b", None)
    >>> m.report()["n_scored"]
    1
    """

    def update(self, y_true: Any, y_pred: Any) -> None:
        """Score one served prediction; predictions of an untrained model (``None``) are skipped."""
        if y_pred is not None:
            super().update(y_true, y_pred)

    def update_many(self, y_true: list, y_pred: list) -> None:
        """:meth:`update` of every pair, in one go (``None`` predictions skipped)."""
        if None in y_pred:
            kept = [(t, p) for t, p in zip(y_true, y_pred, strict=True) if p is not None]
            y_true, y_pred = [t for t, _ in kept], [p for _, p in kept]
        super().update_many(y_true, y_pred)

    def report(self) -> dict[str, Any]:
        """``values()`` (accuracy, kappa, the class scores, cumulative and windowed: ``None``
        before any score), ``n_scored`` and ``per_class`` (per-class recall and precision, the
        confusion matrix's cells)."""
        return {**self.values(), "n_scored": self.n_scored, "per_class": self.per_class()}


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
    """A live model and its bookkeeping.

    ``seq`` is the last log entry the model applied, ``snap_seq`` the one its newest snapshot
    holds; ``ids`` tells which idempotency ids of the window the model *may* have seen (their
    answers are in the store; :mod:`app.registry.ids`), ``unsaved_ids`` maps the ids learned
    since the last snapshot to ``(seq, answer)`` when there is no log to hold them (durability
    ``none``); a ``dirty`` model learned something its log may lack and is rebuilt before it is
    used again. ``last_refresh`` is when the model was last checked against the store (its
    incarnation, and with a shared store the log's tail). ``lock`` makes one writer per model;
    ``engine`` is held while a worker thread runs the model's engine
    (:func:`app.registry.common.off_loop`).
    """

    name: str
    spec: dict[str, Any]
    model: Any
    seq: int = 0
    snap_seq: int = 0
    metrics: ModelMetrics = field(default_factory=ModelMetrics)
    ids: SeenIds = field(default_factory=SeenIds)
    unsaved_ids: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    engine: asyncio.Lock = field(default_factory=asyncio.Lock)  # held by engine work off the loop
    dirty: bool = False
    last_snapshot: float = field(default_factory=time.monotonic)
    last_refresh: float = field(default_factory=time.monotonic)
    learned: int = 0
    pending: list = field(default_factory=list)  # [(examples, future)] waiting for the writer
    writer: asyncio.Task | None = None
    cost: int = 0  # estimated bytes in memory (LoadedModels' budget), updated at load / snapshot
    unsettled: Any = None  # an append whose answer was lost (stores.OutcomeUnknown): outcomes.py
    board: Any = None  # champion and challengers (app.registry.challengers.Board), if any

    @property
    def incarnation(self) -> str:
        """Which life of its name this is (in its spec; ``""``: a legacy model)."""
        return incarnation_of(self.spec)

    @property
    def since_snapshot(self) -> int:
        """Log entries applied since the newest snapshot."""
        return self.seq - self.snap_seq

    @property
    def idle(self) -> bool:
        """Nothing queued, no writer running and the lock free (it could be unloaded)."""
        return not self.pending and self.writer is None and not self.lock.locked()

    def adopt(self, fresh: Handle) -> None:
        """Take the state of ``fresh`` (the same model rebuilt from the store): clean again."""
        self.spec, self.model, self.seq, self.snap_seq = (
            fresh.spec,
            fresh.model,
            fresh.seq,
            fresh.snap_seq,
        )
        self.metrics, self.ids, self.unsaved_ids = fresh.metrics, fresh.ids, fresh.unsaved_ids
        self.cost, self.board = fresh.cost, fresh.board
        self.dirty = False
