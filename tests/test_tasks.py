"""``app.tasks.cancel_and_wait``: a background task that loses a cancellation (redis-py can swallow
one inside a read) still ends; ``cancel()`` then ``await`` would wait for ever."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from app.tasks import cancel_and_wait


@settings(max_examples=25, deadline=None)
@given(lost=st.integers(0, 5), pause=st.sampled_from([0.0, 0.001, 0.01]))
def test_a_task_that_loses_cancellations_still_ends(lost: int, pause: float):
    async def go() -> tuple[int, int]:
        seen = 0

        async def loop() -> None:  # a periodic loop whose store read swallows `lost` cancels
            nonlocal seen
            while True:
                try:
                    await asyncio.sleep(pause)
                except asyncio.CancelledError:
                    seen += 1
                    if seen > lost:
                        raise

        task = asyncio.create_task(loop())
        await asyncio.sleep(0)
        await asyncio.wait_for(cancel_and_wait(task), 10)
        return seen, task.cancelled()

    seen, cancelled = asyncio.run(go())
    assert cancelled and seen == lost + 1


def test_a_failed_task_is_waited_for_and_its_error_retrieved():
    async def go() -> None:
        async def fails() -> None:
            raise RuntimeError("boom")

        task = asyncio.create_task(fails())
        await asyncio.sleep(0)
        await cancel_and_wait(task)
        assert task.done() and isinstance(task.exception(), RuntimeError)

    asyncio.run(go())
