"""The HTTP edge (issue 42, items 6, 9, 10): bounded connections on a real server (header size,
count and time, body time, the caps on bodies held), browser safety (JSON-only bodies, the Host
allowlist, CORS off unless configured), a client leaving mid-body, and the workers' INFO lines.

The live server runs as ``chorus serve`` does (``app.testing.ChorusServer``: ``python -m
app.server``) with small limits, so every wait here is bounded by a few seconds; loopback only.
"""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from app.testing import ROOT, ChorusServer, free_port, wait_ready

HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 3.0
WAIT = 15.0  # the longest a client here waits for an answer (the limits above are far shorter)
LIMITS = {
    "CHORUS_HEADER_TIMEOUT": str(HEADER_TIMEOUT),
    "CHORUS_BODY_TIMEOUT": str(BODY_TIMEOUT),
    "CHORUS_MAX_HEADER_BYTES": "8192",
    "CHORUS_MAX_HEADERS": "50",
    "CHORUS_MAX_BODY_BYTES": "65536",
    "CHORUS_MAX_INFLIGHT_BODIES": "4",
    "CHORUS_MAX_INFLIGHT_BYTES": "131072",
    "CHORUS_WARMUP": "none",
}
HOST = b"Host: 127.0.0.1\r\n"
JSON = b"Content-Type: application/json\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("edge")
    s = ChorusServer({"CHORUS_DATA_DIR": str(d / "data"), **LIMITS}, log=d / "server.log")
    s.start()
    try:
        yield s
    finally:
        s.stop()


def _connect(server: ChorusServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)


def _reply(sock: socket.socket) -> tuple[bytes, bool]:
    """What the server sent until it closed the connection (True) or ``WAIT`` passed (False)."""
    data = b""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data, True
        except TimeoutError:
            break
        if not chunk:
            return data, True
        data += chunk
    return data, False


def _one_response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length (the connection stays open)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536) or b"!"
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(65536) or b"!"
    return head + b"\r\n\r\n" + body


def _status(data: bytes) -> int | None:
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", data)
    return int(m.group(1)) if m else None


def _metrics(server: ChorusServer) -> str:
    return httpx.get(f"{server.url}/metrics", timeout=WAIT).text


def _gauge(server: ChorusServer, name: str) -> float | None:
    m = re.search(rf"^{name} (\S+)$", _metrics(server), re.M)
    return float(m.group(1)) if m else None


def _until(check, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"not within {WAIT:g} s: {what}"
        time.sleep(0.05)


# ------------------------------------------------------------------------------ headers


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET /heal", b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Slow: still com"],
    ids=["nothing", "half a request line", "unfinished headers"],
)
def test_unfinished_headers_are_answered_408_and_closed(server, sent):
    with _connect(server) as sock:
        sock.sendall(sent)
        data, closed = _reply(sock)
    assert closed, (
        f"the connection is still open after {WAIT:g} s (header timeout: {HEADER_TIMEOUT:g} s)"
    )
    assert _status(data) == 408, data


def test_a_trickled_header_is_cut_off(server):
    """The header timeout bounds the whole header, not the pause between two bytes."""
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Slow: ")
        answer = None
        for _ in range(int(WAIT / 0.1)):  # a byte every 0.1 s: far more often than the timeout
            try:
                sock.sendall(b"a")
            except OSError:
                answer = b""
                break
            if select.select([sock], [], [], 0.1)[0]:
                answer, _ = _reply(sock)
                break
    assert answer is not None, f"still reading a trickled header after {WAIT:g} s"
    assert answer == b"" or _status(answer) == 408, answer


@pytest.mark.parametrize("end", [b"", b"\r\n\r\n"], ids=["unfinished", "complete"])
def test_oversized_headers_get_431_and_the_connection_closed(server, end):
    with _connect(server) as sock:
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Big: " + b"a" * 20_000 + end)
        except OSError:
            pass  # the server may close while this is still being sent
        data, closed = _reply(sock)
    assert closed and (data == b"" or _status(data) == 431), data
    assert b"CHORUS_MAX_HEADER_BYTES" in data or data == b""


def test_too_many_header_fields_get_431(server):
    fields = b"".join(b"X-F%d: 1\r\n" % i for i in range(60))
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n" + HOST + fields + b"\r\n")
        data, closed = _reply(sock)
    assert _status(data) == 431 and b"CHORUS_MAX_HEADERS" in data and closed, data


