"""Builds the agent's FastAPI application around a running AgentRuntime."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import FastAPI

from sparksync_agent.api import engines, fabric, metrics, models, routes, stream, workloads
from sparksync_agent.api.auth import BearerTokenMiddleware
from sparksync_agent.api.direct import SampleFanout
from sparksync_agent.api.errors import install_error_handlers
from sparksync_agent.protocol import AGENT_VERSION, PROTOCOL_VERSION
from sparksync_agent.runtime import AgentRuntime

log = logging.getLogger(__name__)

Hook = Callable[[AgentRuntime], Awaitable[None]]


def create_app(runtime: AgentRuntime, token: str, on_start: Hook | None = None, on_stop: Hook | None = None):
    """The ASGI app: routes, error shapes, token check and the sampler's lifetime."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        runtime.sampler.take_sample()  # so the first snapshot and the mDNS TXT have data
        sampler_task = asyncio.create_task(runtime.sampler.run(), name="sampler")
        if runtime.supervisor is not None:
            await runtime.supervisor.start()  # re-attach to ranks that outlived the last agent
        try:
            if on_start:
                await on_start(runtime)
            yield
        finally:
            request_stop(runtime)
            sampler_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler_task
            if runtime.supervisor is not None:
                await runtime.supervisor.close()  # the ranks keep running
            if runtime.model_jobs is not None:
                runtime.model_jobs.close()  # a cut copy keeps its partial files for the next run
            if on_stop:
                await on_stop(runtime)

    app = FastAPI(
        title="SparkSync agent",
        version=f"{AGENT_VERSION} (protocol {PROTOCOL_VERSION})",
        lifespan=lifespan,
        docs_url=None,  # the interactive docs pull assets from a CDN; nothing leaves the node
        redoc_url=None,
    )
    app.state.runtime = runtime
    app.state.sample_fanout = SampleFanout(runtime.sampler)  # used where the server is uvicorn's
    app.state.metrics_registry = metrics.make_registry(runtime)
    install_error_handlers(app)
    for module in (routes, stream, metrics, workloads, engines, fabric, models):
        app.include_router(module.router)
    public = frozenset({"/metrics"}) if runtime.options.metrics_public else frozenset()
    app.add_middleware(BearerTokenMiddleware, token=token, public_paths=public)
    log.debug("API built for pid %d", os.getpid())
    return app


def request_stop(runtime: AgentRuntime) -> None:
    """Ends every stream at once so shutdown is not held up by open clients."""
    runtime.stopping.set()
    runtime.sampler.wake()
