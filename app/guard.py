"""``Guard``: what a request must be before the routes see it (a pure-ASGI middleware).

- **Host** (421): the ``Host`` header must name the address the connection came in on or one of
  ``CHORUS_ALLOWED_HOSTS`` (default ``localhost``, ``127.0.0.1``, ``[::1]``; ``*``: any). A web
  page whose own name was rebound to 127.0.0.1 (DNS rebinding) sends its own name: refused.
- **JSON only** (415): a ``POST``, ``PUT`` or ``PATCH`` must say ``Content-Type:
  application/json``. The bodies a browser page may send to another origin without asking first
  (``text/plain``, forms, multipart) are refused before they are read.
- **Bounded bodies**: a body is read here, whole, before the route runs: at most
  ``CHORUS_MAX_BODY_BYTES`` (413), with at most ``CHORUS_BODY_TIMEOUT`` seconds between two reads
  (408), and within the process's caps on bodies held at once, ``CHORUS_MAX_INFLIGHT_BODIES`` and
  ``CHORUS_MAX_INFLIGHT_BYTES`` (503 with ``Retry-After: 1``; by ``Content-Length`` before reading,
  else as the bytes come). A refusal in the middle of a body closes the connection. A client that
  goes away mid-body gets nothing and the request ends quietly (``ObserveMiddleware`` counts a
  499). The route then gets the body as one message.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import time
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.settings import Settings

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
HOSTS_SEEN = 64  # Host values (with the connection's address) whose check is remembered
TRIM_AFTER = 16 * 1024 * 1024  # bytes of bodies done before the heap is trimmed (when none is held)


class InFlight:
    """The request bodies a process holds now (``/metrics``: ``chorus_inflight_bodies``,
    ``chorus_inflight_body_bytes``)."""

    def __init__(self) -> None:
        self.bodies = 0
        self.bytes = 0  # by Content-Length, or as received


class Guard:
    """The middleware (module docstring).

    Parameters
    ----------
    app
        The wrapped ASGI app.
    settings
        Where the limits come from.
    inflight
        The counters of the bodies held (the app's, read by ``/metrics``).
    """

    def __init__(self, app: ASGIApp, settings: Settings, inflight: InFlight) -> None:
        self.app = app
        self.hosts = settings.host_names()
        self.hosts_seen: dict[tuple[bytes, str | None], bool] = {}
        self.max_body = settings.max_body_bytes
        self.timeout = settings.body_timeout
        self.max_bodies = settings.max_inflight_bodies
        self.max_bytes = settings.max_inflight_bytes
        self.held = inflight
        self.released = 0  # bytes of the bodies done since the heap was last trimmed
        # requests waiting for body bytes, and since when: one sweeper task looks at them a few
        # times a second (a timer per read, asyncio.timeout, cost 3 times the rest of the guard)
        self.reading: dict[asyncio.Task | None, float] = {}
        self.late: set[asyncio.Task | None] = set()
        self.sweeper: asyncio.Task | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = content_type = length = None
        chunked = False
        for k, v in scope["headers"]:
            if k == b"host":
                host = v
            elif k == b"content-type":
                content_type = v
            elif k == b"content-length":
                length = v
            elif k == b"transfer-encoding":
                chunked = True
        if (
            host is not None
            and self.hosts is not None
            and not self._host_ok(host, scope.get("server"))
        ):
            await _answer(send, 421, f"Host: {host.decode('latin-1')!r} is not served here "
                                     "(CHORUS_ALLOWED_HOSTS)")  # fmt: skip
            return
        if scope["method"] in BODY_METHODS and not _is_json(content_type):
            given = "none" if content_type is None else repr(content_type.decode("latin-1"))
            await _answer(send, 415, f"Content-Type: expected application/json, got {given}")
            return
        if not chunked and length in (None, b"0"):
            await self.app(scope, receive, send)
            return
        size = int(length) if length is not None and length.isdigit() else 0
        if size > self.max_body:
            await _answer(send, 413, f"body over the limit of {self.max_body} bytes")
            return
        inflight = self.held
        if inflight.bodies >= self.max_bodies or inflight.bytes + size > self.max_bytes:
            await self._busy(send, close=False)
            return
        inflight.bodies += 1
        inflight.bytes += size
        held = [size]
        try:
            body = await self._read(receive, send, held)
            if body is not None:
                await self.app(scope, _replay(body, receive), send)
        finally:
            inflight.bodies -= 1
            inflight.bytes -= held[0]
            self.released += held[0]
            if inflight.bytes == 0 and self.released >= TRIM_AFTER:
                self.released = 0
                release_memory()

    async def _read(self, receive: Receive, send: Send, held: list[int]) -> bytes | None:
        """The whole body, or None once answered (or the client left); ``held[0]``: the bytes
        counted against the cap for it."""
        chunks: list[bytes] = []
        seen = 0
        while True:
            task = asyncio.current_task()
            self.reading[task] = time.monotonic()
            if self.sweeper is None:
                self.sweeper = asyncio.get_running_loop().create_task(self._sweep())
            try:
                msg = await receive()
            except asyncio.CancelledError:
                if task not in self.late:
                    raise
                self.late.discard(task)
                task.uncancel()  # type: ignore[union-attr]
                await _answer(send, 408, f"no body bytes for {self.timeout:g} s "
                                         "(CHORUS_BODY_TIMEOUT)", close=True)  # fmt: skip
                return None
            finally:
                del self.reading[task]
            if msg["type"] == "http.disconnect":
                return None
            chunk = msg.get("body", b"")
            seen += len(chunk)
            if seen > self.max_body:
                await _answer(send, 413, f"body over the limit of {self.max_body} bytes",
                              close=True)  # fmt: skip
                return None
            if seen > held[0]:
                if self.held.bytes + seen - held[0] > self.max_bytes:
                    await self._busy(send, close=True)
                    return None
                self.held.bytes += seen - held[0]
                held[0] = seen
            chunks.append(chunk)
            if not msg.get("more_body", False):
                return b"".join(chunks)

    async def _sweep(self) -> None:
        """Cancel the reads waiting longer than the body timeout (marked ``late``: ``_read``
        answers 408); ends when no read waits (the next read starts it again)."""
        try:
            while True:
                await asyncio.sleep(min(1.0, self.timeout / 4))
                if not self.reading:
                    return
                now = time.monotonic()
                for task, since in list(self.reading.items()):
                    if now - since >= self.timeout and task is not None and task not in self.late:
                        self.late.add(task)
                        task.cancel()
        finally:
            self.sweeper = None

    def _host_ok(self, host: bytes, server: tuple | None) -> bool:
        """``host`` names the connection's own address (``server``) or an allowed name (a request
        without a Host, HTTP/1.0, is not checked: no browser sends one). Answers are cached."""
        key = (host, server[0] if server else None)
        ok = self.hosts_seen.get(key)
        if ok is None:
            text = host.decode("latin-1").lower()
            if text.startswith("["):
                name = text[1 : text.find("]")] if "]" in text else text
            else:
                name = text.partition(":")[0]
            name = name.rstrip(".")
            assert self.hosts is not None
            ok = name in self.hosts or (server is not None and name == str(server[0]).lower())
            if len(self.hosts_seen) < HOSTS_SEEN:
                self.hosts_seen[key] = ok
        return ok

    async def _busy(self, send: Send, *, close: bool) -> None:
        await _answer(send, 503, f"too many request bodies in flight (at most "
                                 f"{self.max_bodies} and {self.max_bytes} bytes: "
                                 "CHORUS_MAX_INFLIGHT_BODIES, CHORUS_MAX_INFLIGHT_BYTES); retry",
                      close=close, retry=True)  # fmt: skip


def release_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing
    elsewhere). Bodies are read in chunks of tens of KiB, below glibc's mmap threshold, so their
    memory stays in the heap after they are freed: 64 stalled 1 MiB bodies left the RSS 77 MB up
    after their connections closed."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _is_json(content_type: bytes | None) -> bool:
    return (
        content_type is not None
        and content_type.partition(b";")[0].strip().lower() == b"application/json"
    )


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that gives ``body`` first, then whatever comes (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _answer(send: Send, status: int, detail: str, *, close: bool = False,
                  retry: bool = False) -> None:  # fmt: skip
    """A JSON error; ``close``: the connection closes after it (a body is left half-read)."""
    body = orjson.dumps({"detail": detail})
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append((b"connection", b"close"))
    if retry:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