def test_headers_within_the_limits_are_served_and_the_connection_kept(server):
    with _connect(server) as sock:
        for _ in range(2):
            sock.sendall(
                b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Pad: " + b"a" * 4000 + b"\r\n\r\n"
            )
            data = _one_response(sock)
            assert _status(data) == 200, data


# ------------------------------------------------------------------------------- bodies


def _post_head(length: int, path: bytes = b"/learn") -> bytes:
    return b"POST %s HTTP/1.1\r\n%s%sContent-Length: %d\r\n\r\n" % (path, HOST, JSON, length)


def test_a_stalled_body_is_answered_408_and_closed(server):
    with _connect(server) as sock:
        sock.sendall(_post_head(100) + b'{"model": "m", ')
        data, closed = _reply(sock)
    assert closed and _status(data) == 408 and b"CHORUS_BODY_TIMEOUT" in data, data


def test_bodies_held_at_once_are_capped_by_count_and_bytes(server):
    """4 bodies held (being received): a 5th is refused with 503 before it is read; 2 bodies of
    60,000 bytes: a third is refused (131,072 bytes in all); all held ones released after."""
    _until(lambda: _gauge(server, "chorus_inflight_bodies") == 0, "no body held at the start")
    held = [_connect(server) for _ in range(4)]
    try:
        for sock in held:
            sock.sendall(_post_head(1000) + b"{")
        _until(lambda: _gauge(server, "chorus_inflight_bodies") == 4, "4 bodies held")
        with _connect(server) as fifth:
            fifth.sendall(_post_head(1000) + b"{")
            data = _one_response(fifth)
        assert _status(data) == 503 and b"retry-after: 1" in data.lower(), data
        assert b"CHORUS_MAX_INFLIGHT_BODIES" in data
    finally:
        for sock in held:
            sock.close()
    _until(lambda: _gauge(server, "chorus_inflight_bodies") == 0, "the 4 bodies released")
    big = [_connect(server) for _ in range(2)]
    try:
        for sock in big:
            sock.sendall(_post_head(60_000) + b"{")
        _until(
            lambda: _gauge(server, "chorus_inflight_body_bytes") == 120_000, "2 x 60,000 bytes held"
        )
        with _connect(server) as third:
            third.sendall(_post_head(60_000) + b"{")
            data = _one_response(third)
        assert _status(data) == 503, data
    finally:
        for sock in big:
            sock.close()
    _until(lambda: _gauge(server, "chorus_inflight_body_bytes") == 0, "the bytes released")
    r = httpx.post(f"{server.url}/models", json={"name": "after-caps"}, timeout=WAIT)
    assert r.status_code == 201, r.text


def test_a_chunked_body_over_the_cap_is_refused_as_it_comes(server):
    with _connect(server) as sock:
        head = b"POST /learn HTTP/1.1\r\n" + HOST + JSON + b"Transfer-Encoding: chunked\r\n\r\n"
        sock.sendall(head)
        try:
            for _ in range(20):  # 20 x 8 KiB > the 64 KiB body limit
                sock.sendall(b"2000\r\n" + b" " * 8192 + b"\r\n")
        except OSError:
            pass
        data, closed = _reply(sock)
    assert closed and (_status(data) == 413 or data == b""), data


def test_a_client_leaving_mid_body_is_a_quiet_499(server):
    """No ERROR and no traceback in the log, no 500 in chorus_requests_total."""

    def counted(status: str) -> float:
        line = re.search(
            rf'^chorus_requests_total{{method="POST",route="[^"]*",status="{status}"}} (\S+)$',
            _metrics(server), re.M,
        )  # fmt: skip
        return float(line.group(1)) if line else 0.0

    before = counted("499")
    with _connect(server) as sock:
        sock.sendall(_post_head(1000) + b'{"model": "m"')
        _until(lambda: _gauge(server, "chorus_inflight_bodies") == 1, "the body held")
    _until(lambda: counted("499") == before + 1, "the abandoned request counted as 499")
    assert counted("500") == 0
    log = server.log.read_text(errors="replace")  # type: ignore[union-attr]
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]


# ---------------------------------------------------------------------- browser safety


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path, redis_url=None))) as c:
        assert c.post("/models", json={"name": "m"}).status_code == 201
        yield c


LEARN = b'{"model": "m", "features": {"a": 1}, "label": "x"}'
BODIES = {
    "/learn": LEARN,
    "/predict": b'{"model": "m", "features": {"a": 1}}',
    "/models": b'{"name": "n"}',
}


