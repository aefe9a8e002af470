"""Redis Streams as the bus: a consumer group per stream (``XREADGROUP``, ``XACK``,
``XAUTOCLAIM``).

A message is a stream entry whose field ``data`` holds the JSON payload
(:mod:`app.consume.messages`); its bus id is the entry id. A consumer first reads the entries it
had been delivered and not acknowledged (``XREADGROUP ... 0``: it died and restarted under the same
name), then new ones (``>``); every ``claim_idle / 2`` seconds it claims those another consumer of
the group has held longer than ``claim_idle`` (``XAUTOCLAIM``: that consumer died). Answers and dead
letters are ``XADD``-ed (``MAXLEN ~ max_len``) and the messages ``XACK``-ed in one pipeline.

``XREADGROUP``'s reply is read as hiredis gives it (redis-py's own callback builds a dict of the
fields of every entry): :func:`stream_entries`; and commands are packed by hiredis
(:func:`packing_in_c`).
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
import redis.exceptions

try:  # a declared dependency; redis-py works without it, and so does this module
    import hiredis
except ImportError:  # pragma: no cover
    hiredis = None

from app.consume.config import ConsumeConfig, ConsumeConfigError
from app.consume.consumer import BusDown, Delivery

DATA = b"data"
_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def _as_sent(response: Any, **options: Any) -> Any:
    """A reply as the parser gave it (the client's callback for ``XREADGROUP``)."""
    return response


class _PackedInC:
    """A connection whose commands hiredis packs: redis-py's asyncio connections pack them in
    Python, joining the command's buffer again for every argument (an ``XACK`` of 1,000 entry
    ids: ~4 us an id; hiredis: ~0.1 us)."""

    def pack_command(self, *args: Any) -> list[bytes]:
        if isinstance(args[0], str):  # "XINFO GROUPS": the words go as arguments (as redis-py)
            args = (*args[0].encode().split(), *args[1:])
        elif b" " in args[0]:
            args = (*args[0].split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]
        except TypeError:  # an argument hiredis does not know: redis-py's encoder decides
            return super().pack_command(*args)  # type: ignore[misc]


_PACKED_IN_C: dict[type, type] = {}


def packing_in_c(connection_class: type) -> type:
    """``connection_class`` with :class:`_PackedInC`'s ``pack_command`` (itself without
    hiredis)."""
    if hiredis is None or not hasattr(hiredis, "pack_command"):
        return connection_class
    if connection_class not in _PACKED_IN_C:
        _PACKED_IN_C[connection_class] = type(connection_class.__name__,
                                              (_PackedInC, connection_class), {})  # fmt: skip
    return _PACKED_IN_C[connection_class]


def stream_entries(reply: Any) -> list[tuple[bytes, list]]:
    """An ``XREADGROUP`` reply as it came (RESP2: ``[[stream, [[id, [field, value, ...]], ...]],
    ...]``; RESP3: a map of the streams; ``None``: nothing) as ``(stream, [[id, fields], ...])``
    pairs; ``fields`` is ``None`` for an entry deleted since it was delivered.

    >>> stream_entries([[b"s", [[b"1-0", [b"data", b"{}"]], [b"2-0", None]]]])
    [(b's', [[b'1-0', [b'data', b'{}']], [b'2-0', None]])]
    >>> stream_entries({b"s": [[b"1-0", [b"data", b"{}"]]]})
    [(b's', [[b'1-0', [b'data', b'{}']]])]
    """
    if not reply:
        return []
    if isinstance(reply, dict):
        return [(stream, es or []) for stream, es in reply.items()]
    return [(stream, es or []) for stream, es in reply]


def _data(fields: Any) -> bytes | None:
    """The ``data`` field of an entry's fields (a flat list, or redis-py's dict)."""
    if isinstance(fields, dict):
        return fields.get(DATA)
    if len(fields) == 2 and fields[0] == DATA:  # the usual entry: data only
        return fields[1]
    for k in range(0, len(fields) - 1, 2):
        if fields[k] == DATA:
            return fields[k + 1]
    return None


class RedisBus:
    """The Redis Streams side of a consumer.

    Parameters
    ----------
    config
        Its URL, streams, group, consumer name, output and dead-letter streams.
    """

    kind = "redis"

    def __init__(self, config: ConsumeConfig) -> None:
        self.config = config
        self.redis: Any = None
        self._cursor: dict[str, bytes] = {}  # stream -> where its pending history read is
        self._claim_cursor: dict[str, str] = {}

    async def open(self) -> None:
        cfg = self.config
        try:
            self.redis = aioredis.Redis.from_url(
                cfg.url, socket_timeout=cfg.block + 10.0, socket_connect_timeout=5.0,
                health_check_interval=30,
            )  # fmt: skip
        except ValueError as exc:
            raise ConsumeConfigError(f"consume URL {cfg.url!r}: {exc}") from None
        self.redis.set_response_callback("XREADGROUP", _as_sent)  # read by stream_entries()
        pool = self.redis.connection_pool  # no connection yet: each is made of this class
        pool.connection_class = packing_in_c(pool.connection_class)
        try:
            await self.redis.ping()
        except redis.exceptions.AuthenticationError as exc:
            raise ConsumeConfigError(f"redis at {cfg.url}: {exc}") from None
        except _DOWN as exc:
            raise ConsumeConfigError(f"cannot reach redis at {cfg.url}: {exc}") from None
        for stream in cfg.streams:
            await self._ensure_group(stream)
            self._cursor[stream] = b"0"
            self._claim_cursor[stream] = "0-0"

    async def _ensure_group(self, stream: str) -> None:
        cfg = self.config
        try:
            kind = await self.redis.type(stream)
            if kind not in (b"stream", b"none"):
                raise ConsumeConfigError(
                    f"stream {stream!r}: the key holds a Redis {kind.decode()}, not a stream"
                )
            if not cfg.create:
                if kind == b"none":
                    raise ConsumeConfigError(
                        f"stream {stream!r} does not exist on {cfg.url} (produce to it first, "
                        "or let the consumer create it: drop --no-create)"
                    )
                groups = {g["name"] for g in await self.redis.xinfo_groups(stream)}
                if cfg.group.encode() not in groups:
                    raise ConsumeConfigError(
                        f"stream {stream!r} has no consumer group {cfg.group!r} (create it with "
                        f"XGROUP CREATE {stream} {cfg.group} 0, or drop --no-create)"
                    )
                return
            # from the stream's first entry: what producers sent before any consumer ran counts
            await self.redis.xgroup_create(stream, cfg.group, id="0", mkstream=True)
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise ConsumeConfigError(f"stream {stream!r}: {exc}") from None
        except _DOWN as exc:
            raise ConsumeConfigError(f"cannot reach redis at {cfg.url}: {exc}") from None

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
            self.redis = None

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except _DOWN as exc:
            raise BusDown(f"{type(exc).__name__}: {exc}") from exc
        except redis.exceptions.ResponseError as exc:
            if "NOGROUP" in str(exc):  # the stream or its group was deleted under us
                for stream in self.config.streams:
                    await self._ensure_group(stream)
                raise BusDown(f"{exc} (group created again)") from exc
            raise

    def _deliveries(
        self, stream: str, entries: list, counts: dict[bytes, int] | None
    ) -> list[Delivery]:
        if counts is None:  # new entries: delivered once
            return [Delivery(stream, entry_id.decode(), _data(fields)) if fields else
                    Delivery(stream, entry_id.decode(), None, gone=True)
                    for entry_id, fields in entries]  # fmt: skip
        out = []
        for entry_id, fields in entries:
            n = counts.get(entry_id, 1)
            if not fields:  # deleted since it was delivered (XDEL, trimmed)
                out.append(Delivery(stream, entry_id.decode(), None, n, gone=True))
            else:
                out.append(Delivery(stream, entry_id.decode(), _data(fields), n))
        return out

    async def _counts(self, stream: str, entries: list, consumer: str) -> dict[bytes, int]:
        """Times each entry was delivered (``XPENDING``; only for redelivered ones)."""
        if not entries:
            return {}
        rows = await self._call(self.redis.xpending_range(
            stream, self.config.group, min=entries[0][0], max=entries[-1][0],
            count=len(entries), consumername=consumer))  # fmt: skip
        return {r["message_id"]: int(r["times_delivered"]) for r in rows}

    async def pending(self, n: int) -> list[Delivery]:
        cfg = self.config
        for stream, cursor in self._cursor.items():
            if cursor is None:
                continue
            got = stream_entries(await self._call(self.redis.xreadgroup(
                cfg.group, cfg.consumer, {stream: cursor}, count=n)))  # fmt: skip
            history = got[0][1] if got else []
            if not history:
                self._cursor[stream] = None  # type: ignore[assignment]
                continue
            self._cursor[stream] = history[-1][0]
            counts = await self._counts(stream, history, cfg.consumer)
            return self._deliveries(stream, history, counts)
        return []

    async def read(self, n: int, block: float) -> list[Delivery]:
        cfg = self.config
        got = await self._call(self.redis.xreadgroup(
            cfg.group, cfg.consumer, dict.fromkeys(cfg.streams, ">"), count=n,
            block=max(1, int(block * 1000))))  # fmt: skip
        out = []
        for stream, new in stream_entries(got):
            out += self._deliveries(stream.decode(), new, None)
        return out

    async def claim(self, n: int) -> list[Delivery]:
        cfg = self.config
        out: list[Delivery] = []
        for stream in cfg.streams:
            got = await self._call(self.redis.xautoclaim(
                stream, cfg.group, cfg.consumer, min_idle_time=int(cfg.claim_idle * 1000),
                start_id=self._claim_cursor[stream], count=n))  # fmt: skip
            cursor, entries = got[0], got[1]
            deleted = got[2] if len(got) > 2 else []
            self._claim_cursor[stream] = cursor.decode() if isinstance(cursor, bytes) else cursor
            counts = await self._counts(stream, entries, cfg.consumer)
            out += self._deliveries(stream, entries, counts)
            out += [Delivery(stream, i.decode(), None, gone=True) for i in deleted]
        return out

    async def finish(self, acks: list[Delivery], outputs: list[tuple[Delivery, bytes]],
                     dead: list[tuple[Delivery, str]]) -> None:  # fmt: skip
        cfg = self.config
        pipe = self.redis.pipeline(transaction=False)
        for _, answer in outputs:
            pipe.xadd(cfg.output, {DATA: answer}, maxlen=cfg.max_len, approximate=True)
        for d, reason in dead:
            pipe.xadd(cfg.dead_letter, {
                DATA: d.data if d.data is not None else b"", b"reason": reason.encode(),
                b"stream": d.stream.encode(), b"message": d.id.encode(),
                b"model": d.model.encode(), b"deliveries": str(d.deliveries).encode(),
            }, maxlen=cfg.max_len, approximate=True)  # fmt: skip
        by_stream: dict[str, list[str]] = {}
        for d in acks:
            by_stream.setdefault(d.stream, []).append(d.id)
        for stream, ids in by_stream.items():
            pipe.xack(stream, cfg.group, *ids)
        await self._call(pipe.execute())

    async def lag(self) -> dict[str, int]:
        out = {}
        for stream in self.config.streams:
            groups = await self._call(self.redis.xinfo_groups(stream))
            for g in groups:
                if g["name"] == self.config.group.encode():
                    lag = g.get("lag")
                    out[stream] = int(lag) if lag is not None else 0
        return out
