"""Carry one request to a pool and its answer back, with retries, fallback and the cascade.

``Relay.produce`` is an async generator: first a ``Head`` (status and
headers), then the body's bytes, exactly as the replica sent them, the last
of them as an ``End``. The bookkeeping (token count, metrics) is deferred:
the client's stream ends first. Nothing is yielded until a replica has
produced its first bytes. A request no engine is working on (a refused
connect, a "503/429: try elsewhere", a connection the replica dropped before
answering) goes to another replica, or to the other pool when the config
allows a fallback, without the client noticing; a request that timed out or
met an engine's error is answered with what happened (a 504, the engine's
own error), never sent again behind the client's back (see ``upstream``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sparksync.switchyard import answer as answers
from sparksync.switchyard.config import SwitchyardConfig
from sparksync.switchyard.http_errors import engine_error_body, error_body, sse_error_event
from sparksync.switchyard.metrics import GatewayMetrics
from sparksync.switchyard.policies import CascadePolicy, Decision, Policy
from sparksync.switchyard.pools import Pool, PoolSet, Replica
from sparksync.switchyard.sse import SseScanner, StreamStats, load_payload
from sparksync.switchyard.upstream import Attempt, AttemptFailed, attempt
from sparksync.switchyard.wire import WireClient, WireError

log = logging.getLogger(__name__)
JSON_HEADERS = [("content-type", "application/json")]


@dataclass(frozen=True)
class End:
    """The answer's last bytes (maybe none): the client's stream ends with them, in one write."""

    body: bytes = b""


END = End()


@dataclass(frozen=True)
class Head:
    status: int
    headers: list[tuple[str, str]]


class ClientSink(Protocol):
    """Where a live stream's pieces can go without a task woken per piece (``respond.ClientWire``)."""

    def write(self, piece: bytes) -> bool:
        """Send ``piece`` to the client now; False when the client can take no more for now."""
        ...

    async def writable(self) -> None:
        """Wait until the client can take more; raises OSError when it has gone."""
        ...


