"""Durable stores: :class:`SqliteStore` (embedded default), :class:`RedisStore` and
:class:`RedisClusterStore`."""

from __future__ import annotations

from app.settings import Settings
from app.stores.base import (
    DuplicateKey,
    Entry,
    ModelGone,
    OutcomeUnknown,
    SeqConflict,
    Store,
    StoreConfigError,
    StoreCorrupt,
    StoreDown,
    StoreError,
)
from app.stores.redis import RedisStore
from app.stores.redis_cluster import RedisClusterStore, is_cluster_url
from app.stores.sqlite import SqliteStore

__all__ = [
    "DuplicateKey",
    "Entry",
    "ModelGone",
    "OutcomeUnknown",
    "RedisClusterStore",
    "RedisStore",
    "SeqConflict",
    "SqliteStore",
    "Store",
    "StoreConfigError",
    "StoreCorrupt",
    "StoreDown",
    "StoreError",
    "make_store",
]


def make_store(settings: Settings) -> Store:
    """The store the settings select: Redis Cluster for a ``redis+cluster://`` URL, Redis for
    another ``redis_url``, else SQLite in ``data_dir``."""
    if settings.redis_url and is_cluster_url(settings.redis_url):
        return RedisClusterStore(settings.redis_url, timeout=settings.redis_timeout)
    if settings.redis_url:
        return RedisStore(settings.redis_url, timeout=settings.redis_timeout)
    return SqliteStore(settings.data_dir / "chorus.db", synchronous=settings.sqlite_synchronous)
