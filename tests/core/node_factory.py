"""Registry entries and SSH host keys for tests."""

from __future__ import annotations

import base64

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sparksync.core.nodes.registry import PairedNode, PinnedHostKey


def host_pkey() -> paramiko.PKey:
    """A fresh ed25519 public key, as paramiko hands a server's host key to us."""
    line = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return paramiko.PKey.from_type_string("ssh-ed25519", base64.b64decode(line.split()[1]))


def paired_node(name: str = "spark-0001", index: int = 1, **fields) -> PairedNode:
    values = {
        "name": name,
        "host": f"10.0.0.{index}",
        "addresses": [f"10.0.0.{index}", f"fe80::{index}"],
        "user": "nvidia",
        "host_key": PinnedHostKey.from_pkey(host_pkey()),
        **fields,
    }
    return PairedNode(**values)
