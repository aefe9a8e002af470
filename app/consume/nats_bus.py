"""NATS JetStream as the bus: a durable pull consumer on one stream (nats-py, the ``consume``
extra).

A message's body is the JSON payload (:mod:`app.consume.messages`); its bus id is its stream
sequence. The durable consumer (``group``) acknowledges explicitly; a message not acknowledged
within ``ack_wait`` (the configuration's ``claim_idle``) is delivered again, to any consumer of the
durable: that is how a dead consumer's messages are taken over, so :meth:`NatsBus.pending` and
:meth:`NatsBus.claim` have nothing to do. Answers and dead letters are published to subjects (the
reason and the original message's coordinates in ``Chorus-*`` headers), then the messages are
acknowledged: to a subject a JetStream stream keeps (found when the consumer starts) through
JetStream, each confirmed as stored before the acknowledgement (a dead letter the stream refuses,
e.g. full, leaves its message unacknowledged: it comes again, never lost); to any other subject
as a plain publish, flushed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from app.consume.config import ConsumeConfig, ConsumeConfigError
from app.consume.consumer import BusDown, Delivery

try:  # the consume extra; without it a nats:// URL says what to install
    import nats
    import nats.errors
    import nats.js.errors
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType
except ImportError:  # pragma: no cover - exercised only without nats-py
    nats = None


log = logging.getLogger("chorus.consume")


async def _quiet(exc: Exception) -> None:
    """nats-py's asynchronous errors (each connection attempt that failed): one line each."""
    log.debug("nats: %r", exc)


async def _disconnected() -> None:
    log.warning("nats: disconnected; reconnecting")


async def _reconnected() -> None:
    log.warning("nats: reconnected")


def _header(text: str) -> str:
    """A header value: one line."""
    return " ".join(text.split())[:4096]


