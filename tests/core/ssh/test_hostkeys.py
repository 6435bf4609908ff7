"""Host keys: fingerprints as ssh-keygen prints them, the pinned-key policy, the mDNS cross-check."""

from __future__ import annotations

import base64
import subprocess

import paramiko
import pytest

from sparksync.core.nodes.registry import HostKeyChangedError as RegistryHostKeyChangedError
from sparksync.core.nodes.registry import PinnedHostKey
from sparksync.core.ssh.errors import HostKeyChangedError, HostKeyMismatchError
from sparksync.core.ssh.hostkeys import (
    PinnedHostKeyPolicy,
    cross_check_advertised,
    fingerprint,
    preferred_key_types,
)
from tests.core.node_factory import host_pkey


@pytest.mark.parametrize("key_type", ["ed25519", "ecdsa", "rsa"])
def test_fingerprint_is_what_ssh_keygen_prints(tmp_path, key_type):
    path = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-f", str(path)], check=True)
    kind, blob = (tmp_path / "key.pub").read_text().split()[:2]
    key = paramiko.PKey.from_type_string(kind, base64.b64decode(blob))
    printed = subprocess.run(
        ["ssh-keygen", "-lf", str(path) + ".pub"], capture_output=True, text=True, check=True
    )
    assert fingerprint(key) == printed.stdout.split()[1]
    assert fingerprint(key).startswith("SHA256:") and not fingerprint(key).endswith("=")


def test_the_policy_accepts_exactly_the_pinned_key():
    key = host_pkey()
    PinnedHostKeyPolicy(PinnedHostKey.from_pkey(key), "n1", "10.0.0.1").missing_host_key(
        None, "10.0.0.1", key
    )


def test_the_policy_refuses_another_key_naming_both_fingerprints_and_the_repair_command():
    pinned, presented = host_pkey(), host_pkey()
    policy = PinnedHostKeyPolicy(PinnedHostKey.from_pkey(pinned), "n1", "10.0.0.1")
    with pytest.raises(HostKeyChangedError) as caught:
        policy.missing_host_key(None, "10.0.0.1", presented)
    message = str(caught.value)
    assert fingerprint(pinned) in message and fingerprint(presented) in message
    assert "sparksync node pair 10.0.0.1 --repair" in message
    assert "sparksync node unpair n1 --forget" in message
    # Callers that catch the registry's error type see it too.
    assert isinstance(caught.value, RegistryHostKeyChangedError)


def test_the_policy_is_a_paramiko_policy_and_never_learns_a_key():
    policy = PinnedHostKeyPolicy(PinnedHostKey.from_pkey(host_pkey()), "n1", "h")
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(policy)  # accepted: it is a MissingHostKeyPolicy
    with pytest.raises(HostKeyChangedError):
        policy.missing_host_key(client, "h", host_pkey())
    assert client.get_host_keys().keys() == []


def test_advertised_fingerprints_match_in_either_spelling_of_the_type():
    key = host_pkey()
    cross_check_advertised(key, {}, "h")  # nothing advertised: nothing to check
    cross_check_advertised(key, {"ed25519": fingerprint(key)}, "h")
    cross_check_advertised(key, {"ssh-ed25519": fingerprint(key), "rsa": "SHA256:" + "A" * 43}, "h")


def test_a_fingerprint_other_than_the_advertised_one_is_a_possible_impostor():
    key, advertised = host_pkey(), host_pkey()
    with pytest.raises(HostKeyMismatchError, match="possible impostor") as caught:
        cross_check_advertised(key, {"ed25519": fingerprint(advertised)}, "spark-1a2b.local")
    assert fingerprint(key) in str(caught.value) and fingerprint(advertised) in str(caught.value)


def test_a_node_that_advertised_only_another_key_type_is_refused_too():
    with pytest.raises(HostKeyMismatchError):
        cross_check_advertised(host_pkey(), {"ecdsa": "SHA256:" + "B" * 43}, "h")


def test_the_pinned_type_leads_the_offered_host_key_algorithms():
    available = ["ssh-ed25519", "ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256"]
    assert preferred_key_types(available, ["ssh-rsa"]) == [
        "rsa-sha2-512",
        "rsa-sha2-256",
        "ssh-ed25519",
        "ecdsa-sha2-nistp256",
    ]
    assert preferred_key_types(available, ["ecdsa"])[0] == "ecdsa-sha2-nistp256"
    assert preferred_key_types(available, []) == available
    assert sorted(preferred_key_types(available, ["ed25519"])) == sorted(available)
