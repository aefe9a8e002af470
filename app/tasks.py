"""Stopping a background task for sure.

``task.cancel()`` then ``await task`` can wait for ever: redis-py can swallow a cancellation that
lands in one of its reads (on a blocking ``XREADGROUP``, 25-72 of 200 cancellations were lost with
redis-py 8.1 and 0-2 with 7.4: ``benchmarks/redis_cancel.py``), and a loop that lost one goes on.
:func:`cancel_and_wait` cancels again until the task has ended: each new cancellation lands at
the task's next await.
"""

from __future__ import annotations

import asyncio

AGAIN = 0.05  # seconds between two cancellations of a task that did not end


async def cancel_and_wait(task: asyncio.Task) -> None:
    """Cancel ``task`` and wait until it has ended (cancelling it again every :data:`AGAIN`
    seconds while it runs on); its exception, if it failed, is retrieved and dropped."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=AGAIN)
    if not task.cancelled():
        task.exception()
