"""Schemathesis against a live server on both stores: no 5xx, every answer as documented.

A bounded budget for CI (about 800 cases per store, fixed seed, about a minute each); the big runs are made by
hand (see docs/service.md, "Fuzzing").
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest
from _live_server import live_server

pytest.importorskip("schemathesis")
pytest.importorskip("ensembles")

_spec = importlib.util.spec_from_file_location(
    "chorus_fuzz", Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz.py"
)
fuzz = importlib.util.module_from_spec(_spec)  # the one schemathesis command (benchmarks/fuzz.py)
_spec.loader.exec_module(fuzz)


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_schemathesis_finds_nothing(store, tmp_path, request):
    if shutil.which("st") is None and shutil.which("schemathesis") is None:
        pytest.skip("schemathesis CLI not installed")
    extra = {"redis_url": request.getfixturevalue("clean_redis_url")} if store == "redis" else {}
    key = {"api_key": "fuzz-key"} if store == "redis" else {}  # one store with a key, one without
    with live_server(tmp_path, snapshot_every=50, **extra, **key) as url:
        run = subprocess.run(  # noqa: S603 - our own CLI on our own server
            fuzz.st_command(url, api_key=key.get("api_key"), n=60, seed=12),
            capture_output=True,
            text=True,
            timeout=170,
            cwd=tmp_path,
        )
    tail = run.stdout[-4000:]
    assert run.returncode == 0, tail
    generated, passed = fuzz.counts(run.stdout)
    assert generated == passed, tail  # every case passed every check
    assert generated >= 500, tail  # the budget really ran
