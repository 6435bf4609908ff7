"""Model routes: list, roots, receive / verify / finalize a copy, delete, reach a peer, and jobs."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Path, Query, Request
from starlette.convertors import Convertor, register_url_convertor

from sparksync_agent.api.errors import ApiError
from sparksync_agent.models import JobBoard, ModelError, ModelStore
from sparksync_agent.models.jobs import JOB_WAIT_MAX_S
from sparksync_agent.protocol import (
    DELETABLE_NAME_REGEX,
    ErrorBody,
    FetchRequest,
    FinalizeRequest,
    JobList,
    ModelEntry,
    ModelJob,
    ModelList,
    PushRequest,
    ReachReply,
    ReachRequest,
    ReceiveReply,
    ReceiveRequest,
    RootsConfig,
    VerifyReply,
    VerifyRequest,
)
from sparksync_agent.runtime import AgentRuntime



class _DeletableName(Convertor[str]):
    """Matches only a model name that no other route here serves, so DELETE /v1/models/jobs/fetch
    or /roots finds the route beside it and answers 405 with its Allow, never a model lookup."""

    regex = DELETABLE_NAME_REGEX

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("model_name", _DeletableName())

router = APIRouter(prefix="/v1/models")
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 404, 409, 422, 503, 507)
}


def _store(request: Request) -> ModelStore:
    runtime: AgentRuntime = request.app.state.runtime
    if runtime.models is None:
        raise ApiError(503, "no_models", "this agent keeps no model store")
    return runtime.models


def _jobs(request: Request) -> JobBoard:
    runtime: AgentRuntime = request.app.state.runtime
    if runtime.model_jobs is None:
        raise ApiError(503, "no_models", "this agent runs no model jobs")
    return runtime.model_jobs


async def _off_loop(fn, *args):
    """Disk work (walking, hashing) runs off the event loop, so telemetry keeps flowing."""
    try:
        return await asyncio.to_thread(fn, *args)
    except ModelError as exc:
        raise ApiError(exc.status, exc.code, str(exc)) from exc


@router.get("", response_model=ModelList, responses=_ERRORS)
async def list_models(
    request: Request, manifests: bool = Query(True, description="sha256 per file (cached by size and mtime).")
) -> ModelList:
    return await _off_loop(_store(request).list, manifests)


@router.get("/roots", response_model=RootsConfig, responses=_ERRORS)
async def get_roots(request: Request) -> RootsConfig:
    return _store(request).config()


@router.put("/roots", response_model=RootsConfig, responses=_ERRORS)
async def put_roots(body: RootsConfig, request: Request) -> RootsConfig:
    return await _off_loop(_store(request).set_config, body)


@router.post("/receive", response_model=ReceiveReply, responses=_ERRORS)
async def receive(body: ReceiveRequest, request: Request) -> ReceiveReply:
    """Make the staging folder for a copy; refused (409 no_space) with the numbers when it will not fit."""
    return await _off_loop(_store(request).receive, body)


@router.post("/verify", response_model=VerifyReply, responses=_ERRORS)
async def verify(body: VerifyRequest, request: Request) -> VerifyReply:
    """Fresh sha256 of every file against the source's manifest."""
    return await _off_loop(_store(request).verify, body)


@router.post("/finalize", response_model=ModelEntry, responses=_ERRORS)
async def finalize(body: FinalizeRequest, request: Request) -> ModelEntry:
    """Move a verified copy from staging into the store: from now on it is listed present."""
    return await _off_loop(_store(request).finalize, body)


@router.delete("/{name:model_name}", status_code=204, responses=_ERRORS)
async def delete_model(
    request: Request,
    # The convertor has matched it already; the schema says the same rule.
    name: str = Path(json_schema_extra={"pattern": f"^{DELETABLE_NAME_REGEX}$"}),
    partial: bool = Query(False, description="The unfinished copy.")
) -> None:
    """Delete a model; refused (409) while a running workload here uses it."""
    await _off_loop(_store(request).delete, name, partial)


@router.post("/reach", response_model=ReachReply, responses=_ERRORS)
async def reach(body: ReachRequest, request: Request) -> ReachReply:
    """Whether this node can ssh to another with its own key (the node-to-node mesh)."""
    return await _off_loop(_jobs(request).reach, body)


@router.post("/jobs/fetch", response_model=ModelJob, status_code=201, responses=_ERRORS)
async def fetch(body: FetchRequest, request: Request) -> ModelJob:
    """Download a Hugging Face repo into this node's HF cache (huggingface_hub)."""
    return await _off_loop(_jobs(request).fetch, body)


@router.post("/jobs/push", response_model=ModelJob, status_code=201, responses=_ERRORS)
async def push(body: PushRequest, request: Request) -> ModelJob:
    """rsync a model from here into another node's staging folder over ssh."""
    return await _off_loop(_jobs(request).push, body)


@router.get("/jobs", response_model=JobList, responses=_ERRORS)
async def jobs(request: Request) -> JobList:
    return JobList(jobs=_jobs(request).all())


@router.get("/jobs/{job_id}", response_model=ModelJob, responses=_ERRORS)
async def job(
    job_id: str,
    request: Request,
    wait_s: float = Query(0.0, ge=0.0, le=JOB_WAIT_MAX_S, description="Answer when the job ends, or after this."),
) -> ModelJob:
    """The job; with ``wait_s``, its state once it has ended or ``wait_s`` has passed."""
    return await _off_loop(_jobs(request).get, job_id, wait_s)


@router.post("/jobs/{job_id}/cancel", response_model=ModelJob, responses=_ERRORS)
async def cancel(job_id: str, request: Request) -> ModelJob:
    return await _off_loop(_jobs(request).cancel, job_id)
