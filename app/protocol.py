"""The HTTP/1.1 connection under uvicorn: its httptools protocol, with bounds on what a client can
make the server hold before the app sees a request.

uvicorn's httptools protocol keeps any request line and headers a client sends (16 MB each from
150 connections took the RSS from 279 to 2,711 MB, issue 42) for as long as it sends them (3,000
half-sent requests were still open after 40 s). ``ChorusHttpProtocol`` answers 431 and closes the
connection as soon as a request's line and headers pass ``CHORUS_MAX_HEADER_BYTES`` or its header
fields ``CHORUS_MAX_HEADERS``, and 408 (closing it) when they are not complete
``CHORUS_HEADER_TIMEOUT`` seconds after the connection opened or the request's first byte came.
Bodies are the app's to bound (``app.guard``). ``app.server.server_config`` selects it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.settings import Settings, get_settings


@dataclass(frozen=True)
class HeaderLimits:
    """What one request's line and headers may take: bytes, fields, seconds."""

    max_bytes: int
    max_count: int
    timeout: float

    @classmethod
    def from_settings(cls, settings: Settings) -> HeaderLimits:
        return cls(settings.max_header_bytes, settings.max_headers, settings.header_timeout)


class ChorusConfig(uvicorn.Config):
    """uvicorn's ``Config`` running ``ChorusHttpProtocol`` with ``header_limits`` (it pickles,
    so worker processes get the same)."""

    def __init__(self, app: Any, *, header_limits: HeaderLimits, **kwargs: Any) -> None:
        self.header_limits = header_limits
        super().__init__(app, http=ChorusHttpProtocol, **kwargs)


class _Refused(Exception):
    """Raised in a parser callback: answer ``status`` with ``detail`` and close."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class ChorusHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header size, count and time limits (module docstring).

    A request's header bytes are counted as they are fed to the parser, in pieces no longer than
    what is left of the limit, so the parser never holds more than the limit of one request (a
    request pipelined behind another in one read may pass it by at most that read).
    """

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        limits = getattr(config, "header_limits", None)
        self.limits: HeaderLimits = limits or HeaderLimits.from_settings(get_settings())
        # from a request's start (or the connection's) to its headers' end
        self._in_headers = True
        self._header_bytes = 0
        self._requests_begun = 0
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        view = memoryview(data)
        while view and not self.transport.is_closing():
            if self._in_headers:
                room = self.limits.max_bytes - self._header_bytes
                piece, view = view[: room + 1], view[room + 1 :]
            else:
                piece, view = view, view[:0]
            begun = self._requests_begun
            if not self._feed(piece):
                return
            if self._in_headers and begun == self._requests_begun:  # still the same headers
                self._header_bytes += len(piece)
                if self._header_bytes > self.limits.max_bytes:
                    self._refuse(431, f"request line and headers over the limit of "
                                      f"{self.limits.max_bytes} bytes (CHORUS_MAX_HEADER_BYTES)")  # fmt: skip
                    return

    def _feed(self, piece: memoryview) -> bool:
        """Feed the parser as uvicorn does; False once the connection is answered or handed on."""
        try:
            self.parser.feed_data(piece)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _Refused):
                self._refuse(exc.__context__.status, exc.__context__.detail)
            else:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
            return False
        except httptools.HttpParserError:
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
            return False
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        return True

    # parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        self._header_bytes = 0
        self._requests_begun += 1
        if self._header_timer is None:
            self._arm_header_timer()

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= self.limits.max_count:
            raise _Refused(431, f"more than {self.limits.max_count} header fields "
                                "(CHORUS_MAX_HEADERS)")  # fmt: skip
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._cancel_header_timer()
        super().on_headers_complete()

    # the header timer
    def _arm_header_timer(self) -> None:
        self._header_timer = self.loop.call_later(self.limits.timeout, self._headers_late)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._in_headers and not self.transport.is_closing():
            self._refuse(408, f"request line and headers not received within "
                              f"{self.limits.timeout:g} s (CHORUS_HEADER_TIMEOUT)")  # fmt: skip

    def _refuse(self, status: int, detail: str) -> None:
        """Answer ``status`` (unless a response is under way: a pipelined request) and close."""
        self._cancel_header_timer()
        if self.cycle is None or self.cycle.response_complete:
            body = b'{"detail":"%s"}' % detail.encode()
            content = [STATUS_LINE[status]]
            for name, value in self.server_state.default_headers:
                content.extend([name, b": ", value, b"\r\n"])
            content.extend([b"content-type: application/json\r\n",
                            b"content-length: %d\r\n" % len(body),
                            b"connection: close\r\n\r\n", body])  # fmt: skip
            self.transport.write(b"".join(content))
        self.transport.close()
