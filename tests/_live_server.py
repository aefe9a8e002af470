"""A real Chorus server on a free port in a background thread (embedded SQLite store in a tmp dir).

Imported by test_cli.py, test_client.py and test_replay.py; not a test module itself.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from app.testing import free_port


@contextlib.contextmanager
def live_server(data_dir: Path, **settings) -> Iterator[str]:
    """Run ``app.main.create_app`` under uvicorn as ``chorus serve`` runs it
    (``app.server.server_config``); yields the base URL; stops it on exit."""
    from app.main import create_app
    from app.server import server_config
    from app.settings import Settings

    settings.setdefault("redis_url", None)
    config = Settings(data_dir=data_dir, **settings)
    port = free_port()
    logging = uvicorn.config.LOGGING_CONFIG  # uvicorn's own: a root handler would displace pytest's
    server = uvicorn.Server(
        server_config(
            config,
            create_app(config),
            port=port,
            log_level="warning",
            lifespan="on",
            log_config=logging,
        )  # fmt: skip
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
