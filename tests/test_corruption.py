"""A damaged SQLite store breaks only what it cannot read (issue 42, item 5).

A real store file of three models (``a``, ``b``, ``c``: a snapshot at seq 150, 300 log entries
each) is copied, and a page of the copy is overwritten (or the file truncated) as a disk error
would: the server must serve every model whose data still reads, mark the others broken with the
reason, and never sit in "recovering models from the store" retrying for ever; ``chorus doctor``
reports it per model and salvages what can be read into a new store that serves.
"""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import app as cli
from app.main import create_app
from app.registry import Example, Registry
from app.settings import Settings
from app.stores import SqliteStore

MODELS = ("a", "b", "c")
N = 300
SNAP = 150


def _settings(data_dir: Path, **kw) -> Settings:
    # start-up waits for recovery (up to startup_timeout): a server that recovers answers ready
    kw = {"snapshot_every": 10**9, "snapshot_interval": 3600, "warmup": "none", **kw}
    return Settings(data_dir=data_dir, **kw)


async def _build(data_dir: Path) -> None:
    store = SqliteStore(data_dir / "chorus.db")
    await store.open()
    reg = Registry(store, _settings(data_dir))
    await reg.recover()
    for m in MODELS:
        await reg.create(m, {"ensemble": "bagging", "learner": "naive_bayes", "n_models": 3})
    rng = random.Random(42)
    for i in range(N):
        if i == SNAP:
            await reg.snapshot_all()
        for m in MODELS:  # one log row per example: each model's rows fill pages of their own
            ex = Example({"x": rng.random(), "tag": f"tag_{m}"}, rng.choice("yn"), 1.0, f"{m}{i}")
            await reg.learn(m, [ex])
    await store.close()  # the last connection: the WAL goes into the file


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("store")
    asyncio.run(_build(d))
    return d / "chorus.db"


@pytest.fixture
def copy(original, tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    shutil.copy(original, d / "chorus.db")
    return d / "chorus.db"


def _pages(path: Path, table: str) -> list[int]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY path", (table,)
        ).fetchall()
        return [r[0] for r in rows]
    finally:
        db.close()


def _root(path: Path, table: str) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[
            0
        ]
    finally:
        db.close()


