"""``GET /v1/engines``: which engines this node can run, and what the others lack."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Query, Request

from sparksync_agent.api.errors import ApiError
from sparksync_agent.protocol import EngineReport, ErrorBody

router = APIRouter(prefix="/v1")


@router.get(
    "/engines", response_model=EngineReport, responses={401: {"model": ErrorBody}, 503: {"model": ErrorBody}}
)
async def engines(
    request: Request, refresh: bool = Query(False, description="Check again now.")
) -> EngineReport:
    detector = getattr(request.app.state.runtime, "engines", None)
    if detector is None:
        raise ApiError(503, "no_detector", "this agent runs no engine detection")
    if detector.report is None or refresh:
        # Subprocesses (python3, docker) run off the event loop: telemetry keeps flowing.
        return await asyncio.to_thread(detector.run)
    return detector.report
