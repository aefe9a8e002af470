"""Slow and stalled clients against one real server: its RSS before, at the peak and after they close.

    nice -n 10 python benchmarks/slow_clients.py [--connections 300] [--header-kb 1024]
                                                 [--body-kb 1024] [--hold 3]

Starts ``app.testing.ChorusServer`` (one worker, the embedded store, default limits) and runs
three phases, each with ``--connections`` loopback connections opened at once:

- **headers**: each sends a request line and one header value of up to ``--header-kb`` KiB and
  never ends it (the server refuses it at ``CHORUS_MAX_HEADER_BYTES``);
- **idle**: each sends half a request line and stalls (``CHORUS_HEADER_TIMEOUT`` closes them);
- **bodies**: each sends ``POST /learn`` headers announcing ``--body-kb`` KiB and all of it but one
  byte, then stalls (``CHORUS_MAX_INFLIGHT_*`` refuse the ones beyond the caps, 503;
  ``CHORUS_BODY_TIMEOUT`` closes the rest).

For each phase: the server's RSS before, the highest seen while the connections are held for
``--hold`` seconds, and after they are closed, plus how many connections the server answered or
closed by then. Not a test: it prints a table (issue 42's numbers: 150 x 16 MB headers took the
RSS from 279 to 2,711 MB; stalled 4 MB bodies to 4.1 GB, which stayed after the connections closed).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from app.testing import ChorusServer


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _client(port: int, head: bytes, tail: bytes, answered: list[int], stop: asyncio.Event):
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    try:
        writer.write(head)
        for i in range(0, len(tail), 65536):
            writer.write(tail[i : i + 65536])
            await writer.drain()
        read = asyncio.ensure_future(reader.read(1))
        await asyncio.wait({read, asyncio.ensure_future(stop.wait())},
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        if read.done():
            answered.append(1)
        read.cancel()
    except OSError:
        answered.append(1)  # reset by the server
    finally:
        writer.close()


async def phase(server: ChorusServer, n: int, head: bytes, tail: bytes, hold: float) -> dict:
    pid = server.proc.pid  # type: ignore[union-attr]
    before = rss_mb(pid)
    stop = asyncio.Event()
    answered: list[int] = []
    tasks = [asyncio.ensure_future(_client(server.port, head, tail, answered, stop))
             for _ in range(n)]  # fmt: skip
    peak = before
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline:
        peak = max(peak, rss_mb(pid))
        await asyncio.sleep(0.05)
    n_answered = len(answered)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(2.0)
    return {"before": before, "peak": peak, "after": rss_mb(pid), "answered": n_answered}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=300)
    ap.add_argument("--header-kb", type=int, default=1024)
    ap.add_argument("--body-kb", type=int, default=1024)
    ap.add_argument("--hold", type=float, default=3.0, help="seconds the connections are held")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="chorus-slow-"))
    server = ChorusServer({"CHORUS_DATA_DIR": str(work / "data"), "CHORUS_WARMUP": "none"},
                          log=work / "server.log", access_log=False)  # fmt: skip
    server.start()
    host = b"Host: 127.0.0.1\r\n"
    body = args.body_kb * 1024
    phases = {
        "headers": (b"GET /healthz HTTP/1.1\r\n" + host + b"X-Pad: ",
                    b"a" * (args.header_kb * 1024)),
        "idle": (b"GET /heal", b""),
        "bodies": (b"POST /learn HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n" % body, b" " * (body - 1)),
    }  # fmt: skip
    try:
        print(f"{args.connections} connections a phase, held {args.hold:g} s "
              f"(headers {args.header_kb} KiB, bodies {args.body_kb} KiB)")  # fmt: skip
        print(f"{'phase':8} {'RSS before':>11} {'peak':>8} {'after':>8} {'answered/closed':>16}")
        for name, (head, tail) in phases.items():
            r = asyncio.run(phase(server, args.connections, head, tail, args.hold))
            print(f"{name:8} {r['before']:9.0f} MB {r['peak']:5.0f} MB {r['after']:5.0f} MB "
                  f"{r['answered']:>10}/{args.connections}")  # fmt: skip
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
