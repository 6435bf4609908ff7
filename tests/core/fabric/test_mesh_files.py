"""The mesh's ~/.ssh edits: from=-restricted keys, known_hosts from pinned keys, a managed config block."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sparksync.core.fabric import mesh_files
from sparksync.core.nodes.registry import PinnedHostKey


def pinned() -> PinnedHostKey:
    return PinnedHostKey.from_pkey(_ed25519())


def _ed25519() -> paramiko.PKey:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                            serialization.NoEncryption())
    return paramiko.Ed25519Key.from_private_key(io.StringIO(pem.decode()))


PUB = "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + b"k" * 32).decode() + " x@n1"


def test_authorized_line_is_restricted_to_the_fabric_subnets_and_tagged():
    line = mesh_files.authorized_line(PUB, ["10.100.0.0/24", "10.100.1.0/24"], "id-n1")
    assert line.startswith('from="10.100.0.0/24,10.100.1.0/24",no-agent-forwarding,no-X11-forwarding ssh-ed25519 ')
    assert line.endswith(" sparksync-mesh:id-n1")


def test_authorized_keys_keep_other_lines_and_replace_our_older_line():
    other = b"# mine\r\nssh-rsa AAAAB3NzaC1yc2E= me@laptop"  # no newline at the end, CRLF kept
    first = mesh_files.authorized_line(PUB, ["10.100.0.0/24"], "id-n1")
    content = mesh_files.add_authorized(other, first)
    assert content.startswith(other) and content.count(b"sparksync-mesh") == 1
    assert mesh_files.add_authorized(content, first) == content  # once only
    second = mesh_files.authorized_line(PUB, ["10.100.4.0/24"], "id-n1")
    replaced = mesh_files.add_authorized(content, second)
    assert b"10.100.0.0/24" not in replaced and b"10.100.4.0/24" in replaced and replaced.startswith(other)


def test_known_hosts_holds_the_pinned_key_under_the_fabric_addresses():
    key = pinned()
    content = mesh_files.add_known_host(b"github.com ssh-ed25519 AAAA\n", ["10.100.0.2", "10.100.1.2"], key, "id-n2")
    lines = content.decode().splitlines()
    assert lines[0] == "github.com ssh-ed25519 AAAA"
    assert lines[1] == f"10.100.0.2,10.100.1.2 {key.key_type} {key.key_base64} sparksync-mesh:id-n2"
    again = mesh_files.add_known_host(content, ["10.100.0.2", "10.100.1.2"], key, "id-n2")
    assert again == content
    assert mesh_files.remove_known_host(content, "id-n2") == b"github.com ssh-ed25519 AAAA\n"


def test_a_foreign_known_hosts_line_with_another_key_is_a_conflict_plain_or_hashed():
    key, other = pinned(), pinned()
    salt = b"s" * 20
    hashed = "|1|{}|{}".format(base64.b64encode(salt).decode(),
                               base64.b64encode(hmac.new(salt, b"10.100.0.3", hashlib.sha1).digest()).decode())
    content = (f"10.100.0.2 {other.key_type} {other.key_base64}\n"
               f"{hashed} {other.key_type} {other.key_base64}\n"
               f"10.100.0.9 {key.key_type} {key.key_base64}\n").encode()
    found = mesh_files.conflicts(content, ["10.100.0.2", "10.100.0.3", "10.100.0.9"], key)
    assert [(c.host, c.line_number, c.fingerprint) for c in found] == [
        ("10.100.0.2", 1, other.fingerprint), ("10.100.0.3", 2, other.fingerprint)]
    assert mesh_files.conflicts(content, ["10.100.0.9"], key) == []


def test_the_config_block_leads_the_file_and_goes_away_peer_by_peer():
    peers = [mesh_files.PeerEntry("id-n2", "n2", ("10.100.0.2",), "u2"),
             mesh_files.PeerEntry("id-n3", "n3", ("10.100.0.3", "10.100.1.3"), "u3")]
    user = b"Host *\n    ServerAliveInterval 30\n"
    content = mesh_files.set_config_block(user, mesh_files.config_block(peers))
    text = content.decode()
    assert text.startswith(mesh_files.BLOCK_BEGIN) and text.endswith(user.decode())
    assert "Host 10.100.0.3 10.100.1.3\n    User u3\n    IdentityFile ~/.ssh/id_ed25519_sparksync" in text
    assert mesh_files.set_config_block(content, mesh_files.config_block(peers)) == content  # replaced, not added
    block = mesh_files.drop_peer(mesh_files.config_block_of(content), "id-n2")
    assert block is not None and "u2" not in block and "u3" in block
    assert mesh_files.drop_peer(block, "id-n3") is None
    assert mesh_files.set_config_block(content, None) == user


def test_a_line_that_is_no_key_is_refused():
    with pytest.raises(ValueError):
        mesh_files.authorized_line("not a key", ["10.0.0.0/24"], "id")
    with pytest.raises(ValueError):
        mesh_files.authorized_line(PUB, [], "id")
