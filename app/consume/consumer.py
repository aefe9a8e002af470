"""The consumer loop: messages from a bus learned through the registry, acknowledged after the log.

A read of up to ``batch`` messages is parsed, split by model (in the order they came), and each
model's consecutive examples become one ``Registry.learn`` call: one engine batch and one log
append, the same path as a batched ``POST /learn``. Late labels go through
``Registry.learn_delayed`` and rows without a label through ``Registry.predict``. Then, in one
round trip to the bus: the answers are published to the output stream (if any), the messages that
can never be learned go to the dead-letter stream with their reason, and all of these are
acknowledged.

Exactly once: a message is acknowledged only after the registry answered it, i.e. after its log
append; a message delivered again (the consumer died before its acknowledgement) carries the same
learn id (its ``id`` field, else the bus's id of the message), which the model's idempotency window
answers as a duplicate without learning it again.

Failures: a message the service answers 4xx (unknown model, bad features, over a model's limit, a
broken model, an unknown or expired prediction id) is dead-lettered with that answer as its reason.
A model whose store fails (503) keeps its messages, in order, and is retried with a growing delay
while the other models go on; at most ``max_pending`` messages are held so. An engine failure is
retried twice, then dead-lettered; a message the bus delivered ``max_deliveries`` times (it
crashed the consumers) is dead-lettered unread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.consume.config import ConsumeConfig
from app.consume.messages import BadMessage, Message, parse
from app.consume.metrics import UNKNOWN_MODEL, ConsumeMetrics
from app.errors import ChorusError, ModelNotFound, NotCaughtUp, NotReady, StoreUnavailable
from app.registry import Example, Registry, dumps
from app.routes.schemas import KEY_MAX
from app.tasks import cancel_and_wait

log = logging.getLogger("chorus.consume")

ENGINE_TRIES = 3  # an engine failure (a 500) is tried this often before the message is dead
RETRY_FIRST, RETRY_MAX = 0.05, 5.0  # seconds a failing model waits before its next try


class BusDown(Exception):
    """The bus did not answer (connection lost, timeout): the loop waits and tries again."""


@dataclass(slots=True)
class Delivery:
    """One message as the bus delivered it.

    Parameters
    ----------
    stream
        The stream (Redis key, JetStream stream) it came from.
    id
        The bus's id of the message (Redis entry id, JetStream stream sequence).
    data
        Its payload (``None``: no payload, or the entry was deleted meanwhile: ``gone``).
    deliveries
        How often the bus delivered it, this time included.
    handle
        The bus's own object for it (a NATS message, to acknowledge).
    """

    stream: str
    id: str
    data: bytes | None
    deliveries: int = 1
    handle: Any = None
    gone: bool = False
    msg: Message | None = None
    learn_id: str = ""
    bad: str | None = None  # why it can never be learned (set by the consumer's parse)

    @property
    def model(self) -> str:
        return self.msg.model if self.msg is not None else ""


class Bus(Protocol):
    """What the loop needs from a message bus (:mod:`app.consume.redis_bus`,
    :mod:`app.consume.nats_bus`). Bus failures raise :class:`BusDown`; a configuration that
    cannot work raises :class:`~app.consume.config.ConsumeConfigError`."""

    kind: str

    async def open(self) -> None:
        """Connect; create (or check) the streams and the group."""

    async def close(self) -> None:
        """Disconnect."""

    async def pending(self, n: int) -> list[Delivery]:
        """Up to ``n`` more of this consumer's messages it had not acknowledged before it
        (re)started, in order (``[]`` when done)."""

    async def read(self, n: int, block: float) -> list[Delivery]:
        """Up to ``n`` new messages, waiting up to ``block`` seconds for the first."""

    async def claim(self, n: int) -> list[Delivery]:
        """Up to ``n`` messages other consumers of the group hold unacknowledged for longer than
        ``claim_idle`` (they died), now this consumer's."""

    async def finish(self, acks: list[Delivery], outputs: list[tuple[Delivery, bytes]],
                     dead: list[tuple[Delivery, str]]) -> None:  # fmt: skip
        """Publish ``outputs`` and ``dead`` (with their reasons), then acknowledge ``acks``."""

    async def lag(self) -> dict[str, int]:
        """Messages per stream not yet delivered to the group."""


