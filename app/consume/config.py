"""What a consumer reads and how: one URL with query options (``CHORUS_CONSUME``), or the same
options given to ``chorus consume``.

``redis://host:6379/0?stream=chorus:examples&group=chorus&output=chorus:predictions``
(also ``rediss://``, ``unix://``) reads Redis Streams through a consumer group;
``nats://host:4222?stream=CHORUS&subject=chorus.examples&group=chorus`` reads a NATS JetStream
stream through a durable pull consumer (``tls://`` too). The query options are those of
:class:`ConsumeConfig`; the rest of the URL goes to the client as it is.
"""

from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDIS_SCHEMES = ("redis", "rediss", "unix")
NATS_SCHEMES = ("nats", "tls")


class ConsumeConfigError(ValueError):
    """The consumer cannot run as configured (bad URL, option, missing stream): a clear message,
    no retry."""


@dataclass
class ConsumeConfig:
    """A consumer's configuration.

    Parameters
    ----------
    url
        The bus: ``redis://``, ``rediss://``, ``unix://`` (Redis Streams) or ``nats://``,
        ``tls://`` (NATS JetStream), without the options below.
    streams
        Redis: the stream keys to read (each a stream of messages for any models). NATS: the one
        JetStream stream's name.
    subject
        NATS: the subject the consumer filters on (and the stream's subject when it is created).
    group
        Redis: the consumer group; NATS: the durable consumer's name. Consumers of one group share
        the messages (each message goes to one of them).
    consumer
        Redis: this consumer's name in the group (default: the host name). A consumer restarted
        under the same name first takes back the messages it had not acknowledged.
    batch
        Messages per read: a read becomes one engine batch per model.
    block
        Seconds a read waits for messages.
    output
        Stream (Redis) or subject (NATS) each learned or predicted message's answer is published
        to (``None``: not published).
    dead_letter
        Stream (Redis) or subject (NATS) that messages which cannot be learned go to, with the
        reason.
    claim_idle
        Redis: a message another consumer of the group has held unacknowledged this long (seconds)
        is claimed (``XAUTOCLAIM``): that consumer died. NATS: the consumer's ``ack_wait``.
    max_pending
        Messages held unacknowledged at most (those of a model whose store is failing wait, in
        order): beyond it no new message is read until they are learned.
    max_deliveries
        A message delivered this many times without being learned (it crashed or stalled the
        consumers each time) is dead-lettered instead of tried again.
    max_len
        Approximate length the output and dead-letter streams are trimmed to (Redis ``MAXLEN ~``).
    create
        Create a missing stream and group (NATS: stream and durable consumer); without it a
        missing one is an error naming it.
    """

    url: str
    streams: list[str] = field(default_factory=list)
    subject: str = "chorus.examples"
    group: str = "chorus"
    consumer: str = field(default_factory=socket.gethostname)
    batch: int = 1000
    block: float = 1.0
    output: str | None = None
    dead_letter: str | None = None
    claim_idle: float = 60.0
    max_pending: int = 10_000
    max_deliveries: int = 10
    max_len: int = 100_000
    create: bool = True

    @property
    def kind(self) -> str:
        """``"redis"`` or ``"nats"``."""
        return "nats" if urlsplit(self.url).scheme in NATS_SCHEMES else "redis"

    @classmethod
    def from_url(cls, url: str, **overrides: Any) -> ConsumeConfig:
        """The configuration a URL with query options describes; ``overrides`` (not ``None``)
        win over the URL's options. :class:`ConsumeConfigError` names what is wrong."""
        parts = urlsplit(url)
        if parts.scheme not in REDIS_SCHEMES + NATS_SCHEMES:
            raise ConsumeConfigError(
                f"consume URL {url!r}: the scheme must be one of "
                f"{', '.join(s + '://' for s in REDIS_SCHEMES + NATS_SCHEMES)}"
            )
        if parts.scheme != "unix" and not parts.hostname:
            raise ConsumeConfigError(f"consume URL {url!r}: no host")
        names = {f.name for f in dataclasses.fields(cls)} - {"url"}
        options: dict[str, Any] = {}
        rest = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            name = key.replace("-", "_")
            if name == "stream":
                options.setdefault("streams", []).append(value)
            elif name in names:
                options[name] = value
            else:
                rest.append((key, value))  # the client's own (redis-py: socket_timeout, ...)
        for name, value in overrides.items():
            if value is not None and value != []:
                options[name] = value
        base = urlunsplit(parts._replace(query=urlencode(rest)))
        try:
            config = cls(base, **{k: _typed(cls, k, v) for k, v in options.items()})
        except (TypeError, ValueError) as exc:
            raise ConsumeConfigError(f"consume URL {url!r}: {exc}") from None
        config.check()
        return config

    def check(self) -> None:
        """:class:`ConsumeConfigError` for an option out of its range."""
        kind = self.kind
        if not self.streams:
            self.streams = ["CHORUS"] if kind == "nats" else ["chorus:examples"]
        if self.dead_letter is None:
            self.dead_letter = "chorus.dead" if kind == "nats" else "chorus:dead"
        if kind == "nats" and len(self.streams) != 1:
            raise ConsumeConfigError("stream: NATS reads one JetStream stream per consumer")
        bounds = {"batch": (1, 100_000), "max_pending": (1, 10_000_000),
                  "max_deliveries": (1, 1_000_000), "max_len": (1, 1 << 40)}  # fmt: skip
        for name, (lo, hi) in bounds.items():
            value = getattr(self, name)
            if not lo <= value <= hi:
                raise ConsumeConfigError(f"{name}: {value} is not in [{lo}, {hi}]")
        if self.max_pending < self.batch:
            raise ConsumeConfigError(
                f"max_pending ({self.max_pending}) is below batch ({self.batch})"
            )
        for name in ("block", "claim_idle"):
            value = getattr(self, name)
            if not 0 < value <= 86_400:
                raise ConsumeConfigError(f"{name}: {value} s is not in (0, 86400]")
        for name in ("group", "consumer", "subject"):
            if not getattr(self, name):
                raise ConsumeConfigError(f"{name}: empty")
        for s in [*self.streams, self.output, self.dead_letter]:
            if s is not None and (not s or len(s) > 512):
                raise ConsumeConfigError(f"stream {s!r}: 1-512 characters")


def _typed(cls: type, name: str, value: Any) -> Any:
    """A query option's text as its field's type."""
    if not isinstance(value, str):
        return value
    kind = {f.name: f.type for f in dataclasses.fields(cls)}[name]
    if kind == "int":
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{name}: {value!r} is not an integer") from None
    if kind == "float":
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{name}: {value!r} is not a number") from None
    if kind == "bool":
        if value.lower() not in ("1", "0", "true", "false", "yes", "no"):
            raise ValueError(f"{name}: {value!r} is not true or false")
        return value.lower() in ("1", "true", "yes")
    return value or None if kind == "str | None" else value
