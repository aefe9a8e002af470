"""``chorus doctor``: check a SQLite store model by model and salvage what can be read.

A damaged page of the store's file (a disk error, bytes written over it, a truncated copy) makes
SQLite refuse every statement that reaches it: the server marks the models whose data it holds
broken, or, when the ``models`` table itself cannot be read, serves nothing. This module reads the
file the other way round, tolerating every error: it seeks each model's rows through the B-tree
keys (a damaged page breaks only the ranges of keys it holds) and reports, per model, what can be
read: its spec, each snapshot generation (decoded, checksum or HMAC verified), and its log (every
entry a record, contiguous from the snapshot on). A salvage copies the readable part of every
model into a new store: the newest verified snapshot, the log behind it as far as it is
contiguous, the idempotency ids of those entries and the kept predictions; then it loads every
copied model as the server would (snapshot + replay) and keeps only those that load.

When the ``models`` table cannot be read, model names are found in the other tables' keys and a
model's spec is rebuilt from its newest verified snapshot (the engine's own spec of the state).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from app import snapshot as codec
from app.errors import ChorusError, CorruptSnapshot
from app.registry.recovery import Recovery, Unloadable, mentions_river
from app.stores.base import incarnation_of
from app.stores.sqlite import SqliteStore, _entries

SLOTS = ("snapshots", "snapshots_prev")  # the two snapshot generations' tables
_NAMED_BY = (("models", "name"), ("log", "model"), ("snapshots", "model"),
             ("snapshots_prev", "model"), ("idem", "model"))  # fmt: skip
_INTEGRITY_LINES = 20


@dataclass
class ModelCheck:
    """What could be read of one model.

    ``restorable`` is the last seq a salvaged copy holds (the newest verified snapshot, then the
    contiguous log after it); ``last_seq`` the models table's (``None`` when unreadable).
    """

    name: str
    spec: dict[str, Any] | None = None
    spec_from: str | None = None  # "models table" or "snapshot"
    created: float | None = None
    last_seq: int | None = None
    snapshots: list[tuple[str, int, bytes]] = field(
        default_factory=list
    )  # verified (slot, seq, blob)
    log_rows: list[tuple[int, int, bytes]] = field(
        default_factory=list
    )  # contiguous (seq, n, record)
    log_to: int = 0  # last seq of the contiguous log read
    log_complete: bool = True  # the log was read to its end without an error or a gap
    ids: list[tuple[str, bytes, int]] = field(default_factory=list)
    predictions: list[tuple[str, bytes, float]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def restorable(self) -> int:
        newest = max((seq for _, seq, _ in self.snapshots), default=0)
        return max(newest, self.log_to)

    @property
    def verdict(self) -> str:
        """``ok`` (nothing wrong), ``recoverable`` (damage, but every acknowledged example can
        be restored), ``partial`` (some examples are lost, or cannot be known to be complete) or
        ``lost`` (no spec)."""
        if self.spec is None:
            return "lost"
        complete = (
            self.restorable == self.last_seq if self.last_seq is not None else self.log_complete
        )
        if not complete:
            return "partial"
        return "recoverable" if self.problems else "ok"

    def summary(self) -> str:
        """One line: the verdict and why."""
        if self.spec is None:
            return (
                f"{self.name}: lost: its spec cannot be read and no snapshot verifies; "
                + "; ".join(self.problems)
            )
        total = "?" if self.last_seq is None else f"{self.last_seq:,}"
        what = f"{self.restorable:,} of {total} log entries restorable"
        snaps = ", ".join(f"seq {seq}" for _, seq, _ in self.snapshots) or "none"
        line = f"{self.name}: {self.verdict}: {what} (verified snapshots: {snaps}"
        line += f"; spec from the {self.spec_from})"
        return line + "".join(f"\n    - {p}" for p in self.problems)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "spec_from": self.spec_from,
            "last_seq": self.last_seq,
            "restorable_seq": self.restorable,
            "snapshots": [seq for _, seq, _ in self.snapshots],
            "log_readable_to": self.log_to,
            "problems": self.problems,
        }


@dataclass
class StoreCheck:
    """The whole store: SQLite's integrity check, the models table, every model found."""

    path: Path
    integrity: list[str] = field(default_factory=list)  # ["ok"] when healthy
    models_table: str = "ok"
    models: dict[str, ModelCheck] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        return (
            self.integrity == ["ok"]
            and self.models_table == "ok"
            and all(m.verdict == "ok" for m in self.models.values())
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "healthy": self.healthy,
            "integrity_check": self.integrity,
            "models_table": self.models_table,
            "models": {n: m.to_json() for n, m in self.models.items()},
        }


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _tolerant(db: sqlite3.Connection, sql: str, params: tuple = ()) -> tuple[list, str | None]:
    """The rows a query yields before an error, and the error (``None``: read to the end)."""
    rows: list = []
    try:
        cur = db.execute(sql, params)
        while (row := cur.fetchone()) is not None:
            rows.append(row)
    except sqlite3.DatabaseError as exc:
        return rows, _err(exc)
    return rows, None


