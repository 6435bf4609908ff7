"""The OpenAI-compatible gateway: an ASGI app (Starlette) served by uvicorn.

Routes:

- ``POST /v1/chat/completions`` and ``POST /v1/completions``, streaming or not;
- ``GET /v1/models``: the virtual ``switchyard`` model plus one entry per pool;
- ``GET /metrics``: Prometheus text; ``GET /health``: the pools' state (no key needed).

The model ``switchyard`` is routed by the configured policy; a pool's name as
the model, or an ``X-Switchyard-Pool`` header, sends a request to that pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sparksync.switchyard.config import SwitchyardConfig
from sparksync.switchyard.errors import ConfigError
from sparksync.switchyard.health import HealthChecker
from sparksync.switchyard.http_errors import error_document
from sparksync.switchyard.intake import HttpError, Router, check_key, read_json
from sparksync.switchyard.metrics import GatewayMetrics
from sparksync.switchyard.policies import make_policy
from sparksync.switchyard.pools import PoolSet
from sparksync.switchyard.relay import Relay
from sparksync.switchyard.respond import RelayResponse
from sparksync.switchyard.sources import PoolSource, StaticUrls
from sparksync.switchyard.upstream import make_client

log = logging.getLogger(__name__)

# Given the gateway's URL once it listens; the context it returns is held until the gateway stops.
OnListening = Callable[[str], AbstractContextManager[object]]


class Gateway:
    """Everything one running gateway holds: pools, policy, metrics, and (while running) its HTTP client."""

    def __init__(
        self, config: SwitchyardConfig, source: PoolSource | None = None, api_key: str | None = None
    ):
        self.config = config
        self.api_key = api_key
        if source is None and config.workload_pools():
            raise ConfigError(
                f"pools {', '.join(sorted(config.workload_pools()))} follow workloads, which this gateway was "
                "given no way to read; run it with `sparksync switchyard serve`"
            )
        self.source = source or StaticUrls.from_config(config)
        self.pools = PoolSet({name: config.upstream_model(name) for name in config.pools}, config.breaker)
        self.pools.apply({name: pool.urls for name, pool in config.pools.items()})
        self.policy = make_policy(config.policy)
        self.router = Router(config, self.policy)
        self.metrics = GatewayMetrics(self.pools)
        self.created = int(time.time())
        self.relay: Relay | None = None

    @contextlib.asynccontextmanager
    async def running(self, app: Starlette):
        wire = make_client(self.config.limits)
        # The relay streams through the lean wire client; the health checks use httpx.
        async with httpx.AsyncClient(trust_env=False) as client:
            self.relay = Relay(self.config, self.pools, self.policy, wire, self.metrics)
            checker = HealthChecker(self.pools, self.source, self.config.health, client)
            await checker.check_once()  # the first requests should already skip dead replicas
            task = asyncio.create_task(checker.run_forever(), name="switchyard-health")
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await wire.aclose()
                await self.source.aclose()


def build_app(gateway: Gateway) -> Starlette:
    routes = [
        Route("/v1/chat/completions", _completion_endpoint("chat", "/v1/chat/completions"), methods=["POST"]),
        Route("/v1/completions", _completion_endpoint("completions", "/v1/completions"), methods=["POST"]),
        Route("/v1/models", _models, methods=["GET"]),
        Route("/metrics", _metrics, methods=["GET"]),
        Route("/health", _health, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=gateway.running,
        exception_handlers={HttpError: _http_error, 404: _not_found, 405: _not_allowed},
    )
    app.state.gateway = gateway
    return app


def _completion_endpoint(endpoint: str, path: str):
    async def handle(request: Request):
        gw: Gateway = request.app.state.gateway
        check_key(request, gw.api_key)
        body = await read_json(request, gw.config.limits.max_body_bytes)
        job = gw.router.job(request, body, endpoint, path)
        assert gw.relay is not None, "the gateway's lifespan has not started"
        return RelayResponse(gw.relay.produce(job), gw.config.limits.request_timeout_s, job.request_id)

    return handle


async def _models(request: Request) -> JSONResponse:
    gw: Gateway = request.app.state.gateway
    check_key(request, gw.api_key)
    data = [
        {"id": name, "object": "model", "created": gw.created, "owned_by": "switchyard"}
        for name in gw.router.models()
    ]
    return JSONResponse({"object": "list", "data": data})


async def _metrics(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    check_key(request, gw.api_key)
    return Response(gw.metrics.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8")


async def _health(request: Request) -> JSONResponse:
    gw: Gateway = request.app.state.gateway
    pools = {
        p.name: {"replicas": len(p.replicas), "available": sum(r.available for r in p.replicas)}
        for p in gw.pools.pools.values()
    }
    up = any(p["available"] for p in pools.values())
    return JSONResponse(
        {"status": "ok" if up else "no replica available", "pools": pools}, status_code=200 if up else 503
    )


async def _http_error(request: Request, exc: HttpError) -> JSONResponse:
    return JSONResponse(error_document(exc.status, exc.message, exc.code, exc.param), status_code=exc.status)


async def _not_found(request: Request, exc: Exception) -> JSONResponse:
    message = (
        f"no such endpoint {request.url.path}; this gateway serves /v1/chat/completions, "
        "/v1/completions, /v1/models, /metrics and /health"
    )
    return JSONResponse(error_document(404, message, "not_found"), status_code=404)


async def _not_allowed(request: Request, exc: Exception) -> JSONResponse:
    message = f"{request.method} is not allowed on {request.url.path}"
    return JSONResponse(error_document(405, message, "method_not_allowed"), status_code=405)


def run(
    config: SwitchyardConfig, source: PoolSource | None = None, on_listening: OnListening | None = None
) -> None:
    """Serve on uvloop where it is installed, as uvicorn does when it makes the loop itself.

    ``uvicorn.Server.serve`` runs on whatever loop it is given, and a plain
    ``asyncio.run`` gives it the pure-Python selector loop, which costs
    several times more CPU per streamed chunk (measured at concurrency 32 in
    tests/perf/test_switchyard_overhead.py).
    """
    try:
        import uvloop
    except ImportError:  # Windows, or a minimal install: the standard loop works, only slower
        asyncio.run(serve(config, source, on_listening))
        return
    uvloop.run(serve(config, source, on_listening))


async def serve(
    config: SwitchyardConfig, source: PoolSource | None = None, on_listening: OnListening | None = None
) -> None:
    """Run the gateway until cancelled or interrupted (``sparksync switchyard serve``).

    The socket is bound before uvicorn starts, so the real port (``port = 0``
    picks a free one) is known; ``on_listening(url)`` gives a context held
    while the gateway serves (the CLI announces the gateway with it).
    """
    import uvicorn

    api_key = config.check_bind()
    app = build_app(Gateway(config, source, api_key))
    uv_config = uvicorn.Config(
        app,
        host=config.listen.host,
        port=config.listen.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )
    server = uvicorn.Server(uv_config)
    sock = uv_config.bind_socket()
    sock.listen(uv_config.backlog)  # connections wait in the backlog, not refused, until uvicorn accepts
    host = f"[{config.listen.host}]" if ":" in config.listen.host else config.listen.host
    url = f"http://{host}:{sock.getsockname()[1]}"
    log.info("switchyard listening on %s", url)
    with on_listening(url) if on_listening is not None else contextlib.nullcontext():
        await server.serve(sockets=[sock])


__all__ = ["Gateway", "build_app", "run", "serve"]
