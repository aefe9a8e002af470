"""Embedded store: one SQLite file in WAL mode (the zero-set-up default).

The log holds one row per *append*: ``seq`` is the sequence number of the row's last entry,
``n`` how many entries it holds, ``record`` the entry itself when ``n = 1`` and the entries
framed (each a 4-byte little-endian length, then its bytes) when ``n > 1``. A batch of 1,000 is
then one row (one B-tree insert, and one delete at the trim) instead of 1,000. Databases written
before (log format 1: every row one entry, no ``n`` column) get the column with ``n = 1`` when
opened and read as before; this version's batch rows are unreadable to versions before it
(``PRAGMA user_version`` is 2 once the column exists).
"""

from __future__ import annotations

import json
import sqlite3
import struct
import time
from pathlib import Path
from typing import Any

from app.stores.base import (
    DuplicateKey,
    Entry,
    ModelGone,
    SeqConflict,
    incarnation_of,
    raises_store_errors,
)

# Pages the WAL grows to before a commit copies it into the database (SQLite's default: 1,000).
# A checkpoint costs syncs and a pass over the pages; batched learning writes ~50 pages per
# 1,000 examples. Appending 1,000-entry rows and trimming them as the server does took ~5 ms
# per batch with 1,000-page checkpoints and ~2.4 ms with 4,000 (a WAL of ~16 MB) on the
# development machine (benchmarks/results/profile.md, "After the HTTP work").
WAL_PAGES = 4000