def _page_size(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA page_size").fetchone()[0]
    finally:
        db.close()


def _read_page(path: Path, page: int) -> bytes:
    size = _page_size(path)
    with open(path, "rb") as f:
        f.seek((page - 1) * size)
        return f.read(size)


def _damage(path: Path, page: int) -> None:
    """Bytes written over a whole page (a fixed pattern: the same damage on every run)."""
    size = _page_size(path)
    with open(path, "r+b") as f:
        f.seek((page - 1) * size)
        f.write(bytes(range(256)) * (size // 256))


def _only(path: Path, model: str) -> int:
    """A leaf page of the log holding only ``model``'s rows (its entries' tag, no other's)."""
    for page in _pages(path, "log"):
        raw = _read_page(path, page)
        if f"tag_{model}".encode() in raw and not any(
            f"tag_{m}".encode() in raw for m in MODELS if m != model
        ):
            return page
    raise AssertionError(f"no log page holds only {model}'s rows")


def _serve(data_dir: Path) -> TestClient:
    return TestClient(create_app(_settings(data_dir)))


def doctor(*args):
    return CliRunner().invoke(cli, ["doctor", *map(str, args)])


# ---------------------------------------------------------------------------- the server


def test_a_damaged_log_page_breaks_only_the_model_it_holds(copy):
    _damage(copy, _only(copy, "b"))
    with _serve(copy.parent) as c:
        ready = c.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert "(b)" in ready.json()["detail"] and "chorus doctor" in ready.json()["detail"]
        for m in ("a", "c"):  # the others serve, exactly as stored
            assert c.get(f"/models/{m}").json()["n_seen"] == N
            r = c.post("/learn", json={"model": m, "features": {"x": 0.5}, "label": "y"})
            assert r.status_code == 200 and r.json()["seq"] == N + 1
        broken = c.get("/models/b")
        assert broken.status_code == 409
        assert "cannot read this model's data" in broken.json()["detail"]
        listed = {m["name"]: m.get("status") for m in c.get("/models").json()["models"]}
        assert listed["b"] == "broken" and listed["a"] != "broken"


def test_a_damaged_log_root_breaks_every_model_but_recovery_ends(copy, caplog):
    _damage(copy, _root(copy, "log"))
    with caplog.at_level(logging.ERROR), _serve(copy.parent) as c:
        ready = c.get("/readyz")
        assert ready.status_code == 200, ready.text  # not "recovering ... model 1 of 3"
        assert "3 model(s) broken by damaged store data (a, b, c)" in ready.json()["detail"]
        for m in MODELS:
            assert c.get(f"/models/{m}").status_code == 409
    assert any("is broken" in r.message and r.levelno == logging.ERROR for r in caplog.records)


def test_a_damaged_record_breaks_its_model_only(copy):
    db = sqlite3.connect(copy)  # bytes over one record of b's (the page itself reads)
    db.execute("UPDATE log SET record = x'00ff7b' WHERE model = 'b' AND seq = ?", (N - 5,))
    db.commit()
    db.close()
    with _serve(copy.parent) as c:
        assert c.get("/readyz").status_code == 200
        assert c.get("/models/a").json()["n_seen"] == N
        assert "log entry" in c.get("/models/b").json()["detail"]


@pytest.mark.parametrize("damage", ["models_root", "truncated"])
def test_a_store_that_cannot_list_its_models_says_so_instead_of_retrying(copy, damage, caplog):
    if damage == "models_root":
        _damage(copy, _root(copy, "models"))
    else:
        with open(copy, "r+b") as f:
            f.truncate(copy.stat().st_size // 2)
    with caplog.at_level(logging.WARNING), _serve(copy.parent) as c:
        ready = c.get("/readyz")
        assert ready.status_code == 503
        detail = ready.json()["detail"]
        assert "the store is damaged" in detail and "chorus doctor --salvage" in detail
        assert "damaged" in c.get("/models/a").json()["detail"]
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and "the store is damaged" in errors[0].message  # no retry loop


# ---------------------------------------------------------------------------- chorus doctor


def test_doctor_finds_a_healthy_store_healthy(copy):
    result = doctor("--data-dir", copy.parent)
    assert result.exit_code == 0, result.output
    assert "healthy" in result.output
    for m in MODELS:
        assert f"{m}: ok: {N} of {N} log entries restorable" in result.output


def test_doctor_reports_and_salvages_a_damaged_log_page(copy, tmp_path):
    _damage(copy, _only(copy, "b"))
    result = doctor("--data-dir", copy.parent, "--salvage", tmp_path / "saved", "--json")
    assert result.exit_code == 1, result.output
    import json

    report = json.loads(result.output)
    assert not report["healthy"]
    verdicts = {n: m["verdict"] for n, m in report["models"].items()}
    assert verdicts == {"a": "ok", "b": "partial", "c": "ok"}
    b = report["models"]["b"]
    assert SNAP <= b["restorable_seq"] < N and any("log unreadable" in p for p in b["problems"])
    assert report["salvage"]["models"]["a"] == f"salvaged to seq {N} of {N}"
    with _serve(tmp_path / "saved") as c:  # the copy serves every model, b as far as it reads
        assert c.get("/readyz").json() == {"status": "ready", "engine": "compiled"}
        assert {m: c.get(f"/models/{m}").json()["n_seen"] for m in MODELS} == {
            "a": N,
            "b": b["restorable_seq"],
            "c": N,
        }
        again = {"model": "a", "features": {"x": 0.1, "tag": "tag_a"}, "label": "y", "id": "a7"}
        assert c.post("/learn", json=again).json()["duplicate"]  # the ids came along


def test_doctor_salvages_a_store_whose_models_table_is_damaged(copy, tmp_path):
    _damage(copy, _root(copy, "models"))
    result = doctor("--data-dir", copy.parent, "--salvage", tmp_path / "saved")
    assert result.exit_code == 1, result.output
    assert "models table: unreadable" in result.output
    for m in MODELS:
        assert f"{m}: recoverable: {N} of ? log entries restorable" in result.output
        assert f"{m}: salvaged to seq {N} of ?" in result.output
    with _serve(tmp_path / "saved") as c:
        assert c.get("/readyz").status_code == 200
        for m in MODELS:
            desc = c.get(f"/models/{m}").json()
            assert desc["n_seen"] == N and desc["spec"]["learner"] == "naive_bayes"


def test_doctor_on_a_truncated_file_keeps_what_reads(copy, tmp_path):
    with open(copy, "r+b") as f:
        f.truncate(copy.stat().st_size // 2)
    result = doctor("--data-dir", copy.parent, "--salvage", tmp_path / "saved")
    assert result.exit_code == 1, result.output
    assert "DAMAGED" in result.output
    with _serve(tmp_path / "saved") as c:  # whatever was salvaged loads
        assert c.get("/readyz").status_code == 200


def test_doctor_refuses_to_overwrite_a_store(copy):
    result = doctor("--data-dir", copy.parent, "--salvage", copy.parent)
    assert result.exit_code == 1 and "exists" in result.output
