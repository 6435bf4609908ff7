"""What the Switchyard overhead benchmark drives: nginx as the anchor proxy, and a streaming load generator.

The load generator runs in the benchmark's own process on one event loop
(uvloop where installed), with the gateway's own lean HTTP client, so that at
thousands of chunks a second it stays a small fraction of a core; the gateway
and nginx each run in their own processes, as they would in use.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from sparksync.switchyard.wire import WireClient, WireError
from tests.engines.engine_procs import EngineProcess, free_port, running, wait_http_ready

NGINX_CONF = """
worker_processes 1;
user root;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    upstream engine {{ server 127.0.0.1:{upstream}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://engine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"""


STREAM_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


def nginx_binary() -> str | None:
    return shutil.which("nginx") or (shutil.which("nginx", path="/usr/sbin:/sbin"))


@contextmanager
def nginx_proxy(upstream_port: int, workdir: Path) -> Iterator[EngineProcess]:
    """A plain nginx reverse proxy (no buffering, keep-alive upstream) in front of ``upstream_port``."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = workdir / "nginx.conf"
    conf.write_text(NGINX_CONF.format(prefix=workdir, upstream=upstream_port, port=port))
    cmd = [nginx_binary() or "nginx", "-p", str(workdir), "-c", str(conf), "-g", "daemon off;"]
    with running(cmd, workdir / "nginx.out", port) as proc:
        wait_http_ready(proc, "/health")
        yield proc


@dataclass(frozen=True)
class Route:
    """Where a group of streams goes: straight to the engine, or through a proxy."""

    name: str
    url: str
    model: str
    procs: tuple[psutil.Process, ...] = ()  # the proxy's processes, whose CPU time is counted


@dataclass
class Window:
    """One route's streams during one window's counted part."""

    seconds: float  # the counted part's length
    ttft_s: list[float] = field(default_factory=list)  # of the requests sent in the counted part
    tokens: int = 0  # output tokens that arrived in the counted part, from any request
    received: int = 0  # output tokens that arrived at all (the proxy's CPU covers the whole window)
    requests: int = 0
    errors: int = 0
    proxy_cpu_s: float = 0.0  # CPU time the route's proxy used meanwhile (0 for direct)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


@dataclass
class Side:
    """What the measuring machine itself did during a window."""

    elapsed_s: float = 0.0
    loadgen_cpu_s: float = 0.0  # this process: the load generator
    cpu_busy: tuple[float, ...] = ()  # per CPU, the busy share of the window (0..1), all processes

    @property
    def loadgen_share(self) -> float:
        return self.loadgen_cpu_s / self.elapsed_s if self.elapsed_s else 0.0


@dataclass(frozen=True)
class Load:
    """The traffic of one window: ``concurrency`` closed-loop streams per route, side by side."""

    concurrency: int
    seconds: float
    settle_s: float  # streams start within its first half, and nothing is counted during it
    min_tokens: int
    max_tokens: int


async def measure(routes: list[Route], load: Load, seed: int = 0) -> dict[str, Window]:
    """Streams on every route at once, against the same engine, for one window.

    Each stream waits a random moment before its first request and asks for a random
    number of tokens each time (seeded, so a run can be replayed): streams of equal
    length started together would finish together and come back as one burst, and the
    figures would then measure how a burst meets the engine's batch steps, not the route.
    """
    windows = {r.name: Window(load.seconds) for r in routes}
    started = time.monotonic()
    span = _Span(started + load.settle_s, started + load.settle_s + load.seconds)
    client = WireClient(connect_timeout=5, read_timeout=120)
    try:
        await asyncio.gather(
            *(
                _stream(
                    client, route, load, random.Random(f"{seed}/{route.name}/{i}"), span, windows[route.name]
                )
                for i in range(load.concurrency)
                for route in routes  # interleaved, so no route is always first to send
            )
        )
    finally:
        await client.aclose()
    return windows


@dataclass(frozen=True)
class _Span:
    """The counted part of a window."""

    start: float
    end: float


async def _stream(
    client: WireClient, route: Route, load: Load, rng: random.Random, span: _Span, window: Window
):
    """One closed-loop stream: a request, then the next one as soon as it ends."""
    bodies: dict[int, bytes] = {}
    url = route.url + "/v1/chat/completions"
    await asyncio.sleep(rng.random() * load.settle_s / 2)
    while (sent := time.monotonic()) < span.end:
        length = rng.randint(load.min_tokens, load.max_tokens)
        body = bodies.get(length) or bodies.setdefault(length, _body(route.model, length))
        try:
            first = await _one(client, url, body, span, window)
        except WireError:
            first = None
        if sent < span.start:
            continue
        if first is None:
            window.errors += 1
        else:
            window.ttft_s.append(first - sent)
            window.requests += 1


async def _one(client: WireClient, url: str, body: bytes, span: _Span, window: Window) -> float | None:
    """Stream one answer, counting its tokens that arrive in the span; returns when the first came."""
    first = None
    response = await client.post(url, body, STREAM_HEADERS)
    try:
        if response.status_code != 200:
            return None
        async for chunk in response.chunks():
            hits = chunk.count(b'"content":"')  # one per token event; no JSON parsing (it must stay cheap)
            if hits:
                window.received += hits
                now = time.monotonic()
                first = first or now
                if span.start <= now < span.end:
                    window.tokens += hits
    finally:
        await response.aclose()
    return first


def _body(model: str, max_tokens: int) -> bytes:
    return json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": "Tell me about the cluster."}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "stream": True,
        }
    ).encode()


def run_window(routes: list[Route], load: Load, seed: int = 0) -> tuple[dict[str, Window], Side]:
    """One window on a fresh event loop (uvloop where installed: the load generator must stay cheap)."""
    me = psutil.Process()
    before = {r.name: cpu_seconds(r.procs) for r in routes}
    own, busy = sum(me.cpu_times()[:2]), psutil.cpu_times(percpu=True)
    started = time.monotonic()
    windows = _run(measure(routes, load, seed))
    elapsed = time.monotonic() - started
    side = Side(
        elapsed, sum(me.cpu_times()[:2]) - own, _busy_shares(busy, psutil.cpu_times(percpu=True), elapsed)
    )
    for r in routes:
        windows[r.name].proxy_cpu_s = cpu_seconds(r.procs) - before[r.name]
    return windows, side


def _run(coro):
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def _busy_shares(before, after, elapsed: float) -> tuple[float, ...]:
    def busy(t) -> float:
        return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)

    return tuple(max(0.0, busy(a) - busy(b)) / elapsed for a, b in zip(after, before))


def cpu_seconds(procs) -> float:
    return sum(sum(p.cpu_times()[:2]) for p in procs)


def process_tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


@contextmanager
def favoured(engine_pid: int, relay_pids: list[int]) -> Iterator[str | None]:
    """Put the measured processes ahead of the rest of the machine, all routes alike.

    Other work on a shared machine would otherwise take a proxy's CPU for milliseconds at
    a time, and that would count as the proxy's latency (on a Spark the gateway has cores
    to spare). The proxies and the load generator (this process), which wait for the
    network most of the time, get the lowest real-time priority, so a token is handled the
    moment it arrives; the engine, which computes all the time, only a raised nice level,
    so the rest of the machine keeps some CPU. Every thread of each, as Linux schedules
    threads. Yields how, or None (and changes nothing) where that is not allowed.
    """
    mine = _threads(os.getpid())
    try:
        for tid in _threads(engine_pid):
            os.setpriority(os.PRIO_PROCESS, tid, ENGINE_NICE)
        for tid in mine + [t for pid in relay_pids for t in _threads(pid)]:
            os.sched_setscheduler(tid, os.SCHED_RR, os.sched_param(RELAY_RT_PRIORITY))
    except PermissionError:
        _restore(mine)
        yield None
        return
    try:
        yield f"engine at nice {ENGINE_NICE}, proxies and load generator at real-time priority"
    finally:
        _restore(mine)


ENGINE_NICE = -10
RELAY_RT_PRIORITY = 1


def _threads(pid: int) -> list[int]:
    return [t.id for t in psutil.Process(pid).threads()]


def _restore(tids: list[int]) -> None:
    for tid in tids:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
            os.setpriority(os.PRIO_PROCESS, tid, 0)


def start_gateway_process(config_path: Path, port: int, log: Path):
    """``sparksync switchyard serve`` as its own process (how it runs in use)."""
    cmd = [sys.executable, "-m", "sparksync", "switchyard", "serve", "--config", str(config_path)]
    return running(cmd, log, port)
