"""The unicast fallback and manual add: real sockets on loopback, a real sshd, and real name lookups.

No test here sends anything off this machine: scans stay on 127.0.0.0/8 and
names resolve from /etc/hosts (``localhost``) or are refused before lookup.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from sparksync.core.discovery import (
    HostNotFoundError,
    ScanRefusedError,
    probe,
    resolve_host,
    scan_nodes,
)
from sparksync.core.discovery.scan import MAX_SCAN_HOSTS, scan, scan_targets

BANNER = b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n"


HANGUP_SLACK_S = 0.2


class FakeServer:
    """TCP listeners on loopback addresses that answer like an SSH server, or like something else.

    ``mode``: "ssh" sends the banner; "chatty" sends other lines first (RFC 4253
    allows that); "http" sends an HTTP error and closes; "silent" accepts and
    says nothing. It counts how many connections it holds at once.
    """

    def __init__(self, mode: str = "ssh", addresses: tuple[str, ...] = ("127.0.0.1",), port: int = 0):
        self.mode = mode
        self.sockets = []
        for address in addresses:
            sock = socket.create_server((address, port), backlog=128)
            port = sock.getsockname()[1]  # the same port on every address
            self.sockets.append(sock)
        self.port = port
        self.address = addresses[0]
        self.accepted = 0
        self._spans: list[tuple[float, float]] = []  # (accepted, hung up) per connection
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._serve, args=(s,), daemon=True) for s in self.sockets]
        self._workers: list[threading.Thread] = []
        for thread in self._threads:
            thread.start()

    @property
    def most_open(self) -> int:
        """The most connections held at once, as the server saw them.

        The server's threads notice a hang-up a little late on a loaded machine (the
        prober's next connect can be accepted first), so each connection counts as
        closed HANGUP_SLACK_S before the server noticed; a prober over its limit would
        still overlap by a whole probe timeout.
        """
        with self._lock:
            edges = [(start, 1) for start, _ in self._spans]
            edges += [(max(start, end - HANGUP_SLACK_S), -1) for start, end in self._spans]
        peak = now = 0
        for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
            now += step
            peak = max(peak, now)
        return peak

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = sock.accept()
            except (TimeoutError, OSError):
                continue
            worker = threading.Thread(target=self._talk, args=(conn,), daemon=True)
            with self._lock:
                self._workers.append(worker)
            worker.start()

    def _talk(self, conn: socket.socket) -> None:
        opened = time.monotonic()
        with self._lock:
            self.accepted += 1
        try:
            with conn:
                if self.mode == "ssh":
                    conn.sendall(BANNER)
                elif self.mode == "chatty":
                    conn.sendall(b"Welcome to the lab\r\nauthorised use only\r\n" + BANNER)
                elif self.mode == "http":
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                conn.settimeout(0.05)
                while not self._stop.is_set():  # hold until the prober hangs up
                    try:
                        if not conn.recv(64):
                            break
                    except TimeoutError:
                        continue
                    except OSError:
                        break
        finally:
            with self._lock:
                self._spans.append((opened, time.monotonic()))

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads + self._workers:
            thread.join(5)
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def servers():
    made: list[FakeServer] = []

    def make(*args, **kwargs) -> FakeServer:
        made.append(FakeServer(*args, **kwargs))
        return made[-1]

    yield make
    for server in made:
        server.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- probe -----------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "status"), [("ssh", "ssh"), ("chatty", "ssh"), ("http", "open")])
def test_probe_reads_the_ssh_banner_or_tells_it_is_not_ssh(servers, mode, status):
    server = servers(mode)
    result = asyncio.run(probe("127.0.0.1", server.port, timeout_s=2))
    assert result.status == status
    assert result.banner == (BANNER.decode().strip() if status == "ssh" else None)


def test_probe_of_a_silent_port_times_out_within_the_limit(servers):
    server = servers("silent")
    result = asyncio.run(probe("127.0.0.1", server.port, timeout_s=0.3))
    assert result.status == "timeout" and 0.25 < result.elapsed_s < 1.5


def test_probe_of_a_closed_port(servers):
    result = asyncio.run(probe("127.0.0.1", free_port(), timeout_s=2))
    assert result.status == "closed" and result.elapsed_s < 1


@pytest.fixture
def sshd(tmp_path):
    """The real OpenSSH server on a free loopback port (skipped where it is not installed)."""
    if not shutil.which("ssh-keygen") or not os.path.exists("/usr/sbin/sshd") or os.geteuid() != 0:
        pytest.skip("needs root and openssh-server")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    key = tmp_path / "host_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    port = free_port()
    config = tmp_path / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {key}\nPidFile {tmp_path}/sshd.pid\n"
        "UsePAM no\nPasswordAuthentication no\nAllowUsers nobody-sparksync-test\n"
    )
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, f"sshd exited: {proc.stderr.read().decode()}"
            threading.Event().wait(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(5)
        proc.stderr.close()


def test_scan_finds_a_real_sshd(sshd):
    (node,) = scan_nodes("127.0.0.1", sshd, timeout_s=3)
    assert node.ssh_banner.startswith("SSH-2.0-OpenSSH")
    assert node.addresses == ["127.0.0.1"] and node.ssh_port == sshd
    assert node.kind == "ssh" and node.sources == ["scan"] and node.key == "addr:127.0.0.1"


# --- scan --------------------------------------------------------------------------------


def test_subnet_scan_finds_ssh_hosts_only_and_stays_bounded(servers):
    ssh_hosts = ("127.0.0.2", "127.0.0.5")
    ssh_server = servers("ssh", ssh_hosts)
    silent = servers("silent", tuple(f"127.0.0.{i}" for i in range(6, 14)), port=ssh_server.port)
    progress = []
    results = asyncio.run(
        scan("127.0.0.0/28", ssh_server.port, timeout_s=1.5, concurrency=4,
             on_result=lambda r, done, total: progress.append((done, total)))
    )  # fmt: skip
    assert [r.address for r in results] == [f"127.0.0.{i}" for i in range(1, 15)]  # no .0, no .15
    by_status = {}
    for r in results:
        by_status.setdefault(r.status, []).append(r.address)
    assert by_status["ssh"] == list(ssh_hosts)
    assert len(by_status["timeout"]) == 8 and len(by_status["closed"]) == 4
    assert silent.most_open <= 4  # never more connections at once than asked
    assert progress[-1] == (14, 14) and len(progress) == 14


def test_scan_can_be_cancelled(servers):
    silent = servers("silent", tuple(f"127.0.0.{i}" for i in range(1, 15)))
    cancel = threading.Event()
    results = asyncio.run(
        scan(
            "127.0.0.0/28",
            silent.port,
            timeout_s=0.3,
            concurrency=2,
            on_result=lambda *_: cancel.set(),
            cancel=cancel,
        )
    )
    assert len(results) == 2 and silent.accepted == 2  # the two in flight finish; nothing new starts


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("10.0.0.0/21", r"holds 2046 addresses; a scan covers at most 1024"),
        ("0.0.0.0/0", "at most 1024"),
        ("10.0.0.0/33", "not a subnet"),
        ("224.0.0.0/30", "not a unicast address"),
        ("255.255.255.255", "not a unicast address"),
    ],
)
def test_scan_refuses_what_it_must_not_scan(target, message):
    with pytest.raises(ScanRefusedError, match=message):
        scan_targets(target)


def test_scan_target_sizes():
    assert len(scan_targets("10.1.0.0/22")) == 1022 <= MAX_SCAN_HOSTS
    assert scan_targets("10.1.0.7/32") == ["10.1.0.7"]
    assert scan_targets("10.1.0.6/31") == ["10.1.0.6", "10.1.0.7"]
    assert scan_targets("10.1.0.9/30") == ["10.1.0.9", "10.1.0.10"]  # host bits ignored
    assert scan_targets("localhost") == ["127.0.0.1"]


def test_scan_rejects_a_bad_port():
    with pytest.raises(ScanRefusedError, match="out of range"):
        asyncio.run(scan("127.0.0.1", 0))


# --- manual add --------------------------------------------------------------------------


def test_manual_add_of_an_ip_address():
    node = resolve_host(" 10.0.0.5 ", 2222)
    assert node.addresses == ["10.0.0.5"] and node.hostname == "10.0.0.5" and node.ssh_port == 2222
    assert node.kind == "ssh" and node.sources == ["manual"] and node.key == "addr:10.0.0.5"


def test_manual_add_resolves_a_name_through_the_system():
    node = resolve_host("localhost")  # from /etc/hosts: no query leaves the machine
    assert "127.0.0.1" in node.addresses and node.hostname == "localhost" and node.key == "host:localhost"


@pytest.mark.parametrize(
    "text", ["", "   ", "user@spark-1a2b.local", "spark-1a2b:22", "bad name", "a..b", "-x"]
)
def test_manual_add_refuses_what_is_not_a_host(text):
    with pytest.raises(HostNotFoundError, match="type"):
        resolve_host(text)


@pytest.mark.parametrize(
    ("errno", "hint"),
    [(socket.EAI_NONAME, "check the spelling"), (socket.EAI_AGAIN, "name server could not be reached")],
)
def test_names_that_do_not_resolve_say_why(errno, hint):
    def resolver(*args, **kwargs):
        raise socket.gaierror(errno, os.strerror(errno) if errno > 0 else "Name or service not known")

    with pytest.raises(HostNotFoundError, match=rf"cannot resolve host name 'node9\.example\.com' .*{hint}"):
        resolve_host("node9.example.com", resolver=resolver)


def test_manual_add_rejects_a_bad_port():
    with pytest.raises(HostNotFoundError, match="out of range"):
        resolve_host("10.0.0.5", 70000)