def _names(db: sqlite3.Connection, table: str, column: str) -> tuple[set[str], str | None]:
    """The distinct model names a table holds, found by seeking from key to key (so a damaged
    page hides only the names whose keys it holds, as far as the seek can pass it)."""
    names: set[str] = set()
    after = ""
    sql = f"SELECT {column} FROM {table} WHERE {column} > ? ORDER BY {column} LIMIT 1"  # noqa: S608
    while True:
        try:
            row = db.execute(sql, (after,)).fetchone()
        except sqlite3.DatabaseError as exc:
            return names, _err(exc)
        if row is None:
            return names, None
        after = row[0]
        names.add(after)


def _connect(path: Path) -> sqlite3.Connection:
    """A connection that never writes (``query_only``) and reads a truncated file's pages that
    are still there (``writable_schema``: SQLite refuses the whole file otherwise)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such store file")
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA query_only = ON")
    db.execute("PRAGMA writable_schema = ON")
    return db


def check(path: Path, key: bytes | None = None) -> StoreCheck:
    """Check the SQLite store at ``path`` (its file); reads only.

    Parameters
    ----------
    path
        The store's database file (``CHORUS_DATA_DIR/chorus.db``).
    key
        ``CHORUS_SNAPSHOT_KEY`` (bytes) when the snapshots are HMAC-signed.
    """
    db = _connect(path)
    try:
        report = StoreCheck(path)
        try:
            lines = [r[0] for r in db.execute(f"PRAGMA integrity_check({_INTEGRITY_LINES})")]
            report.integrity = [x for line in lines for x in line.split("\n") if x]
        except sqlite3.DatabaseError as exc:
            report.integrity = [f"integrity_check failed: {_err(exc)}"]
        rows, error = _tolerant(db, "SELECT name FROM models")
        if error is None:
            rows, error = _tolerant(db, "SELECT name, spec, last_seq, created FROM models")
        if error is not None:
            report.models_table = (
                f"unreadable ({error}; {len(rows)} row(s) read): model names are taken from the "
                "other tables' keys, a spec that cannot be read from the newest verified snapshot"
            )
        found: set[str] = set()
        for table, column in _NAMED_BY:
            names, _ = _names(db, table, column)
            found |= names
        for name in sorted(found):
            report.models[name] = _check_model(db, name, key)
        return report
    finally:
        db.close()


def _check_model(db: sqlite3.Connection, name: str, key: bytes | None) -> ModelCheck:
    m = ModelCheck(name)
    try:
        row = db.execute(
            "SELECT spec, last_seq, created FROM models WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            m.problems.append("not in the models table (a model half-deleted, or its row lost)")
        else:
            m.last_seq, m.created = int(row[1]), float(row[2])
            m.spec, m.spec_from = json.loads(row[0]), "models table"
    except (sqlite3.DatabaseError, ValueError, TypeError) as exc:
        m.problems.append(f"models table row unreadable: {_err(exc)}")
    states: dict[int, dict] = {}
    metas: dict[int, dict] = {}
    for slot in SLOTS:
        rows, error = _tolerant(db, f"SELECT seq, blob FROM {slot} WHERE model = ?", (name,))  # noqa: S608
        if error is not None:
            m.problems.append(f"snapshot table {slot} unreadable: {error}")
        for seq, blob in rows:
            try:
                states[seq], metas[seq] = codec.decode(bytes(blob), key)
                m.snapshots.append((slot, int(seq), bytes(blob)))
            except CorruptSnapshot as exc:
                m.problems.append(f"snapshot at seq {seq} rejected: {exc}")
    m.snapshots.sort(key=lambda s: -s[1])
    if m.spec is None and m.snapshots:
        newest = m.snapshots[0][1]
        m.spec = _spec_of(states[newest], m.problems, key)
        if m.spec is not None and metas[newest].get("incarnation"):
            m.spec["incarnation"] = metas[newest]["incarnation"]  # the life its snapshots carry
        m.spec_from = "snapshot" if m.spec is not None else None
    _check_log(db, m)
    horizon = m.restorable
    rows, error = _tolerant(
        db, "SELECT key, response, seq FROM idem WHERE model = ? AND seq <= ?", (name, horizon)
    )
    m.ids = [(k, bytes(r), int(s)) for k, r, s in rows]
    if error is not None:
        m.problems.append(f"idempotency ids partly unreadable ({len(rows)} read): {error}")
    rows, error = _tolerant(
        db, "SELECT pid, blob, expires FROM predictions WHERE model = ?", (name,)
    )
    m.predictions = [(p, bytes(b), float(e)) for p, b, e in rows]
    if error is not None:
        m.problems.append(f"kept predictions partly unreadable ({len(rows)} read): {error}")
    return m


def _spec_of(state: dict, problems: list[str], key: bytes | None) -> dict[str, Any] | None:
    """The declared spec a snapshot's state implies (the engine's spec of the model). A state
    with river-backed (pickled) members is loaded only when HMAC-signed, as the server does."""
    import ensembles

    if key is None and mentions_river(state["header"]):
        problems.append("the newest verified snapshot has river-backed members but is not signed")
        return None
    try:
        return {**ensembles.load_state(state).spec(), "features": None, "classes": None}
    except Exception as exc:  # noqa: BLE001 - whatever the state is, only this model fails
        problems.append(f"the newest verified snapshot does not load: {_err(exc)}"[:300])
        return None


def _check_log(db: sqlite3.Connection, m: ModelCheck) -> None:
    """Read the log from the oldest verified snapshot on (from the start without one) while it
    is contiguous and every entry is a record."""
    start = min((seq for _, seq, _ in m.snapshots), default=0)
    expect = start + 1
    m.log_to = start
    try:
        cur = db.execute(
            "SELECT seq, n, record FROM log WHERE model = ? AND seq > ? ORDER BY seq",
            (m.name, start),
        )
        for seq, n, record in _rows(cur):
            first = seq - n + 1
            if first > expect:
                m.problems.append(f"log has a gap: entries {expect}..{first - 1} missing")
                m.log_complete = False
                return
            for s, raw in _entries(seq, n, record):
                rec = orjson.loads(raw)
                if not isinstance(rec, dict) or not (("x" in rec and "y" in rec) or "op" in rec):
                    raise ValueError(f"log entry {s} is not an example or control record")
            m.log_rows.append((seq, n, bytes(record)))
            m.log_to, expect = seq, seq + 1
    except (sqlite3.DatabaseError, ValueError) as exc:
        m.log_complete = False
        m.problems.append(f"log unreadable after seq {m.log_to}: {_err(exc)}"[:300])
    if m.last_seq is not None and m.log_complete and m.restorable < m.last_seq:
        m.log_complete = False
        m.problems.append(f"log ends at seq {m.log_to}, the models table says {m.last_seq}")


def _rows(cur: sqlite3.Cursor) -> Iterator[tuple]:
    while (row := cur.fetchone()) is not None:
        yield row


def salvage(report: StoreCheck, out_dir: Path, settings: Any) -> dict[str, str]:
    """Copy every model's readable part into a new store in ``out_dir`` (``chorus.db``, which
    must not exist), then load each copied model as the server would; a model that does not load
    is removed from the copy. Returns model -> what was salvaged (or why not)."""
    out = out_dir / "chorus.db"
    if out.exists():
        raise FileExistsError(f"{out} exists: salvage writes a new store only")
    asyncio.run(_create(out))
    db = sqlite3.connect(out, isolation_level=None)
    outcome: dict[str, str] = {}
    try:
        db.execute("BEGIN IMMEDIATE")
        for m in report.models.values():
            if m.spec is None:
                outcome[m.name] = "not salvaged: its spec cannot be read"
                continue
            seq = m.restorable
            db.execute(
                "INSERT INTO models (name, spec, last_seq, created, incarnation)"
                " VALUES (?, ?, ?, ?, ?)",
                (m.name, json.dumps(m.spec), seq, m.created or time.time(), incarnation_of(m.spec)),
            )
            db.executemany(
                "INSERT INTO log (model, seq, n, record) VALUES (?, ?, ?, ?)",
                [(m.name, s, n, r) for s, n, r in m.log_rows],
            )
            for slot, s, blob in m.snapshots:
                db.execute(
                    f"INSERT INTO {slot} (model, seq, blob) VALUES (?, ?, ?)",  # noqa: S608
                    (m.name, s, blob),
                )
            db.executemany(
                "INSERT INTO idem (model, key, response, seq) VALUES (?, ?, ?, ?)",
                [(m.name, k, r, s) for k, r, s in m.ids],
            )
            db.executemany(
                "INSERT INTO predictions (model, pid, blob, expires) VALUES (?, ?, ?, ?)",
                [(m.name, p, b, e) for p, b, e in m.predictions],
            )
            total = "?" if m.last_seq is None else f"{m.last_seq:,}"
            outcome[m.name] = f"salvaged to seq {seq:,} of {total}"
        db.execute("COMMIT")
    finally:
        db.close()
    for name, why in asyncio.run(_verify(out, report, settings)).items():
        outcome[name] = f"not salvaged: the copy does not load: {why}"
    return outcome


async def _create(path: Path) -> None:
    store = SqliteStore(path)
    await store.open()
    await store.close()


async def _verify(path: Path, report: StoreCheck, settings: Any) -> dict[str, str]:
    """Load every copied model (snapshot + replay, as the server does); those that fail are
    deleted from the copy. Returns model -> why it failed."""
    store = SqliteStore(path)
    await store.open()
    failed: dict[str, str] = {}
    try:
        recovery = Recovery(store, settings)
        for m in report.models.values():
            if m.spec is None:
                continue
            try:
                await recovery.load(m.name, m.spec)
            except (Unloadable, ChorusError) as exc:
                failed[m.name] = str(exc)[:300]
                with contextlib.suppress(Exception):
                    await store.delete_model(m.name)
    finally:
        await store.close()
    return failed
