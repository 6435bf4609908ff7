"""One attempt at one replica: send the request, and hold its first bytes before anything is forwarded.

Holding the first chunk (a stream) or the whole body (no stream) before the
client sees a byte is what makes retries safe: until then, a replica that
refuses, resets, times out or answers 5xx costs the client nothing but time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from sparksync.switchyard.config import LimitsConfig
from sparksync.switchyard.pools import Pool, Replica
from sparksync.switchyard.wire import WireClient, WireConnectError, WireError, WireResponse, WireTimeout

# Headers of the replica's answer worth passing on; the rest describe the hop, not the answer.
PASSED_HEADERS = ("content-type",)


class AttemptFailed(Exception):
    """The replica failed before any byte was forwarded: another replica may be tried."""

    def __init__(self, kind: str, message: str, status: int | None = None, body: bytes = b""):
        super().__init__(message)
        self.kind = kind  # connect, timeout, broken, upstream_5xx
        self.status = status
        self.body = body


@dataclass(eq=False)
class Attempt:
    """A replica's answer with its head and first bytes in hand."""

    pool: Pool
    replica: Replica
    response: WireResponse
    first: bytes
    complete: bool  # the whole body is in ``first``
    chunks: AsyncIterator[bytes] | None = None  # the rest, from the iterator that gave ``first``

    @property
    def status(self) -> int:
        return self.response.status_code

    def headers(self) -> list[tuple[str, str]]:
        return [(k, v) for k, v in self.response.headers if k in PASSED_HEADERS]

    def finished(self) -> bool:
        """Every byte of the answer has been taken (``first`` and what ``rest`` gave)."""
        return self.complete or self.response.finished

    def rest(self) -> AsyncIterator[bytes]:
        # The replica's own iterator, not a wrapper around it: one layer less per token.
        return self.chunks if not self.complete and self.chunks is not None else _nothing()

    async def close(self) -> None:
        await self.response.aclose()


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
) -> Attempt:
    """Send to ``replica``; returns with the first chunk held, or raises AttemptFailed."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream" if stream else "application/json",
    }
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        response = await client.post(replica.url + path, body, headers)
    except WireError as exc:
        raise AttemptFailed(_kind(exc, "connect"), f"{replica.url}: {exc}") from exc
    try:
        return await _hold_first(pool, replica, response, stream)
    except BaseException:
        await response.aclose()
        raise


async def _hold_first(pool: Pool, replica: Replica, response: WireResponse, stream: bool) -> Attempt:
    try:
        if response.status_code >= 500 or not stream or response.status_code != 200:
            body = await response.read()
            if response.status_code >= 500:
                raise AttemptFailed(
                    "upstream_5xx",
                    f"{replica.url} answered HTTP {response.status_code}",
                    response.status_code,
                    body,
                )
            return Attempt(pool, replica, response, body, complete=True)
        chunks = response.chunks()
        first = await anext(chunks, b"")
        return Attempt(pool, replica, response, first, complete=not first, chunks=chunks)
    except WireError as exc:
        raise AttemptFailed(_kind(exc, "broken"), f"{replica.url}: {exc}") from exc


def _kind(exc: WireError, default: str) -> str:
    if isinstance(exc, WireTimeout):
        return "timeout"
    return "connect" if isinstance(exc, WireConnectError) else default
