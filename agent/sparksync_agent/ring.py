"""The telemetry ring buffer.

It stores each sample once, already encoded as JSON, because every reader
(history pages, every stream client, reconnecting clients) wants the wire
form; encoding once per sample instead of once per reader keeps the agent's
CPU flat as clients come and go, and bytes are far smaller than model objects.
"""

from __future__ import annotations

from collections import deque


class UnknownSinceError(ValueError):
    """``since`` names a sequence number the agent has not produced yet."""


class SampleRing:
    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("ring capacity must be at least 1")
        self.capacity = capacity
        self._items: deque[bytes] = deque(maxlen=capacity)
        self._last_seq = 0

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def first_seq(self) -> int:
        """The oldest seq still held (last_seq + 1 when empty)."""
        return self._last_seq - len(self._items) + 1

    def append(self, seq: int, encoded: bytes) -> None:
        # Sequence numbers are contiguous; index maths in since() relies on it.
        if seq != self._last_seq + 1:
            raise ValueError(f"sample seq {seq} does not follow {self._last_seq}")
        self._items.append(encoded)
        self._last_seq = seq

    def since(self, since: int, limit: int | None = None) -> tuple[list[tuple[int, bytes]], int]:
        """Samples with seq > since, oldest first, and how many were lost.

        ``lost`` counts samples after ``since`` that have already left the ring.
        """
        if since < 0 or since > self._last_seq:
            raise UnknownSinceError(
                f"since={since} is not a sequence number this agent has produced (newest is {self._last_seq})"
            )
        start = max(since + 1, self.first_seq)
        lost = start - (since + 1)
        count = self._last_seq - start + 1
        if limit is not None:
            count = min(count, limit)
        offset = start - self.first_seq
        items = [(start + i, self._items[offset + i]) for i in range(count)]
        return items, lost