_SNAPSHOT_SLOTS = ("snapshots", "snapshots_prev")  # the two generations kept (put_snapshot)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    name TEXT PRIMARY KEY, spec TEXT NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS log (
    model TEXT NOT NULL, seq INTEGER NOT NULL, record BLOB NOT NULL, n INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (model, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    model TEXT PRIMARY KEY, seq INTEGER NOT NULL, blob BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS snapshots_prev (
    model TEXT PRIMARY KEY, seq INTEGER NOT NULL, blob BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS idem (
    model TEXT NOT NULL, key TEXT NOT NULL, response BLOB NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (model, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS predictions (
    model TEXT NOT NULL, pid TEXT NOT NULL, blob BLOB NOT NULL, expires REAL NOT NULL,
    PRIMARY KEY (model, pid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS predictions_expires ON predictions (expires);
CREATE INDEX IF NOT EXISTS predictions_model_expires ON predictions (model, expires);
CREATE TABLE IF NOT EXISTS leases (
    model TEXT PRIMARY KEY, token TEXT NOT NULL, until REAL NOT NULL) WITHOUT ROWID;
"""


@raises_store_errors
class SqliteStore:
    """A :class:`~app.stores.base.Store` in one SQLite database file.

    Every write is one transaction (``BEGIN IMMEDIATE``), so an append with its idempotency keys
    either lands whole or not at all, also with several processes sharing the file.
    Calls run directly on the event loop: they are local and take microseconds.

    Parameters
    ----------
    path
        Database file; its directory is created.
    synchronous
        ``PRAGMA synchronous``; ``NORMAL`` (default) survives a killed process, ``FULL`` also a
        power cut.
    """

    name = "sqlite"
    DRIVER_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError, OSError)

    @staticmethod
    def corrupt(exc: BaseException) -> bool:
        """Whether a driver error means damaged data (SQLite's ``SQLITE_CORRUPT`` or
        ``SQLITE_NOTADB``, or a log row that does not split into its entries), not a busy or
        unreachable file: :class:`~app.stores.base.StoreCorrupt`."""
        code = getattr(exc, "sqlite_errorcode", None) or 0
        return (code & 0xFF) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)

    def __init__(self, path: str | Path, synchronous: str = "NORMAL") -> None:
        self.path = Path(path)
        self.synchronous = synchronous
        self._db: sqlite3.Connection | None = None
        self._puts = 0

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise sqlite3.OperationalError("store is closed")
        return self._db

    async def open(self, timeout: float = 0.0) -> None:
        await self.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={self.synchronous}")
        db.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")
        db.executescript(_SCHEMA)
        _add_idem_seq(db)
        _add_log_n(db)
        _add_incarnation(db)
        db.execute("CREATE INDEX IF NOT EXISTS idem_seq ON idem (model, seq)")
        self._db = db

    async def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    async def ping(self) -> bool:
        try:
            self.db.execute("SELECT 1").fetchone()
            return True
        except sqlite3.Error:
            return False

    def _tx(self):
        return _Tx(self.db)

    async def create_model(self, name: str, spec: dict[str, Any]) -> bool:
        try:
            with self._tx() as db:
                db.execute(
                    "INSERT INTO models (name, spec, created, incarnation) VALUES (?, ?, ?, ?)",
                    (name, json.dumps(spec), time.time(), incarnation_of(spec)),
                )
            return True
        except sqlite3.IntegrityError:
            return False

    async def get_model(self, name: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT spec FROM models WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else None

    async def data_id(self) -> str:
        return f"sqlite:{self.path}"  # the file is the data (its inode stays with this process)

    async def list_models(self) -> dict[str, dict[str, Any]]:
        rows = self.db.execute("SELECT name, spec FROM models ORDER BY created, name").fetchall()
        return {name: json.loads(spec) for name, spec in rows}

    async def delete_model(self, name: str) -> bool:
        with self._tx() as db:
            n = db.execute("DELETE FROM models WHERE name = ?", (name,)).rowcount
            for table in ("log", "snapshots", "snapshots_prev", "idem", "predictions", "leases"):
                db.execute(f"DELETE FROM {table} WHERE model = ?", (name,))  # noqa: S608
        return n > 0

    async def append(
        self, name: str, entries: list[Entry], expected_seq: int, incarnation: str | None = None
    ) -> int:
        seq = expected_seq + len(entries)
        with self._tx() as db:
            # one statement checks that the model (that incarnation) exists and that the log did
            # not move
            moved = db.execute(
                "UPDATE models SET last_seq = ? WHERE name = ? AND last_seq = ? "
                "AND incarnation = coalesce(?, incarnation)",
                (seq, name, expected_seq, incarnation),
            ).rowcount
            if not moved:
                raise SeqConflict(_last_seq(db, name, incarnation))
            keyed = [
                (name, e.key, e.response or b"", expected_seq + i + 1)
                for i, e in enumerate(entries)
                if e.key is not None
            ]
            if keyed:
                added = _insert_keys(db, keyed)
                if added != len(keyed):  # some key was there already: find it, roll back
                    for _, key, resp, _ in keyed:
                        row = db.execute(
                            "SELECT response FROM idem WHERE model = ? AND key = ?", (name, key)
                        ).fetchone()
                        if row is not None and bytes(row[0]) != resp:
                            raise DuplicateKey(key)
                    raise DuplicateKey(keyed[0][1])
            if entries:  # one row, however many entries (the module docstring)
                db.execute(
                    "INSERT INTO log (model, seq, record, n) VALUES (?, ?, ?, ?)",
                    (name, seq, _frame(entries), len(entries)),
                )
        return seq

    async def read(self, name: str, after_seq: int, limit: int = 1000) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        rows = self.db.execute(
            "SELECT seq, n, record FROM log WHERE model = ? AND seq > ? ORDER BY seq",
            (name, after_seq),
        )
        for last, n, record in rows:
            out.extend(e for e in _entries(last, n, record) if e[0] > after_seq)
            if len(out) >= limit:
                break
        rows.close()
        return out[:limit]

    async def last_seq(self, name: str) -> int:
        row = self.db.execute("SELECT last_seq FROM models WHERE name = ?", (name,)).fetchone()
        return row[0] if row else 0

    async def put_snapshot(
        self, name: str, seq: int, blob: bytes, incarnation: str | None = None
    ) -> int:
        # The two generations are two slots, the tables ``snapshots`` and ``snapshots_prev``;
        # readers order them by seq. A newer snapshot overwrites the slot of the older one (or
        # an empty one), one write of the blob: shifting the current one to the other table
        # first copied it too (a 30 MB model's snapshot held the event loop ~0.2 s longer).
        with self._tx() as db:
            _last_seq(db, name, incarnation)
            held: dict[str, int] = {}  # slot -> the seq it holds
            for table in _SNAPSHOT_SLOTS:
                row = db.execute(f"SELECT seq FROM {table} WHERE model = ?", (name,)).fetchone()
                if row is not None:
                    held[table] = row[0]
            newest = max(held.values(), default=None)
            if newest is None or seq >= newest:  # (else another process wrote a newer one)
                if seq == newest:  # the same generation, in place
                    target = next(t for t, s in held.items() if s == newest)
                else:  # an empty slot, else the older generation's
                    target = next((t for t in _SNAPSHOT_SLOTS if t not in held), None)
                    target = target or min(held, key=held.__getitem__)
                db.execute(
                    f"INSERT OR REPLACE INTO {target} (model, seq, blob) VALUES (?, ?, ?)",
                    (name, seq, blob),
                )
                held[target] = seq
            db.execute("UPDATE models SET last_seq = MAX(last_seq, ?) WHERE name = ?", (seq, name))
        return min(held.values())  # the oldest generation kept

    async def get_snapshot(self, name: str) -> tuple[int, bytes] | None:
        gens = await self.get_snapshots(name)
        return gens[0] if gens else None

    async def get_snapshots(self, name: str) -> list[tuple[int, bytes]]:
        rows = self.db.execute(
            "SELECT seq, blob FROM snapshots WHERE model = ?1 "
            "UNION ALL SELECT seq, blob FROM snapshots_prev WHERE model = ?1 ORDER BY seq DESC",
            (name,),
        ).fetchall()
        return [(seq, bytes(blob)) for seq, blob in rows]

    async def trim(self, name: str, upto_seq: int, incarnation: str | None = None) -> None:
        with self._tx() as db:
            try:
                _last_seq(db, name, incarnation)
            except ModelGone:
                return
            db.execute("DELETE FROM log WHERE model = ? AND seq <= ?", (name, upto_seq))
            row = db.execute(  # a batch row across upto_seq keeps only its entries after it
                "SELECT seq, n, record FROM log WHERE model = ? AND seq > ? ORDER BY seq LIMIT 1",
                (name, upto_seq),
            ).fetchone()
            if row is not None and row[0] - row[1] < upto_seq:
                kept = [Entry(r) for seq, r in _entries(*row) if seq > upto_seq]
                db.execute(
                    "UPDATE log SET n = ?, record = ? WHERE model = ? AND seq = ?",
                    (len(kept), _frame(kept), name, row[0]),
                )

    async def get_answers(self, name: str, keys: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for i in range(0, len(keys), 500):  # under SQLite's limit of bound parameters
            part = keys[i : i + 500]
            rows = self.db.execute(
                f"SELECT key, response FROM idem WHERE model = ? AND key IN "  # noqa: S608
                f"({','.join('?' * len(part))})",
                (name, *part),
            )
            out.update((k, bytes(r)) for k, r in rows)
        return out

    async def key_names(self, name: str) -> list[str]:
        return [k for (k,) in self.db.execute("SELECT key FROM idem WHERE model = ?", (name,))]

    async def put_keys(
        self, name: str, items: list[tuple[str, int, bytes]], incarnation: str | None = None
    ) -> None:
        with self._tx() as db:
            _last_seq(db, name, incarnation)
            _insert_keys(db, [(name, key, resp, seq) for key, seq, resp in items])

    async def forget_keys(self, name: str, upto_seq: int) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM idem WHERE model = ? AND seq <= ?", (name, upto_seq))

    async def put_prediction(self, name: str, pid: str, blob: bytes, ttl: float) -> None:
        await self.put_predictions([(name, pid, blob)], ttl)  # unbounded: the registry bounds

    async def put_predictions(
        self, items: list[tuple[str, str, bytes]], ttl: float, *, max_per_model: int | None = None
    ) -> set[str]:
        now = time.time()
        with self._tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO predictions (model, pid, blob, expires) VALUES (?, ?, ?, ?)",
                [(name, pid, blob, now + ttl) for name, pid, blob in items],
            )
            if max_per_model is not None:
                for name in {name for name, _, _ in items}:  # the oldest beyond the bound go
                    db.execute(
                        "DELETE FROM predictions WHERE model = ?1 AND pid IN (SELECT pid FROM "
                        "predictions WHERE model = ?1 ORDER BY expires DESC LIMIT -1 OFFSET ?2)",
                        (name, max_per_model),
                    )
            before = self._puts
            self._puts += len(items)
            if self._puts // 1000 != before // 1000:  # expired ones linger max(TTL, 60 s): 410
                db.execute("DELETE FROM predictions WHERE expires < ?", (now - max(ttl, 60.0),))
        return set()  # one file: all kept, or an error

    async def get_prediction(self, name: str, pid: str) -> bytes | None:
        row = self.db.execute(
            "SELECT blob FROM predictions WHERE model = ? AND pid = ?", (name, pid)
        ).fetchone()
        return bytes(row[0]) if row else None

    async def acquire_writer(self, name: str, token: str, ttl: float) -> bool:
        now = time.time()
        with self._tx() as db:
            row = db.execute("SELECT token, until FROM leases WHERE model = ?", (name,)).fetchone()
            if row is not None and row[0] != token and row[1] > now:
                return False
            db.execute(
                "INSERT OR REPLACE INTO leases (model, token, until) VALUES (?, ?, ?)",
                (name, token, now + ttl),
            )
        return True

    async def release_writer(self, name: str, token: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM leases WHERE model = ? AND token = ?", (name, token))


def _last_seq(db: sqlite3.Connection, name: str, incarnation: str | None) -> int:
    """The model's last seq; :class:`ModelGone` if it is not there, or not that incarnation
    (``None``: any)."""
    row = db.execute("SELECT last_seq, incarnation FROM models WHERE name = ?", (name,)).fetchone()
    if row is None or incarnation not in (None, row[1]):
        raise ModelGone(name)
    return row[0]


def _add_incarnation(db: sqlite3.Connection) -> None:
    """Give a database written before incarnations its ``models.incarnation`` column: the
    models already there are legacy ones (``""``, as ``incarnation_of`` reads their specs)."""

    def has_it() -> bool:
        return any(row[1] == "incarnation" for row in db.execute("PRAGMA table_info(models)"))

    if has_it():
        return
    with _Tx(db):
        if not has_it():  # (another process sharing the file may have added it meanwhile)
            db.execute("ALTER TABLE models ADD COLUMN incarnation TEXT NOT NULL DEFAULT ''")


def _add_idem_seq(db: sqlite3.Connection) -> None:
    """Give a database written before ids were forgotten by seq its ``idem.seq`` column, filled
    from each stored answer's ``seq``."""

    def has_seq() -> bool:
        return any(row[1] == "seq" for row in db.execute("PRAGMA table_info(idem)"))

    if has_seq():
        return
    with _Tx(db):
        if has_seq():  # another process sharing the file migrated it meanwhile
            return
        db.execute("ALTER TABLE idem ADD COLUMN seq INTEGER NOT NULL DEFAULT 0")
        db.execute(
            "UPDATE idem SET seq = COALESCE(json_extract(CAST(response AS TEXT), '$.seq'), 0)"
        )


_LEN = struct.Struct("<I")


def _frame(entries: list[Entry]) -> bytes:
    """The ``record`` of a log row holding ``entries`` (the module docstring)."""
    if len(entries) == 1:
        return entries[0].record
    pack = _LEN.pack
    return b"".join([part for e in entries for part in (pack(len(e.record)), e.record)])


def _entries(last: int, n: int, record: bytes) -> list[tuple[int, bytes]]:
    """``(seq, record)`` of each entry of the log row ``(last, n, record)``."""
    if n == 1:
        return [(last, bytes(record))]
    out, pos, blob = [], 0, memoryview(record)
    try:
        for seq in range(last - n + 1, last + 1):
            (size,) = _LEN.unpack_from(blob, pos)
            out.append((seq, bytes(blob[pos + 4 : pos + 4 + size])))
            pos += 4 + size
    except struct.error:
        pos = len(blob) + 1  # a length past the row's end
    if pos != len(blob):
        exc = sqlite3.DatabaseError(f"log row at seq {last}: its {n} entries do not fit its bytes")
        exc.sqlite_errorcode = sqlite3.SQLITE_CORRUPT  # damaged data: StoreCorrupt
        raise exc
    return out


def _add_log_n(db: sqlite3.Connection) -> None:
    """Give a log of format 1 (one entry per row) the ``n`` column (every old row: ``n = 1``)
    and mark the database as log format 2."""
    if db.execute("PRAGMA user_version").fetchone()[0] >= 2:
        return
    with _Tx(db):
        if not any(row[1] == "n" for row in db.execute("PRAGMA table_info(log)")):
            db.execute("ALTER TABLE log ADD COLUMN n INTEGER NOT NULL DEFAULT 1")
        db.execute("PRAGMA user_version = 2")


_KEYS_PER_INSERT = 500  # rows of one multi-row INSERT into idem (4 bound values each)


def _insert_keys(db: sqlite3.Connection, rows: list[tuple[str, str, bytes, int]]) -> int:
    """``INSERT OR IGNORE`` of idempotency rows ``(model, key, response, seq)``; returns how many
    were new. Multi-row statements: a batch's 1,000 keys took ~7 us each through
    ``executemany`` and ~4.5 through statements of 500 rows (the module binds and steps once
    per statement; benchmarks/results/consume.md)."""
    per = max(1, min(_KEYS_PER_INSERT, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // 4))
    added = 0
    for i in range(0, len(rows), per):
        part = rows[i : i + per]
        values = ",".join(("(?, ?, ?, ?)",) * len(part))
        sql = f"INSERT OR IGNORE INTO idem (model, key, response, seq) VALUES {values}"  # noqa: S608
        added += db.execute(sql, [v for row in part for v in row]).rowcount
    return added


class _Tx:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception)."""

    __slots__ = ("db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.db.execute("COMMIT")
        else:
            self.db.execute("ROLLBACK")
