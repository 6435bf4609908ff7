"""Glances in server mode on loopback, the anchor the agent's overhead is measured against.

Glances is the monitor users would otherwise run (psutil-based, like the agent).
Its XML-RPC server refreshes its stats when a client asks for them (no more often
than ``--cached-time``, which we set to 0), so a client polling ``getAll`` at N Hz
makes it sample at N Hz, exactly as the agent does at ``--sample-hz N``.

It must stay on this machine: it binds 127.0.0.1 only, its mDNS announce and
its PyPI update check are off, and the plugins that can reach beyond loopback
(public IP lookup, cloud metadata, port scanner) or talk to other daemons
(containers, VMs) are disabled. That also makes it lighter, so the comparison
is conservative: the real default Glances costs more.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import xmlrpc.client
from dataclasses import dataclass, field
from pathlib import Path

from tests.perf.probes import BackgroundLoop

STARTUP_TIMEOUT_S = 30.0
DISABLED_PLUGINS = "ip,cloud,ports,containers,vms"
# Host-header allowlist: also silences Glances' DNS-rebinding warning.
_CONFIG = """\
[global]
check_update=false
[outputs]
xmlrpc_allowed_hosts=127.0.0.1,localhost
"""


def glances_executable() -> str:
    """The glances next to this interpreter (the venv's pinned one), else on PATH."""
    beside = Path(sys.executable).with_name("glances")
    found = str(beside) if beside.exists() else shutil.which("glances")
    if not found:
        raise RuntimeError("glances is not installed; run 'make setup' (it installs the [perf] extra)")
    return found


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class GlancesServer:
    proc: subprocess.Popen
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/RPC2"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_glances(workdir: Path, refresh_s: float) -> GlancesServer:
    """``glances -s`` on 127.0.0.1 with a private HOME, so it reads and writes nothing of the user's."""
    home = workdir / "glances-home"
    (home / "cache").mkdir(parents=True, exist_ok=True)
    config = workdir / "glances.conf"
    config.write_text(_CONFIG)
    port = free_loopback_port()
    argv = [
        glances_executable(), "-s", "-B", "127.0.0.1", "-p", str(port), "-C", str(config),
        "--disable-autodiscover", "--disable-check-update", "--disable-webui",
        "--disable-plugin", DISABLED_PLUGINS, "--cached-time", "0", "-t", str(refresh_s),
    ]  # fmt: skip
    env = dict(os.environ, HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), XDG_CONFIG_HOME=str(home))
    log_path = workdir / "glances.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    server = GlancesServer(proc, port, log_path)
    try:
        _wait_ready(server)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: GlancesServer) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            log = server.log_path.read_text(errors="replace")
            raise RuntimeError(f"glances exited with {server.proc.returncode}:\n{log}")
        try:
            xmlrpc.client.ServerProxy(server.url).init()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"glances did not answer on {server.url} in {STARTUP_TIMEOUT_S:.0f} s")


@dataclass
class GlancesPoller(BackgroundLoop):
    """A client that fetches all of Glances' stats at a fixed rate, as ``glances -c`` does."""

    url: str
    hz: float
    polls: int = 0
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    thread_name = "perf-glances-poller"


    def _run(self) -> None:
        proxy = xmlrpc.client.ServerProxy(self.url)
        period, deadline = 1.0 / self.hz, time.monotonic()
        try:
            while not self._stop.is_set():
                proxy.getAll()
                self.polls += 1
                deadline = max(deadline + period, time.monotonic())  # on the clock, never bursting
                self._stop.wait(deadline - time.monotonic())
        except BaseException as exc:  # noqa: BLE001 - reported by the benchmark
            self.error = exc
