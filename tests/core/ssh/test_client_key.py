from __future__ import annotations

import logging
import multiprocessing
import re
import socket
import stat
import subprocess
from pathlib import Path

import paramiko
import pytest
from keyring.backends import fail

from sparksync.core.ssh.client_key import KEY_FILE, PASSPHRASE_SECRET, ClientKey, ClientKeyError
from sparksync.core.base.paths import config_dir
from sparksync.core.ssh.secrets import LEGACY_SERVICE, KeyringUnavailableError, SecretStore, home_service
from tests.core.keyring_fixtures import (
    MemoryKeyring,
    keyring_cli,
)


class ForgetfulKeyring(MemoryKeyring):
    """Accepts every secret and keeps none, as a misconfigured backend can."""

    def set_password(self, service, username, password):
        pass


@pytest.fixture
def store() -> SecretStore:
    return SecretStore(backend=MemoryKeyring())


@pytest.fixture
def key_dir(tmp_path: Path) -> Path:
    return tmp_path / "keys"


def ssh_keygen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh-keygen", *args], capture_output=True, text=True, timeout=30)


def test_a_new_key_is_ed25519_encrypted_and_private(store, key_dir):
    key = ClientKey.load_or_create(store, key_dir)

    assert key.private_key_path == key_dir / KEY_FILE
    assert isinstance(key.pkey, paramiko.Ed25519Key)
    assert stat.S_IMODE(key.private_key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_dir.stat().st_mode) == 0o700
    assert key.private_key_path.read_text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    with pytest.raises(paramiko.PasswordRequiredException):
        paramiko.Ed25519Key(filename=str(key.private_key_path))
    passphrase = store.get(PASSPHRASE_SECRET)
    assert passphrase and len(passphrase) >= 32


def test_openssh_opens_the_key_with_the_keyrings_passphrase_only(store, key_dir):
    key = ClientKey.load_or_create(store, key_dir)
    path = str(key.private_key_path)

    assert ssh_keygen("-y", "-P", "", "-f", path).returncode != 0
    derived = ssh_keygen("-y", "-P", store.get(PASSPHRASE_SECRET), "-f", path)
    assert derived.returncode == 0, derived.stderr
    assert derived.stdout.split()[:2] == key.public_line().split()[:2]


def test_public_line_file_and_fingerprint_agree_with_ssh_keygen(store, key_dir):
    key = ClientKey.load_or_create(store, key_dir)

    assert re.fullmatch(r"ssh-ed25519 AAAA[0-9A-Za-z+/=]+ sparksync@\S+", key.public_line())
    assert key.public_line().endswith(f"sparksync@{socket.gethostname()}")
    assert key.public_key_path.read_text() == key.public_line() + "\n"
    assert stat.S_IMODE(key.public_key_path.stat().st_mode) == 0o644
    printed = ssh_keygen("-lf", str(key.public_key_path))
    assert printed.stdout.split()[1] == key.fingerprint()
    assert key.fingerprint().startswith("SHA256:")


def test_later_calls_load_the_same_key_and_leave_the_files_alone(store, key_dir):
    first = ClientKey.load_or_create(store, key_dir)
    files = {p: p.read_bytes() for p in key_dir.iterdir() if p.name != ".lock"}

    again = ClientKey.load_or_create(store, key_dir)

    assert again.fingerprint() == first.fingerprint()
    assert again.pkey.get_base64() == first.pkey.get_base64()
    assert {p: p.read_bytes() for p in files} == files


def test_the_default_key_dir_is_in_the_config_dir(store):
    key = ClientKey.load_or_create(store)
    assert key.private_key_path == config_dir() / "keys" / KEY_FILE


def test_a_missing_or_stale_public_file_is_rewritten(store, key_dir):
    key = ClientKey.load_or_create(store, key_dir)
    key.public_key_path.unlink()
    ClientKey.load_or_create(store, key_dir)
    assert key.public_key_path.read_text() == key.public_line() + "\n"

    key.public_key_path.write_text("ssh-ed25519 AAAAsomethingelse old@host\n")
    ClientKey.load_or_create(store, key_dir)
    assert key.public_key_path.read_text() == key.public_line() + "\n"


def test_a_lost_passphrase_is_an_error_and_no_new_key_is_made(store, key_dir):
    key = ClientKey.load_or_create(store, key_dir)
    before = key.private_key_path.read_bytes()
    store.delete(PASSPHRASE_SECRET)

    with pytest.raises(ClientKeyError) as refused:
        ClientKey.load_or_create(store, key_dir)

    message = str(refused.value)
    assert str(key.private_key_path) in message
    assert "no longer in the keyring" in message and "will not make a new key" in message
    assert "pair your nodes again" in message
    assert key.private_key_path.read_bytes() == before
    assert store.get(PASSPHRASE_SECRET) is None


def test_a_wrong_passphrase_is_an_error_and_the_key_is_kept(store, key_dir):
    key = ClientKey.load_or_create(store, key_dir)
    before = key.private_key_path.read_bytes()
    store.set(PASSPHRASE_SECRET, "not-the-passphrase")

    with pytest.raises(ClientKeyError, match="cannot be opened with the passphrase"):
        ClientKey.load_or_create(store, key_dir)
    assert key.private_key_path.read_bytes() == before


def test_without_a_keyring_no_key_is_made(key_dir):
    with pytest.raises(KeyringUnavailableError, match="never falls back to plain text"):
        ClientKey.load_or_create(SecretStore(backend=fail.Keyring()), key_dir)
    assert not (key_dir / KEY_FILE).exists()
    assert not (key_dir / f"{KEY_FILE}.pub").exists()