class NatsBus:
    """The NATS JetStream side of a consumer.

    Parameters
    ----------
    config
        Its URL, stream, subject, durable consumer, output and dead-letter subjects.
    """

    kind = "nats"

    def __init__(self, config: ConsumeConfig) -> None:
        if nats is None:
            raise ConsumeConfigError(
                "a nats:// bus needs nats-py: pip install 'chorus[consume]' (or nats-py)"
            )
        self.config = config
        self.stream = config.streams[0]
        self.nc: Any = None
        self.js: Any = None
        self.sub: Any = None
        self.kept: dict[str, str] = {}  # output / dead-letter subject -> the stream keeping it

    def _down(self) -> tuple[type[BaseException], ...]:
        return (nats.errors.Error, OSError, TimeoutError)

    async def open(self) -> None:
        cfg = self.config
        try:  # a few tries at start-up; once connected, reconnect for ever
            self.nc = await nats.connect(
                cfg.url, connect_timeout=5, max_reconnect_attempts=2, allow_reconnect=True,
                reconnect_time_wait=0.5, error_cb=_quiet, disconnected_cb=_disconnected,
                reconnected_cb=_reconnected,
            )  # fmt: skip
        except (nats.errors.NoServersError, OSError, TimeoutError) as exc:
            raise ConsumeConfigError(f"cannot reach nats at {cfg.url}: {exc!r}") from None
        self.nc.options["max_reconnect_attempts"] = -1
        self.js = self.nc.jetstream()
        try:
            await self._ensure()
        except nats.js.errors.ServiceUnavailableError as exc:
            raise ConsumeConfigError(
                f"nats at {cfg.url} has no JetStream (start nats-server with -js): {exc}"
            ) from None
        except nats.js.errors.APIError as exc:
            raise ConsumeConfigError(f"stream {self.stream!r}: {exc}") from None
        except self._down() as exc:
            raise ConsumeConfigError(f"nats at {cfg.url}: {exc!r}") from None

    async def _ensure(self) -> None:
        cfg = self.config
        try:
            await self.js.stream_info(self.stream)
        except nats.js.errors.NotFoundError:
            if not cfg.create:
                raise ConsumeConfigError(
                    f"JetStream stream {self.stream!r} does not exist on {cfg.url} (create it "
                    f"on subject {cfg.subject!r}, or let the consumer create it: drop "
                    "--no-create)"
                ) from None
            await self.js.add_stream(name=self.stream, subjects=[cfg.subject],
                                     storage=StorageType.FILE)  # fmt: skip
        if not cfg.create:
            try:
                await self.js.consumer_info(self.stream, cfg.group)
            except nats.js.errors.NotFoundError:
                raise ConsumeConfigError(
                    f"stream {self.stream!r} has no durable consumer {cfg.group!r} (drop "
                    "--no-create to create it)"
                ) from None
        config = ConsumerConfig(
            durable_name=cfg.group, ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL, ack_wait=cfg.claim_idle,
            max_ack_pending=cfg.max_pending, filter_subject=cfg.subject,
        )  # fmt: skip
        self.sub = await self.js.pull_subscribe(cfg.subject, durable=cfg.group,
                                                stream=self.stream, config=config)  # fmt: skip
        self.kept = {}
        for subject in (cfg.output, cfg.dead_letter):
            if subject is None:
                continue
            try:
                self.kept[subject] = await self.js.find_stream_name_by_subject(subject)
            except nats.js.errors.NotFoundError:
                if subject == cfg.dead_letter:
                    log.warning("no JetStream stream keeps the dead-letter subject %r: dead "
                                "letters reach its subscribers only", subject)  # fmt: skip

    async def close(self) -> None:
        if self.nc is not None:
            try:
                await self.nc.close()
            except Exception:  # noqa: BLE001, S110 - closing a dead connection
                pass
            self.nc = None

    async def pending(self, n: int) -> list[Delivery]:
        return []  # JetStream redelivers after ack_wait by itself

    async def claim(self, n: int) -> list[Delivery]:
        return []

    async def read(self, n: int, block: float) -> list[Delivery]:
        try:
            msgs = await self.sub.fetch(n, timeout=block)
        except nats.errors.TimeoutError:
            return []
        except self._down() as exc:
            raise BusDown(f"{type(exc).__name__}: {exc}") from exc
        out = []
        for m in msgs:
            meta = m.metadata
            out.append(Delivery(self.stream, str(meta.sequence.stream), m.data,
                                int(meta.num_delivered), handle=m))  # fmt: skip
        return out

    async def finish(self, acks: list[Delivery], outputs: list[tuple[Delivery, bytes]],
                     dead: list[tuple[Delivery, str]]) -> None:  # fmt: skip
        cfg = self.config
        sends: list[tuple[str, bytes, dict[str, str] | None]] = []
        if cfg.output is not None:
            sends += [(cfg.output, answer, None) for _, answer in outputs]
        for d, reason in dead:
            assert cfg.dead_letter is not None  # (set by the configuration)
            headers = {"Chorus-Reason": _header(reason), "Chorus-Stream": d.stream,
                       "Chorus-Message": d.id, "Chorus-Model": d.model,
                       "Chorus-Deliveries": str(d.deliveries)}  # fmt: skip
            sends.append((cfg.dead_letter, d.data or b"", headers))
        try:
            plain = [send for send in sends if send[0] not in self.kept]
            for subject, data, headers in plain:
                await self.nc.publish(subject, data, headers=headers)
            if plain:
                await self.nc.flush(timeout=10)
            await asyncio.gather(*(  # each stored (its PubAck) before any acknowledgement
                self.js.publish(subject, data, timeout=10, stream=self.kept[subject],
                                headers=headers)
                for subject, data, headers in sends if subject in self.kept))  # fmt: skip
            for d in acks:
                await d.handle.ack()
            await self.nc.flush(timeout=10)
        except self._down() as exc:
            raise BusDown(f"{type(exc).__name__}: {exc}") from exc

    async def lag(self) -> dict[str, int]:
        try:
            info = await self.sub.consumer_info()
        except self._down() as exc:
            raise BusDown(f"{type(exc).__name__}: {exc}") from exc
        return {self.stream: int(info.num_pending or 0)}
