"""Load this client's key into the user's running ssh-agent, from the keyring.

OpenSSH cannot read our keyring, so with the exported config plain ``ssh``
asks for the key's passphrase, and a script in ``BatchMode`` cannot answer.
``sparksync node ssh-add`` solves that without a second copy of the key:
the key is decrypted in memory with the keyring's passphrase and piped to
``ssh-add -`` on its standard input. Neither the passphrase nor the
decrypted key is ever written to a file or put on a command line; the
ssh-agent holds the key (for ``lifetime`` seconds when given) as it would
after ``ssh-add`` with a typed passphrase.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.ssh.client_key import PASSPHRASE_SECRET, ClientKey
from sparksync.core.ssh.secrets import SecretStore

_SSH_ADD_TIMEOUT_S = 30.0


class SshAgentError(SparkSyncError):
    """The key could not be handed to an ssh-agent."""

    exit_code = 18


@dataclass(frozen=True)
class AgentKeyAdded:
    fingerprint: str
    socket: str
    lifetime_s: int | None


def add_key_to_ssh_agent(
    secrets: SecretStore | None = None, *, key_dir: Path | None = None, lifetime_s: int | None = None
) -> AgentKeyAdded:
    """Hand the client key to the ssh-agent named by ``SSH_AUTH_SOCK``."""
    socket = os.environ.get("SSH_AUTH_SOCK")
    if not socket:
        raise SshAgentError(
            "No ssh-agent is running in this shell (SSH_AUTH_SOCK is not set). Start one with "
            "`eval \"$(ssh-agent -s)\"`, then run `sparksync node ssh-add` again."
        )
    ssh_add = shutil.which("ssh-add")
    if ssh_add is None:
        raise SshAgentError("ssh-add was not found on PATH; install OpenSSH's client (Debian: openssh-client).")
    secrets = secrets if secrets is not None else SecretStore()
    key = ClientKey.load_or_create(secrets, key_dir)
    passphrase = secrets.get(PASSPHRASE_SECRET, migrate=False)
    if passphrase is None:  # load_or_create just opened the key with it: only a racing reset gets here
        raise SshAgentError(f"The passphrase of {key.private_key_path} left the keyring meanwhile; try again.")
    private = serialization.load_ssh_private_key(key.private_key_path.read_bytes(), passphrase.encode())
    plain = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    argv = [ssh_add, *(["-t", str(lifetime_s)] if lifetime_s else []), "-"]
    try:
        done = subprocess.run(argv, input=plain, capture_output=True, timeout=_SSH_ADD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SshAgentError(f"ssh-add did not answer within {_SSH_ADD_TIMEOUT_S:.0f} s (agent at {socket}).") from exc
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}"
        raise SshAgentError(f"ssh-add could not add the SparkSync key to the agent at {socket}: {why}")
    return AgentKeyAdded(key.fingerprint(), socket, lifetime_s)
