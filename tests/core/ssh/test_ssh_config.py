from __future__ import annotations

import base64
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization

from sparksync.core.ssh.client_key import PASSPHRASE_SECRET, ClientKey
from sparksync.core.nodes.registry import PairedNode, PinnedHostKey
from sparksync.core.ssh.secrets import SecretStore, home_service
from sparksync.core.ssh.config_export import (
    SshConfigError,
    export_ssh_config,
    host_key_alias,
    render_known_hosts,
    render_ssh_config,
    write_known_hosts,
)
from tests.core.node_factory import host_pkey, paired_node

SSHD = "/usr/sbin/sshd"
pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="the OpenSSH client is not installed")


def ssh_G(config: Path, alias: str, home: Path) -> dict[str, str]:
    """What ``ssh -G`` resolves for ``alias`` (it parses the config and connects nowhere)."""
    done = subprocess.run(
        ["ssh", "-G", "-F", str(config), alias],
        capture_output=True, text=True, timeout=30, env={**os.environ, "HOME": str(home)},
    )
    assert done.returncode == 0, done.stderr
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)


@pytest.fixture
def odd_dir(tmp_path: Path) -> Path:
    """A directory whose name has a blank and a '%', both of which ssh_config treats specially."""
    path = tmp_path / "my configs 100%"
    path.mkdir()
    return path


def test_each_node_resolves_to_its_own_host_key_and_our_key(tmp_path, odd_dir):
    nodes = [paired_node("spark-0001", 1), paired_node("gx10-ab12", 2, port=2222, user="alice")]
    key_path = odd_dir / "keys" / "id_ed25519"
    exported = export_ssh_config(nodes, key_path, odd_dir)

    for node in nodes:
        resolved = ssh_G(exported.config_path, node.name, tmp_path)
        assert resolved["hostname"] == node.host
        assert resolved["user"] == node.user
        assert resolved["port"] == str(node.port)
        assert resolved["identitiesonly"] == "yes"
        assert resolved["hostkeyalias"] == host_key_alias(node)
        assert resolved["userknownhostsfile"] == str(exported.known_hosts_path)
        assert resolved["globalknownhostsfile"] == "/dev/null"
        assert resolved["stricthostkeychecking"] == "true"
        assert resolved["updatehostkeys"] == "false"
        # ssh -G prints IdentityFile before token expansion, so '%' shows doubled.
        assert resolved["identityfile"] == str(key_path).replace("%", "%%")


