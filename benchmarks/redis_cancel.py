"""How often redis-py's asyncio client loses a task's cancellation (the reason for
``app.tasks.cancel_and_wait``, which the consumer's stop uses on its reader).

A task loops on ``XREADGROUP ... BLOCK 50`` (as ``chorus consume``'s reader does); after a random
0-200 ms it is cancelled once; 300 ms later it should have ended. A task still running then lost
its cancellation. Each trial has its own client. Prints the installed redis-py's version and
the count of lost cancellations; a task that lost one keeps running to the end of the run (it
loads the loop, as a real lost reader would).

    python benchmarks/redis_cancel.py --url redis://127.0.0.1:6379/15 --trials 200
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random

import redis
import redis.asyncio as aioredis


async def trials(url: str, n: int, seed: int) -> int:
    rnd = random.Random(seed)
    lost = 0
    for _ in range(n):
        r = aioredis.Redis.from_url(
            url, socket_timeout=10.05, socket_connect_timeout=5, health_check_interval=30
        )  # fmt: skip (the consumer's)
        try:
            await r.xgroup_create("chorus-cancel", "g", id="0", mkstream=True)
        except redis.exceptions.ResponseError:  # BUSYGROUP: it exists
            pass

        async def reader(r: aioredis.Redis = r) -> None:
            while True:
                await r.xreadgroup("g", "c", {"chorus-cancel": ">"}, count=10, block=50)

        task = asyncio.create_task(reader())
        await asyncio.sleep(rnd.uniform(0.0, 0.2))
        task.cancel()
        await asyncio.sleep(0.3)
        lost += not task.done()
    return lost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="a Redis database this may write a stream to")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    lost = asyncio.run(trials(a.url, a.trials, a.seed))
    print(f"redis-py {redis.__version__}: {lost} of {a.trials} cancellations lost")  # noqa: T201
    os._exit(0)  # (the tasks that lost theirs still run)


if __name__ == "__main__":
    main()
