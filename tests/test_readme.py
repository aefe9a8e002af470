"""The README is executable truth: its shell and Python blocks run, in order, against a fresh
``chorus serve`` on a free port, and its sample outputs match what they print (loosely: JSON keys,
value types and counts; report rows by name and type), so it cannot drift again.

How a block is read:

* ``bash`` blocks run command by command (``\\`` continuations joined) in one temporary working
  directory, with ``localhost:8000`` / ``127.0.0.1:8000`` pointed at the test server and ``chorus``
  being this checkout's CLI. A comment line holding JSON (``# {...}``) is the sample output of the
  command before it. The commands run as written, nothing pasted in: a shell variable a command
  assigns (``id=$(...)``) is kept for the commands after it, as in one terminal.
* A plain fenced block right after a ``bash`` block is the sample output of its last command (the
  replay report: the same first line, same row names, numbers where the sample has numbers).
* ``python`` blocks run in one namespace each; a trailing ``# ...`` comment after a ``print`` is its
  sample output (same number of words, each of the same kind: bool, number or word). The engine
  block iterates over ``stream``, which the test provides (60 rows of a small synthetic stream).
* ``127.0.0.1:6379`` is a redis-server the test starts, which the server consumes
  (``CHORUS_CONSUME``, with ``output=chorus:predictions``): the producer block runs against it.
* The set-up block (``pip install -e . && chorus serve`` / ``bash .ci/test``) is what this test
  stands in for, so it is not run: the server is started the same way (``chorus serve``).
* The replay block replays all of shuttle.csv.gz (49k rows, ~5 s locally and over HTTP each), as
  the README says.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from app.testing import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*)=", re.M)  # a shell variable a command assigns
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.S | re.M)


def blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block, in order (``""`` for a plain block)."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def commands(body: str) -> list[tuple[str, list[str]]]:
    """Shell commands of a block, each with the JSON sample-output comments that follow it."""
    out: list[tuple[str, list[str]]] = []
    pending = ""
    for line in body.splitlines():
        if pending:
            pending += "\n" + line
        elif line.startswith("#"):
            sample = line[1:].strip()
            if sample.startswith("{") and out:
                out[-1][1].append(sample)
            continue
        elif line.strip():
            pending = line
        if pending and not pending.rstrip().endswith("\\"):
            out.append((pending, []))
            pending = ""
    return out


def same_shape(sample, actual, where: str = "") -> None:
    """Loose comparison: same keys, same JSON types (``"..."`` stands for any string), same
    number of probabilities."""
    if isinstance(sample, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        if where.endswith("probabilities"):
            assert len(actual) == len(sample), f"{where}: {actual} vs sample {sample}"
            return
        assert set(actual) == set(sample), f"{where}: keys {sorted(actual)} vs {sorted(sample)}"
        for k in sample:
            same_shape(sample[k], actual[k], f"{where}.{k}")
    elif sample is None:
        assert actual is None, f"{where}: expected null, got {actual!r}"
    elif isinstance(sample, bool):
        assert isinstance(actual, bool), f"{where}: expected a boolean, got {actual!r}"
    elif isinstance(sample, int | float):
        assert isinstance(actual, int | float) and not isinstance(actual, bool), where
    else:
        assert isinstance(actual, type(sample)), f"{where}: expected {type(sample)}, {actual!r}"


def word_kind(w: str) -> str:
    if w in ("True", "False"):
        return "bool"
    try:
        float(w.replace(",", ""))
        return "number"
    except ValueError:
        return "word"


def report_rows(text: str) -> dict[str, str]:
    """``name -> kind of value`` of a replay report (``examples  49,097`` -> number)."""
    rows = {}
    for line in text.strip().splitlines()[1:]:
        m = re.match(r"^(\S.*?)\s{2,}(\S+)(?: s)?$", line)
        if m:
            rows[m.group(1)] = word_kind(m.group(2))
    return rows


@pytest.fixture
def bus(tmp_path):
    """The README's Redis bus (a real redis-server; the server consumes it, CHORUS_CONSUME)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not on PATH (apt-get install redis-server)")
    redis = RedisServer(tmp_path / "bus")
    redis.start()
    yield redis.port
    redis.stop()


