"""Keyrings for tests: an in-memory backend, and a real Secret Service.

``real_keyring`` runs gnome-keyring-daemon on a private D-Bus session bus
(HOME and the XDG dirs moved into tmp_path), so secrets go through the same
D-Bus Secret Service API a desktop uses, and nothing touches the user's
keyring. The root conftest loads this module as a plugin, so any test can
ask for ``real_keyring``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import keyring
import keyring.backend
import pytest
from keyring.backends import SecretService

KEYRING_PASSWORD = "test-keyring-password"
SECRETS_BUS_NAME = "org.freedesktop.secrets"
_START_TIMEOUT_S = 10.0

# A session bus with no service activation: only the daemons this fixture
# starts can own names, so nothing else gets spawned behind our back.
_BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A keyring backend that keeps secrets in a dict (for unit tests)."""

    priority = 1

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.entries.pop((service, username), None) is None:
            raise keyring.errors.PasswordDeleteError("no such password")


@contextmanager
def global_keyring(backend: keyring.backend.KeyringBackend) -> Iterator[keyring.backend.KeyringBackend]:
    """Make ``backend`` keyring's process-wide choice inside the block, then restore the old one."""
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


@dataclass(frozen=True)
class RealKeyring:
    backend: SecretService.Keyring
    bus_address: str
    env: dict[str, str]  # the environment a subprocess needs to reach this keyring


@pytest.fixture
def real_keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RealKeyring]:
    """gnome-keyring on a private session bus, unlocked, and selected as keyring's backend."""
    for tool in ("dbus-daemon", "gnome-keyring-daemon"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (Debian: apt-get install dbus gnome-keyring)")
    root = tmp_path / "keyring-session"
    env = _session_env(root)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with _daemons(root) as address:
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
        with global_keyring(SecretService.Keyring()) as backend:
            yield RealKeyring(backend, address, {**env, "DBUS_SESSION_BUS_ADDRESS": address})


def _session_env(root: Path) -> dict[str, str]:
    dirs = {name: root / name for name in ("home", "run", "data", "config")}
    for path in dirs.values():
        path.mkdir(parents=True, mode=0o700)
    return {
        "HOME": str(dirs["home"]),
        "XDG_RUNTIME_DIR": str(dirs["run"]),
        "XDG_DATA_HOME": str(dirs["data"]),
        "XDG_CONFIG_HOME": str(dirs["config"]),  # keyring's own config file is looked up here
    }


@contextmanager
def _daemons(root: Path) -> Iterator[str]:
    started: list[subprocess.Popen] = []
    try:
        address = _start_bus(root, started)
        _start_gnome_keyring(root, {**os.environ, "DBUS_SESSION_BUS_ADDRESS": address}, started)
        _wait_for_name(address, SECRETS_BUS_NAME, started)
        yield address
    finally:
        for process in reversed(started):  # the keyring first, then its bus
            _stop(process)


def _start_bus(root: Path, started: list[subprocess.Popen]) -> str:
    config = root / "bus.conf"
    config.write_text(_BUS_CONFIG.format(socket=root / "run" / "bus"))
    with (root / "dbus.log").open("wb") as log:
        bus = subprocess.Popen(
            ["dbus-daemon", "--nofork", f"--config-file={config}", "--print-address=1"],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    started.append(bus)
    address = bus.stdout.readline().strip()
    if not address:
        pytest.fail(f"dbus-daemon did not start: {(root / 'dbus.log').read_text()}")
    return address


def _start_gnome_keyring(root: Path, env: dict[str, str], started: list[subprocess.Popen]) -> None:
    with (root / "gnome-keyring.log").open("wb") as log:
        daemon = subprocess.Popen(
            ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
    started.append(daemon)
    # --unlock reads the login keyring's password from stdin (creating the
    # keyring with it the first time) until EOF.
    daemon.stdin.write(KEYRING_PASSWORD.encode())
    daemon.stdin.close()


def _wait_for_name(address: str, name: str, started: list[subprocess.Popen]) -> None:
    from jeepney.bus_messages import message_bus
    from jeepney.io.blocking import open_dbus_connection

    deadline = time.monotonic() + _START_TIMEOUT_S
    with open_dbus_connection(bus=address) as connection:
        while time.monotonic() < deadline:
            if connection.send_and_get_reply(message_bus.NameHasOwner(name)).body[0]:
                return
            if any(process.poll() is not None for process in started):
                break
            threading.Event().wait(0.02)
    pytest.fail(f"{name} did not appear on the test session bus within {_START_TIMEOUT_S} s")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


def keyring_cli(real: RealKeyring, *args: str) -> subprocess.CompletedProcess:
    """Run keyring's own command (``python -m keyring ...``) in a fresh process against ``real``.

    A fresh process proves a secret reached the Secret Service, not just this
    process's memory.
    """
    env = {**os.environ, **real.env}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    return subprocess.run(
        [sys.executable, "-m", "keyring", *args], env=env, capture_output=True, text=True, timeout=30
    )
