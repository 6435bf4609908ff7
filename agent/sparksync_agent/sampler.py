"""The agent's own sampling clock.

Samples are taken on deadlines derived from a monotonic clock, not by
sleeping a fixed period after each sample, so the rate does not drift with
the time each collection takes.
"""

from __future__ import annotations

import asyncio
import logging
import time

from sparksync_agent.collectors import CollectorSet
from sparksync_agent.protocol import Sample
from sparksync_agent.ring import SampleRing

log = logging.getLogger(__name__)

RING_SECONDS = 660  # the issue asks for at least 10 minutes; keep a minute of slack


def ring_capacity(sample_hz: float) -> int:
    return max(1, int(round(sample_hz * RING_SECONDS)))


class Sampler:
    def __init__(self, collectors: CollectorSet, sample_hz: float):
        self.collectors = collectors
        self.sample_hz = sample_hz
        self.ring = SampleRing(ring_capacity(sample_hz))
        self.latest: Sample | None = None
        self._new_sample = asyncio.Event()

    def take_sample(self) -> Sample:
        """Collect, encode and store one sample; wakes every waiting stream."""
        values = self.collectors.collect(time.monotonic())
        sample = Sample(seq=self.ring.last_seq + 1, ts=time.time(), **values)
        self.ring.append(sample.seq, sample.model_dump_json(exclude_none=True).encode())
        self.latest = sample
        self.wake()
        return sample

    def wake(self) -> None:
        """Wake every waiting stream (on a new sample, or so they see a shutdown)."""
        # Swap the event: waiters hold the old one, which is set exactly once.
        event, self._new_sample = self._new_sample, asyncio.Event()
        event.set()

    async def wait_for_sample(self, timeout: float) -> bool:
        """Wait until the next sample lands; False on timeout."""
        try:
            await asyncio.wait_for(self._new_sample.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def run(self) -> None:
        """Sample forever on the clock; the caller takes the first sample itself."""
        period = 1.0 / self.sample_hz
        deadline = time.monotonic()
        while True:
            deadline += period
            delay = deadline - time.monotonic()
            if delay < 0:
                # Fell behind (suspend, overload): skip missed ticks instead of bursting.
                deadline += (int(-delay / period) + 1) * period
                delay = deadline - time.monotonic()
            await asyncio.sleep(delay)
            self.take_sample()
