"""Schemathesis against a live server on both stores: no 5xx, every answer as documented.

A bounded budget for CI (about 800 cases per store, fixed seed, about a minute each); the big runs are made by
hand (see docs/service.md, "Fuzzing").
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from _live_server import live_server

pytest.importorskip("schemathesis")
pytest.importorskip("ensembles")

CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance"
)


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_schemathesis_finds_nothing(store, tmp_path, request):
    st = shutil.which("st") or shutil.which("schemathesis")
    if st is None:
        pytest.skip("schemathesis CLI not installed")
    extra = {"redis_url": request.getfixturevalue("clean_redis_url")} if store == "redis" else {}
    args = ["-H", "Authorization: Bearer fuzz-key"] if store == "redis" else []
    key = {"api_key": "fuzz-key"} if store == "redis" else {}  # one store with a key, one without
    with live_server(tmp_path, snapshot_every=50, **extra, **key) as url:
        run = subprocess.run(  # noqa: S603 - our own CLI on our own server
            [
                st,
                "run",
                f"{url}/openapi.json",
                *args,
                "-c",
                CHECKS,
                "-n",
                "60",
                "--seed",
                "12",
                "--phases",
                "examples,coverage,fuzzing",
                "--no-color",
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=170,
            cwd=tmp_path,
        )
    tail = run.stdout[-4000:]
    assert run.returncode == 0, tail
    summary = tail.split("SUMMARY")[-1]
    found = re.search(r"(\d+) generated, (\d+) passed", summary)
    assert found and found.group(1) == found.group(2), tail  # every case passed every check
    assert int(found.group(1)) >= 500, tail  # the budget really ran
