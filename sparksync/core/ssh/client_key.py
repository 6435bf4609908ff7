"""This client's one SSH key pair (ed25519), made once and reused for every node.

The private key lies in the config dir (``keys/id_ed25519``, mode 0600) in
OpenSSH format, encrypted with a random passphrase that only the keyring
holds. Re-pairing a node reuses the same key, so a node's authorized_keys
never fills up with stale SparkSync keys.

Using the key from a terminal (``ssh spark-xxxx`` with the exported
config): OpenSSH cannot read our keyring, so it asks for the passphrase.
The exported config sets ``AddKeysToAgent yes``, so with an ssh-agent
running it asks once per login; ``sparksync node ssh-add`` loads the key into
the running ssh-agent with the keyring's passphrase (through ssh-add's askpass
hook, never a file), which is how scripts and ``BatchMode`` use it. The
passphrase lives in this home's keyring service (``secrets.home_service()``). We chose this over a
second, unencrypted copy of the key for ssh: a key file that anyone who can
read it may use is exactly what the keyring is there to avoid.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from secrets import token_urlsafe

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.file_lock import exclusive_lock
from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.core.ssh.secrets import KeyringUnavailableError, SecretStore, backend_name

log = logging.getLogger(__name__)

KEY_FILE = "id_ed25519"
PASSPHRASE_SECRET = "client-key-passphrase"


class ClientKeyError(SparkSyncError):
    """The client key exists but cannot be used."""


@dataclass(frozen=True)
class ClientKey:
    pkey: paramiko.Ed25519Key
    private_key_path: Path

    @property
    def public_key_path(self) -> Path:
        return self.private_key_path.with_name(self.private_key_path.name + ".pub")

    def public_line(self) -> str:
        """The authorized_keys line. Match keys by blob, not by line: the comment names this host."""
        return f"{self.pkey.get_name()} {self.pkey.get_base64()} sparksync@{socket.gethostname()}"

    def fingerprint(self) -> str:
        return self.pkey.fingerprint  # "SHA256:...", as ssh-keygen -l prints it

    @classmethod
    def load_or_create(cls, secrets: SecretStore, key_dir: Path | None = None) -> ClientKey:
        """The existing key, or a new one (with its passphrase stored in the keyring first)."""
        key_dir = ensure_dir(Path(key_dir) if key_dir is not None else config_dir() / "keys")
        path = key_dir / KEY_FILE
        # Two SparkSync processes starting at once must not both make a key:
        # the second would overwrite the first one's passphrase or file.
        with exclusive_lock(key_dir / ".lock"):
            key = cls._load(secrets, path) if path.exists() else cls._create(secrets, path)
            key._write_public_if_stale()
        return key

    @classmethod
    def _load(cls, secrets: SecretStore, path: Path) -> ClientKey:
        passphrase = secrets.get(PASSPHRASE_SECRET, migrate=False)
        if passphrase is None:
            passphrase = cls._adopt_legacy_passphrase(secrets, path)
        if passphrase is None:
            raise ClientKeyError(
                f"The SparkSync key {path} exists, but its passphrase is no longer in the keyring "
                f"({backend_name(secrets.backend())}; entry {secrets.service}/{PASSPHRASE_SECRET}). "
                "SparkSync will not make a new key by itself, because your paired nodes trust this "
                "one. If the keyring was reset, restore it; otherwise move the key away "
                f"(mv '{path}' '{path}.old') and pair your nodes again to make and install a new key."
            )
        try:
            pkey = _open(path, passphrase)
        except (paramiko.SSHException, ValueError, OSError) as exc:
            raise ClientKeyError(
                f"The SparkSync key {path} cannot be opened with the passphrase in the keyring "
                f"({type(exc).__name__}: {exc}). The file is damaged or the keyring holds another "
                f"key's passphrase. Move the key away (mv '{path}' '{path}.old') and pair your "
                "nodes again to make and install a new key."
            ) from exc
        return cls(pkey=pkey, private_key_path=path)

    @staticmethod
    def _adopt_legacy_passphrase(secrets: SecretStore, path: Path) -> str | None:
        """The passphrase kept before entries were scoped to the home, if it opens this key.

        Every home once shared one entry, so it may be another home's: it is
        copied into this home's service only once it has opened this key.
        """
        legacy = secrets.get_legacy(PASSPHRASE_SECRET)
        if legacy is None:
            return None
        try:
            _open(path, legacy)
        except (paramiko.SSHException, ValueError, OSError):
            log.warning("the shared keyring entry %s is another key's passphrase; not adopted", PASSPHRASE_SECRET)
            return None
        secrets.set(PASSPHRASE_SECRET, legacy)
        log.info("moved the key's passphrase into keyring service %s", secrets.service)
        return legacy

    @classmethod
    def _create(cls, secrets: SecretStore, path: Path) -> ClientKey:
        passphrase = token_urlsafe(32)
        # The passphrase goes to the keyring before any file exists: without a
        # keyring we stop here and leave nothing behind.
        secrets.set(PASSPHRASE_SECRET, passphrase)
        if secrets.get(PASSPHRASE_SECRET, migrate=False) != passphrase:
            raise KeyringUnavailableError(
                "the keyring accepted the key's passphrase but does not give it back",
                backend_name(secrets.backend()),
            )
        write_atomic(path, _encrypted_openssh(Ed25519PrivateKey.generate(), passphrase), mode=0o600)
        key = cls._load(secrets, path)  # read back what we wrote: proves the file opens
        log.info("created client key %s (%s)", path, key.fingerprint())
        return key

    def _write_public_if_stale(self) -> None:
        # ssh and users read the .pub file; keep it the public half of this key.
        try:
            fields = self.public_key_path.read_text().split()
        except (FileNotFoundError, UnicodeDecodeError):
            fields = []
        if fields[1:2] != [self.pkey.get_base64()]:
            write_atomic(self.public_key_path, self.public_line() + "\n", mode=0o644)


def _open(path: Path, passphrase: str) -> paramiko.Ed25519Key:
    return paramiko.Ed25519Key(filename=str(path), password=passphrase)


def _encrypted_openssh(private_key: Ed25519PrivateKey, passphrase: str) -> bytes:
    return private_key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.OpenSSH,
        encryption_algorithm=serialization.BestAvailableEncryption(passphrase.encode()),
    )
