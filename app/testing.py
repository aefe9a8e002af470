"""Real processes for tests and benchmarks: a free port, a ``redis-server``, a ``nats-server``, a
Chorus server, a ``chorus consume``; and a registry on a store of one's own.

The one place tests (``tests/conftest.py``, the crash tests) and benchmarks (``http_load``,
``fuzz``, ``coldstart``, ``consume``) get these from: no mocks, real servers on free ports,
stopped on exit. Not imported by the service itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Container
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@contextlib.asynccontextmanager
async def open_registry(settings: Any) -> AsyncIterator[Any]:
    """A recovered :class:`app.registry.Registry` on its own connection to the store of
    ``settings`` (one per simulated "process"), closed on exit."""
    from app.registry import Registry
    from app.stores import make_store

    store = make_store(settings)
    await store.open(5)
    try:
        reg = Registry(store, settings)
        await reg.recover()
        yield reg
    finally:
        await store.close()


def with_registry(settings: Any, body: Callable[[Any], Awaitable[Any]] | None = None, *,
                  create: dict[str, dict[str, Any]] | None = None,
                  snapshot: bool = False) -> Any:  # fmt: skip
    """``asyncio.run`` of one "process": :func:`open_registry` on ``settings``, the models of
    ``create`` (name -> spec) that the store does not hold yet created, ``await body(reg)``, a
    snapshot of every model if ``snapshot``; returns what ``body`` returned.

    ``with_registry(settings, lambda reg: reg.models.get("m"))`` is the model ``m`` as a process
    that starts now recovers it (its handle: the model stays usable after the store closed).
    """

    async def run() -> Any:
        async with open_registry(settings) as reg:
            for name, spec in (create or {}).items():
                if await reg.store.get_model(name) is None:
                    await reg.create(name, spec)
            out = None if body is None else await body(reg)
            if snapshot:
                await reg.snapshot_all()
            return out

    return asyncio.run(run())


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen | None, timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if ``proc`` has not exited after ``timeout`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_ready(url: str, timeout: float = 60.0, proc: subprocess.Popen | None = None, *,
               accept: Container[int] = (200,)) -> None:  # fmt: skip
    """Wait until ``url`` answers with a status in ``accept``; ``RuntimeError`` after ``timeout``
    seconds or as soon as ``proc`` (the server's process, if given) exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - our own local server
                status = r.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            status = None
        if status in accept:
            return
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout:g} s")


class DeployNginx:
    """The deploy's balancer config (``deploy/nginx-cluster.conf``), run by a real nginx on a
    free port, its upstream servers replaced by local ``ports`` (routing by model name as
    deployed). Files live in ``directory`` (created); ``start`` waits for ``/healthz`` through
    it and raises ``RuntimeError`` with nginx's stderr if it does not come up."""

    def __init__(self, ports: list[int], directory: Path) -> None:
        import shutil

        self.nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.port = free_port()
        self.directory = directory
        conf = (ROOT / "deploy/nginx-cluster.conf").read_text()
        block = re.search(r"(?:    server chorus-\d+:8000([^\n]*)\n)+", conf)
        assert block is not None, "deploy/nginx-cluster.conf: no upstream server lines"
        lines = "".join(f"    server 127.0.0.1:{p}{block.group(1)}\n" for p in ports)
        conf = conf[: block.start()] + lines + conf[block.end() :]
        conf = conf.replace("listen 80;", f"listen 127.0.0.1:{self.port};")
        for sub in ("logs", "tmp"):
            (directory / sub).mkdir(parents=True)
        (directory / "site.conf").write_text(conf)
        (directory / "nginx.conf").write_text(
            "worker_processes 1; pid nginx.pid; error_log logs/error.log;\n"
            "events { worker_connections 1024; }\n"
            "http { access_log off; client_body_temp_path tmp; proxy_temp_path tmp;\n"
            f"  include {directory / 'site.conf'}; }}\n"
        )
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        d = self.directory
        with open(d / "stderr.log", "wb") as err:
            self.proc = subprocess.Popen(
                [self.nginx, "-p", str(d), "-c", str(d / "nginx.conf"), "-g", "daemon off;"],
                stderr=err,
            )
        try:
            wait_ready(f"{self.url}/healthz", timeout, self.proc)
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(
                f"nginx did not start: {exc}\n{(d / 'stderr.log').read_text()}"
            ) from exc

    def stop(self) -> None:
        stop_process(self.proc, 10)


