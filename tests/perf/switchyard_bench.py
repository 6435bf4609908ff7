"""What the Switchyard overhead benchmark drives: nginx as the anchor proxy, and a streaming load generator.

The load generator runs in the benchmark's own process with asyncio; the
gateway and nginx each run in their own processes, as they would in use.
"""

from __future__ import annotations

import asyncio
import json
import os
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


@dataclass
class Window:
    """One target measured for a while at one concurrency."""

    ttft_s: list[float] = field(default_factory=list)
    tokens: int = 0
    requests: int = 0
    errors: int = 0
    wall_s: float = 0.0
    proxy_cpu_s: float = 0.0  # CPU time the proxy under test used meanwhile (0 for direct)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else 0.0


async def measure(url: str, model: str, concurrency: int, seconds: float, max_tokens: int) -> Window:
    """``concurrency`` workers stream chat completions back to back for ``seconds``.

    The workers use the gateway's own lean HTTP client: at thousands of chunks a second httpx
    would make the load generator, not the proxy under test, the bottleneck of the measurement.
    """
    window = Window()
    deadline = time.monotonic() + seconds
    client = WireClient(connect_timeout=5, read_timeout=120)
    started = time.monotonic()
    try:
        await asyncio.gather(
            *(_worker(client, url, model, max_tokens, deadline, window) for _ in range(concurrency))
        )
    finally:
        await client.aclose()
    window.wall_s = time.monotonic() - started
    return window


async def _worker(client: WireClient, url: str, model: str, max_tokens: int, deadline: float, window: Window):
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": "Tell me about the cluster."}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "stream": True,
        }
    ).encode()
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    while time.monotonic() < deadline:
        sent = time.monotonic()
        first, count = None, 0
        try:
            response = await client.post(url + "/v1/chat/completions", body, headers)
            try:
                if response.status_code != 200:
                    window.errors += 1
                    continue
                async for chunk in response.chunks():
                    hits = chunk.count(b'"content":"')
                    if hits and first is None:
                        first = time.monotonic()
                    count += hits
            finally:
                await response.aclose()
        except WireError:
            window.errors += 1
            continue
        if first is not None:
            window.ttft_s.append(first - sent)
        window.tokens += count
        window.requests += 1


def run_windows(
    url: str, model: str, concurrency: int, seconds: float, max_tokens: int, procs: list[psutil.Process] = ()
) -> Window:
    before = cpu_seconds(procs)
    window = asyncio.run(measure(url, model, concurrency, seconds, max_tokens))
    window.proxy_cpu_s = cpu_seconds(procs) - before
    return window


def cpu_seconds(procs) -> float:
    return sum(sum(p.cpu_times()[:2]) for p in procs)


def process_tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


@contextmanager
def cpus_split(engine_pid: int) -> Iterator[bool]:
    """Give the engine CPU 0 and everything started in the block (and this process) the others.

    On a Spark the engine computes on the GPU, so the gateway's CPU never slows it; on a
    small CPU-only box they would fight for the same cores and the figures would measure
    that fight. Yields False (and changes nothing) on a single-CPU machine.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        yield False
        return
    for thread in psutil.Process(engine_pid).threads():
        os.sched_setaffinity(thread.id, {cpus[0]})
    os.sched_setaffinity(0, set(cpus[1:]))
    try:
        yield True
    finally:
        os.sched_setaffinity(0, set(cpus))


def start_gateway_process(config_path: Path, port: int, log: Path):
    """``sparksync switchyard serve`` as its own process (how it runs in use)."""
    cmd = [sys.executable, "-m", "sparksync", "switchyard", "serve", "--config", str(config_path)]
    return running(cmd, log, port)
