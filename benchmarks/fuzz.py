"""The big schemathesis run (issue #12's "Done when"): both stores, with and without an API key.

Each configuration starts a real ``chorus serve`` (a subprocess, on a free port; for Redis a
``redis-server`` of its own on another free port, keeping nothing on disk) and runs the
schemathesis CLI against its OpenAPI document with the same checks as ``tests/test_fuzz.py``
(no 5xx, documented status codes and content types, response schemas), then writes a table::

    nice -n 10 python benchmarks/fuzz.py --n 700 --out benchmarks/results/fuzz.md

``--n`` is schemathesis' ``--max-examples`` per operation and phase; the number of cases a run
generated is read from schemathesis' own summary. A benchmark, not a test: CI runs the small
budget in tests/test_fuzz.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from app.testing import free_port

CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance"
)
KEY = "fuzz-key"


def st_command(url: str, *, api_key: str | None, n: int, seed: int) -> list[str]:
    """The schemathesis CLI run against ``url`` (also what tests/test_fuzz.py runs, smaller)."""
    st = shutil.which("st") or shutil.which("schemathesis")
    if st is None:
        raise RuntimeError("schemathesis CLI not installed (pip install -e '.[dev]')")
    headers = ["-H", f"Authorization: Bearer {api_key}"] if api_key else []
    return [st, "run", f"{url}/openapi.json", *headers, "-c", CHECKS, "-n", str(n),
            "--seed", str(seed), "--phases", "examples,coverage,fuzzing", "--no-color"]  # fmt: skip


def counts(stdout: str) -> tuple[int, int]:
    """(cases generated, cases that passed every check) from schemathesis' summary; (0, 0) if none."""
    found = re.search(r"(\d+) generated, (\d+) passed", stdout.split("SUMMARY")[-1])
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2):  # noqa: S310 - our own local server
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in {timeout:.0f} s")


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(  # noqa: S603
        [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def chorus_server(workdir: Path, *, redis_url: str | None, api_key: str | None) -> Iterator[str]:
    port = free_port()
    env = dict(os.environ, CHORUS_DATA_DIR=str(workdir / "data"), CHORUS_SNAPSHOT_EVERY="50")
    env.pop("CHORUS_REDIS_URL", None)
    env.pop("CHORUS_API_KEY", None)
    if redis_url:
        env["CHORUS_REDIS_URL"] = redis_url
    if api_key:
        env["CHORUS_API_KEY"] = api_key
    log = (workdir / "server.log").open("w")
    proc = subprocess.Popen(  # noqa: S603
        [
            shutil.which("chorus") or "chorus",
            "serve",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/healthz", 120)
        wait_http(f"{url}/readyz", 600)  # the first start compiles the kernels
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def run_one(store: str, keyed: bool, n: int, seed: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="chorus-fuzz-") as tmp:
        work = Path(tmp)
        with contextlib.ExitStack() as stack:
            redis_url = stack.enter_context(redis_server(work)) if store == "redis" else None
            url = stack.enter_context(
                chorus_server(work, redis_url=redis_url, api_key=KEY if keyed else None)
            )
            t0 = time.monotonic()
            run = subprocess.run(  # noqa: S603
                st_command(url, api_key=KEY if keyed else None, n=n, seed=seed),
                capture_output=True,
                text=True,
                cwd=work,
            )
            seconds = time.monotonic() - t0
            server_log = (work / "server.log").read_text()
    generated, passed = counts(run.stdout)
    fivexx = len(re.findall(r"Traceback|Internal Server Error", server_log))
    if run.returncode != 0 or generated != passed:
        print(run.stdout[-6000:], file=sys.stderr)
    if fivexx:
        print(server_log[-8000:], file=sys.stderr)
    return {
        "store": store,
        "api key": "yes" if keyed else "no",
        "cases": generated,
        "passed": passed,
        "failures": generated - passed,
        "server tracebacks": fivexx,
        "exit": run.returncode,
        "seconds": round(seconds),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, default=700, help="schemathesis --max-examples")
    p.add_argument("--seed", type=int, default=20261123)
    p.add_argument("--only", default="", help="e.g. sqlite:no,redis:yes")
    p.add_argument("--out", default="benchmarks/results/fuzz.md")
    args = p.parse_args()
    configs = [(s, k) for s in ("sqlite", "redis") for k in (False, True)]
    if args.only:
        wanted = {tuple(c.split(":")) for c in args.only.split(",")}
        configs = [(s, k) for s, k in configs if (s, "yes" if k else "no") in wanted]
    rows = []
    for store, keyed in configs:
        row = run_one(store, keyed, args.n, args.seed)
        print(row, flush=True)
        rows.append(row)
    head = list(rows[0])
    lines = [
        "# Schemathesis against live servers (benchmarks/fuzz.py)",
        "",
        f"Command: `nice -n 10 python benchmarks/fuzz.py --n {args.n} --seed {args.seed}`; "
        f"checks `{CHECKS}`, phases examples, coverage, fuzzing. "
        f"Total cases: {sum(int(r['cases']) for r in rows)}.",  # type: ignore[call-overload]
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows),
        "",
    ]
    if args.out:
        Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
