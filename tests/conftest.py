"""Shared fixtures: a real ``redis-server`` on a free port (no mocks), for every test module.

``redis_cluster`` (session-scoped) is a real 3-master Redis Cluster (three ``redis-server
--cluster-enabled yes`` + ``redis-cli --cluster create``, no replicas); ``clean_cluster_url``
flushes it and gives its ``redis+cluster://`` URL.

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

    def __init__(
        self, directory: Path, port: int | None = None, *, extra: tuple[str, ...] = ()
    ) -> None:
        self.dir = Path(directory)
        self.port = port or free_port()
        self.extra = extra  # more redis-server options (cluster mode)
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
                *self.extra,
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


class RedisCluster:
    """Three cluster-enabled redis-server masters joined by ``redis-cli --cluster create``.

    AOF on (``appendfsync always``) so a master killed with SIGKILL restarts with its data, a
    short ``cluster-node-timeout`` and ``cluster-require-full-coverage no`` (the other masters'
    slots keep serving while one is down: the deploy's setting too).

    Parameters
    ----------
    directory
        Parent of the three nodes' directories (AOF and ``nodes.conf``).
    """

    def __init__(self, directory: Path) -> None:
        self.nodes = []
        for i in range(3):
            extra = (
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-port", str(free_port()),
                "--cluster-node-timeout", "1500",
                "--cluster-require-full-coverage", "no",
            )  # fmt: skip
            self.nodes.append(RedisServer(Path(directory) / f"node{i}", extra=extra))

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def cli(self, port: int, *args: str, timeout: float = 30) -> str:
        out = subprocess.run(
            ["redis-cli", "-p", str(port), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return out.stdout

    def start(self, timeout: float = 30.0) -> None:
        for n in self.nodes:
            n.start()
        if "cluster_known_nodes:3" not in self.cli(self.nodes[0].port, "cluster", "info"):
            addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
            self.cli(self.nodes[0].port, "--cluster", "create", *addrs, "--cluster-replicas", "0",
                     "--cluster-yes")  # fmt: skip
        self.wait_ok(timeout)

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every node says ``cluster_state:ok`` and knows the three masters."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            infos = [self.cli(n.port, "cluster", "info") for n in self.nodes if n.ping()]
            if len(infos) == 3 and all(
                "cluster_state:ok" in i and "cluster_known_nodes:3" in i for i in infos
            ):
                return
            time.sleep(0.05)
        raise RuntimeError("redis cluster did not reach cluster_state:ok")

    def node_of(self, key: str) -> RedisServer:
        """The master that holds ``key``'s slot."""
        slot = int(self.cli(self.nodes[0].port, "cluster", "keyslot", key))
        for line in self.cli(self.nodes[0].port, "cluster", "nodes").splitlines():
            fields = line.split()
            port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
            for part in fields[8:]:
                lo, _, hi = part.partition("-")
                if part[0].isdigit() and int(lo) <= slot <= int(hi or lo):
                    return next(n for n in self.nodes if n.port == port)
        raise LookupError(f"no master serves slot {slot}")

    def flushall(self) -> None:
        for n in self.nodes:
            n.flushall()

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A 3-master Redis Cluster for the session (skips without ``redis-server``/``redis-cli``)."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server / redis-cli not on PATH (apt-get install redis-server)")
    cluster = RedisCluster(tmp_path_factory.mktemp("cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def clean_cluster_url(redis_cluster: RedisCluster) -> str:
    """The session cluster's ``redis+cluster://`` URL, flushed (restarted nodes a test killed)."""
    if not all(n.ping() for n in redis_cluster.nodes):
        for n in redis_cluster.nodes:
            if not n.ping():
                n.start()
        redis_cluster.wait_ok()
    redis_cluster.flushall()
    return redis_cluster.url
