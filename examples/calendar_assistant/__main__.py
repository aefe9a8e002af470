"""One command: Chorus on the embedded SQLite store + the calendar assistant.

    python -m examples.calendar_assistant [--data-dir ./calendar-data] [--port 8080]

starts Chorus (``python -m app.server``, as ``chorus serve`` runs it) as a child process with
``CHORUS_DATA_DIR=<data-dir>/chorus`` on ``--chorus-port``, waits until it is ready, then serves
the assistant on ``--port``. Stopping the assistant (Ctrl-C) stops Chorus too; its state stays in
the data dir for next time. With ``--chorus-url`` the assistant uses an already running Chorus and
starts none.

The launcher binds both ports itself before starting anything, and hands Chorus its listening
socket (``--fd``): a port that is taken (say by a ``chorus serve`` on 8000) stops it with a
message naming the port, never an attachment to a server it did not start. Port 0 picks a free
port, and the launcher says which.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import uvicorn

from .server import LEARNERS, AssistantSettings, create_app

log = logging.getLogger("calendar_assistant")
REPO_ROOT = Path(__file__).resolve().parents[2]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = AssistantSettings()
    p = argparse.ArgumentParser(
        prog="python -m examples.calendar_assistant",
        description="Start Chorus (embedded store) and the calendar assistant.",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=defaults.data_dir,
        help="assistant history + Chorus store (default: %(default)s)",
    )
    p.add_argument("--host", default="127.0.0.1", help="assistant host (default: %(default)s)")
    p.add_argument(
        "--port",
        type=int,
        default=8080,
        help="assistant port, 0 for a free one (default: %(default)s)",
    )
    p.add_argument(
        "--chorus-port",
        type=int,
        default=8000,
        help="port of the Chorus server started here, 0 for a free one (default: %(default)s)",
    )
    p.add_argument(
        "--chorus-url", default=None, help="use this running Chorus instead of starting one"
    )
    p.add_argument("--model-prefix", default=defaults.model_prefix)
    p.add_argument("--learner", choices=LEARNERS, default=defaults.learner)
    p.add_argument("--n-models", type=int, default=defaults.n_models)
    p.add_argument("--grace-period", type=int, default=defaults.grace_period)
    p.add_argument("--delta", type=float, default=defaults.delta)
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument(
        "--no-challengers",
        dest="challengers",
        action="store_false",
        help="no challengers beside each field's model (and no 'which candidate wins' panel)",
    )
    return p.parse_args(argv)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: have the kernel send SIGTERM to Chorus if the launcher dies without cleaning up."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def listen(host: str, port: int, what: str, hint: str) -> socket.socket:
    """A socket listening on ``host:port`` (0: a free port), or ``SystemExit`` naming the port
    when it is taken (``hint``: what to do instead)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (as uvicorn binds)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise SystemExit(f"cannot start {what} on {host}:{port}: {exc.strerror} (another server "
                         f"on that port?); {hint}") from None  # fmt: skip
    sock.listen(2048)
    return sock


def start_chorus(sock: socket.socket, data_dir: Path) -> subprocess.Popen[bytes]:
    """Run the Chorus service on the embedded store in ``data_dir`` as a child process serving
    the listening socket ``sock`` (so it serves on the port checked free, or on none)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["CHORUS_DATA_DIR"] = str(data_dir.resolve())
    env.pop("CHORUS_REDIS_URL", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    cmd = [
        sys.executable,
        "-m",
        "app.server",
        "--fd",
        str(sock.fileno()),
        "--log-level",
        "warning",
    ]
    preexec = _die_with_parent if sys.platform.startswith("linux") else None
    return subprocess.Popen(
        cmd, env=env, cwd=REPO_ROOT, preexec_fn=preexec, pass_fds=(sock.fileno(),)
    )


def wait_ready(url: str, proc: subprocess.Popen[bytes] | None, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"Chorus exited with code {proc.returncode} before it was ready")
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"Chorus at {url} not ready after {timeout:.0f} s")


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # uvicorn re-raises SIGTERM after its graceful shutdown; make that an exception so the
    # ``finally`` below still stops Chorus (SIGINT already is one: KeyboardInterrupt).
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    chorus: subprocess.Popen[bytes] | None = None
    chorus_url = args.chorus_url
    site = listen(args.host, args.port, "the assistant", "pass --port N (0: a free port)")
    if chorus_url is None:
        url = f"http://127.0.0.1:{args.chorus_port}"
        with listen("127.0.0.1", args.chorus_port, "Chorus", "pass --chorus-port N (0: a free "
                    f"port), or --chorus-url {url} to use the server there") as sock:  # fmt: skip
            chorus_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            log.info("starting Chorus on %s (store: %s)", chorus_url, args.data_dir / "chorus")
            chorus = start_chorus(sock, args.data_dir / "chorus")
    try:
        wait_ready(chorus_url, chorus)
        settings = AssistantSettings(
            chorus_url=chorus_url,
            data_dir=args.data_dir,
            model_prefix=args.model_prefix,
            learner=args.learner,
            n_models=args.n_models,
            seed=args.seed,
            grace_period=args.grace_period,
            delta=args.delta,
            challengers=args.challengers,
            api_key=os.environ.get("CHORUS_API_KEY") or None,
        )
        log.info("calendar assistant on http://%s:%d", args.host, site.getsockname()[1])
        uvicorn.run(create_app(settings), fd=site.fileno(), log_level="warning")
    finally:
        site.close()
        if chorus is not None and chorus.poll() is None:
            chorus.terminate()
            try:
                chorus.wait(timeout=15)
            except subprocess.TimeoutExpired:
                chorus.kill()
                chorus.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
