"""``sparksync-agent serve``: wires state, collectors, API and mDNS together."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import time
from collections.abc import Callable
from email.utils import formatdate

import uvicorn

from sparksync_agent.atomic import remove_stale_temps
from sparksync_agent.api.app import create_app, request_stop
from sparksync_agent.api.direct import ServerSendKeeper
from sparksync_agent.collectors import CollectorSet
from sparksync_agent.collectors.defaults import default_collectors
from sparksync_agent.collectors.nodeinfo import read_node_info
from sparksync_agent.engines.detect import EngineDetector
from sparksync_agent.fabric.service import FabricService
from sparksync_agent.errors import PortInUseError, StateDirError
from sparksync_agent.models import JobBoard, ModelStore, workloads_using
from sparksync_agent.runtime import AgentOptions, AgentRuntime
from sparksync_agent.state import (
    Endpoint,
    clear_endpoint,
    load_or_create_node_id,
    load_or_create_token,
    pid_alive,
    prepare_state_dir,
    write_endpoint,
)
from sparksync_agent.supervisor.supervisor import Supervisor

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 1  # whole seconds (uvicorn's type); SIGTERM must end the agent within 2 s


def bind_loopback(port: int) -> socket.socket:
    """Bind 127.0.0.1 ourselves: a clear error for a taken port, and port 0 support."""
    # Name the protocol: asyncio turns on TCP_NODELAY only for sockets whose proto is
    # IPPROTO_TCP, and without it every reply stalls ~40 ms on Nagle + delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUseError(
                f"port {port} on 127.0.0.1 is already in use (another agent?). "
                "Stop that process, pick another --port, or use --port 0 for a free one."
            ) from exc
        raise
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


class _AgentServer(uvicorn.Server):
    """uvicorn, told to end our streams the moment a stop signal arrives.

    uvicorn's own main loop wakes every 0.1 s to poll ``should_exit``; on an
    idle node that doubles the agent's wake-ups at 10 Hz and dominates its CPU
    at 1 Hz. This one sleeps until asked to exit; the Date header is refreshed
    from the sampler's tick, so the agent wakes only to sample.
    """

    def __init__(self, config: uvicorn.Config, runtime: AgentRuntime):
        super().__init__(config)
        self.runtime = runtime
        self.loop: asyncio.AbstractEventLoop | None = None
        self._exit_requested: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._exit_requested = asyncio.Event()
        if await self.on_tick(0):  # sets the first Date header
            return
        self.runtime.sampler.every_second(self._refresh_date)
        await self._exit_requested.wait()

    def _refresh_date(self) -> None:
        """What uvicorn's on_tick does once a second (this server sets no notify callback)."""
        date = formatdate(time.time(), usegmt=True).encode()
        headers = [(b"date", date)] if self.config.date_header else []
        self.server_state.default_headers = headers + self.config.encoded_headers

    def request_exit(self) -> None:
        """Stop serving; safe from a signal handler or any thread."""
        self.should_exit = True
        if self.loop is not None:
            # Signal handlers run between bytecodes; hop onto the loop safely.
            self.loop.call_soon_threadsafe(self._on_exit_requested)

    def _on_exit_requested(self) -> None:
        request_stop(self.runtime)
        if self._exit_requested is not None:
            self._exit_requested.set()

    def handle_exit(self, sig, frame) -> None:
        super().handle_exit(sig, frame)
        self.request_exit()


def build_runtime(options: AgentOptions) -> tuple[AgentRuntime, str]:
    state_dir = prepare_state_dir(options.state_dir)
    remove_stale_temps(state_dir)  # what a writer killed mid-write left behind
    token = load_or_create_token(state_dir)
    node_id = load_or_create_node_id(state_dir)
    info = read_node_info(node_id)
    supervisor = Supervisor(state_dir)
    collectors = CollectorSet(default_collectors(workloads=supervisor.board))
    runtime = AgentRuntime(options, node_id, info, collectors)
    runtime.supervisor, runtime.engines = supervisor, EngineDetector()
    runtime.fabric = FabricService(node_id, state_dir)
    runtime.models = ModelStore(state_dir, in_use=lambda paths: workloads_using(supervisor, paths))
    runtime.model_jobs = JobBoard(runtime.models)
    return runtime, token


def serve(options: AgentOptions) -> None:
    runtime, token = build_runtime(options)
    sock = bind_loopback(options.port)
    port = sock.getsockname()[1]
    server_box: dict[str, _AgentServer] = {}

    async def on_start(rt: AgentRuntime) -> None:
        server = server_box["server"]
        await _start_advertising(rt)
        _publish_endpoint(rt, port)
        if rt.options.parent_pid:
            rt.sampler.every_second(_parent_watch(server, rt.options.parent_pid))
        log.info("agent %s serving on 127.0.0.1:%d at %.1f Hz", rt.node_id[:8], port, rt.options.sample_hz)

    async def on_stop(rt: AgentRuntime) -> None:
        clear_endpoint(rt.options.state_dir, rt.run_id)
        await _stop_advertising(rt)
        rt.collectors.close()
        log.info("agent stopped")

    app = create_app(runtime, token, on_start=on_start, on_stop=on_stop)
    config = uvicorn.Config(
        ServerSendKeeper(app),  # so the stream can write samples from the tick (api/direct.py)
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    server = server_box["server"] = _AgentServer(config, runtime)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        raise StateDirError("the agent did not start; see the log lines above")


def _parent_watch(server: _AgentServer, parent_pid: int) -> Callable[[], None]:
    """An agent the desktop app started must not outlive it, even if the app crashes."""

    def check() -> None:
        if not server.should_exit and not pid_alive(parent_pid):
            log.info("parent process %d is gone; stopping", parent_pid)
            server.request_exit()

    return check


def _publish_endpoint(runtime: AgentRuntime, port: int) -> None:
    write_endpoint(runtime.options.state_dir, Endpoint(port=port, pid=os.getpid(), run_id=runtime.run_id))


async def _start_advertising(runtime: AgentRuntime) -> None:
    if not runtime.options.advertise:
        return
    from sparksync_agent.advertise import Advertiser  # zeroconf loads only when asked for

    interfaces = runtime.options.interfaces or node_ipv4_addresses()
    latest = runtime.sampler.latest
    mem_total = latest.memory.total_bytes if latest and latest.memory else 0
    advertiser = Advertiser(runtime.info, mem_total, interfaces, ssh_port=runtime.options.ssh_port)
    try:
        await advertiser.start()
    except Exception as exc:  # noqa: BLE001 - mDNS is a convenience; the API must still serve
        log.warning("mDNS advertisement failed, serving without it: %s", exc)
        await advertiser.stop()
        return
    runtime.advertiser = advertiser


async def _stop_advertising(runtime: AgentRuntime) -> None:
    if runtime.advertiser is not None:
        await runtime.advertiser.stop()
        runtime.advertiser = None


def node_ipv4_addresses() -> list[str]:
    """The node's own non-loopback IPv4 addresses: explicit, never 'all interfaces'."""
    import psutil

    return sorted(
        addr.address
        for addrs in psutil.net_if_addrs().values()
        for addr in addrs
        if addr.family == socket.AF_INET and not addr.address.startswith("127.")
    )