@pytest.fixture
def server(tmp_path, bus):
    port = free_port()
    env = dict(os.environ, CHORUS_DATA_DIR=str(tmp_path / "chorus-data"), PYTHONPATH=str(ROOT))
    env["CHORUS_CONSUME"] = f"redis://127.0.0.1:{bus}/0?output=chorus:predictions&block=0.2"
    env.pop("CHORUS_REDIS_URL", None)
    env.pop("CHORUS_URL", None)
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
        time.sleep(0.1)
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def test_readme_blocks_run_as_written(server, bus, tmp_path):
    port = server
    text = README.read_text()
    here = {"localhost:8000": f"localhost:{port}", "127.0.0.1:8000": f"127.0.0.1:{port}",
            "127.0.0.1:6379": f"127.0.0.1:{bus}"}  # fmt: skip
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("CHORUS_URL", None)
    shell_prelude = f'chorus() {{ {shlex.quote(sys.executable)} -m app.cli "$@"; }}\n'
    last_output = ""
    kept = shlex.quote(str(work / ".readme-variables"))  # variables assigned so far (declare -p)
    ran = {"bash": 0, "python": 0, "sample": 0}
    previous = ""
    for lang, body in blocks(text):
        for a, b in here.items():
            body = body.replace(a, b)
        if lang == "bash" and "pip install -e ." in body:
            previous = "setup"
            continue  # the set-up commands: this test's fixture does the same
        if lang == "bash":
            for cmd, samples in commands(body):
                assigned = ASSIGNMENT.findall(cmd)
                script = (f"{shell_prelude}[ -f {kept} ] && . {kept}\n{cmd}\nstatus=$?\n"
                          + "".join(f"declare -p {v} >> {kept}\n" for v in assigned)
                          + "exit $status\n")  # fmt: skip
                res = subprocess.run(
                    ["bash", "-c", script],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert res.returncode == 0, f"{cmd}\n{res.stdout}\n{res.stderr}"
                last_output = res.stdout
                with contextlib.suppress(ValueError):
                    answer = json.loads(res.stdout)
                    if "curl" in cmd and res.stdout.strip():
                        assert "detail" not in answer, f"{cmd}: {answer}"
                for sample in samples:
                    same_shape(json.loads(sample), json.loads(res.stdout), cmd.split()[0])
                    ran["sample"] += 1
                ran["bash"] += 1
        elif lang == "" and previous == "bash":
            want = report_rows(body)
            assert want, body
            assert report_rows(last_output) == want, (body, last_output)
            header = body.strip().splitlines()[0]  # file, target, model name, spec and seed
            assert last_output.strip().splitlines()[0] == header, last_output
            ran["sample"] += 1
        elif lang == "python":
            code = body
            sample = None
            m = re.search(r"\n# (.+)\n?$", code)
            if m:
                sample = m.group(1).split()
            namespace = {"__name__": "__readme__", "stream": _stream(60)}
            buf = io.StringIO()
            cwd = os.getcwd()
            os.chdir(work)
            try:
                with contextlib.redirect_stdout(buf):
                    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
            finally:
                os.chdir(cwd)
            if sample is not None:
                got = buf.getvalue().split()
                assert [word_kind(w) for w in got] == [word_kind(w) for w in sample], (got, sample)
                ran["sample"] += 1
            ran["python"] += 1
        previous = lang
    assert ran["bash"] >= 8 and ran["python"] >= 2 and ran["sample"] >= 4, ran
    assert (work / "curve.png").stat().st_size > 0  # the replay's --plot


def _stream(n: int) -> list[tuple[dict, str]]:
    return [
        ({"attendees": i % 9, "kind": "abc"[i % 3]}, "yes" if i % 9 > 3 else "no") for i in range(n)
    ]


def test_commands_parser():
    body = "curl -s -X POST x \\\n  -d '{}'\n# {\"a\": 1}\n# a comment\ncurl y   # trailing\n"
    assert commands(body) == [
        ("curl -s -X POST x \\\n  -d '{}'", ['{"a": 1}']),
        ("curl y   # trailing", []),
    ]
    with pytest.raises(AssertionError):
        same_shape({"a": 1, "b": None}, {"a": 1, "b": 2})
    with pytest.raises(AssertionError):
        same_shape({"p": {"x": 1.0}}, {"p": {"x": 1.0}, "q": 1})
    same_shape({"prediction_id": "...", "probabilities": {"60": 1.0}},
               {"prediction_id": "abc", "probabilities": {"90": 1.0}})  # fmt: skip
