"""Run the service under uvicorn: ``server_config`` (the one place its uvicorn configuration is
built) and ``serve()`` (what ``chorus serve`` and ``python -m app.server`` run)."""

from __future__ import annotations

import argparse
import copy
import gc
import os
import sys
from typing import Any

import uvicorn
from uvicorn.config import LOGGING_CONFIG
from uvicorn.supervisors import Multiprocess

from app.protocol import ChorusConfig, HeaderLimits
from app.settings import Settings, get_settings

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
STARTUP_FAILURE = 3  # uvicorn's exit code when the server did not start
GC_YOUNG = 10_000  # allocations before a young-generation collection (Python's default: 700)


def long_lived_gc() -> tuple[int, ...]:
    """Tune the garbage collector once the models are recovered; returns the thresholds it had.

    The recovered models and imports are long-lived: frozen, out of GC scans. A batch of 1,000
    examples holds ~4,000 containers at once (parsed dicts, answers): at the default 700 the
    collector ran ~10 times per batch (4% of its time) to find no cycles; requests free what they
    allocate, so collections stay rare at :data:`GC_YOUNG`."""
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, *thresholds[1:])
    return thresholds


def log_config(log_level: str) -> dict[str, Any]:
    """uvicorn's logging configuration plus a root handler at ``log_level`` for the service's
    own loggers (``chorus``, ...). uvicorn applies it in every worker process: a configuration
    made in the parent alone left the workers of ``--workers N`` without their INFO lines."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["plain"] = {"format": LOG_FORMAT}
    config["handlers"]["plain"] = {
        "formatter": "plain",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
    }
    config["root"] = {"handlers": ["plain"], "level": log_level.upper()}
    return config


def server_config(
    settings: Settings | None = None,
    app: Any = "app.main:app_factory",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    log_level: str = "info",
    access_log: bool = False,
    **options: Any,
) -> ChorusConfig:
    """The uvicorn configuration every Chorus server runs with: the HTTP protocol with the
    header limits of ``settings`` (``app.protocol``), the logging of every process, the keep-alive
    and shutdown timeouts.

    Parameters
    ----------
    settings
        Defaults to the environment (``CHORUS_*``).
    app
        An import string of a factory (the default: the app built from the environment in each
        worker) or an app.
    host, port, workers, log_level, access_log
        As in ``serve``.
    options
        More ``uvicorn.Config`` arguments, or others than these (``lifespan``, ``log_config``).
    """
    settings = settings or get_settings()
    kwargs: dict[str, Any] = {
        "factory": isinstance(app, str),
        "host": host,
        "port": port,
        "workers": workers,
        "log_config": log_config(log_level),
        "log_level": log_level,
        "access_log": access_log,
        "timeout_keep_alive": 5,
        "timeout_graceful_shutdown": 10,
        # a worker loading its kernels from numba's cache can hold the GIL for seconds: at
        # uvicorn's 5 s its supervisor took it for hung and killed it, once or twice per worker
        # at each `--workers 2` start on a busy 2-core machine
        "timeout_worker_healthcheck": 30,
    }
    kwargs.update(options)
    return ChorusConfig(app, header_limits=HeaderLimits.from_settings(settings), **kwargs)


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    log_level: str = "info",
    access_log: bool = False,
    *,
    fd: int | None = None,
) -> None:
    """Run the HTTP service until interrupted (SIGINT/SIGTERM snapshot every model first).

    Parameters
    ----------
    host, port
        Where to listen.
    workers
        uvicorn worker processes. Each holds every model and they share the store; the log's
        sequence check keeps them consistent, but one worker is fastest (no catch-up replays).
    log_level
        Log level of uvicorn and the service.
    access_log
        Log every request (off by default: it costs throughput).
    fd
        Serve the listening socket of this inherited file descriptor instead of binding
        ``host:port`` (a launcher that bound the port itself, as the calendar example's does).
    """
    if workers > 1:  # the workers share the store: each reads the others' log entries first
        os.environ.setdefault("CHORUS_SHARED_STORE", "true")
    more = {} if fd is None else {"fd": fd}
    config = server_config(
        host=host, port=port, workers=workers, log_level=log_level, access_log=access_log, **more
    )
    server = uvicorn.Server(config)
    try:
        if workers > 1:
            Multiprocess(config, sockets=[config.bind_socket()]).run()
        else:
            server.run()
    except KeyboardInterrupt:
        pass
    if workers == 1 and not server.started:
        sys.exit(STARTUP_FAILURE)


def main(argv: list[str] | None = None) -> None:
    """``python -m app.server [--host H] [--port P] [--fd N] [--workers N] [--log-level L]
    [--access-log]`` (what ``app.testing.ChorusServer`` runs)."""
    p = argparse.ArgumentParser(prog="python -m app.server", description=serve.__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--fd", type=int, default=None, help="serve this inherited listening socket")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--log-level", default="info")
    p.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=False)
    args = p.parse_args(argv)
    serve(args.host, args.port, args.workers, args.log_level, args.access_log, fd=args.fd)


if __name__ == "__main__":
    main()
