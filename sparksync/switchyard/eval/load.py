"""A throughput load: closed-loop streams through the gateway for a while, and what they measured.

``concurrency`` streams each send a request, read its streamed answer, and
send the next one at once, cycling through the given request bodies (each
stream starts at a different one, so the mix is the suite's). Nothing is
counted during the first ``settle_s``, while the pools fill; then for
``seconds``: output tokens (an answer's tokens spread evenly from its first
token to its end, so an answer that straddles the window's edge counts for
its part inside), the time to first token of the requests sent in the
window, and which pool answered them (``X-Switchyard-Pool``). When the
window ends the streams still open are closed, which stops their
generations: a sweep's points then start from idle pools.

The aggregate output tokens/s over all streams is the figure the published
prototype reports (about 1.5x with half the requests on the large model,
3.0x with a quarter), not one stream's speed.

The streams use the gateway's own lean HTTP client, so the load itself
takes little of the machine's CPU.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field

from sparksync.switchyard.sse import StreamStats
from sparksync.switchyard.wire import WireClient, WireError

HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 600.0


@dataclass
class LoadResult:
    seconds: float  # the counted window
    tokens: float = 0.0  # output tokens inside the window
    requests: int = 0  # requests sent inside the window that streamed an answer
    errors: int = 0  # requests sent inside the window that failed
    ttft_s: list[float] = field(default_factory=list)
    pools: Counter[str] = field(default_factory=Counter)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    def share(self, pool: str) -> float | None:
        total = sum(self.pools.values())
        return self.pools[pool] / total if total else None


@dataclass(frozen=True)
class _Window:
    start: float
    end: float

    def overlap(self, begin: float, end: float) -> float:
        return max(0.0, min(end, self.end) - max(begin, self.start))


async def play_load(
    url: str, bodies: list[dict], concurrency: int, seconds: float, settle_s: float
) -> LoadResult:
    """Streams through the gateway at ``url`` (bodies as JSON objects, sent with ``stream`` on)."""
    encoded = [json.dumps({**b, "stream": True, "stream_options": {"include_usage": True}}).encode() for b in bodies]
    now = time.monotonic()
    window = _Window(now + settle_s, now + settle_s + seconds)
    result = LoadResult(seconds)
    client = WireClient(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S)
    target = url + "/v1/chat/completions"
    streams = [asyncio.create_task(_stream(client, target, encoded, i, concurrency, window, result))
               for i in range(concurrency)]  # fmt: skip
    try:
        # The streams stop sending at the window's end; answers still coming are cut there.
        done, pending = await asyncio.wait(streams, timeout=max(0.0, window.end - time.monotonic()))
        for task in pending:
            task.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]  # a bug of ours, not a failed request
    finally:
        await client.aclose()
    return result


async def _stream(
    client: WireClient, url: str, bodies: list[bytes], first: int, step: int, window: _Window, result: LoadResult
) -> None:
    index = first
    while (sent := time.monotonic()) < window.end:
        body = bodies[index % len(bodies)]
        index += step
        stats = StreamStats(sent)
        pool = None
        try:
            pool = await _one(client, url, body, stats)
        except WireError:
            if sent >= window.start:
                result.errors += 1
            continue
        except asyncio.CancelledError:
            stats.finish()  # the window closed mid-answer: its tokens so far count
            _count(stats, window, result)
            raise
        stats.finish()
        _count(stats, window, result)
        if sent < window.start:
            continue
        if pool is None or stats.ttft_s is None:
            result.errors += 1
            continue
        result.requests += 1
        result.ttft_s.append(stats.ttft_s)
        result.pools[pool] += 1


async def _one(client: WireClient, url: str, body: bytes, stats: StreamStats) -> str | None:
    """Stream one answer into ``stats``; the pool that answered, or None for an error answer."""
    response = await client.post(url, body, HEADERS)
    try:
        if response.status_code != 200:
            await response.read()
            return None
        pool = dict(response.headers).get("x-switchyard-pool")
        async for chunk in response.chunks():
            stats.feed(chunk)
        return pool
    finally:
        await response.aclose()


def _count(stats: StreamStats, window: _Window, result: LoadResult) -> None:
    if stats.first_output_at is None or stats.ended_at is None:
        return
    begin, end, tokens = stats.first_output_at, stats.ended_at, stats.output_tokens
    if end <= begin:  # the whole answer in one piece
        result.tokens += tokens if window.start <= end < window.end else 0
        return
    result.tokens += tokens * window.overlap(begin, end) / (end - begin)
