"""The live telemetry stream, as server-sent events with sequence numbers.

The response is a bare ASGI response rather than a ``StreamingResponse``
around an async generator: at 10 Hz each sample's trip through the generator
and the task group is a measurable share of the agent's CPU, and this loop
does the same work (and the same disconnect watch) with less of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from sparksync_agent.api.errors import ApiError
from sparksync_agent.api.routes import read_since, runtime_of
from sparksync_agent.protocol import ErrorBody
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
    return SampleEventStream(runtime, start)


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

    def __init__(self, runtime: AgentRuntime, last: int):
        self.status_code = 200
        self.background = None
        self.init_headers()
        self._runtime, self._last = runtime, last

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        pump = asyncio.ensure_future(self._pump(send))
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

    async def _pump(self, send: Send) -> None:
        runtime, sampler, last = self._runtime, self._runtime.sampler, self._last
        runtime.stream_clients += 1
        try:
            items, lost = sampler.ring.since(last)
            while not runtime.stopping.is_set():
                if lost:  # the client was too slow for the ring; say so and go on
                    await _send(
                        send,
                        b"event: lost\ndata: %s\n\n" % json.dumps({"lost": lost, "since": last}).encode(),
                    )
                for seq, data in items:
                    chunk = b"id: %d\nevent: sample\ndata: %s\n\n" % (seq, data)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    last = seq
                # Sends can wait on a slow client, and samples may have landed meanwhile.
                if sampler.ring.last_seq == last and not await sampler.wait_for_sample(PING_SECONDS):
                    await _send(send, b": ping\n\n")
                items, lost = sampler.ring.since(last)
        finally:
            runtime.stream_clients -= 1


async def _send(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