def test_a_keyring_that_forgets_is_caught_before_a_key_is_written(key_dir):
    with pytest.raises(KeyringUnavailableError, match="does not give it back"):
        ClientKey.load_or_create(SecretStore(backend=ForgetfulKeyring()), key_dir)
    assert not (key_dir / KEY_FILE).exists()


def test_the_passphrase_is_never_logged(store, key_dir, caplog):
    caplog.set_level(logging.DEBUG)
    key = ClientKey.load_or_create(store, key_dir)
    assert key.fingerprint() in caplog.text
    assert store.get(PASSPHRASE_SECRET) not in caplog.text


def test_the_passphrase_round_trips_through_a_real_secret_service(real_keyring, key_dir):
    key = ClientKey.load_or_create(SecretStore(), key_dir)

    # A new store and a new process: the key loads again from the Secret Service alone.
    again = ClientKey.load_or_create(SecretStore(), key_dir)
    assert again.fingerprint() == key.fingerprint()

    # What the docs tell a terminal user: keyring's command prints the passphrase ssh asks for.
    printed = keyring_cli(real_keyring, "get", home_service(), PASSPHRASE_SECRET)
    assert printed.returncode == 0, printed.stderr
    derived = ssh_keygen("-y", "-P", printed.stdout.strip(), "-f", str(key.private_key_path))
    assert derived.stdout.split()[:2] == key.public_line().split()[:2]


def _load_or_create_into(key_dir: Path, out: Path, barrier) -> None:
    barrier.wait(timeout=20)
    out.write_text(ClientKey.load_or_create(SecretStore(), key_dir).fingerprint())


def test_two_processes_starting_at_once_make_one_key(real_keyring, key_dir, tmp_path):
    context = multiprocessing.get_context("fork")  # no resource-tracker process to leak
    barrier = context.Barrier(2)
    outputs = [tmp_path / "first", tmp_path / "second"]
    processes = [
        context.Process(target=_load_or_create_into, args=(key_dir, out, barrier)) for out in outputs
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)

    assert [process.exitcode for process in processes] == [0, 0]
    fingerprints = {out.read_text() for out in outputs}
    assert len(fingerprints) == 1
    # ...and the key on disk opens with the passphrase the keyring kept.
    assert ClientKey.load_or_create(SecretStore(), key_dir).fingerprint() in fingerprints


def test_two_homes_keep_their_own_keys_in_one_real_keyring(real_keyring, tmp_path, monkeypatch):
    """A script with its own SPARKSYNC_HOME must not break the user's key (it once overwrote its passphrase)."""
    keys = {}
    for home in ("user", "script"):
        monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path / home))
        keys[home] = ClientKey.load_or_create(SecretStore())
    assert keys["user"].fingerprint() != keys["script"].fingerprint()

    for home, key in keys.items():
        monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path / home))
        assert key.private_key_path.is_relative_to(tmp_path / home)
        assert ClientKey.load_or_create(SecretStore()).fingerprint() == key.fingerprint()
        # A fresh process finds each passphrase under its own home's service, and it opens that key.
        printed = keyring_cli(real_keyring, "get", home_service(), PASSPHRASE_SECRET)
        assert printed.returncode == 0, printed.stderr
        derived = ssh_keygen("-y", "-P", printed.stdout.strip(), "-f", str(key.private_key_path))
        assert derived.stdout.split()[:2] == key.public_line().split()[:2]
    assert keyring_cli(real_keyring, "get", LEGACY_SERVICE, PASSPHRASE_SECRET).stdout.strip() == ""


def _key_under_the_legacy_entry(real_keyring, key_dir: Path) -> ClientKey:
    """A key made the old way: its passphrase in the shared service every home used."""
    key = ClientKey.load_or_create(SecretStore(), key_dir)
    passphrase = SecretStore().get(PASSPHRASE_SECRET)
    real_keyring.backend.set_password(LEGACY_SERVICE, PASSPHRASE_SECRET, passphrase)
    real_keyring.backend.delete_password(home_service(), PASSPHRASE_SECRET)
    return key


def test_a_passphrase_in_the_legacy_entry_is_migrated_into_the_home(real_keyring, key_dir):
    key = _key_under_the_legacy_entry(real_keyring, key_dir)

    assert ClientKey.load_or_create(SecretStore(), key_dir).fingerprint() == key.fingerprint()
    moved = keyring_cli(real_keyring, "get", home_service(), PASSPHRASE_SECRET)
    assert moved.stdout.strip() == real_keyring.backend.get_password(LEGACY_SERVICE, PASSPHRASE_SECRET)


def test_another_keys_passphrase_in_the_legacy_entry_is_not_adopted(real_keyring, key_dir, tmp_path):
    _key_under_the_legacy_entry(real_keyring, key_dir)
    other_dir = tmp_path / "other-keys"
    ClientKey.load_or_create(SecretStore(), other_dir)
    real_keyring.backend.delete_password(home_service(), PASSPHRASE_SECRET)
    real_keyring.backend.set_password(LEGACY_SERVICE, PASSPHRASE_SECRET, "another key's passphrase")

    with pytest.raises(ClientKeyError, match="no longer in the keyring"):
        ClientKey.load_or_create(SecretStore(), key_dir)
    assert real_keyring.backend.get_password(home_service(), PASSPHRASE_SECRET) is None
