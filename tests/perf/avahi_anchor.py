"""Avahi as the discovery anchor: a private avahi-daemon inside one lab node.

``avahi-browse`` asks avahi-daemon over the D-Bus *system* bus, so the node
gets a system bus of its own: a ``dbus-daemon`` with a config of ours whose
socket lies in the test's tmp dir (libdbus follows DBUS_SYSTEM_BUS_ADDRESS).
avahi-daemon then runs in the node's namespace, bound to ``eth0`` there, with
publishing off, and with a tmpfs over /run in its private mount namespace for
its hard-wired pid file and socket (/run/avahi-daemon), so it can neither
clash with nor be mistaken for a host's own Avahi. Nothing of it reaches the
host's interfaces, its system bus or its /run.

Each ``cold()`` block is a freshly started avahi-daemon, i.e. an empty cache:
the same cold start that our own discovery gets as a fresh process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.lab.netlab import Lab, LabNode, _stop_popen

START_TIMEOUT_S = 10.0
READY_LINE = "Server startup complete"
TOOLS = ("dbus-daemon", "avahi-daemon", "avahi-browse", "stdbuf")

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"""

AVAHI_CONFIG = """[server]
host-name={host}
use-ipv4=yes
use-ipv6=no
allow-interfaces={iface}
enable-dbus=yes
[wide-area]
enable-wide-area=no
[publish]
disable-publishing=yes
disable-user-service-publishing=yes
publish-addresses=no
publish-hinfo=no
publish-workstation=no
publish-domain=no
[reflector]
enable-reflector=no
"""

# The daemon's runtime dir is compiled in; the tmpfs stays inside this command's mount namespace.
_PRIVATE_RUN = 'mount -t tmpfs sslab-avahi-run /run && exec "$@"'


def missing_tools() -> str | None:
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install avahi-daemon avahi-utils dbus)"
    return None


@dataclass
class Browse:
    """One ``avahi-browse -rpt`` run: when each instance resolved, and when the tool exited."""

    resolved_at: dict[str, float] = field(default_factory=dict)  # instance name -> s after launch
    resolved: dict[str, tuple[str, str]] = field(default_factory=dict)  # instance -> (host, address)
    exited_after_s: float = 0.0
    returncode: int | None = None
    stderr: str = ""

    def all_resolved_after(self, count: int) -> float | None:
        """Seconds until ``count`` instances had resolved; None when fewer ever did."""
        times = sorted(self.resolved_at.values())
        return times[count - 1] if len(times) >= count else None


class PrivateAvahi:
    """A system bus and, inside ``cold()``, an avahi-daemon, both in ``node``'s namespace."""

    def __init__(self, lab: Lab, node: LabNode, workdir: Path):
        self.lab, self.node, self.workdir = lab, node, workdir
        workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.socket = workdir / "system_bus_socket"
        self.env = {**os.environ, "DBUS_SYSTEM_BUS_ADDRESS": f"unix:path={self.socket}"}
        self._bus: subprocess.Popen | None = None

    def __enter__(self) -> PrivateAvahi:
        config = self.workdir / "bus.conf"
        config.write_text(BUS_CONFIG.format(socket=self.socket))
        argv = ["dbus-daemon", "--nofork", f"--config-file={config}", "--print-address=1"]
        with (self.workdir / "dbus.log").open("wb") as log:
            self._bus = self.lab.popen(self.node, argv, stdout=subprocess.PIPE, stderr=log)
        if not self.lab.read_line(self._bus, START_TIMEOUT_S).startswith("unix:"):
            raise AssertionError(f"dbus-daemon did not start: {(self.workdir / 'dbus.log').read_text()}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bus is not None:
            _stop_popen(self._bus)

    @contextlib.contextmanager
    def cold(self) -> Iterator[None]:
        """A freshly started avahi-daemon (empty cache) for the duration of the block."""
        config = self.workdir / "avahi-daemon.conf"
        config.write_text(AVAHI_CONFIG.format(host=f"sslab-anchor-{self.node.index}", iface=self.node.iface))
        argv = ["sh", "-c", _PRIVATE_RUN, "sh", "avahi-daemon", "-f", str(config),
                "--no-drop-root", "--no-chroot", "--no-rlimits", "--no-proc-title"]  # fmt: skip
        # The daemon logs to stderr; merged into the pipe that Lab.read_line reads.
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
        daemon = self.lab.popen(self.node, argv, env=self.env, **pipes)
        try:
            self._wait_started(daemon)
            yield
        finally:
            _stop_popen(daemon)

    def _wait_started(self, daemon: subprocess.Popen) -> None:
        seen: list[str] = []
        deadline = time.monotonic() + START_TIMEOUT_S
        while not seen or READY_LINE not in seen[-1]:
            line = self.lab.read_line(daemon, max(0.01, deadline - time.monotonic()))
            if not line:
                raise AssertionError("avahi-daemon exited while starting:\n" + "".join(seen))
            seen.append(line)

    def browse(self, service_type: str, timeout_s: float = 15.0) -> Browse:
        """``avahi-browse -rpt TYPE``, line-buffered (stdbuf) so each line is timed as it comes."""
        argv = ["stdbuf", "-oL", "avahi-browse", "-rpt", service_type]
        result = Browse()
        started = time.monotonic()
        proc = self.lab.popen(self.node, argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            while line := self.lab.read_line(proc, max(0.01, timeout_s - (time.monotonic() - started))):
                _record(result, line, time.monotonic() - started)
            result.returncode = proc.wait(timeout_s)
            result.exited_after_s = time.monotonic() - started
            result.stderr = proc.stderr.read().decode(errors="replace").strip()
        finally:
            _stop_popen(proc)
        return result


def _record(result: Browse, line: str, at: float) -> None:
    # Parsable output: "=;iface;proto;instance;type;domain;host;address;port;txt" per resolved service.
    fields = line.rstrip("\n").split(";")
    if fields[0] == "=" and len(fields) >= 9:
        instance = fields[3]
        result.resolved_at.setdefault(instance, at)
        result.resolved[instance] = (fields[6], fields[7])

