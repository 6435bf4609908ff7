"""Custom apps: a web app on a node, reached through an SSH tunnel (as in NVIDIA Sync).

An app has a name, the port it listens on at the node's loopback, an
optional start script run on the node while the app is open, and an
optional path to open in the browser. The DGX Dashboard (port 11000) is the
built-in one. The list lives in ``custom_apps.json`` in the config dir
(versioned, written atomically).

``AppSession`` is one open app on one node: the tunnel and, if there is one,
the script. ``close()`` closes the tunnel and stops the script: the script
runs in its own session on the node, and the wrapper that started it kills
that whole process group once our channel's input ends, which also happens
when the SSH link drops, so nothing is left running.
"""

from __future__ import annotations

import builtins
import collections
import json
import logging
import re
import shlex
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import paramiko
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.file_lock import exclusive_lock
from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.core.ssh.transports import NodeTransports
from sparksync.core.ssh.tunnel import Tunnel, open_tunnel

log = logging.getLogger(__name__)

APPS_VERSION = 1
APPS_FILE = "custom_apps.json"
DGX_DASHBOARD_PORT = 11000
SCRIPT_STOP_TIMEOUT_S = 10.0
_OUTPUT_LINES = 20

# Runs the user's script ($1) in a new session (so its pid is its process
# group), then waits for our input to end and kills the group: closing the
# channel, or losing the link, stops the script and everything it started.
# ``kill -TERM -PID`` (no "--": dash's kill refuses it) reaches the whole group;
# a script that ignores TERM gets KILL 5 s later.
_WRAPPER = (
    'setsid sh -c "$1" </dev/null & pid=$!\n'
    "cat >/dev/null\n"
    'kill -TERM -"$pid" 2>/dev/null\n'
    '(sleep 5; kill -KILL -"$pid" 2>/dev/null) </dev/null >/dev/null 2>&1 &\n'
    'wait "$pid"\n'
)


class CustomAppError(SparkSyncError):
    """A custom app could not be saved, found or opened."""


class CustomApp(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=60)
    remote_port: int = Field(ge=1, le=65535)
    start_script: str | None = None  # shell commands, run on the node while the app is open
    browser_path: str | None = None  # e.g. "/" or "/lab"; None: no browser

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if value != value.strip() or any(ord(c) < 32 for c in value):
            raise ValueError("a name without leading/trailing blanks or control characters")
        return value

    @field_validator("browser_path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^/[^\s]*$", value):
            raise ValueError("a path starting with '/' and without blanks, such as /lab")
        return value

    @field_validator("start_script")
    @classmethod
    def _script(cls, value: str | None) -> str | None:
        return value if value and value.strip() else None


DGX_DASHBOARD = CustomApp(name="DGX Dashboard", remote_port=DGX_DASHBOARD_PORT, browser_path="/")


class CustomAppsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1)
    apps: list[CustomApp]


