"""The queue's retry hints (issue 19): ``Retry-After`` in whole seconds, ``retry-after-ms``
(which the OpenAI SDKs read first) as the wait the requests ahead take."""

from __future__ import annotations

import asyncio

import pytest

from lokal.serve.slots import QueueFull, Slots


def test_a_full_queue_says_how_long_the_requests_ahead_take():
    async def scenario():
        slots = Slots(concurrency=1, max_queue=1)
        await slots.acquire()  # running
        waiting = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0)
        with pytest.raises(QueueFull) as guessed:  # nothing measured yet: a 1 s guess each
            await slots.acquire()
        assert (guessed.value.retry_after, guessed.value.retry_after_ms) == (2, 2000)
        slots.release(0.004)  # a fast model: 4 ms in its slot
        await waiting
        waiting = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0)
        with pytest.raises(QueueFull) as measured:
            await slots.acquire()
        assert measured.value.retry_after == 1  # whole seconds: never less than 1
        assert measured.value.retry_after_ms == 8  # two requests ahead of 4 ms each
        slots.release(0.004)
        await waiting

    asyncio.run(scenario())
