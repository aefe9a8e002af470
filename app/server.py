"""``serve()``: run the service under uvicorn (``chorus serve`` calls it)."""

from __future__ import annotations

import logging
import os

import uvicorn


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    log_level: str = "info",
    access_log: bool = False,
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
        uvicorn log level.
    access_log
        Log every request (off by default: it costs throughput).
    """
    if workers > 1:  # the workers share the store: each reads the others' log entries first
        os.environ.setdefault("CHORUS_SHARED_STORE", "true")
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    uvicorn.run(
        "app.main:app_factory",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=10,
    )


if __name__ == "__main__":  # python -m app.server [port]
    import sys

    serve(port=int(sys.argv[1]) if len(sys.argv) > 1 else 8000)
