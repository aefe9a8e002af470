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
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from app.testing import RedisServer, free_port
from learners import jit

# a model on a cold numba cache compiles on its first call here, as numba does (a test that
# finds a stale cache must not run on the interpreted kernels meanwhile); the tests of
# compiling elsewhere choose their mode (test_compile_elsewhere.py), children their own
jit.set_compile_mode("block")

# hypothesis: CI (.ci/run passes --hypothesis-profile=ci) draws the same examples on every run, so a
# red CI is the code's doing and reproduces; any other run draws new ones (``--hypothesis-seed=N``
# repeats one: the seeds of a failure are printed)
settings.register_profile("ci", derandomize=True, print_blob=True)

__all__ = ["RedisServer", "free_port"]  # test modules import them from here too


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


# every compiled entry point the engine calls checks its argument types first (see
# learners.jit.entry_point and tests/test_entry_points.py)
from learners.jit import ENTRY_CHECKS  # noqa: E402

ENTRY_CHECKS.on = True