@dataclass
class _Outcome:
    """What became of one model's messages of a read."""

    done: list[tuple[Delivery, dict[str, Any] | None]] = field(default_factory=list)
    dead: list[tuple[Delivery, str]] = field(default_factory=list)
    held: list[Delivery] = field(default_factory=list)


def _permanent(exc: BaseException) -> bool:
    """Whether a registry error means the message can never be learned as it is (a 4xx)."""
    if isinstance(exc, StoreUnavailable | NotReady | NotCaughtUp):
        return False
    return isinstance(exc, ChorusError) and exc.status_code < 500


def _reason(exc: BaseException) -> str:
    status = getattr(exc, "status_code", 500)
    return f"{status}: {getattr(exc, 'detail', None) or exc}"


def _outcome(answer: dict | None) -> str | None:
    """What the registry did with an acknowledged message: ``"duplicate"`` (its id was learned
    before), ``"learned"`` (a log sequence number), or ``None`` (answered without learning: a
    prediction)."""
    if answer is None:
        return None
    if answer.get("duplicate"):
        return "duplicate"
    return "learned" if "seq" in answer else None


class Consumer:
    """Consumes one bus into one registry.

    Parameters
    ----------
    registry
        The registry whose learn path the messages take (the HTTP routes' own).
    bus
        The bus to read.
    config
        The consumer's configuration.
    metrics
        Prometheus counters (``None``: none kept).
    """

    def __init__(self, registry: Registry, bus: Bus, config: ConsumeConfig,
                 metrics: ConsumeMetrics | None = None) -> None:  # fmt: skip
        self.registry = registry
        self.bus = bus
        self.config = config
        self.metrics = metrics
        settings = registry.settings
        self.max_batch = settings.max_batch
        self.max_values = settings.max_batch_values
        self.held: dict[str, list[Delivery]] = {}  # model -> its messages waiting for a retry
        self.retry_at: dict[str, float] = {}
        self.delay: dict[str, float] = {}
        self.failures: dict[str, int] = {}  # learn id -> engine failures so far
        self.last_lag: dict[str, int] = {}
        self.counts = {"acked": 0, "learned": 0, "duplicates": 0, "dead": 0, "redelivered": 0}

    @property
    def n_held(self) -> int:
        return sum(map(len, self.held.values()))

    # ------------------------------------------------------------------ the loop
    async def run(self, stop: asyncio.Event, *, ready: Callable[[], Awaitable[None]] | None = None,
                  once: bool = False) -> None:  # fmt: skip
        """Consume until ``stop`` is set (``once``: until no message is left). The bus is opened
        here (its configuration errors are raised); its failures later are waited out."""
        cfg = self.config
        await self.bus.open()
        while not self.registry.ready:
            await asyncio.sleep(0.05)
        if ready is not None:
            await ready()
        log.info("consuming %s %s as %s/%s", cfg.kind, ",".join(cfg.streams), cfg.group,
                 cfg.consumer)  # fmt: skip
        await self._guarded(self._pending, stop)
        # the next read (and its parsing) runs while this one learns: the engine releases the
        # GIL, so the two overlap (at most two reads are held besides what waits for a retry)
        ahead: asyncio.Queue[list[Delivery]] = asyncio.Queue(maxsize=1)
        halt = asyncio.Event()
        reader = asyncio.create_task(self._reader(ahead, stop, halt))
        next_claim = time.monotonic()
        next_lag = 0.0
        try:
            while not stop.is_set():
                now = time.monotonic()
                if now >= next_lag:
                    next_lag = now + 5.0
                    with contextlib.suppress(BusDown):
                        self.last_lag = await self.bus.lag()
                        if self.metrics is not None:
                            self.metrics.lag = self.last_lag
                await self._retry_due(now)
                if now >= next_claim:
                    claimed = await self._guarded(self._claim, stop)
                    full = claimed is not None and claimed >= cfg.batch
                    next_claim = now + (0 if full else min(cfg.claim_idle / 2, 30.0))
                get = asyncio.create_task(ahead.get())
                await asyncio.wait({get, reader}, return_when=asyncio.FIRST_COMPLETED)
                if not get.done():  # the reader ended: stopped, or it failed
                    get.cancel()
                    if not reader.cancelled() and reader.exception() is not None:
                        raise reader.exception()  # (not a silent end of the consuming)
                    break
                batch = get.result()
                if batch:
                    await self._guarded_process(batch)
                elif once and not self.held and ahead.empty():
                    break
        finally:
            halt.set()
            if stop.is_set() or not ahead.empty():  # what it holds is delivered again later
                # (again and again: redis-py can swallow a cancellation in a blocking read, and
                # the reader then hands its batch to a queue nobody empties: app.tasks)
                await cancel_and_wait(reader)
            else:  # (its next hand-over finds room, then it sees ``halt``)
                with contextlib.suppress(BaseException):
                    await reader
        if not stop.is_set():  # once: what the reader took meanwhile is learned too
            while not ahead.empty():
                await self._guarded_process(ahead.get_nowait())

    async def _reader(self, ahead: asyncio.Queue, stop: asyncio.Event,
                      halt: asyncio.Event) -> None:  # fmt: skip
        """Reads new messages and parses them, one read ahead of the learning; an empty read
        (``block`` seconds without a message) is passed on too, so the loop wakes for its
        retries and claims."""
        cfg = self.config
        while not (stop.is_set() or halt.is_set()):
            if self.n_held + 2 * cfg.batch > cfg.max_pending:  # backpressure: wait for the held
                await asyncio.sleep(0.05)
                await ahead.put([])
                continue
            try:
                batch = await self.bus.read(cfg.batch, cfg.block)
            except BusDown as exc:
                log.warning("%s bus unavailable (%s); retrying", cfg.kind, exc)
                await self._sleep(stop, RETRY_MAX / 5)
                batch = []
            for d in batch:
                self._prepare(d)
            await ahead.put(batch)

    async def _guarded(self, step: Callable[[], Awaitable[int]], stop: asyncio.Event) -> int | None:
        """``step()``, waiting out bus failures (logged once per outage)."""
        delay = RETRY_FIRST
        failing = False
        while not stop.is_set():
            try:
                n = await step()
            except BusDown as exc:
                if not failing:
                    log.warning("%s bus unavailable (%s); retrying", self.config.kind, exc)
                failing = True
                await self._sleep(stop, delay)
                delay = min(2 * delay, RETRY_MAX)
                continue
            if failing:
                log.warning("%s bus available again", self.config.kind)
            return n
        return None

    @staticmethod
    async def _sleep(stop: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(seconds, 0.001))

    async def _pending(self) -> int:
        n = 0
        while batch := await self.bus.pending(self.config.batch):
            n += len(batch)
            await self.process(batch)
        return n

    async def _claim(self) -> int:
        batch = await self.bus.claim(self.config.batch)
        if batch:
            log.info("claimed %d message(s) of a consumer that stopped", len(batch))
            await self.process(batch)
        return len(batch)

    async def _retry_due(self, now: float) -> None:
        due = [name for name, t in self.retry_at.items() if t <= now]
        batch = []
        for name in due:
            del self.retry_at[name]
            batch += self.held.pop(name, [])
        if batch:
            await self._guarded_process(batch)

    async def _guarded_process(self, batch: list[Delivery]) -> None:
        try:
            await self.process(batch)
        except BusDown as exc:  # learned, not acknowledged: delivered again, then duplicates
            log.warning("acknowledgements not sent (%s); the messages come again", exc)

    # ------------------------------------------------------------------ one read
    async def process(self, batch: list[Delivery]) -> None:
        """Learn, predict or dead-letter each message of ``batch``, then settle them on the bus
        (publish answers and dead letters, acknowledge) in one call."""
        dead: list[tuple[Delivery, str]] = []
        todo: dict[str, list[Delivery]] = {}
        for d in batch:
            if d.gone:
                continue
            if d.msg is None and d.bad is None:
                self._prepare(d)
            if d.bad is not None:
                dead.append((d, d.bad))
                continue
            assert d.msg is not None
            name = d.msg.model
            if name in self.held:  # its model waits for a retry: after the held ones, in order
                self.held[name].append(d)
                continue
            todo.setdefault(name, []).append(d)
        outcomes = await asyncio.gather(*(self._model(name, ds) for name, ds in todo.items()))
        done: list[tuple[Delivery, dict[str, Any] | None]] = []
        for name, out in zip(todo, outcomes, strict=True):
            done += out.done
            dead += out.dead
            if out.held:
                self._hold(name, out.held)
        acks = [d for d, _ in done] + [d for d, _ in dead] + [d for d in batch if d.gone]
        outputs = []
        if self.config.output is not None:
            outputs = [(d, self._answer(d, a)) for d, a in done if a is not None]
        if acks:
            await self.bus.finish(acks, outputs, dead)
        self._count(batch, done, dead)

    def _prepare(self, d: Delivery) -> None:
        """Parse a message: its ``msg`` and ``learn_id``, or ``bad``: why it is dead."""
        if d.gone:
            return
        if d.deliveries > self.config.max_deliveries:
            d.bad = (f"delivered {d.deliveries} times without being learned (the consumers "
                     "failed or stopped on it each time)")  # fmt: skip
            return
        try:
            d.msg = parse(d.data)
        except BadMessage as exc:
            d.bad = f"422: {exc.reason}"
            return
        d.learn_id = d.msg.id or self._bus_id(d)

    def _bus_id(self, d: Delivery) -> str:
        key = f"{self.bus.kind}:{d.stream}:{d.id}"
        if len(key) > KEY_MAX:
            import hashlib

            digest = hashlib.sha256(d.stream.encode(errors="replace")).hexdigest()[:32]
            key = f"{self.bus.kind}:{digest}:{d.id}"
        return key

    def _hold(self, name: str, ds: list[Delivery]) -> None:
        self.held[name] = ds + self.held.get(name, [])
        delay = self.delay.get(name, RETRY_FIRST / 2) * 2
        self.delay[name] = min(delay, RETRY_MAX)
        self.retry_at[name] = time.monotonic() + self.delay[name]
        if self.metrics is not None:
            self.metrics.retried.labels(ds[0].stream, name).inc(len(ds))

    @staticmethod
    def _answer(d: Delivery, answer: dict[str, Any]) -> bytes:
        assert d.msg is not None
        return dumps({"model": d.msg.model, "id": d.learn_id, "stream": d.stream,
                      "message": d.id, **answer})  # fmt: skip

    def _count(self, batch: list[Delivery], done: list, dead: list) -> None:
        """Counts and Prometheus counters of a read: one pass over its messages."""
        c = self.counts
        learned = dups = 0
        for _, a in done:
            outcome = _outcome(a)
            learned += outcome == "learned"
            dups += outcome == "duplicate"
        redelivered = sum(d.deliveries > 1 for d in batch)
        c["acked"] += len(done) + len(dead)
        c["dead"] += len(dead)
        c["redelivered"] += redelivered
        c["learned"] += learned
        c["duplicates"] += dups
        if self.metrics is not None:
            self._count_metrics(batch, done, dead)

    def _count_metrics(self, batch: list[Delivery], done: list, dead: list) -> None:
        """The Prometheus counters of a read, per (stream, model): a model the registry does not
        hold is counted as ``UNKNOWN_MODEL`` (the labels stay bounded)."""
        m = self.metrics
        assert m is not None
        known = self.registry.models.peek
        labels: dict[tuple[str, str], tuple[str, str]] = {}

        def label(d: Delivery) -> tuple[str, str]:
            key = (d.stream, d.model)
            out = labels.get(key)
            if out is None:
                model = d.model if d.model and known(d.model) is not None else UNKNOWN_MODEL
                out = labels[key] = (d.stream, model)
            return out

        tallies: dict[Any, dict[tuple[str, str], int]] = {
            counter: {} for counter in (m.acked, m.dead, m.learned, m.duplicates, m.redelivered)
        }

        def tally(counter: Any, d: Delivery) -> None:
            key = label(d)
            t = tallies[counter]
            t[key] = t.get(key, 0) + 1

        by_outcome = {"learned": m.learned, "duplicate": m.duplicates}
        for d, a in done:
            tally(m.acked, d)
            outcome = _outcome(a)
            if outcome is not None:
                tally(by_outcome[outcome], d)
        for d, _ in dead:
            tally(m.acked, d)
            tally(m.dead, d)
        for d in batch:
            if d.deliveries > 1:
                tally(m.redelivered, d)
        for counter, t in tallies.items():
            for key, n in t.items():
                counter.labels(*key).inc(n)

    # ------------------------------------------------------------------ one model
    async def _model(self, name: str, ds: list[Delivery]) -> _Outcome:
        """One model's messages of a read, in order: runs of examples as engine batches, late
        labels and predictions; the first store failure holds the rest for a retry."""
        out = _Outcome()
        i = 0
        while i < len(ds):
            run = self._run(ds, i)
            try:
                answers = await self._apply(name, run)
            except Exception as exc:  # noqa: BLE001 - the whole run failed alike
                answers = [exc] * len(run)
            for j, (d, a) in enumerate(zip(run, answers, strict=True)):
                if not isinstance(a, BaseException):
                    self.failures.pop(d.learn_id, None)
                    out.done.append((d, a))
                elif _permanent(a) or self._given_up(d, a):
                    out.dead.append((d, _reason(a)))
                else:  # store down, not ready, engine failure: this and the rest wait
                    if not isinstance(a, StoreUnavailable | NotReady | NotCaughtUp):
                        log.warning("model %s: %s; retrying", name, _reason(a))
                    out.held = run[j:] + ds[i + len(run) :]
                    return out
            if out.done:
                self.delay.pop(name, None)
            i += len(run)
        return out

    def _given_up(self, d: Delivery, exc: BaseException) -> bool:
        """Whether an engine failure (a 500) of this message happened often enough."""
        if isinstance(exc, StoreUnavailable | NotReady | NotCaughtUp):
            return False
        n = self.failures.get(d.learn_id, 0) + 1
        self.failures[d.learn_id] = n
        if n >= ENGINE_TRIES:
            del self.failures[d.learn_id]
            return True
        return False

    def _run(self, ds: list[Delivery], i: int) -> list[Delivery]:
        """The messages from ``i`` on that make one registry call: consecutive examples (or
        predictions) within the request bounds (``CHORUS_MAX_BATCH``, ``_VALUES``), or one
        late label."""
        first = ds[i].msg
        assert first is not None
        if first.kind == "label":
            return [ds[i]]
        n_values = 0
        j = i
        while j < len(ds) and j - i < self.max_batch:
            m = ds[j].msg
            assert m is not None
            if m.kind != first.kind:
                break
            n_values += len(m.features or ())
            if n_values > self.max_values and j > i:
                break
            j += 1
        return ds[i:j]

    async def _apply(self, name: str, run: list[Delivery]) -> list[Any]:
        """The registry's answers to a run (an exception in place of a message's answer)."""
        reg = self.registry
        msgs: list[Message] = [d.msg for d in run]  # type: ignore[misc]
        first = msgs[0]
        if first.kind == "label":
            assert first.prediction_id is not None
            key = first.id  # None: the prediction id is the learn id (as over HTTP)
            return [await reg.learn_delayed(name, first.prediction_id, first.label, key)]
        n_values = sum(len(m.features or ()) for m in msgs)
        if n_values > self.max_values:  # one message alone over the bound of a request
            from app.errors import PayloadTooLarge

            return [PayloadTooLarge(
                f"features: {n_values:,} feature values, over the limit of {self.max_values:,} "
                "per request (CHORUS_MAX_BATCH_VALUES)")]  # fmt: skip
        if first.kind == "predict":
            X = [m.features for m in msgs]
            try:
                return list(await reg.predict(name, X, many=len(X) > 1))  # type: ignore[arg-type]
            except ChorusError as exc:
                if len(X) == 1 or not _permanent(exc):
                    raise
                calls = [reg.predict(name, [x]) for x in X]  # type: ignore[list-item]
                return [r[0] if isinstance(r, list) else r
                        for r in await asyncio.gather(*calls, return_exceptions=True)]  # fmt: skip
        exs = [Example(m.features, m.label, m.weight, d.learn_id)  # type: ignore[arg-type]
               for m, d in zip(msgs, run, strict=True)]  # fmt: skip
        try:
            return await reg.learn(name, exs, batch=len(exs) > 1)
        except ChorusError as exc:
            if len(exs) == 1 or not _permanent(exc) or isinstance(exc, ModelNotFound):
                raise
        # a bad example in the batch: each on its own (the model's writer still groups them
        # into one engine call and isolates the bad ones)
        results = await asyncio.gather(*(reg.learn(name, [ex]) for ex in exs),
                                       return_exceptions=True)  # fmt: skip
        return [r[0] if isinstance(r, list) else r for r in results]