@pytest.mark.parametrize("path", sorted(BODIES))
@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_only_json_bodies_are_read(client, path, content_type):
    headers = {"content-type": content_type} if content_type else {}
    r = client.post(path, content=BODIES[path], headers=headers)
    assert r.status_code == 415, r.text
    assert "Content-Type: expected application/json" in r.json()["detail"]
    assert client.get("/models/m").json()["n_seen"] == 0
    assert client.get("/models/n").status_code == 404
    assert "415" in client.get("/openapi.json").json()["paths"][path]["post"]["responses"]


def test_a_form_post_from_a_page_learns_nothing(client):
    r = client.post("/learn", data={LEARN.decode(): ""})  # what an HTML form on any page can send
    assert r.status_code == 415, r.text
    assert client.get("/models/m").json()["n_seen"] == 0


@pytest.mark.parametrize(
    "ct", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
def test_json_bodies_are_served(client, ct):
    r = client.post("/learn", content=LEARN, headers={"content-type": ct})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.evil.example",
                                  "localhost.evil.example:80", "[::2]:8000"])  # fmt: skip
def test_a_foreign_host_is_421(client, host):
    for method, path, kw in [("get", "/models/m", {}), ("post", "/learn", {"content": LEARN}),
                             ("delete", "/models/m", {})]:  # fmt: skip
        headers = {"host": host, "content-type": "application/json"}
        r = getattr(client, method)(path, headers=headers, **kw)
        assert r.status_code == 421, (method, path, r.text)
        assert "CHORUS_ALLOWED_HOSTS" in r.json()["detail"]
    assert client.get("/models/m").json()["n_seen"] == 0


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:9", "[::1]:8000",
                                  "LOCALHOST", "testserver"])  # fmt: skip
def test_local_hosts_and_the_own_address_are_served(client, host):
    assert client.get("/models/m", headers={"host": host}).status_code == 200


def test_allowed_hosts_are_configurable(tmp_path):
    settings = Settings(data_dir=tmp_path, redis_url=None, allowed_hosts="chorus.example")
    with TestClient(create_app(settings)) as c:
        assert c.get("/healthz", headers={"host": "chorus.example:443"}).status_code == 200
        assert c.get("/healthz", headers={"host": "localhost"}).status_code == 421
        assert c.get("/healthz", headers={"host": "testserver"}).status_code == 200  # its own
    settings = Settings(data_dir=tmp_path, redis_url=None, allowed_hosts="*")
    with TestClient(create_app(settings)) as c:
        assert c.get("/healthz", headers={"host": "anything.example"}).status_code == 200


def test_cors_is_off_unless_configured(tmp_path):
    preflight = {
        "origin": "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
    }
    with TestClient(create_app(Settings(data_dir=tmp_path / "a", redis_url=None))) as c:
        r = c.options("/learn", headers=preflight)
        assert "access-control-allow-origin" not in r.headers
        r = c.get("/healthz", headers={"origin": "https://app.example"})
        assert "access-control-allow-origin" not in r.headers
    settings = Settings(data_dir=tmp_path / "b", redis_url=None, cors_origins="https://app.example")
    with TestClient(create_app(settings)) as c:
        r = c.options("/learn", headers=preflight)
        assert (
            r.status_code == 200
            and r.headers["access-control-allow-origin"] == "https://app.example"
        )
        r = c.options("/learn", headers={**preflight, "origin": "https://evil.example"})
        assert r.headers.get("access-control-allow-origin") != "https://evil.example"


def test_inflight_bytes_below_the_body_limit_are_refused_at_start(tmp_path):
    with pytest.raises(ValueError, match="max_inflight_bytes"):
        Settings(data_dir=tmp_path, max_body_bytes=2**20, max_inflight_bytes=2**19)


# ----------------------------------------------------------------------- worker logs


RECOVERED = r"INFO chorus\.registry recovered 0 model"
KERNELS = r"INFO chorus engine kernels ready"  # (no kind to load: the same on a cold numba cache)


def test_workers_log_their_info_lines(tmp_path):
    """``chorus serve --workers 2``: each worker logs its recovery and its kernels."""
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "CHORUS_DATA_DIR": str(tmp_path / "data"), "CHORUS_WARMUP": "none"}
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--workers", "2"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
        )  # fmt: skip
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz", 60, proc)

        def lines(pattern: str) -> int:
            return len(re.findall(pattern, Path(log).read_text(errors="replace")))

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (lines(RECOVERED) >= 2 and lines(KERNELS) >= 2):
            time.sleep(0.1)
        text = log.read_text(errors="replace")
        assert lines(RECOVERED) >= 2 and lines(KERNELS) >= 2, text
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
