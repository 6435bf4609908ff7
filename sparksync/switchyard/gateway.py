"""The OpenAI-compatible gateway: an ASGI app (Starlette) served by uvicorn.

Routes:

- ``POST /v1/chat/completions`` and ``POST /v1/completions``, streaming or not;
- ``GET /v1/models``: the virtual ``switchyard`` model plus one entry per pool;
- ``GET /metrics``: Prometheus text; ``GET /health``: the pools' state (no key needed).

The model ``switchyard`` is routed by the configured policy; a pool's name as
the model, or an ``X-Switchyard-Pool`` header, sends a request to that pool.

A POST to a completion endpoint goes straight to its handler, ahead of
Starlette: its routing, middleware and Request object cost more CPU than the
gateway's own work, and on a short stream that is a sizeable share of the
answer's time. Everything else (wrong methods included) goes through Starlette.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import signal
import threading
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
            self.relay.loop = asyncio.get_running_loop()
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
                self.metrics.flush()


COMPLETION_PATHS = {"/v1/chat/completions": "chat", "/v1/completions": "completions"}


def build_app(gateway: Gateway) -> GatewayApp:
    completions = {
        path: CompletionEndpoint(gateway, endpoint, path) for path, endpoint in COMPLETION_PATHS.items()
    }
    routes = [Route(path, handler, methods=["POST"]) for path, handler in completions.items()]
    routes += [
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
    return GatewayApp(app, completions)


class GatewayApp:
    """The ASGI app: completion POSTs to their handler at once, the rest (and the lifespan) to Starlette."""

    def __init__(self, starlette: Starlette, completions: dict[str, CompletionEndpoint]):
        self.starlette = starlette
        self._completions = completions

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            handler = self._completions.get(scope["path"])
            if handler is not None:
                await handler(scope, receive, send)
                return
        await self.starlette(scope, receive, send)


class CompletionEndpoint:
    """``POST /v1/chat/completions`` or ``/v1/completions`` as a plain ASGI app."""

    def __init__(self, gateway: Gateway, endpoint: str, path: str):
        self.gateway = gateway
        self.endpoint = endpoint
        self.path = path

    async def __call__(self, scope, receive, send) -> None:
        gw = self.gateway
        headers = _headers(scope)
        try:
            check_key(headers, gw.api_key)
            body = await read_json(headers, _body_chunks(receive), gw.config.limits.max_body_bytes)
            job = gw.router.job(headers, body, self.endpoint, self.path)
        except HttpError as exc:
            await _send_json(send, exc.status, error_document(exc.status, exc.message, exc.code, exc.param))
            return
        except _ClientGone:
            return  # nothing to answer: the client left while sending its request
        assert gw.relay is not None, "the gateway's lifespan has not started"
        relay = gw.relay
        await RelayResponse(relay.produce(job), gw.config.limits.request_timeout_s, job.request_id, relay.loop)(
            scope, receive, send
        )


class _ClientGone(Exception):
    pass


def _headers(scope) -> dict[str, str]:
    # The first of repeated headers counts, as with Starlette's Headers.get.
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        key = name.decode("latin-1").lower()
        if key not in headers:
            headers[key] = value.decode("latin-1")
    return headers


async def _body_chunks(receive):
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone()
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


async def _send_json(send, status: int, document: dict) -> None:
    # The bytes Starlette's JSONResponse would send.
    body = json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _models(request: Request) -> JSONResponse:
    gw: Gateway = request.app.state.gateway
    check_key(request.headers, gw.api_key)
    data = [
        {"id": name, "object": "model", "created": gw.created, "owned_by": "switchyard"}
        for name in gw.router.models()
    ]
    return JSONResponse({"object": "list", "data": data})


async def _metrics(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    check_key(request.headers, gw.api_key)
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


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HttpError)
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
        # No X-Forwarded-For rewriting: the gateway never reads the client's address, and the
        # middleware would cost every request a header scan.
        proxy_headers=False,
    )
    server = uvicorn.Server(uv_config)
    sock = uv_config.bind_socket()
    sock.listen(uv_config.backlog)  # connections wait in the backlog, not refused, until uvicorn accepts
    host = f"[{config.listen.host}]" if ":" in config.listen.host else config.listen.host
    url = f"http://{host}:{sock.getsockname()[1]}"
    log.info("switchyard listening on %s", url)
    # What the imports and the set-up made lives as long as the gateway: out of the collector's
    # sight, so that no full collection walks those ~100,000 objects (about 0.1 s each time).
    gc.freeze()
    with _stop_on_sigterm(), on_listening(url) if on_listening is not None else contextlib.nullcontext():
        await server.serve(sockets=[sock])


class Stopped(SystemExit):
    """The gateway was told to stop with SIGTERM and has wound down (exit status 0)."""

    def __init__(self) -> None:
        super().__init__(0)


@contextlib.contextmanager
def _stop_on_sigterm():
    """SIGTERM ends the gateway like Ctrl-C does: its ``on_listening`` context is left, so the
    announcement is removed.

    uvicorn handles the signal itself while it serves, and on its way out sends the
    signal again to the handler it found; with the default one the process would die
    right there, before any cleanup of ours. This handler raises instead, which unwinds
    through the contexts.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stopped(signum, frame) -> None:
        raise Stopped()

    previous = signal.signal(signal.SIGTERM, stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = ["Gateway", "build_app", "run", "serve"]
