"""``sparksync node pair | unpair | list | ssh-config``: option checks, output, and a real run in the lab."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.base.paths import config_dir
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.authorized_keys import count_key
from sparksync.core.ssh.secrets import home_service
from tests.core.keyring_fixtures import (
    MemoryKeyring,
    global_keyring,
    real_keyring,  # noqa: F401  (a fixture)
)
from tests.core.node_factory import paired_node
from tests.lab.sshd import PASSWORD

REPO = Path(__file__).resolve().parents[2]
GOOD_FP = "SHA256:" + "A" * 43


@pytest.fixture(autouse=True)
def memory_keyring():
    """A keyring that works the same in every environment (the lab test brings a real one)."""
    with global_keyring(MemoryKeyring()) as backend:
        yield backend


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin)


def seed_registry(*names: str) -> Registry:
    registry = Registry()
    for index, name in enumerate(names, start=1):
        registry.add(paired_node(name, index))
    return registry


# --- without a network ------------------------------------------------------------------------


def test_list_json_shows_each_paired_node_with_its_pinned_key():
    registry = seed_registry("spark-0001", "spark-0002")
    result = invoke("node", "list", "--json")
    assert result.exit_code == 0, result.output
    nodes = json.loads(result.stdout)["nodes"]
    assert [n["name"] for n in nodes] == ["spark-0001", "spark-0002"]
    assert nodes[0]["host_key"]["fingerprint"] == registry.get("spark-0001").host_key.fingerprint
    assert nodes[0]["state"] == "paired" and nodes[0]["reason"] is None and nodes[0]["user"] == "nvidia"


def test_list_prints_a_table_or_says_how_to_pair():
    empty = invoke("node", "list")
    assert empty.exit_code == 0 and empty.stdout == "" and "sparksync node pair HOST" in empty.stderr
    assert json.loads(invoke("node", "list", "--json").stdout) == {"nodes": []}
    registry = seed_registry("spark-0001")
    table = invoke("node", "list").stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "ADDRESS", "USER"]
    assert table[1].split()[:4] == [
        "spark-0001",
        "10.0.0.1",
        "nvidia",
        registry.get("spark-0001").host_key.fingerprint,
    ]


def test_a_malformed_accept_host_key_is_refused_before_connecting():
    result = invoke("node", "pair", "192.0.2.1", "--accept-host-key", "SHA256:short", "--password-stdin")
    assert result.exit_code == 2 and "is not a SHA-256 fingerprint" in result.stderr


def test_without_a_terminal_the_key_and_password_must_come_from_options():
    no_key = invoke("node", "pair", "192.0.2.1", "--password-stdin", stdin="pw\n")
    assert no_key.exit_code == 2 and "--accept-host-key" in no_key.stderr
    no_password = invoke("node", "pair", "192.0.2.1", "--accept-host-key", GOOD_FP)
    assert no_password.exit_code == 2 and "--password-stdin" in no_password.stderr


def test_unpair_forget_drops_the_node_here_and_warns_about_the_key_left_there():
    seed_registry("spark-0001", "spark-0002")
    node_id = Registry().get("spark-0001").node_id
    result = invoke("node", "unpair", "spark-0001", "--forget", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["forgotten_only"] is True and json.loads(result.stdout)["id"] == node_id
    assert "still be in" in result.stderr
    assert Registry().names() == ["spark-0002"]
    by_id = invoke("node", "unpair", Registry().get("spark-0002").node_id, "--forget")  # an id works too
    assert by_id.exit_code == 0 and Registry().names() == []


def test_unpair_of_an_unknown_node_names_the_paired_ones():
    seed_registry("spark-0001")
    result = invoke("node", "unpair", "nope", "--forget")
    assert result.exit_code == 1 and "No paired node is named 'nope' (paired: spark-0001)" in result.stderr


def test_ssh_config_prints_a_host_block_per_node_and_how_to_include_it():
    seed_registry("spark-0001", "spark-0002")
    result = invoke("node", "ssh-config")
    assert result.exit_code == 0, result.output
    assert "Host spark-0001\n" in result.stdout and "Host spark-0002\n" in result.stdout
    config = config_dir() / "ssh_config"
    assert config.read_text() == result.stdout and f'Include "{config}"' in result.stderr
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


# --- the real thing, in the lab -------------------------------------------------------------


def sparksync(ssh_lab, env: dict[str, str], *args: str, stdin: str | None = None):
    """``sparksync ARGS`` as its own process, started inside the lab's client namespace."""
    argv = [sys.executable, "-m", "sparksync", *args]
    return ssh_lab.lab.exec(ssh_lab.client, argv, input=stdin, env=env, cwd=REPO)


def test_pair_list_ssh_and_unpair_through_the_cli(ssh_lab_factory, real_keyring, tmp_path):  # noqa: F811
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    user, fp = ssh_lab.user(node), ssh_lab.fingerprint(node)
    env = {**os.environ, **real_keyring.env}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    pair_args = ["node", "pair", node.ip, "--user", user, "--password-stdin", "--name", "n1"]

    wrong = sparksync(ssh_lab, env, *pair_args, "--accept-host-key", GOOD_FP, stdin=PASSWORD + "\n")
    assert wrong.returncode == 13 and f"presents the host key {fp}, not {GOOD_FP}" in wrong.stderr
    assert not ssh_lab.authorized_keys_path(node).parent.exists()

    paired = sparksync(ssh_lab, env, *pair_args, "--accept-host-key", fp, "--json", stdin=PASSWORD + "\n")
    assert paired.returncode == 0, paired.stderr
    document = json.loads(paired.stdout)
    assert document["node"]["name"] == "n1" and document["node"]["host_key"]["fingerprint"] == fp
    assert fp in paired.stderr and PASSWORD not in paired.stderr + paired.stdout
    our_key = (config_dir() / "keys" / "id_ed25519.pub").read_text().strip()
    assert count_key(ssh_lab.authorized_keys_path(node).read_bytes(), our_key) == 1

    listed = json.loads(sparksync(ssh_lab, env, "node", "list", "--json").stdout)["nodes"]
    assert [(n["name"], n["host"], n["user"]) for n in listed] == [("n1", node.ip, user)]

    exported = sparksync(ssh_lab, env, "node", "ssh-config")
    assert exported.returncode == 0 and "Host n1\n" in exported.stdout
    # OpenSSH itself, with the exported config, our key and the pinned host key: `ssh n1` works.
    askpass = tmp_path / "askpass"
    askpass.write_text(f"#!/bin/sh\nexec {sys.executable} -m keyring get {home_service()} client-key-passphrase\n")
    askpass.chmod(0o700)
    ssh_env = {**env, "SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force"}
    ssh_argv = ["ssh", "-F", str(config_dir() / "ssh_config"), "-o", "ConnectTimeout=5", "n1", "id", "-un"]
    ssh = ssh_lab.lab.exec(ssh_lab.client, ssh_argv, env=ssh_env, stdin=subprocess.DEVNULL)
    assert ssh.returncode == 0 and ssh.stdout.strip() == user, ssh.stderr

    unpaired = sparksync(ssh_lab, env, "node", "unpair", "n1", "--json")
    assert unpaired.returncode == 0, unpaired.stderr
    assert json.loads(unpaired.stdout)["key_removed"] is True
    assert count_key(ssh_lab.authorized_keys_path(node).read_bytes(), our_key) == 0
    assert json.loads(sparksync(ssh_lab, env, "node", "list", "--json").stdout) == {"nodes": []}
    assert "known_hosts" in os.listdir(config_dir())  # the export was refreshed, now without n1
    assert (config_dir() / "known_hosts").read_text() == ""
