"""The agent's API routes: handshake, snapshot, status and telemetry history."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from sparksync_agent.api.errors import CONFLICT, ApiError
from sparksync_agent.protocol import (
    AGENT_VERSION,
    PROTOCOL_VERSION,
    AgentStatus,
    ErrorBody,
    Hello,
    HelloReply,
    Snapshot,
    TelemetryPage,
    protocol_major,
)
from sparksync_agent.ring import UnknownSinceError
from sparksync_agent.runtime import AgentRuntime

router = APIRouter(prefix="/v1")
_ERRORS: dict[int | str, dict[str, Any]] = {401: {"model": ErrorBody}, 422: {"model": ErrorBody}}


def runtime_of(request: Request) -> AgentRuntime:
    return request.app.state.runtime


# A body that is not even text (not UTF-8) is refused by the framework with a 400.
_BODY_ERRORS: dict[int | str, dict[str, Any]] = {**_ERRORS, 400: {"model": ErrorBody}}


@router.post("/hello", response_model=HelloReply, responses={**_BODY_ERRORS, 409: {"model": ErrorBody}})
def hello(body: Hello, request: Request) -> HelloReply:
    """Exchange versions first; a different protocol MAJOR is refused, naming both."""
    try:
        compatible = protocol_major(body.protocol_version) == protocol_major(PROTOCOL_VERSION)
    except ValueError:
        compatible = False
    if not compatible:
        raise ApiError(
            409,
            "protocol_mismatch",
            f"this agent speaks protocol {PROTOCOL_VERSION} (agent {AGENT_VERSION}) but the client "
            f"speaks {body.protocol_version!r}; upgrade the older side so both share the major version",
        )
    runtime = runtime_of(request)
    return HelloReply(
        agent_version=AGENT_VERSION,
        protocol_version=PROTOCOL_VERSION,
        node_id=runtime.node_id,
        run_id=runtime.run_id,
        sample_hz=runtime.options.sample_hz,
    )


@router.get("/snapshot", response_model=Snapshot, responses=_ERRORS)
def snapshot(request: Request) -> Snapshot:
    return runtime_of(request).snapshot()


@router.get("/status", response_model=AgentStatus, responses=_ERRORS)
def status(request: Request) -> AgentStatus:
    return runtime_of(request).status()


@router.get(
    "/telemetry",
    response_model=TelemetryPage,
    responses={**_ERRORS, 409: {"model": ErrorBody}},
)
def telemetry(
    request: Request,
    since: int = Query(0, description="Return samples with seq > since."),
    limit: int | None = Query(None, ge=1, le=100_000),
) -> Response:
    runtime = runtime_of(request)
    items, lost = read_since(runtime, since, limit)
    # The ring holds encoded samples; splice them in rather than decode and re-encode.
    head = json.dumps({"run_id": runtime.run_id, "since": since, "last_seq": runtime.sampler.ring.last_seq, "lost": lost})
    body = head[:-1].encode() + b', "samples": [' + b",".join(data for _, data in items) + b"]}"
    return Response(body, media_type="application/json")


def read_since(runtime: AgentRuntime, since: int, limit: int | None = None):
    try:
        return runtime.sampler.ring.since(since, limit)
    except UnknownSinceError as exc:
        raise ApiError(CONFLICT, "unknown_since", f"{exc}; resume with since=0 or a seq you received") from exc