def test_an_unknown_alias_gets_none_of_our_settings(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text(render_ssh_config([paired_node()], tmp_path / "k", tmp_path / "kh"))
    resolved = ssh_G(config, "elsewhere.example", tmp_path)
    assert "hostkeyalias" not in resolved
    assert resolved["hostname"] == "elsewhere.example"


def test_an_ipv6_address_with_a_zone_survives_token_expansion(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text(render_ssh_config([paired_node(host="fe80::1%eth0")], tmp_path / "k", tmp_path / "kh"))
    assert ssh_G(config, "spark-0001", tmp_path)["hostname"] == "fe80::1%eth0"


def test_the_include_line_works_from_a_users_ssh_config(tmp_path, odd_dir):
    exported = export_ssh_config([paired_node()], odd_dir / "id_ed25519", odd_dir)
    user_config = tmp_path / "user_config"
    user_config.write_text(exported.include_line() + "\n\nHost *\n    ServerAliveInterval 30\n")
    assert ssh_G(user_config, "spark-0001", tmp_path)["hostkeyalias"] == "sparksync-spark-0001"
    assert exported.include_line() in exported.config_path.read_text()  # the usage comment


def test_known_hosts_holds_each_pinned_key_under_its_alias(tmp_path):
    nodes = [paired_node(f"spark-000{i}", i) for i in range(1, 4)]
    path = tmp_path / "known_hosts"
    write_known_hosts(nodes, path)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    listed = subprocess.run(["ssh-keygen", "-lf", str(path)], capture_output=True, text=True, check=True)
    assert [line.split()[1] for line in listed.stdout.splitlines()] == [n.host_key.fingerprint for n in nodes]
    for node in nodes:
        found = subprocess.run(["ssh-keygen", "-F", host_key_alias(node), "-f", str(path)],
                               capture_output=True, text=True)
        assert found.returncode == 0 and node.host_key.key_base64 in found.stdout


def test_known_hosts_is_rewritten_whole(tmp_path):
    path = tmp_path / "known_hosts"
    write_known_hosts([paired_node("a", 1), paired_node("b", 2)], path)
    write_known_hosts([paired_node("b", 2)], path)
    assert "sparksync-a " not in path.read_text()
    assert render_known_hosts([]) == ""


def test_export_defaults_to_the_config_dir(tmp_path):
    from sparksync.core.base.paths import config_dir

    exported = export_ssh_config([paired_node()], tmp_path / "k")
    assert exported.config_path == config_dir() / "ssh_config"
    assert exported.known_hosts_path == config_dir() / "known_hosts"
    assert "sparksync-spark-0001 ssh-ed25519 " in exported.known_hosts_path.read_text()
    assert stat.S_IMODE(exported.config_path.stat().st_mode) == 0o600


def test_a_path_ssh_config_cannot_hold_is_refused(tmp_path):
    with pytest.raises(SshConfigError, match="double quote"):
        render_ssh_config([paired_node()], tmp_path / 'say "hi"' / "k", tmp_path / "kh")


# -- through a real sshd on loopback -----------------------------------------------------------


@dataclass(frozen=True)
class LoopbackSshd:
    port: int
    host_key: PinnedHostKey
    authorized_keys: Path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_listening(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            threading.Event().wait(0.02)
    pytest.fail(f"sshd did not start: {log.read_text()}")


@pytest.fixture
def loopback_sshd(tmp_path: Path) -> Iterator[LoopbackSshd]:
    """A real sshd on 127.0.0.1 with its own host key, letting root in by key from a file we write."""
    if not Path(SSHD).exists() or os.geteuid() != 0:
        pytest.skip("needs root and openssh-server")
    # sshd refuses to start without its privilege-separation dir. It is left in
    # place (as the sshd service leaves it): other tests' sshds may be using it.
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    root = tmp_path / "sshd"
    root.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / "host_key")], check=True)
    key_type, key_b64 = (root / "host_key.pub").read_text().split()[:2]
    authorized = root / "authorized_keys"
    authorized.touch()
    port = _free_port()
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\nPidFile none\n"
        f"AuthorizedKeysFile {authorized}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
    )
    log = root / "sshd.log"
    with log.open("wb") as out:
        process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(root / "sshd_config")], stderr=out)
    try:
        _wait_listening(port, process, log)
        pkey = paramiko.PKey.from_type_string(key_type, base64.b64decode(key_b64))
        yield LoopbackSshd(port, PinnedHostKey.from_pkey(pkey), authorized)
    finally:
        process.terminate()
        process.wait(timeout=10)


def _run_ssh(config: Path, alias: str, tmp_path: Path, extra_env: dict[str, str], options: list[str] = ()):
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "PYTHON_KEYRING_BACKEND")}
    env.update(extra_env)  # may name a test's own ssh-agent
    env["HOME"] = str(tmp_path)  # never the real ~/.ssh
    return subprocess.run(
        ["ssh", "-F", str(config), *options, alias, "echo", "hello from $(hostname)"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env,
    )


def _node_at(sshd: LoopbackSshd, host_key: PinnedHostKey) -> PairedNode:
    return paired_node("spark-0001", host="127.0.0.1", port=sshd.port, user="root", host_key=host_key)


def test_terminal_ssh_logs_in_with_our_key_and_the_keyrings_passphrase(
    tmp_path, odd_dir, real_keyring, loopback_sshd
):
    key = ClientKey.load_or_create(SecretStore(), odd_dir / "keys")
    loopback_sshd.authorized_keys.write_text(key.public_line() + "\n")
    node = _node_at(loopback_sshd, loopback_sshd.host_key)
    exported = export_ssh_config([node], key.private_key_path, odd_dir)
    # ssh asks for the passphrase, keyring's command answers from this home's service.
    askpass = tmp_path / "askpass"
    askpass.write_text(f"#!/bin/sh\nexec {sys.executable} -m keyring get {home_service()} {PASSPHRASE_SECRET}\n")
    askpass.chmod(0o700)

    done = _run_ssh(exported.config_path, "spark-0001", tmp_path,
                    {**real_keyring.env, "SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force"})

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hello from")
    # Nothing was learnt or added: the pinned file is as we wrote it.
    assert exported.known_hosts_path.read_text() == render_known_hosts([node])


def test_terminal_ssh_refuses_a_host_key_other_than_the_pinned_one(tmp_path, loopback_sshd):
    impostor_pin = PinnedHostKey.from_pkey(host_pkey())
    exported = export_ssh_config([_node_at(loopback_sshd, impostor_pin)], tmp_path / "no-key", tmp_path)

    done = _run_ssh(exported.config_path, "spark-0001", tmp_path, {})

    assert done.returncode == 255
    assert "Host key verification failed" in done.stderr
    assert "hello" not in done.stdout


@contextmanager
def _ssh_agent(tmp_path: Path) -> Iterator[str]:
    socket_path = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket_path)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while not socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        yield str(socket_path)
    finally:
        agent.terminate()
        agent.wait(timeout=10)