class RedisServer:
    """A real redis-server child process with the AOF on.

    Parameters
    ----------
    directory
        Working directory (the AOF lives there and survives restarts).
    port
        Port to listen on (a free one by default).
    fsync
        ``appendfsync``: ``"always"`` (exact fault tests, the default) or ``"everysec"``
        (production's setting, for load benchmarks).
    extra
        More redis-server options (cluster mode).
    """

    def __init__(self, directory: Path, port: int | None = None, *, fsync: str = "always",
                 extra: tuple[str, ...] = ()) -> None:  # fmt: skip
        if fsync not in ("always", "everysec", "no"):
            raise ValueError(f"fsync must be one of ['always', 'everysec', 'no'], got {fsync!r}")
        self.dir = Path(directory)
        self.port = port or free_port()
        self.fsync = fsync
        self.extra = extra
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        """Start it and wait for ``PING``."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", self.fsync, "--dir", str(self.dir),
             "--protected-mode", "no", *self.extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
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
        """SIGTERM, then SIGKILL after 10 s."""
        stop_process(self.proc, 10)
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: the server keeps its connections and what clients send it, and answers
        nothing until :meth:`resume` (a stalled Redis, as under a long fork or swap)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`: it then runs what was sent meanwhile."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def flushall(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(b"FLUSHALL\r\n")
            s.recv(64)


class NatsServer:
    """A real ``nats-server`` with JetStream (file storage in ``directory``) on a free port.

    Parameters
    ----------
    directory
        JetStream's store directory (survives restarts).
    port
        Port to listen on (a free one by default).
    """

    def __init__(self, directory: Path, port: int | None = None) -> None:
        import shutil

        self.binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
        self.dir = Path(directory)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        """Start it and wait until it accepts connections."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    if s.recv(4).startswith(b"INFO"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.proc.returncode}")
            time.sleep(0.02)
        raise RuntimeError("nats-server did not accept connections")

    def kill(self) -> None:
        """SIGKILL (what JetStream wrote to its files is what survives; :meth:`start` again on
        the same port and directory recovers it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        stop_process(self.proc, 10)
        self.proc = None


def start_consumer(url: str, env: dict[str, str], *args: str, log: Path,
                   checkout: Path = ROOT) -> subprocess.Popen:  # fmt: skip
    """``chorus consume URL ARGS...`` (``python -m app.cli``) as a child process, ``env`` (its
    ``CHORUS_*`` settings) on top of this process's environment and ``checkout`` (this one by
    default; another for an A/B benchmark) first on its path; its stderr is appended to
    ``log``."""
    full = {**os.environ, "PYTHONPATH": str(checkout), **env}
    cmd = [sys.executable, "-m", "app.cli", "consume", url, *args]
    with log.open("ab") as err:
        return subprocess.Popen(cmd, cwd=checkout, env=full, stdout=subprocess.DEVNULL, stderr=err)


class ChorusServer:
    """``python -m app.server`` (``chorus serve``'s uvicorn configuration) on a free port, in its
    own process group (so ``kill9`` reaches every worker).

    Parameters
    ----------
    env
        Environment on top of this process's (``CHORUS_*`` settings).
    port
        Port to listen on (a free one by default; give the same one to restart "the same" server).
    workers
        uvicorn worker processes.
    log
        File the server's stderr is appended to (default: kept in memory, shown on failure).
    access_log
        Whether uvicorn logs each request.
    log_level
        The server's log level.
    inherit_env
        Whether ``env`` is added to this process's environment (else it is the whole of it).
    """

    def __init__(self, env: dict[str, str], *, port: int | None = None, workers: int = 1,
                 log: Path | None = None, access_log: bool = True,
                 inherit_env: bool = True, log_level: str = "warning") -> None:  # fmt: skip
        self.port = port or free_port()
        self.env = {**os.environ, **env} if inherit_env else dict(env)
        self.workers = workers
        self.log = log
        self.access_log = access_log
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0, *, wait: bool = True) -> None:
        """Start it and wait until ``/readyz`` answers 200 (``wait=False``: return at once)."""
        args = [sys.executable, "-m", "app.server", "--host", "127.0.0.1", "--port",
                str(self.port), "--log-level", self.log_level, "--workers", str(self.workers),
                "--access-log" if self.access_log else "--no-access-log"]  # fmt: skip
        self.proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("ab") if self.log else subprocess.PIPE,
        )
        if not wait:
            return
        try:
            wait_ready(f"{self.url}/readyz", timeout, self.proc)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n{self.tail()}") from None

    def tail(self, n: int = 30) -> str:
        """The last lines the server wrote to stderr (after it exited, or from ``log``)."""
        if self.log is not None:
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
        elif self.proc is not None and self.proc.stderr and self.proc.poll() is not None:
            text = self.proc.stderr.read().decode(errors="replace")
        else:
            text = ""
        return "\n".join(text.splitlines()[-n:])

    def kill9(self) -> None:
        """SIGKILL to the whole process group."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM to the process group (a clean shutdown: snapshots), SIGKILL after 30 s."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()