class CustomApps:
    """The user's custom apps, kept in ``path``."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else config_dir() / APPS_FILE

    def list(self) -> list[CustomApp]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return _parse(raw, self.path)

    def get(self, name: str) -> CustomApp:
        if name == DGX_DASHBOARD.name:
            return DGX_DASHBOARD
        for app in self.list():
            if app.name == name:
                return app
        known = ", ".join(a.name for a in self.list()) or "none"
        raise CustomAppError(
            f"No custom app is named {name!r} (defined: {known}). Add it with `sparksync app add`."
        )

    def add(self, app: CustomApp, replace: bool = False) -> None:
        if app.name == DGX_DASHBOARD.name:
            raise CustomAppError(f"{app.name!r} is built in; give your app another name.")
        with self._locked():
            apps = self.list()
            if any(a.name == app.name for a in apps) and not replace:
                raise CustomAppError(
                    f"A custom app named {app.name!r} exists; remove it first or choose another name."
                )
            self._write([a for a in apps if a.name != app.name] + [app])

    def remove(self, name: str) -> CustomApp:
        with self._locked():
            app = self.get(name)
            self._write([a for a in self.list() if a.name != name])
        return app

    def _locked(self):
        ensure_dir(self.path.parent)
        return exclusive_lock(self.path.with_name(self.path.name + ".lock"))

    def _write(self, apps: builtins.list[CustomApp]) -> None:  # `list` here is the method above
        data = CustomAppsFile(version=APPS_VERSION, apps=apps).model_dump(mode="json")
        write_atomic(self.path, json.dumps(data, indent=2) + "\n", mode=0o600)


def _parse(raw: bytes, path: Path) -> list[CustomApp]:
    try:
        data = json.loads(raw)
        version = data.get("version") if isinstance(data, dict) else None
        if isinstance(version, int) and version > APPS_VERSION:
            raise CustomAppError(
                f"{path} comes from a newer SparkSync (format version {version}); it was left untouched. "
                "Upgrade SparkSync to use it."
            )
        return CustomAppsFile.model_validate(data).apps
    except (UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
        raise CustomAppError(
            f"The custom apps file {path} cannot be read ({exc.__class__.__name__}); it was left untouched. "
            f"Fix it or move it away (mv '{path}' '{path}.bad')."
        ) from exc


# --- running an app -----------------------------------------------------------------------------


class RemoteScript:
    """A start script running on a node for as long as this object is open."""

    def __init__(self, transport: paramiko.Transport, script: str, label: str):
        self.label = label
        self.output: collections.deque[str] = collections.deque(maxlen=_OUTPUT_LINES)
        self._channel = transport.open_session(timeout=15)
        self._channel.set_combine_stderr(True)
        self._channel.exec_command(shlex.join(["sh", "-c", _WRAPPER, "sparksync-app", script]))
        self._reader = threading.Thread(target=self._read, name=f"app-script-{label}", daemon=True)
        self._reader.start()

    def running(self) -> bool:
        return not self._channel.exit_status_ready()

    def stop(self, timeout: float = SCRIPT_STOP_TIMEOUT_S) -> None:
        try:
            self._channel.shutdown_write()  # the wrapper's `cat` ends: it kills the script's group
            deadline = time.monotonic() + timeout
            while not self._channel.exit_status_ready() and time.monotonic() < deadline:
                self._channel.status_event.wait(0.2)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            log.info(
                "%s: stopping the start script: %s (the node ends it when the link drops)", self.label, exc
            )
        finally:
            self._channel.close()
            self._reader.join(timeout)

    def _read(self) -> None:
        pending = b""
        try:
            while chunk := self._channel.recv(4096):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                self.output.extend(line.decode(errors="replace") for line in lines)
        except (OSError, EOFError, paramiko.SSHException):
            pass
        if pending:
            self.output.append(pending.decode(errors="replace"))


class AppSession:
    """One custom app open on one node."""

    def __init__(self, app: CustomApp, node: str, tunnel: Tunnel, script: RemoteScript | None):
        self.app, self.node, self.tunnel, self.script = app, node, tunnel, script

    @property
    def url(self) -> str | None:
        if self.app.browser_path is None:
            return None
        return f"http://127.0.0.1:{self.tunnel.local_port}{self.app.browser_path}"

    def wait_ready(self, timeout: float, cancel: threading.Event | None = None) -> bool:
        """Wait until the app answers through the tunnel (a started script may need a moment)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cancel is not None and cancel.is_set():
                return False
            if _answers(self.tunnel.local_port):
                return True
            if self.script is not None and not self.script.running():
                return False
            (cancel or threading.Event()).wait(0.25)
        return False

    def close(self) -> None:
        try:
            self.tunnel.close()
        finally:
            if self.script is not None:
                self.script.stop()
        log.info("closed %s on %s", self.app.name, self.node)


def open_app(app: CustomApp, node: str, transports: NodeTransports, timeout: float = 30.0) -> AppSession:
    """Start the app's script on ``node`` (if any) and open its tunnel."""
    tunnel = open_tunnel(transports, node, app.remote_port, timeout=timeout)
    try:
        script = (
            RemoteScript(transports.get(node, timeout), app.start_script, f"{node}/{app.name}")
            if app.start_script
            else None
        )
    except BaseException:
        tunnel.close()
        raise
    return AppSession(app, node, tunnel, script)


def _answers(port: int) -> bool:
    """True once something at the far end of the tunnel accepts and keeps a connection."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.settimeout(1.0)
            try:
                # Our tunnel accepts every connection; a refused remote port shows as an immediate EOF.
                return sock.recv(1, socket.MSG_PEEK) != b""
            except TimeoutError:
                return True  # open and silent, as an HTTP server waiting for a request
    except OSError:
        return False


class AppSessions:
    """The apps open now, by (node, app name); ``close_all`` when the app quits."""

    def __init__(self, transports: Callable[[], NodeTransports]):
        self._transports = transports
        self._sessions: dict[tuple[str, str], AppSession] = {}
        self._lock = threading.Lock()

    def open(self, app: CustomApp, node: str, timeout: float = 30.0) -> AppSession:
        key = (node, app.name)
        with self._lock:
            session = self._sessions.get(key)
        if session is not None:
            return session  # opening it again shows the same tunnel
        session = open_app(app, node, self._transports(), timeout)
        with self._lock:
            if key in self._sessions:  # another thread won the race; keep one
                session.close()
                return self._sessions[key]
            self._sessions[key] = session
        return session

    def open_sessions(self) -> list[AppSession]:
        with self._lock:
            return list(self._sessions.values())

    def close(self, node: str, name: str) -> None:
        with self._lock:
            session = self._sessions.pop((node, name), None)
        if session is not None:
            session.close()

    def close_all(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            try:
                session.close()
            except Exception:  # one stuck session must not keep the others open
                log.exception("closing %s on %s failed", session.app.name, session.node)
