"""Workload routes: start a rank, list, stop, forget, and read or stream a rank's log."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from sparksync_agent.api.errors import ApiError
from sparksync_agent.api.stream import resume_point
from sparksync_agent.protocol import (
    ErrorBody,
    LogLine,
    LogPage,
    RankStart,
    RankStatus,
    WorkloadList,
    WorkloadStatus,
)
from sparksync_agent.runtime import AgentRuntime
from sparksync_agent.supervisor.errors import SupervisorError
from sparksync_agent.supervisor.rank import DEFAULT_STOP_GRACE_S, Rank
from sparksync_agent.supervisor.supervisor import Supervisor

router = APIRouter(prefix="/v1/workloads")
_ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 401, 404, 409, 422, 503)}
PING_SECONDS = 15.0
WAKE_SECONDS = 1.0


def supervisor_of(request: Request) -> Supervisor:
    runtime: AgentRuntime = request.app.state.runtime
    supervisor = getattr(runtime, "supervisor", None)
    if supervisor is None:
        raise ApiError(503, "no_supervisor", "this agent runs no process supervisor")
    return supervisor


class _Refusals:
    """Turns the supervisor's refusals into ErrorBody answers."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> None:
        if isinstance(exc, SupervisorError):
            raise ApiError(exc.status, exc.code, str(exc)) from exc


@router.post("", response_model=RankStatus, status_code=201, responses=_ERRORS)
async def start_rank(body: RankStart, request: Request) -> RankStatus:
    """Start one rank; answers once its process runs (poll the workload for 'ready')."""
    with _Refusals():
        return supervisor_of(request).start_rank(body)


@router.get("", response_model=WorkloadList, responses=_ERRORS)
async def list_workloads(request: Request) -> WorkloadList:
    return supervisor_of(request).workloads()


@router.get("/{workload_id}", response_model=WorkloadStatus, responses=_ERRORS)
async def get_workload(workload_id: str, request: Request) -> WorkloadStatus:
    with _Refusals():
        return supervisor_of(request).workload(workload_id)


@router.post("/{workload_id}/stop", response_model=WorkloadStatus, responses=_ERRORS)
async def stop_workload(
    workload_id: str,
    request: Request,
    grace_s: float = Query(DEFAULT_STOP_GRACE_S, ge=0, le=600, description="SIGKILL after this."),
) -> WorkloadStatus:
    """SIGTERM to every process of the workload here, SIGKILL after the grace; answers once all ended."""
    with _Refusals():
        return await supervisor_of(request).stop(workload_id, grace_s)


@router.delete("/{workload_id}", status_code=204, responses=_ERRORS)
async def forget_workload(workload_id: str, request: Request) -> None:
    """Drop a finished workload from the list."""
    with _Refusals():
        supervisor_of(request).forget(workload_id)


def _rank(request: Request, workload_id: str, name: str | None) -> Rank:
    with _Refusals():
        return supervisor_of(request).rank(workload_id, name)


@router.get("/{workload_id}/logs", response_model=LogPage, responses=_ERRORS)
async def logs(
    workload_id: str,
    request: Request,
    name: str | None = Query(None, description="The process; optional when the workload has one here."),
    since: int = Query(0, ge=0, description="Return lines with seq > since."),
    limit: int | None = Query(None, ge=1, le=100_000),
) -> LogPage:
    rank = _rank(request, workload_id, name)
    rank.pump()  # the freshest lines, not only what the last poll saw
    items, lost = rank.ring.since(since, limit)
    lines = [LogLine(seq=seq, text=text) for seq, text in items]
    return LogPage(
        workload_id=workload_id,
        name=rank.name,
        since=since,
        lines=lines,
        last_seq=rank.ring.last_seq,
        lost=lost,
    )


@router.get(
    "/{workload_id}/logs/stream",
    response_class=StreamingResponse,
    responses={
        **_ERRORS,
        200: {"content": {"text/event-stream": {}}, "description": "'line', 'lost' and 'end' events"},
    },
)
async def log_stream(
    workload_id: str,
    request: Request,
    name: str | None = Query(None),
    since: int | None = Query(None, ge=0, description="Resume after this seq (default: only new lines)."),
    last_event_id: str | None = Header(None),
) -> StreamingResponse:
    """Lines as server-sent events (id = seq); ends with an 'end' event once the process has finished."""
    rank = _rank(request, workload_id, name)
    start = resume_point(since, last_event_id, rank.ring.last_seq, "log line")
    runtime: AgentRuntime = request.app.state.runtime
    return StreamingResponse(_events(runtime, rank, start), media_type="text/event-stream")


async def _events(runtime: AgentRuntime, rank: Rank, last: int) -> AsyncIterator[bytes]:
    while not runtime.stopping.is_set():
        items, lost = rank.ring.since(last)
        if lost:
            yield b"event: lost\ndata: " + json.dumps({"lost": lost, "since": last}).encode() + b"\n\n"
        for seq, text in items:
            yield b"id: %d\nevent: line\ndata: %s\n\n" % (
                seq,
                LogLine(seq=seq, text=text).model_dump_json().encode(),
            )
            last = seq
        if items:
            continue
        if rank.record.state.finished and last >= rank.ring.last_seq:
            yield b"event: end\ndata: " + rank.status().model_dump_json().encode() + b"\n\n"
            return
        # Short waits so an agent shutdown ends the stream promptly; a ping keeps tunnels open.
        idle = 0.0
        while not await rank.ring.wait(WAKE_SECONDS) and not runtime.stopping.is_set():
            idle += WAKE_SECONDS
            if idle >= PING_SECONDS:
                yield b": ping\n\n"
                idle = 0.0
            if rank.record.state.finished:
                break
