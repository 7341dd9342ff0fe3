"""The bounded queue in front of a model: ``concurrency`` requests generate at once (1 for a
model in this process, more for a remote server), at most ``max_queue`` wait; one more is
refused (``QueueFull``, a 429 with ``Retry-After``). A waiting request that is cancelled
(its client went away) leaves the queue at once."""

from __future__ import annotations

import asyncio
import math

__all__ = ["QueueFull", "Slots"]


class QueueFull(Exception):
    """Every slot is busy and the queue is full; ``retry_after`` is a guess in whole seconds
    (the ``Retry-After`` header), ``retry_after_ms`` the same guess in milliseconds (the
    ``retry-after-ms`` header, which the OpenAI SDKs read first): the time the requests
    ahead take, which for a fast model is far less than a second."""

    def __init__(self, retry_after: int, retry_after_ms: int | None = None) -> None:
        super().__init__(f"the queue is full; retry after {retry_after} s")
        self.retry_after = retry_after
        self.retry_after_ms = retry_after * 1000 if retry_after_ms is None else retry_after_ms


class Slots:
    def __init__(self, concurrency: int = 1, max_queue: int = 8) -> None:
        self.concurrency = concurrency
        self.max_queue = max_queue
        self.running = 0
        self.waiting = 0
        self._semaphore = asyncio.Semaphore(concurrency)
        self._seconds = 1.0  # moving average of a request's time in its slot (a guess first)
        self._measured = False

    async def acquire(self) -> None:
        """Wait for a slot; QueueFull when none is free and the queue is full."""
        if self.running >= self.concurrency and self.waiting >= self.max_queue:
            wait = self._seconds * (self.waiting + 1) / self.concurrency
            raise QueueFull(max(1, math.ceil(wait)), max(1, math.ceil(wait * 1000)))
        self.waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1
        self.running += 1

    def release(self, seconds: float | None = None) -> None:
        """Free a slot; ``seconds``: how long it was held (for Retry-After)."""
        if seconds is not None:
            self._seconds = 0.8 * self._seconds + 0.2 * seconds if self._measured else seconds
            self._measured = True
        self.running -= 1
        self._semaphore.release()

    def state(self) -> dict[str, int]:
        return {
            "running": self.running,
            "waiting": self.waiting,
            "concurrency": self.concurrency,
            "max_queue": self.max_queue,
        }
