"""One attempt at one replica: send the request, and hold its first bytes before anything is forwarded.

The first chunk (a stream) or the whole body (no stream) is held before the
client sees a byte, so a failed attempt can still become a clean error
answer. Another replica may take the request only when no engine is working
on it: a refused or timed-out connect never reached one; an answer of 503 or
429 says "not now, try elsewhere"; and a connection the replica closed before
any byte of its answer means the engine let go of the request (it died or
restarted; llama.cpp, vLLM and SGLang drop a request whose connection ends),
so it runs once elsewhere, not twice. A request that timed out may still be
generating, and an engine's error answer is its answer: sending either again
would run a long generation on every replica in turn, so the client is told
what happened instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from sparksync.switchyard.config import LimitsConfig
from sparksync.switchyard.pools import Pool, Replica
from sparksync.switchyard.wire import WireClient, WireConnectError, WireError, WireResponse, WireTimeout

# Headers of the replica's answer worth passing on; the rest describe the hop, not the answer.
PASSED_HEADERS = ("content-type",)


# Answers that say "not now": the replica did not take the request on.
TRY_ELSEWHERE = (429, 503)


class AttemptFailed(Exception):
    """The replica failed before any byte was forwarded to the client."""

    def __init__(self, kind: str, message: str, status: int | None = None, body: bytes = b""):
        super().__init__(message)
        # connect, busy (429/503: try elsewhere), broken (closed before any byte), timeout (a stream's
        # silence), deadline (a whole answer's time), upstream_5xx (the engine's error answer)
        self.kind = kind
        self.status = status
        self.body = body

    @property
    def retry(self) -> bool:
        """Whether another replica may take the request: only when no engine is working on it."""
        return self.kind in ("connect", "busy", "broken")

    @property
    def replica_fault(self) -> bool:
        """Whether it counts against the replica's breaker: a busy answer or a long generation
        that outlived the answer deadline are not the replica failing."""
        return self.kind not in ("busy", "deadline")


@dataclass(eq=False)
class Attempt:
    """A replica's answer with its head and first bytes in hand."""

    pool: Pool
    replica: Replica
    response: WireResponse
    first: bytes
    complete: bool  # the whole body is in ``first``
    chunks: AsyncIterator[bytes] | None = None  # the rest, from the iterator that gave ``first``
    json_body: bool = False  # ``first`` was reshaped into a JSON document of ours

    @property
    def status(self) -> int:
        return self.response.status_code

    def headers(self) -> list[tuple[str, str]]:
        if self.json_body:
            return [("content-type", "application/json")]
        return [(k, v) for k, v in self.response.headers if k in PASSED_HEADERS]

    def reshape(self, body: bytes) -> None:
        """Answer with ``body`` (JSON) instead of the replica's own complete body."""
        self.first, self.complete, self.json_body = body, True, True

    def finished(self) -> bool:
        """Every byte of the answer has been taken (``first`` and what ``rest`` gave)."""
        return self.complete or self.response.finished

    def rest(self) -> AsyncIterator[bytes]:
        # The replica's own iterator, not a wrapper around it: one layer less per token.
        return self.chunks if not self.complete and self.chunks is not None else _nothing()

    def close(self) -> None:
        self.response.close()


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""


def make_client(limits: LimitsConfig) -> WireClient:
    return WireClient(connect_timeout=limits.connect_timeout_s, read_timeout=limits.read_timeout_s)


async def attempt(
    client: WireClient,
    pool: Pool,
    replica: Replica,
    path: str,
    body: bytes,
    stream: bool,
    api_key: str | None,
    limits: LimitsConfig,
) -> Attempt:
    """Send to ``replica``; returns with the first chunk held, or raises AttemptFailed.

    A stream may fall silent for ``read_timeout_s`` between two bytes; a
    non-streamed answer must be whole within ``answer_timeout_s``.
    """
    headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream" if stream else "application/json",
    }
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    whole = None if stream else limits.answer_timeout_s
    try:
        response = await client.post(replica.url + path, body, headers, answer_timeout=whole)
    except WireError as exc:
        raise AttemptFailed(_kind(exc, stream), f"{replica.url}: {exc}") from exc
    try:
        return await _hold_first(pool, replica, response, stream)
    except BaseException:
        await response.aclose()
        raise


async def _hold_first(pool: Pool, replica: Replica, response: WireResponse, stream: bool) -> Attempt:
    status = response.status_code
    try:
        if not stream or status != 200:
            body = await response.read()
            if status in TRY_ELSEWHERE:
                raise AttemptFailed("busy", f"{replica.url} answered HTTP {status}", status, body)
            if status >= 500:
                raise AttemptFailed("upstream_5xx", f"{replica.url} answered HTTP {status}", status, body)
            return Attempt(pool, replica, response, body, complete=True)
        # Not through the chunks() generator: a spliced answer never iterates it, and a generator
        # left started would cost a finalizer task at each answer's end.
        first = await response.next_piece()
        return Attempt(pool, replica, response, first, complete=not first, chunks=response.chunks())
    except WireError as exc:
        raise AttemptFailed(_kind(exc, stream), f"{replica.url}: {exc}") from exc


def _kind(exc: WireError, stream: bool) -> str:
    if isinstance(exc, WireConnectError):  # (a connect timeout too): the request never left
        return "connect"
    if isinstance(exc, WireTimeout):
        return "timeout" if stream else "deadline"
    return "broken"
