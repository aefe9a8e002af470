"""Service settings: one pydantic-settings class, ``CHORUS_`` environment prefix."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything the service can be configured with (environment variables ``CHORUS_*``).

    Parameters
    ----------
    data_dir
        Directory of the embedded SQLite store (used when ``redis_url`` is not set).
    redis_url
        ``redis://host:port/db`` selects the Redis store (also ``rediss://``, ``unix://``);
        ``redis+cluster://host:port[,host:port...]`` the Redis Cluster store. A URL of another
        shape is refused when the settings are read (start-up fails naming it).
    api_key
        When set, every route except ``/healthz`` and ``/readyz`` needs ``Authorization: Bearer <key>``.
    snapshot_key
        HMAC key for snapshot checksums; without it snapshots carry a plain SHA-256.
    durability
        ``"log"`` appends every example to the model's log before answering; ``"none"`` relies on
        snapshots only (faster, loses the examples since the last snapshot on a crash).
    snapshot_every
        Write a snapshot after this many examples learned by a model.
    snapshot_interval
        Write a snapshot of every changed model at least this often (seconds).
    prediction_ttl
        Seconds a ``prediction_id`` from ``/predict`` accepts a delayed label.
    keep_predictions
        Store the features of every ``/predict`` call so a delayed label can be given.
    max_batch
        Largest number of examples in one batched ``/learn`` or ``/predict``.
    max_batch_values
        Largest number of feature values in one ``/learn`` or ``/predict`` request (the sum
        of its examples' feature counts): the bound on one request's engine work, refused (413)
        before any of it starts. The default admits 250 examples of 1,000 features (about a
        second of a 10-tree ensemble's work on a busy 2-core machine).
    max_challengers
        Largest number of challengers one model may have (each one is a whole model's memory
        and engine time on every example the model learns).
    max_body_bytes
        Largest request body accepted.
    sqlite_synchronous
        SQLite ``PRAGMA synchronous`` (``NORMAL`` survives process crashes, ``FULL`` power loss).
    redis_timeout
        Socket timeout for Redis calls (seconds).
    startup_timeout
        How long startup waits for the store to answer before giving up (seconds).
    metrics_window
        Window of the windowed accuracy.
    idempotency_window
        Idempotency keys are remembered for the last this-many examples of a model (older ones
        are forgotten at the next snapshot), so a retry is safe for that long. They are kept in
        the store; memory holds a filter of ~1.5 bytes per id of the window.
    shared_store
        Other processes write to the same store (``serve(workers > 1)`` sets it): read the log
        tail before each write instead of finding out from a refused append.
    warmup
        Ensemble kinds whose kernels are compiled at start-up, besides those of the stored models
        (comma-separated ``bagging``, ``boosting``, ``single``, ``arf``, ``srp``; ``all``;
        ``none``). ``/readyz`` is 503 until they are compiled.
    read_staleness
        With ``shared_store``, ``/predict`` catches up with the log when its model was last
        caught up longer ago than this (seconds): the freshness bound of reads.
    max_kept_predictions
        A model keeps at most this many ``/predict`` results for delayed labels (oldest first out).
    max_kept_bytes
        A prediction whose kept record (features + answer) is larger is served but not kept
        (``prediction_id: null``).
    min_seq_wait
        How long a read with ``min_seq`` waits for the model to reach that log sequence number
        before answering 503 (seconds).
    memory_mb
        Memory budget of the models held in memory (MiB; 0 = none). Past it, the least recently
        used idle models are snapshotted and dropped from memory, and loaded again (snapshot +
        log, exactly) by their next request. What is counted is an estimate per model (its state
        arrays with room to grow, plus a fixed overhead), not the process's RSS: the interpreter,
        libraries and compiled kernels come on top (about 200-250 MB).
    threads
        Threads a batched ``/learn`` or ``/predict`` of an online bagging model (native learner,
        no drift options) runs its members in; 1 (default) runs them in the request's thread.
        Results are bit-identical for every value. A batch at 2 threads keeps 2 cores busy, so
        more threads than idle cores only adds switching.
    max_header_bytes
        Largest request line plus headers of one request (bytes); a larger one is answered 431
        and the connection closed, before the server holds more of it.
    max_headers
        Most header fields in one request (431 beyond).
    header_timeout
        Seconds a client has to send a request's line and headers, counted from the connection's
        start or from its first byte of the request (a keep-alive connection idles 5 s at most
        before it). Later: 408 and the connection is closed.
    body_timeout
        Seconds a request body may pause between two reads (as nginx's ``client_body_timeout``):
        a longer pause is answered 408 and the connection closed.
    max_inflight_bodies
        Request bodies a process holds at once (being received or served); beyond it a request
        with a body is answered 503 (``Retry-After: 1``) before its body is read.
    max_inflight_bytes
        Total bytes of the request bodies a process holds at once (counted by ``Content-Length``
        before the body is read, else as it arrives); beyond it 503 as above. At least
        ``max_body_bytes``.
    allowed_hosts
        Host names (comma-separated) the ``Host`` header may carry, besides the address the
        connection came in on; another is answered 421 (DNS rebinding). ``*`` accepts any.
    consume
        A bus ``chorus serve`` also consumes examples from (``redis://...?stream=S`` for Redis
        Streams, ``nats://...?stream=S`` for NATS JetStream; the options of ``chorus consume`` as
        query parameters, docs/service.md "Examples from a bus"); unset: none.
    cors_origins
        Origins (comma-separated, e.g. ``https://app.example.com``) whose browser pages may call
        the API (CORS); empty (the default): none, no CORS header is ever sent.
    """

    model_config = SettingsConfigDict(env_prefix="CHORUS_", extra="ignore")

    data_dir: Path = Path("./chorus-data")
    redis_url: str | None = None
    api_key: str | None = None
    snapshot_key: str | None = None
    durability: Literal["log", "none"] = "log"
    snapshot_every: int = Field(10_000, ge=1)
    snapshot_interval: float = Field(60.0, gt=0)
    prediction_ttl: float = Field(3600.0, gt=0)
    keep_predictions: bool = True
    max_batch: int = Field(1000, ge=1)
    max_challengers: int = Field(8, ge=0, le=64)
    max_batch_values: int = Field(250_000, ge=1)
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL"] = "NORMAL"
    redis_timeout: float = Field(2.0, gt=0)
    startup_timeout: float = Field(30.0, ge=0)
    metrics_window: int = Field(1000, ge=1)
    idempotency_window: int = Field(100_000, ge=1)
    shared_store: bool = False
    warmup: str = "bagging"

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, v: str | None) -> str | None:
        if not v:
            return v
        from app.stores.redis_cluster import is_cluster_url, parse_cluster_url

        if is_cluster_url(v):
            parse_cluster_url(v)
        else:
            from redis.connection import parse_url

            try:
                parse_url(v)
            except ValueError as exc:
                raise ValueError(
                    f"{exc} (or redis+cluster://host:port[,host:port...] for Redis Cluster)"
                ) from exc
        return v

    @field_validator("warmup")
    @classmethod
    def _check_warmup(cls, v: str) -> str:
        from app.warmup import parse_kinds

        parse_kinds(v)
        return v

    read_staleness: float = Field(1.0, ge=0)
    max_kept_predictions: int = Field(10_000, ge=1)
    max_kept_bytes: int = Field(64 * 1024, ge=256)
    min_seq_wait: float = Field(2.0, ge=0, le=60)
    memory_mb: int = Field(0, ge=0, le=16 * 2**20)
    threads: int = Field(1, ge=1, le=256)
    max_header_bytes: int = Field(64 * 1024, ge=1024)
    max_headers: int = Field(100, ge=8)
    header_timeout: float = Field(10.0, gt=0)
    body_timeout: float = Field(10.0, gt=0)
    max_inflight_bodies: int = Field(256, ge=1)
    max_inflight_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    allowed_hosts: str = "localhost,127.0.0.1,[::1]"
    cors_origins: str = ""
    consume: str | None = None

    @field_validator("consume")
    @classmethod
    def _check_consume(cls, v: str | None) -> str | None:
        if not v:
            return None
        from app.consume.config import ConsumeConfig

        ConsumeConfig.from_url(v)  # a ConsumeConfigError (a ValueError) names what is wrong
        return v

    @model_validator(mode="after")
    def _check_inflight(self) -> Settings:
        if self.max_inflight_bytes < self.max_body_bytes:
            raise ValueError(
                f"max_inflight_bytes ({self.max_inflight_bytes}) must be at least max_body_bytes "
                f"({self.max_body_bytes}): a body of the largest size could never be received"
            )
        return self

    def host_names(self) -> frozenset[str] | None:
        """``allowed_hosts`` as lower-case names (an IPv6 address without brackets); ``None``
        for ``*`` (any host)."""
        names = [h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip()]
        if "*" in names:
            return None
        return frozenset(h[1:-1] if h.startswith("[") and h.endswith("]") else h for h in names)

    def origins(self) -> list[str]:
        """``cors_origins`` as a list."""
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings (a FastAPI dependency; override it in tests)."""
    return Settings()
