from __future__ import annotations

import os
import platform
import shutil
import subprocess

import pytest

from sparksync_agent.collectors.nodeinfo import fingerprint_of_public_key_line, read_node_info

# Made with `ssh-keygen -t ed25519 -C vector@test`; `ssh-keygen -lf` printed the fingerprint.
ED25519_LINE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICAKcD5LIiUVBCE4lSp0pdYqENCR1r2k8saoPDkbjUcB vector@test"
ED25519_FINGERPRINT = "SHA256:Z50SjpiRY0F01FPypneFrk6cRa+1qv8v391qZuNhgVw"


def test_fingerprint_of_a_known_key():
    assert fingerprint_of_public_key_line(ED25519_LINE) == ED25519_FINGERPRINT
    assert fingerprint_of_public_key_line(ED25519_LINE.rsplit(" ", 1)[0] + "\n") == ED25519_FINGERPRINT


@pytest.mark.parametrize("line", ["", "ssh-ed25519", "ssh-ed25519 not*base64!"])
def test_fingerprint_of_garbage_says_why(line):
    with pytest.raises(ValueError, match="public key line|base64"):
        fingerprint_of_public_key_line(line)


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
@pytest.mark.parametrize("key_type", ["ed25519", "ecdsa", "rsa"])
def test_fingerprint_matches_ssh_keygen(tmp_path, key_type):
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-f", str(key), "-N", ""], check=True)
    printed = subprocess.run(
        ["ssh-keygen", "-lf", str(key) + ".pub"], check=True, capture_output=True, text=True
    ).stdout.split()[1]
    assert fingerprint_of_public_key_line((tmp_path / "key.pub").read_text()) == printed


@pytest.fixture
def node_tree(tree):
    tree.stat({"cpu": [1] * 10}, btime=1_761_000_000)
    tree.write(tree.etc / "os-release", 'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 24.04.3 LTS"\nID=ubuntu\n')
    tree.write(tree.etc / "ssh" / "ssh_host_ed25519_key.pub", ED25519_LINE + "\n")
    tree.write(tree.etc / "ssh" / "ssh_host_rsa_key.pub", "this is not a key\n")  # skipped, not fatal
    return tree


def test_node_info_from_a_fake_tree(node_tree):
    node_tree.write(node_tree.sys / "class" / "dmi" / "id" / "product_name", "NVIDIA DGX Spark\n")
    info = read_node_info("node-1", node_tree.proc, node_tree.sys, node_tree.etc)
    assert info.node_id == "node-1"
    assert info.model == "NVIDIA DGX Spark"
    assert info.os == "Ubuntu 24.04.3 LTS"
    assert info.boot_time == 1_761_000_000.0
    assert info.ssh_host_key_fingerprints == {"ssh-ed25519": ED25519_FINGERPRINT}
    assert (info.arch, info.kernel, info.cpu_count) == (
        platform.machine(),
        platform.release(),
        os.cpu_count(),
    )
    assert info.hostname


def test_model_falls_back_to_board_then_device_tree(node_tree):
    dmi = node_tree.sys / "class" / "dmi" / "id"
    node_tree.write(dmi / "product_name", "To Be Filled By O.E.M.\n")
    node_tree.write(node_tree.proc / "device-tree" / "model", b"NVIDIA DGX Spark\x00")
    assert read_node_info("n", node_tree.proc, node_tree.sys, node_tree.etc).model == "NVIDIA DGX Spark"
    node_tree.write(dmi / "board_name", "P4242\n")
    assert read_node_info("n", node_tree.proc, node_tree.sys, node_tree.etc).model == "P4242"


def test_model_absent_is_none(node_tree):
    assert read_node_info("n", node_tree.proc, node_tree.sys, node_tree.etc).model is None


def test_missing_btime_says_why(tree):
    tree.write(tree.proc / "stat", "cpu 1 1 1 1\n")
    with pytest.raises(ValueError, match="btime"):
        read_node_info("n", tree.proc, tree.sys, tree.etc)


def test_node_info_of_this_machine():
    info = read_node_info("self")
    assert info.boot_time > 1e9 and info.cpu_count >= 1 and info.os