def test_ssh_add_lets_batch_mode_ssh_log_in_without_a_passphrase_file(
    tmp_path, odd_dir, real_keyring, loopback_sshd
):
    key = ClientKey.load_or_create(SecretStore())  # where `sparksync node ssh-add` finds it
    loopback_sshd.authorized_keys.write_text(key.public_line() + "\n")
    exported = export_ssh_config([_node_at(loopback_sshd, loopback_sshd.host_key)], key.private_key_path, odd_dir)
    batch = {**real_keyring.env, "SSH_ASKPASS_REQUIRE": "never"}
    config = ["-o", "BatchMode=yes"]

    with _ssh_agent(tmp_path) as socket_path:
        # Before: BatchMode cannot use the encrypted key.
        before = _run_ssh(exported.config_path, "spark-0001", tmp_path, {**batch, "SSH_AUTH_SOCK": socket_path},
                          options=config)  # fmt: skip
        assert before.returncode == 255 and "hello" not in before.stdout

        env = {**os.environ, **real_keyring.env, "SSH_AUTH_SOCK": socket_path}
        env.pop("PYTHON_KEYRING_BACKEND", None)
        added = subprocess.run(
            [sys.executable, "-m", "sparksync", "node", "ssh-add", "--lifetime", "600"],
            env=env, capture_output=True, text=True, timeout=60,
        )
        assert added.returncode == 0, added.stderr
        assert key.fingerprint() in added.stdout and "600 s" in added.stdout
        listed = subprocess.run(["ssh-add", "-l"], env=env, capture_output=True, text=True, timeout=30)
        assert key.fingerprint() in listed.stdout

        after = _run_ssh(exported.config_path, "spark-0001", tmp_path, {**batch, "SSH_AUTH_SOCK": socket_path},
                         options=config)  # fmt: skip
        assert after.returncode == 0, after.stderr
        assert after.stdout.startswith("hello from")

    # Neither the passphrase nor a decrypted copy of our key was left in a file.
    passphrase = SecretStore().get(PASSPHRASE_SECRET).encode()
    home = Path(os.environ["SPARKSYNC_HOME"])
    for path in [*tmp_path.rglob("*"), *home.rglob("*")]:
        if not path.is_file() or path.stat().st_size > 1_000_000:
            continue
        data = path.read_bytes()
        assert passphrase not in data, path
        if b"BEGIN OPENSSH PRIVATE KEY" in data and path != key.private_key_path:
            other = serialization.load_ssh_private_key(data, None)
            assert other.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                   serialization.PublicFormat.OpenSSH).split()[1] != \
                key.pkey.get_base64().encode(), path  # fmt: skip


def test_ssh_add_without_an_agent_says_how_to_start_one(real_keyring, monkeypatch):
    from sparksync.core.ssh.ssh_agent import SshAgentError, add_key_to_ssh_agent

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with pytest.raises(SshAgentError, match="ssh-agent -s"):
        add_key_to_ssh_agent()
