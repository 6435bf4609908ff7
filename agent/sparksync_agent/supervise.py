"""``sparksync-agent supervise``: keep ``serve`` running on a node without user systemd.

It does what the systemd user unit does elsewhere: runs ``serve`` as a child,
restarts it when it exits (with growing pauses, so a crashing agent does not
spin), passes SIGTERM on to it, and writes where a client looks:

- ``--pid-file``: the supervisor's own pid, so a deploy or an uninstall can stop it;
- ``--log-file``: the supervisor's lines and the agent's stderr, appended;
- ``--state-file``: JSON with the child's pid, how often it was started and how
  its last run ended, so a deploy can tell a crash loop from a slow start.

The child gets ``--parent-pid`` of the supervisor: if the supervisor is killed
outright, the agent stops by itself within a second instead of lingering.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sparksync_agent._version import __version__ as AGENT_VERSION
from sparksync_agent.atomic import write_atomic
from sparksync_agent.errors import AgentError
from sparksync_agent.state import pid_alive

log = logging.getLogger(__name__)

STOP_GRACE_S = 5.0  # the agent stops in under 2 s; SIGKILL only a stuck one
LOG_ROTATE_BYTES = 5 * 1024 * 1024


class SupervisorRunningError(AgentError):
    """Another supervisor already runs for this pid file."""

    exit_code = 2


@dataclass(frozen=True)
class Backoff:
    """Pause before restart n: ``first_s * 2**n`` capped at ``max_s``; reset after a long, healthy run."""

    first_s: float = 0.5
    max_s: float = 30.0
    healthy_after_s: float = 60.0

    def delay(self, failures: int) -> float:
        return min(self.max_s, self.first_s * 2 ** min(failures, 16))


@dataclass(frozen=True)
class SuperviseOptions:
    pid_file: Path
    log_file: Path
    state_file: Path | None = None
    serve_args: list[str] = field(default_factory=list)  # passed on to `serve`
    backoff: Backoff = Backoff()


class Supervisor:
    """Runs ``serve`` until stopped; one instance per pid file."""

    def __init__(self, options: SuperviseOptions):
        self.options = options
        self._stop = threading.Event()
        self._child: subprocess.Popen | None = None
        self._starts = 0
        self._last_exit: int | None = None

    def run(self) -> int:
        _claim_pid_file(self.options.pid_file)
        try:
            self._install_signals()
            self._loop()
        finally:
            _release_pid_file(self.options.pid_file)
        self._say("supervisor stopped")
        return 0

    def stop(self) -> None:
        """Stop the child and the loop (safe from a signal handler)."""
        self._stop.set()
        child = self._child
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    # --- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            started = time.monotonic()
            code = self._run_child()
            if self._stop.is_set():
                break
            failures = 0 if time.monotonic() - started >= self.options.backoff.healthy_after_s else failures
            delay = self.options.backoff.delay(failures)
            failures += 1
            self._say(
                f"agent exited with status {code}; restarting in {delay:g} s (start #{self._starts + 1})"
            )
            self._stop.wait(delay)

    def _run_child(self) -> int:
        argv = [sys.executable, "-m", "sparksync_agent", "serve", *self.options.serve_args]
        argv += ["--parent-pid", str(os.getpid())]
        with open(self.options.log_file, "ab", buffering=0) as log_fh:
            self._child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_fh, stderr=log_fh)
        self._starts += 1
        self._say(f"started agent {AGENT_VERSION} as pid {self._child.pid}")
        self._write_state()
        if self._stop.is_set():  # a stop that came while the child was being made
            self._child.send_signal(signal.SIGTERM)
        code = self._wait_child()
        self._last_exit = code
        self._write_state()
        return code

    def _wait_child(self) -> int:
        child = self._child
        assert child is not None
        while True:
            try:
                return child.wait(timeout=STOP_GRACE_S if self._stop.is_set() else None)
            except subprocess.TimeoutExpired:
                self._say(f"agent pid {child.pid} ignored SIGTERM for {STOP_GRACE_S:g} s; killing it")
                child.kill()

    def _install_signals(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop())
        # Detached from any terminal; a hangup is no reason to stop.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    # --- what others read ----------------------------------------------------------------------

    def _write_state(self) -> None:
        if self.options.state_file is None:
            return
        child = self._child
        state = {
            "version": 1,
            "supervisor_pid": os.getpid(),
            "agent_version": AGENT_VERSION,
            "child_pid": child.pid if child is not None and child.poll() is None else None,
            "starts": self._starts,
            "last_exit": self._last_exit,
            "updated_at": time.time(),
        }
        try:
            write_atomic(self.options.state_file, json.dumps(state), mode=0o600)
        except OSError as exc:  # a full disk must not stop the agent itself
            self._say(f"cannot write {self.options.state_file}: {exc}")

    def _say(self, line: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            with open(self.options.log_file, "a") as fh:
                fh.write(f"{stamp} supervise[{os.getpid()}]: {line}\n")
        except OSError:
            pass  # the log is for people; never a reason to stop


def _claim_pid_file(path: Path) -> None:
    other = _live_supervisor(path)
    if other is not None:
        raise SupervisorRunningError(
            f"a supervisor already runs as pid {other} (pid file {path}); stop it first with 'kill {other}'"
        )
    write_atomic(path, f"{os.getpid()}\n", mode=0o600)


def _release_pid_file(path: Path) -> None:
    try:
        if int(path.read_text().strip()) == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def _live_supervisor(path: Path) -> int | None:
    """The pid in ``path`` if that process is alive and is a supervisor (not a reused pid)."""
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    if pid == os.getpid() or not pid_alive(pid):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid  # no /proc to ask: assume it is ours rather than run two
    return pid if b"supervise" in cmdline else None


def rotate_log(path: Path, limit: int = LOG_ROTATE_BYTES) -> None:
    """Keep one older log (``.1``) once the log passes ``limit`` bytes."""
    try:
        if path.stat().st_size > limit:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass


def supervise(options: SuperviseOptions) -> int:
    options.pid_file.parent.mkdir(parents=True, exist_ok=True)
    options.log_file.parent.mkdir(parents=True, exist_ok=True)
    rotate_log(options.log_file)
    return Supervisor(options).run()
