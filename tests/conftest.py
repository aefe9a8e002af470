"""Shared fixtures: a real ``redis-server`` on a free port (no mocks), for every test module.

``redis_url`` (session-scoped) is the URL of a server spawned once per test session with
``--save "" --appendonly yes`` in a temporary directory; tests that need an empty database flush
it themselves (or use ``clean_redis_url``). ``redis_server`` exposes the process so fault tests
can stop, kill and restart it (same port, same AOF directory).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A real redis-server child process with AOF on (``appendfsync always`` for exact tests).

    Parameters
    ----------
    directory
        Working directory (the AOF lives there and survives restarts).
    port
        Port to listen on (a free one by default).
    """

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.dir = Path(directory)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                str(self.dir),
                "--protected-mode",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ping():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            time.sleep(0.02)
        raise RuntimeError("redis-server did not answer PING")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL (no shutdown save; the AOF is what survives)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def flushall(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(b"FLUSHALL\r\n")
            s.recv(64)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server spawned for the session (skips if ``redis-server`` is not on PATH)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not on PATH (apt-get install redis-server)")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisServer) -> str:
    """``redis://127.0.0.1:<port>/0`` of the session's redis-server (shared; flush if needed)."""
    return redis_server.url


@pytest.fixture
def clean_redis_url(redis_server: RedisServer) -> str:
    """The session's redis URL, flushed before the test (restarted first if a test killed it)."""
    if not redis_server.ping():
        redis_server.start()
    redis_server.flushall()
    return redis_server.url
