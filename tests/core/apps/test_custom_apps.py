"""Custom apps: the stored list, and an app opened on a real sshd node (tunnel + start script)."""

from __future__ import annotations

import http.client
import json
import socket
import time

import psutil
import pytest

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.apps.custom_apps import DGX_DASHBOARD, AppSessions, CustomApp, CustomAppError, CustomApps
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.connection import SshSettings
from sparksync.core.ssh.pairing import PairRequest, pair_node
from sparksync.core.base.backoff import Backoff
from sparksync.core.ssh.transports import NodeTransports
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.nsnet import in_netns
from tests.lab.sshd import PASSWORD

FAST = SshSettings(connect_timeout_s=2, handshake_timeout_s=5, auth_timeout_s=10, command_timeout_s=10)


def test_apps_are_stored_versioned_and_checked():
    apps = CustomApps()
    assert apps.list() == []
    jupyter = CustomApp(
        name="Jupyter", remote_port=8888, start_script="jupyter lab --port 8888", browser_path="/lab"
    )
    apps.add(jupyter)
    assert CustomApps().list() == [jupyter]
    assert json.loads(apps.path.read_text())["version"] == 1
    with pytest.raises(CustomAppError, match="exists"):
        apps.add(jupyter)
    with pytest.raises(CustomAppError, match="built in"):
        apps.add(CustomApp(name=DGX_DASHBOARD.name, remote_port=1))
    assert apps.get("DGX Dashboard").remote_port == 11000
    apps.remove("Jupyter")
    assert apps.list() == []
    with pytest.raises(CustomAppError, match="No custom app"):
        apps.get("Jupyter")
    for bad in ({"browser_path": "lab"}, {"remote_port": 0}, {"name": " x"}):
        with pytest.raises(ValueError):
            CustomApp(**{"name": "x", "remote_port": 80, **bad})


def test_a_newer_file_is_left_alone():
    apps = CustomApps()
    apps.path.parent.mkdir(parents=True, exist_ok=True)
    apps.path.write_text('{"version": 7, "apps": []}')
    with pytest.raises(CustomAppError, match="newer SparkSync"):
        apps.list()


# --- against a real sshd node ---------------------------------------------------------------------


def test_an_app_runs_its_script_while_open_and_closing_stops_it(ssh_lab_factory, real_keyring):  # noqa: F811
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    client_key = ClientKey.load_or_create(SecretStore())
    pair_node(
        PairRequest(node.ip, ssh_lab.user(node), name="n1"),
        password=lambda: PASSWORD, confirm=lambda fp: True, client_key=client_key,
        dialer=ssh_lab.dialer, settings=FAST,
    )  # fmt: skip
    port = 8777
    marker = f"--directory /tmp/sparksync-app-{port}"
    app = CustomApp(
        name="Files",
        remote_port=port,
        # The script's own child (the server) must stop too, not only the shell that started it.
        start_script=f"mkdir -p /tmp/sparksync-app-{port} && /usr/bin/python3 -m http.server {port} --bind 127.0.0.1 {marker}",
        browser_path="/",
    )
    links = NodeTransports(client_key, dialer=ssh_lab.dialer, settings=FAST, backoff=Backoff(0.2, 2.0, 1.0))
    sessions = AppSessions(lambda: links)
    try:
        session = sessions.open(app, "n1")
        assert sessions.open(app, "n1") is session  # opened once
        assert session.wait_ready(30), list(session.script.output)
        assert session.url == f"http://127.0.0.1:{session.tunnel.local_port}/"
        assert _get(session.tunnel.local_port) == 200
        assert _server_pids(marker)  # running on the node, as the node's user
        assert all(psutil.Process(p).username() == ssh_lab.user(node) for p in _server_pids(marker))
        sessions.close_all()
        # A process that is exiting loses its command line before its sockets close: wait for both.
        stopped = lambda: not _server_pids(marker) and not _listening(node.netns, port)  # noqa: E731
        _wait(stopped, 15, "the start script's server to stop and its port to close")
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", session.tunnel.local_port), timeout=2).close()
    finally:
        sessions.close_all()
        links.close()


def test_an_app_whose_port_nobody_listens_on_is_not_ready(ssh_lab_factory, real_keyring):  # noqa: F811
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    client_key = ClientKey.load_or_create(SecretStore())
    pair_node(
        PairRequest(node.ip, ssh_lab.user(node), name="n1"),
        password=lambda: PASSWORD, confirm=lambda fp: True, client_key=client_key,
        dialer=ssh_lab.dialer, settings=FAST, registry=Registry(),
    )  # fmt: skip
    with NodeTransports(client_key, dialer=ssh_lab.dialer, settings=FAST) as links:
        sessions = AppSessions(lambda: links)
        session = sessions.open(CustomApp(name="Nothing", remote_port=8799, browser_path="/"), "n1")
        try:
            assert not session.wait_ready(3)
        finally:
            sessions.close_all()


def _server_pids(marker: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "http.server" in cmdline and marker in cmdline and not cmdline.startswith("sh -c"):
            found.append(process.pid)
    return found


def _listening(netns: str, port: int) -> bool:
    try:
        in_netns(netns, lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close())
    except OSError:
        return False
    return True


def _get(port: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status
    finally:
        connection.close()


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout} s for {what}")
        time.sleep(0.1)
