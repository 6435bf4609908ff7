"""The last lines of one rank's output, with sequence numbers, for pages and streams."""

from __future__ import annotations

import asyncio
import bisect
from collections import deque
from itertools import islice

RING_LINES = 5000


class LogRing:
    def __init__(self, capacity: int = RING_LINES):
        self._items: deque[tuple[int, str]] = deque(maxlen=capacity)
        self.last_seq = 0
        self._changed = asyncio.Event()

    @property
    def first_seq(self) -> int:
        return self._items[0][0] if self._items else self.last_seq + 1

    def append(self, seq: int, text: str) -> None:
        self._items.append((seq, text))
        self.last_seq = seq

    def skip_to(self, last_seq: int) -> None:
        """Lines up to ``last_seq`` exist but are not held (older than the agent's reading)."""
        if last_seq > self.last_seq:
            self._items.clear()
            self.last_seq = last_seq

    def since(self, since: int, limit: int | None = None) -> tuple[list[tuple[int, str]], int]:
        """Lines with seq > since, oldest first, and how many of those the ring does not hold.

        Held lines are usually contiguous, but need not be (output rotated away
        before the agent read it), so the start is found by bisection and
        ``lost`` counts every missing number, wherever it falls.
        """
        since = max(0, min(since, self.last_seq))
        start = bisect.bisect_right(self._items, since, key=lambda item: item[0])
        held_after = len(self._items) - start
        lost = (self.last_seq - since) - held_after
        stop = len(self._items) if limit is None else min(len(self._items), start + limit)
        return list(islice(self._items, start, stop)), lost

    def tail(self, count: int) -> list[str]:
        return [text for _, text in list(self._items)[-count:]]

    def wake(self) -> None:
        # Swap the event: waiters hold the old one, which is set exactly once.
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def wait(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True
