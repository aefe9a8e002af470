"""Start-up compilation: ``/readyz`` says what is being compiled until the kernels are ready."""

from __future__ import annotations

import threading
import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import app.main
import app.warmup
from app.main import create_app
from app.settings import Settings
from app.warmup import parse_kinds


def test_parse_kinds():
    assert parse_kinds("all") == ["bagging", "boosting", "single"]
    assert parse_kinds(" none ") == [] and parse_kinds("") == []
    assert parse_kinds("boosting, bagging,boosting") == ["boosting", "bagging"]
    with pytest.raises(ValueError, match="unknown ensemble kind 'forest'.*bagging, boosting"):
        parse_kinds("bagging,forest")
    with pytest.raises(ValueError, match="warmup"):
        Settings(warmup="forest")


def test_readyz_503_while_compiling(tmp_path, monkeypatch, caplog):
    release = threading.Event()
    warmed: list[str] = []

    def slow_warm(kind: str) -> None:
        assert release.wait(30)
        warmed.append(kind)

    monkeypatch.setattr(app.warmup, "warm_kind", slow_warm)
    monkeypatch.setattr(app.main, "WARMUP_WAIT", 0.01)
    caplog.set_level("INFO", logger="chorus")
    settings = Settings(data_dir=tmp_path / "d", warmup="single,bagging")
    with TestClient(create_app(settings)) as client:
        r = client.get("/readyz")
        assert r.status_code == 503
        assert r.json()["detail"].startswith("loading engine kernels: single (1/2")
        assert client.get("/healthz").status_code == 200
        release.set()
        for _ in range(500):
            if client.get("/readyz").status_code == 200:
                break
            release.wait(0.01)
        assert client.get("/readyz").json() == {"status": "ready", "engine": "compiled"}
    assert warmed == ["single", "bagging"]
    assert "loading engine kernels for single models (1/2)" in caplog.text


def test_stored_models_kinds_are_warmed(tmp_path, monkeypatch):
    settings = Settings(data_dir=tmp_path / "d", warmup="none")
    with TestClient(create_app(settings)) as client:
        spec = {"name": "b", "ensemble": "boosting", "learner": "stump", "n_models": 2}
        assert client.post("/models", json=spec).status_code == 201
    warmed: list[str] = []
    monkeypatch.setattr(app.warmup, "warm_kind", warmed.append)
    with TestClient(create_app(settings)) as client:
        assert client.get("/readyz").status_code == 200
    assert warmed == ["boosting"]
