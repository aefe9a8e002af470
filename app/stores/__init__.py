"""Durable stores: :class:`SqliteStore` (embedded default) and :class:`RedisStore`."""

from __future__ import annotations

from app.settings import Settings
from app.stores.base import DuplicateKey, Entry, ModelGone, SeqConflict, Store, StoreError
from app.stores.redis import RedisStore
from app.stores.sqlite import SqliteStore

__all__ = [
    "DuplicateKey",
    "Entry",
    "ModelGone",
    "RedisStore",
    "SeqConflict",
    "SqliteStore",
    "Store",
    "StoreError",
    "make_store",
]


def make_store(settings: Settings) -> Store:
    """The store the settings select: Redis when ``redis_url`` is set, else SQLite in ``data_dir``."""
    if settings.redis_url:
        return RedisStore(settings.redis_url, timeout=settings.redis_timeout)
    return SqliteStore(settings.data_dir / "chorus.db", synchronous=settings.sqlite_synchronous)
