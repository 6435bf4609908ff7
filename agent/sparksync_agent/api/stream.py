"""The live telemetry stream, as server-sent events with sequence numbers.

The response is a bare ASGI response rather than a ``StreamingResponse``
around an async generator: at 10 Hz each sample's trip through the generator
and the task group is a measurable share of the agent's CPU, and this loop
does the same work (and the same disconnect watch) with less of it.

A client that has caught up is then written to from the sampling tick itself
(:mod:`sparksync_agent.api.direct`): the tick frames each sample once and
writes it to every such client's socket, so a sample wakes no stream task
and runs none of the ASGI send chain. A client whose socket backs up, or a
server where the socket cannot be reached, is served by the loop below, from
the ring, exactly as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from sparksync_agent.api.direct import DirectTarget, DirectWriter, SampleFanout, direct_target, fanout_of
from sparksync_agent.api.errors import ApiError
from sparksync_agent.api.routes import read_since, runtime_of
from sparksync_agent.protocol import ErrorBody
from sparksync_agent.ring import SampleRing
from sparksync_agent.runtime import AgentRuntime

router = APIRouter(prefix="/v1")

PING_SECONDS = 15.0  # keeps idle connections (and SSH tunnels) from being reaped


@router.get(
    "/telemetry/stream",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "'sample' and 'lost' events"},
        **{code: {"model": ErrorBody} for code in (400, 401, 409, 422)},
    },
)
async def telemetry_stream(
    request: Request,
    since: int | None = Query(None, description="Resume after this seq (default: only new samples)."),
    last_event_id: str | None = Header(None),
) -> Response:
    runtime = runtime_of(request)
    start = resume_point(since, last_event_id, runtime.sampler.ring.last_seq, "sample")
    read_since(runtime, start, limit=1)  # validate before the 200 goes out
    return SampleEventStream(runtime, start, fanout_of(request.app))


def resume_point(since: int | None, last_event_id: str | None, newest: int, unit: str) -> int:
    """Where an SSE stream starts: ``since``, else the reconnecting client's Last-Event-ID, else now."""
    if since is not None:
        return since
    if last_event_id:
        try:
            return int(last_event_id)
        except ValueError as exc:
            raise ApiError(400, "unknown_since", f"Last-Event-ID must be a {unit} seq") from exc
    return newest


class SampleEventStream(Response):
    """'sample' events from ``last`` on, until the client leaves or the agent stops."""

    media_type = "text/event-stream"

    def __init__(self, runtime: AgentRuntime, last: int, fanout: SampleFanout | None = None):
        self.status_code = 200
        self.background = None
        self.init_headers()
        self._runtime, self._last, self._fanout = runtime, last, fanout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        target = direct_target(scope)
        pump = asyncio.ensure_future(self._pump(send, target if self._fanout is not None else None))
        watch = asyncio.ensure_future(_until_disconnect(receive))
        try:
            await asyncio.wait((pump, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, watch):
                task.cancel()
            for task in (pump, watch):
                with contextlib.suppress(asyncio.CancelledError):
                    await task  # re-raises what the pump raised
        if not watch.done() or watch.cancelled():
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump(self, send: Send, target: DirectTarget | None) -> None:
        runtime, sampler, last = self._runtime, self._runtime.sampler, self._last
        runtime.stream_clients += 1
        stopping = asyncio.ensure_future(runtime.stopping.wait()) if target is not None else None
        try:
            while not runtime.stopping.is_set():
                last = await _catch_up(send, sampler.ring, last)
                if target is not None and stopping is not None:
                    writer = DirectWriter(target.transport, target.flow, last)
                    last = await self._direct(send, writer, stopping)
                elif not await sampler.wait_for_sample(PING_SECONDS):
                    await _send(send, b": ping\n\n")
        finally:
            runtime.stream_clients -= 1
            if stopping is not None:
                stopping.cancel()

    async def _direct(self, send: Send, writer: DirectWriter, stopping: asyncio.Future) -> int:
        """Leave the samples to the tick's direct writes until the client falls behind or the agent stops.

        Returns the last seq written; the caller resumes from the ring after it.
        """
        fanout = self._fanout
        assert fanout is not None, "only a stream with a fan-out gets a direct target"
        fanout.add(writer)
        try:
            while not writer.detached.done() and not stopping.done():
                written = writer.last
                await asyncio.wait((writer.detached, stopping), timeout=PING_SECONDS,
                                   return_when=asyncio.FIRST_COMPLETED)
                if writer.last == written and not writer.detached.done() and not stopping.done():
                    await _send(send, b": ping\n\n")  # no sample for a while (a stalled clock)
        finally:
            fanout.remove(writer)
        return writer.last


async def _catch_up(send: Send, ring: SampleRing, last: int) -> int:
    """Send what the ring holds after ``last`` (saying first what was lost); returns the newest sent."""
    items, lost = ring.since(last)
    while items or lost:
        if lost:  # the client was too slow for the ring; say so and go on
            note = json.dumps({"lost": lost, "since": last}).encode()
            await _send(send, b"event: lost\ndata: %s\n\n" % note)
        for seq, data in items:
            chunk = b"id: %d\nevent: sample\ndata: %s\n\n" % (seq, data)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            last = seq
        # Sends can wait on a slow client, and samples may have landed meanwhile.
        items, lost = ring.since(last)
    return last


async def _send(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
