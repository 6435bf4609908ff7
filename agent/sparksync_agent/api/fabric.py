"""The fabric endpoints: ``GET /v1/fabric`` (read-only), ``POST /v1/fabric/apply`` and ``/rollback``.

The sudo password in the apply and rollback bodies goes to the helper's
sudo and nowhere else; the request models leave it out of their repr, and
nothing here logs a body.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Query, Request

from sparksync_agent.api.errors import ApiError
from sparksync_agent.fabric.probe import ProbeError
from sparksync_agent.fabric.service import FabricService
from sparksync_agent.fabric.sudo import HelperFailed, HelperRefused, SudoRefused
from sparksync_agent.protocol import ErrorBody, FabricApply, FabricReport, FabricResult, FabricRollback

router = APIRouter(prefix="/v1")
_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody}, 403: {"model": ErrorBody}, 400: {"model": ErrorBody}, 422: {"model": ErrorBody},
    502: {"model": ErrorBody}, 503: {"model": ErrorBody},
}  # fmt: skip


def _service(request: Request) -> FabricService:
    service = getattr(request.app.state.runtime, "fabric", None)
    if service is None:
        raise ApiError(503, "no_fabric", "this agent does not manage the fabric")
    return service


@router.get("/fabric", response_model=FabricReport, responses=_ERRORS)
async def fabric(request: Request, probe: bool = Query(True, description="Probe each port's neighbours.")) -> FabricReport:
    service = _service(request)
    try:
        return await asyncio.to_thread(service.report, probe)  # ping runs: keep the loop free
    except ProbeError as exc:
        raise ApiError(503, "probe_failed", str(exc)) from None


@router.post("/fabric/apply", response_model=FabricResult, responses=_ERRORS)
async def apply(body: FabricApply, request: Request) -> FabricResult:
    service = _service(request)
    return await _run(lambda: service.apply(body.plan, body.sudo_password))


@router.post("/fabric/rollback", response_model=FabricResult, responses=_ERRORS)
async def rollback(body: FabricRollback, request: Request) -> FabricResult:
    service = _service(request)
    return await _run(lambda: service.rollback(body.sudo_password, body.last))


async def _run(call) -> FabricResult:
    try:
        return await asyncio.to_thread(call)
    except SudoRefused as exc:
        raise ApiError(403, "sudo_refused", str(exc)) from None
    except HelperRefused as exc:
        raise ApiError(400, "fabric_refused", str(exc)) from None
    except HelperFailed as exc:
        raise ApiError(502, "fabric_helper_failed", str(exc)) from None
