"""The live telemetry stream, as server-sent events with sequence numbers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from sparksync_agent.api.errors import ApiError
from sparksync_agent.api.routes import read_since, runtime_of
from sparksync_agent.runtime import AgentRuntime

router = APIRouter(prefix="/v1")

PING_SECONDS = 15.0  # keeps idle connections (and SSH tunnels) from being reaped


@router.get(
    "/telemetry/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "'sample' and 'lost' events"}},
)
async def telemetry_stream(
    request: Request,
    since: int | None = Query(None, description="Resume after this seq (default: only new samples)."),
    last_event_id: str | None = Header(None),
) -> StreamingResponse:
    runtime = runtime_of(request)
    start = _resume_point(runtime, since, last_event_id)
    read_since(runtime, start, limit=1)  # validate before the 200 goes out
    return StreamingResponse(_events(runtime, start), media_type="text/event-stream")


def _resume_point(runtime: AgentRuntime, since: int | None, last_event_id: str | None) -> int:
    if since is not None:
        return since
    if last_event_id:
        try:
            return int(last_event_id)
        except ValueError as exc:
            raise ApiError(400, "unknown_since", "Last-Event-ID must be a sample seq") from exc
    return runtime.sampler.ring.last_seq


async def _events(runtime: AgentRuntime, last: int) -> AsyncIterator[bytes]:
    runtime.stream_clients += 1
    try:
        items, lost = runtime.sampler.ring.since(last)
        if lost:
            yield b"event: lost\ndata: " + json.dumps({"lost": lost, "since": last}).encode() + b"\n\n"
        while not runtime.stopping.is_set():
            for seq, data in items:
                yield b"id: %d\nevent: sample\ndata: %s\n\n" % (seq, data)
                last = seq
            if not items and not await runtime.sampler.wait_for_sample(PING_SECONDS):
                yield b": ping\n\n"
            items, lost = runtime.sampler.ring.since(last)
            if lost:  # the client was too slow for the ring; say so and go on
                yield b"event: lost\ndata: " + json.dumps({"lost": lost, "since": last}).encode() + b"\n\n"
    finally:
        runtime.stream_clients -= 1