class LiveRest:
    """The rest of a live stream, after its first bytes: the client side plays it (``play``).

    Straight from the replica's connection to the client's where the client
    side can take pieces that way (a ``ClientSink``), else piece by piece
    through ``send``. Either way every piece is watched on its way (TTFT,
    tokens) and goes as the replica sent it. The answer's last piece, which
    came with its end, is kept in ``last`` for the client's final write; a
    replica that broke off leaves its error in ``error``.
    """

    def __init__(self, att: Attempt, stats: StreamStats):
        self.att = att
        self.stats = stats
        self.last = b""
        self.error: WireError | None = None

    async def play(self, sink: ClientSink | None, send: Callable[[bytes], Awaitable[None]]) -> None:
        try:
            if sink is None:
                await self._piece_by_piece(send)
                return
            feed, write = self.stats.feed, sink.write

            def forward(piece: bytes) -> bool:
                feed(piece)
                return write(piece)

            while (last := await self.att.response.splice(forward)) is None:
                await sink.writable()
            self.stats.feed(last)
            self.last = last
        except WireError as exc:
            self.error = exc

    async def _piece_by_piece(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        att, feed = self.att, self.stats.feed
        async for chunk in att.rest():
            feed(chunk)
            if att.finished():  # the replica's end came with this piece: it goes with the end
                self.last = chunk
                return
            await send(chunk)


@dataclass
class Job:
    request_id: str
    endpoint: str  # "chat" or "completions"
    path: str
    body: dict[str, Any]
    stream: bool
    decision: Decision
    via: str  # what chose the pool: policy, model, header
    started: float = field(default_factory=time.monotonic)


class PoolDown(Exception):
    """No replica of the pool produced an answer."""

    def __init__(self, pool: Pool, last: AttemptFailed | None, fallback: Pool | None = None):
        self.pool = pool
        self.last = last
        message = f"pool {pool.name!r} has no replica that answers ({pool.status_line()})"
        if fallback is not None:
            message += f", nor has the fallback pool {fallback.name!r} ({fallback.status_line()})"
        super().__init__(message)


class Unanswered(Exception):
    """The request reached a replica's engine, which did not answer it: it is not sent again."""

    def __init__(self, pool: Pool, replica: Replica, failure: AttemptFailed):
        super().__init__(str(failure))
        self.pool, self.replica, self.failure = pool, replica, failure


# What a relay yields: the head, bytes, maybe the rest of a live stream to play, and the end.
Item = Head | bytes | LiveRest | End


class Relay:
    def __init__(
        self,
        config: SwitchyardConfig,
        pools: PoolSet,
        policy: Policy,
        client: WireClient,
        metrics: GatewayMetrics,
    ):
        self.config = config
        self.pools = pools
        self.policy = policy
        self.client = client
        self.metrics = metrics
        self._keys = {name: _pool_key(p.api_key_env) for name, p in config.pools.items()}
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop it serves on, once known

    def produce(self, job: Job) -> AsyncGenerator[Item, None]:
        """The answer's head and bytes; ``_live`` is returned as is (no wrapper per token)."""
        if job.decision.escalate_to and isinstance(self.policy, CascadePolicy):
            return self._cascade(job)
        return self._live(job, job.decision.pool, job.via)

    async def _cascade(self, job: Job) -> AsyncGenerator[Item, None]:
        held = await self._held_answer(job, job.decision.pool)
        if held is None:
            assert job.decision.escalate_to is not None
            held = self._live(job, job.decision.escalate_to, "escalation")
        async for item in held:
            yield item

    # -- live relay --------------------------------------------------------------------------

    async def _live(self, job: Job, pool_name: str, via: str) -> AsyncGenerator[Item, None]:
        try:
            att = await self._open(job, pool_name, via)
        except PoolDown as down:
            self.metrics.answered(down.pool.name, ok=False, tokens=0, ttft_s=None)
            self.metrics.errors.labels(down.pool.name, "no_replica").inc()
            for item in pool_down_answer(down, self.config.policy.fallback):
                yield item
            return
        except Unanswered as lost:
            self.metrics.answered(lost.pool.name, ok=False, tokens=0, ttft_s=None)
            for item in unanswered_answer(lost, job):
                yield item
            return
        if att.status != 200 and att.complete:  # an engine's error: in OpenAI's shape, whatever its own
            att.reshape(engine_error_body(att.status, att.first))
        stats = StreamStats(job.started)
        ok = att.status == 200
        via = via if att.pool.name == pool_name else "fallback"
        try:
            yield Head(att.status, self._headers(att, job, via))
            stats.feed(att.first)
            if att.finished():
                yield End(att.first)
                return
            yield att.first
            rest = LiveRest(att, stats)
            yield rest
            if rest.error is None:
                yield End(rest.last)
                return
            ok = False
            self._broken(att, rest.error)
            yield sse_error_event(
                f"the replica of pool {att.pool.name!r} failed mid-answer ({rest.error!s}); "
                "the answer is incomplete: send the request again"
            )
        finally:
            # Nothing here waits between the answer's end and the release, so the connection
            # is back in the pool before the client's next request can be read.
            self._release(att)
            self.metrics.defer(lambda: self._finish(job, att, stats, ok))

    def _finish(self, job: Job, att: Attempt, stats: StreamStats, ok: bool) -> None:
        stats.finish()
        self._record(job, att, stats, ok)

    def _broken(self, att: Attempt, exc: Exception) -> None:
        att.replica.breaker.on_failure()
        att.replica.last_error = f"broke mid-answer: {exc}"
        self.metrics.errors.labels(att.pool.name, "broken").inc()
        log.warning("replica %s of pool %s broke mid-answer: %s", att.replica.url, att.pool.name, exc)

    # -- choosing and opening ----------------------------------------------------------------

    async def _open(self, job: Job, pool_name: str, via: str) -> Attempt:
        """An attempt on ``pool_name``, or on the other pool when it is down and fallback is on."""
        self.metrics.routed.labels(pool_name, via).inc()
        try:
            return await self._open_in(job, pool_name)
        except PoolDown as down:
            other = self._other(pool_name)
            if not self.config.policy.fallback or other is None:
                raise
            log.warning("request %s: %s; falling back to pool %s", job.request_id, down, other)
            self.metrics.routed.labels(other, "fallback").inc()
            try:
                return await self._open_in(job, other)
            except PoolDown as also:
                raise PoolDown(down.pool, also.last or down.last, fallback=also.pool) from None

    async def _open_in(self, job: Job, pool_name: str) -> Attempt:
        pool = self.pools[pool_name]
        body = self._body_for(job, pool)
        tried: list[Replica] = []
        last: AttemptFailed | None = None
        for n in range(self.config.limits.max_attempts):
            # Other replicas first; once each was tried, a second try on one may still succeed.
            replica = pool.pick(exclude=tried) or pool.pick()
            if replica is None:
                break
            if n:
                self.metrics.retries.labels(pool.name).inc()
            tried.append(replica)
            replica.outstanding += 1
            replica.breaker.on_attempt()
            try:
                att = await attempt(
                    self.client,
                    pool,
                    replica,
                    job.path,
                    body,
                    job.stream,
                    self._keys[pool.name],
                    self.config.limits,
                )
            except AttemptFailed as exc:
                last = self._failed(pool, replica, exc, job)
                if not exc.retry:
                    raise Unanswered(pool, replica, exc) from None
                continue
            except BaseException:
                replica.outstanding -= 1
                replica.breaker.on_abandoned()
                raise
            replica.breaker.on_success()
            return att
        raise PoolDown(pool, last)

    def _failed(self, pool: Pool, replica: Replica, exc: AttemptFailed, job: Job) -> AttemptFailed:
        replica.outstanding -= 1
        if exc.replica_fault:
            replica.breaker.on_failure()
            replica.last_error = str(exc)
        else:
            replica.breaker.on_abandoned()
        self.metrics.errors.labels(pool.name, exc.kind).inc()
        log.warning(
            "request %s: attempt on %s failed before any byte was sent (%s); %s",
            job.request_id,
            replica.url,
            exc,
            "trying another replica" if exc.retry else "not sent again: it reached the engine",
        )
        return exc

    def _other(self, pool_name: str) -> str | None:
        small, large = self.config.policy.small, self.config.policy.large
        return {small: large, large: small}.get(pool_name)

    def _body_for(self, job: Job, pool: Pool) -> bytes:
        # Only the model name changes: tools, tool_choice, stream_options and the rest go as sent.
        return json.dumps({**job.body, "model": pool.model}, ensure_ascii=False).encode()

    def _release(self, att: Attempt) -> None:
        att.replica.outstanding -= 1
        # Closing the replica's response is what cancels its generation when the client left. It
        # must run even while this task is being cancelled: it never waits, so nothing can stop it
        # halfway (no shielding needed, which would cost every request a cancel scope).
        att.close()

    # -- cascade -----------------------------------------------------------------------------

    async def _held_answer(self, job: Job, pool_name: str) -> AsyncIterator[Head | bytes | End] | None:
        """The small pool's whole answer, or None when it must escalate."""
        assert isinstance(self.policy, CascadePolicy)
        self.metrics.routed.labels(pool_name, job.via).inc()
        try:
            att = await self._open_in(job, pool_name)
        except (PoolDown, Unanswered) as down:
            log.warning("request %s: %s; escalating to %s", job.request_id, down, job.decision.escalate_to)
            return None
        try:
            chunks = [att.first] + [chunk async for chunk in att.rest()]
        except WireError as exc:
            self._broken(att, exc)
            return None  # nothing reached the client yet: the large pool takes over
        finally:
            self._release(att)
        problems = self._validate(att, chunks, job)
        if problems:
            self.metrics.escalations.labels(pool_name, job.decision.escalate_to).inc()
            log.info(
                "request %s: answer of %s escalates to %s: %s",
                job.request_id,
                pool_name,
                job.decision.escalate_to,
                "; ".join(problems),
            )
            return None
        return self._replay(job, att, chunks)

    def _validate(self, att: Attempt, chunks: list[bytes], job: Job) -> list[str]:
        if att.status != 200:
            return [f"{att.pool.name} answered HTTP {att.status}"]
        answer = _assemble(chunks, job.stream)
        if answer is None:
            return [f"{att.pool.name} sent an answer that does not parse"]
        assert isinstance(self.policy, CascadePolicy)
        return self.policy.failures(answer, job.body)

    async def _replay(self, job: Job, att: Attempt, chunks: list[bytes]) -> AsyncIterator[Head | bytes | End]:
        stats = StreamStats(job.started)
        att.first, att.complete = b"".join(chunks), True
        yield Head(att.status, self._headers(att, job, job.via))
        for chunk in chunks:
            stats.feed(chunk)
            yield chunk
        yield END
        stats.finish()
        self._record(job, att, stats, ok=True)

    # -- bookkeeping -------------------------------------------------------------------------

    def _headers(self, att: Attempt, job: Job, via: str) -> list[tuple[str, str]]:
        reason = job.decision.reason.encode("ascii", "replace").decode()[:200]
        headers = att.headers() + [
            ("x-switchyard-pool", att.pool.name),
            ("x-switchyard-replica", att.replica.url),
            ("x-switchyard-via", via),
            ("x-switchyard-reason", reason),
            ("x-request-id", job.request_id),
        ]
        if att.complete:
            headers.append(("content-length", str(len(att.first))))
        return headers

    def _record(self, job: Job, att: Attempt, stats: StreamStats, ok: bool) -> None:
        tokens = stats.output_tokens if job.stream else _completion_tokens(att.first)
        ttft = stats.ttft_s if job.stream else None
        self.metrics.answered(att.pool.name, ok=ok and att.status == 200, tokens=tokens, ttft_s=ttft)
        log.debug(
            "request %s done on %s: HTTP %s, %s output tokens",
            job.request_id,
            att.replica.url,
            att.status,
            tokens,
        )


def pool_down_answer(down: PoolDown, fallback: bool) -> tuple[Head, bytes]:
    last = down.last
    if last is not None and last.kind == "busy" and last.body:
        # Every replica said "not now" in its own words: the engine's words explain it best.
        status = last.status or 503
        return Head(status, JSON_HEADERS), engine_error_body(status, last.body)
    hint = "start its replicas" + (
        "" if fallback else ", or set policy.fallback = true to use the other pool"
    )
    return Head(503, JSON_HEADERS), error_body(503, f"{down}; {hint}", code="pool_unavailable")


def unanswered_answer(lost: Unanswered, job: Job) -> tuple[Head, bytes]:
    """The client's answer when a replica's engine had the request and did not answer it."""
    failure, pool = lost.failure, lost.pool.name
    headers = JSON_HEADERS + [
        ("x-switchyard-pool", pool),
        ("x-switchyard-replica", lost.replica.url),
        ("x-request-id", job.request_id),
    ]
    if failure.kind == "upstream_5xx":
        status = failure.status or 502
        return Head(status, headers), engine_error_body(status, failure.body)
    # A timeout: the engine may still be generating, so another replica would run it twice.
    message = f"pool {pool!r}: {failure}; it was not sent to another replica, as its engine may still be on it"
    return Head(504, headers), error_body(504, message, code="timeout")


def _assemble(chunks: list[bytes], stream: bool) -> answers.Answer | None:
    if not stream:
        try:
            return answers.from_completion(json.loads(b"".join(chunks)))
        except (ValueError, AttributeError):
            return None
    scanner, assembler = SseScanner(), answers.StreamAssembler()
    for payload in scanner.feed(b"".join(chunks) + b"\n"):
        parsed = load_payload(payload)
        if parsed is not None:
            assembler.feed(parsed)
    return assembler.finish()


def _completion_tokens(body: bytes) -> int:
    parsed = load_payload(body)
    usage = (parsed or {}).get("usage")
    value = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) else 0


def _pool_key(env: str | None) -> str | None:
    return os.environ.get(env) if env else None
