from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import keyring.errors
import pytest
from keyring.backends import chainer, fail, null

from sparksync.core.ssh.secrets import (
    BACKEND_ENV,
    KeyringUnavailableError,
    LEGACY_SERVICE,
    SecretStore,
    backend_name,
    home_service,
)
from tests.core.keyring_fixtures import (
    MemoryKeyring,
    global_keyring,
    keyring_cli,
)

SECRET = "correct horse battery staple"


class PlaintextKeyring(MemoryKeyring):
    """Stands in for keyrings.alt.file.PlaintextKeyring (not installed): judged by its name."""


class RaisingKeyring(MemoryKeyring):
    def __init__(self, error: Exception):
        super().__init__()
        self.error = error

    def get_password(self, service, username):
        raise self.error

    set_password = delete_password = get_password


@pytest.fixture(autouse=True)
def _no_keyring_choice(tmp_path, monkeypatch):
    """No explicit backend choice: neither keyring's variable nor a keyring config file."""
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))


def assert_offers_the_choices(message: str) -> None:
    assert "never falls back to plain text" in message
    assert "gnome-keyring" in message and "KWallet" in message
    assert BACKEND_ENV in message and "keyrings.alt" in message


# -- a working backend ------------------------------------------------------------------


def test_set_get_delete_round_trip():
    store = SecretStore(backend=MemoryKeyring())
    assert store.get("token/spark-0001") is None
    store.set("token/spark-0001", SECRET)
    assert store.get("token/spark-0001") == SECRET
    assert store.delete("token/spark-0001") is True
    assert store.get("token/spark-0001") is None
    assert store.delete("token/spark-0001") is False


def test_secrets_are_kept_under_this_homes_service_name():
    backend = MemoryKeyring()
    SecretStore(backend=backend).set("k", SECRET)
    assert backend.entries == {(home_service(), "k"): SECRET}
    assert re.fullmatch(r"sparksync:[0-9a-f]{16}", home_service())
    assert SecretStore(service="other", backend=backend).get("k") is None


def test_each_home_has_its_own_service(tmp_path, monkeypatch):
    backend = MemoryKeyring()
    services = []
    for home in ("a", "b"):
        monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path / home))
        SecretStore(backend=backend).set("k", home)
        services.append(home_service())
    assert services[0] != services[1]
    assert backend.entries == {(services[0], "k"): "a", (services[1], "k"): "b"}
    # The same directory named another way is the same home.
    monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path / "a" / ".." / "a"))
    assert home_service() == services[0]


def test_an_entry_of_the_shared_legacy_service_is_copied_into_the_home_when_read():
    backend = MemoryKeyring()
    backend.entries[(LEGACY_SERVICE, "node/abc/agent-token")] = SECRET
    store = SecretStore(backend=backend)
    assert store.get("node/abc/agent-token") == SECRET
    assert backend.entries[(home_service(), "node/abc/agent-token")] == SECRET
    # The legacy entry stays: another home may still read it.
    assert backend.entries[(LEGACY_SERVICE, "node/abc/agent-token")] == SECRET
    assert store.get("k", migrate=False) is None
    # delete removes it everywhere this home could find it.
    assert store.delete("node/abc/agent-token") is True
    assert backend.entries == {}


def test_an_explicit_service_has_no_legacy():
    backend = MemoryKeyring()
    backend.entries[(LEGACY_SERVICE, "k")] = SECRET
    assert SecretStore(service="other", backend=backend).get("k") is None


def test_the_store_follows_keyrings_global_choice_at_each_call():
    store = SecretStore()
    with global_keyring(MemoryKeyring()) as first:
        store.set("k", SECRET)
    with global_keyring(MemoryKeyring()):
        assert store.get("k") is None
    assert first.entries[(home_service(), "k")] == SECRET


def test_a_working_backend_reports_usable():
    status = SecretStore(backend=MemoryKeyring()).backend_status()
    assert status.usable and status.reason is None
    assert status.backend == "tests.core.keyring_fixtures.MemoryKeyring"


# -- no usable backend --------------------------------------------------------------------


def test_the_fail_backend_is_refused_with_the_explicit_choices():
    store = SecretStore(backend=fail.Keyring())
    for operation in (lambda: store.get("k"), lambda: store.set("k", SECRET), lambda: store.delete("k")):
        with pytest.raises(KeyringUnavailableError) as refused:
            operation()
        assert_offers_the_choices(str(refused.value))
        assert "no usable backend" in refused.value.reason
        assert refused.value.backend == "keyring.backends.fail.Keyring"

    status = store.backend_status()
    assert not status.usable and "no usable backend" in status.reason


def test_a_fresh_process_without_any_keyring_gets_the_refusal(tmp_path):
    """keyring's own detection, in a process with no D-Bus session: the real path on a bare host."""
    env = {k: v for k, v in os.environ.items() if k not in ("DBUS_SESSION_BUS_ADDRESS", BACKEND_ENV)}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    code = (
        "from sparksync.core.ssh.secrets import SecretStore, KeyringUnavailableError\n"
        "store = SecretStore()\n"
        "print(store.backend_status().model_dump_json())\n"
        "try:\n"
        "    store.set('k', 'v')\n"
        "except KeyringUnavailableError as exc:\n"
        "    print(exc)\n"
        "    raise SystemExit(9)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 9, done.stderr
    assert '"usable":false' in done.stdout
    assert_offers_the_choices(done.stdout)


def test_the_null_backend_would_drop_secrets_and_is_refused():
    with pytest.raises(KeyringUnavailableError, match="drops every secret"):
        SecretStore(backend=null.Keyring()).set("k", SECRET)


def test_a_plaintext_backend_keyring_picked_by_itself_is_refused():
    backend = PlaintextKeyring()
    with pytest.raises(KeyringUnavailableError, match="unencrypted on disk") as refused:
        SecretStore(backend=backend).set("k", SECRET)
    assert_offers_the_choices(str(refused.value))
    assert backend.entries == {}


def test_a_plaintext_backend_the_user_chose_is_used(monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, f"{__name__}.PlaintextKeyring")
    backend = PlaintextKeyring()
    SecretStore(backend=backend).set("k", SECRET)
    assert backend.entries == {(home_service(), "k"): SECRET}


def test_a_plaintext_backend_chosen_in_keyrings_config_file_is_used(tmp_path):
    config = tmp_path / "xdg-config" / "python_keyring" / "keyringrc.cfg"
    config.parent.mkdir(parents=True)
    config.write_text(f"[backend]\ndefault-keyring = {__name__}.PlaintextKeyring\n")
    assert SecretStore(backend=PlaintextKeyring()).backend_status().usable


def chain_of(*members) -> chainer.ChainerBackend:
    class Chain(chainer.ChainerBackend):
        backends = list(members)  # instead of every backend installed here

    return Chain()


def test_a_chain_is_judged_by_every_member():
    assert "no usable backend" in SecretStore(backend=chain_of()).backend_status().reason
    assert not SecretStore(backend=chain_of(MemoryKeyring(), PlaintextKeyring())).backend_status().usable
    assert SecretStore(backend=chain_of(MemoryKeyring())).backend_status().usable


@pytest.mark.parametrize(
    "error",
    [keyring.errors.KeyringLocked("Failed to unlock the collection!"),
     keyring.errors.InitError("Failed to create the collection"),
     keyring.errors.NoKeyringError("nothing"),
     ConnectionRefusedError("D-Bus went away")],
    ids=lambda e: type(e).__name__,
)
def test_backend_failures_become_keyring_unavailable(error):
    store = SecretStore(backend=RaisingKeyring(error))
    with pytest.raises(KeyringUnavailableError) as refused:
        store.get("k")
    assert type(error).__name__ in str(refused.value)
    assert_offers_the_choices(str(refused.value))
    status = store.backend_status()
    assert not status.usable and type(error).__name__ in status.reason


def test_a_secret_never_reaches_a_message_or_a_log(caplog):
    caplog.set_level(logging.DEBUG)
    leaky = RaisingKeyring(keyring.errors.PasswordSetError(f"cannot store {SECRET!r}"))
    with pytest.raises(KeyringUnavailableError) as refused:
        SecretStore(backend=leaky).set("k", SECRET)
    assert SECRET not in str(refused.value)
    SecretStore(backend=MemoryKeyring()).set("k", SECRET)
    assert "k" in caplog.text and SECRET not in caplog.text


# -- a real Secret Service ------------------------------------------------------------------


def test_round_trip_through_a_real_secret_service(real_keyring):
    store = SecretStore()
    assert store.backend_status().usable
    assert store.backend_status().backend == "keyring.backends.SecretService.Keyring"

    store.set("token/spark-0001", SECRET)
    assert store.get("token/spark-0001") == SECRET
    # Another process reads it back: it lives in the Secret Service, not in our memory.
    read = keyring_cli(real_keyring, "get", home_service(), "token/spark-0001")
    assert read.returncode == 0 and read.stdout.strip() == SECRET

    assert store.delete("token/spark-0001") is True
    assert store.get("token/spark-0001") is None
    assert keyring_cli(real_keyring, "get", home_service(), "token/spark-0001").stdout.strip() == ""


def test_a_locked_secret_service_is_refused(real_keyring):
    import secretstorage

    store = SecretStore()
    store.set("k", SECRET)
    connection = secretstorage.dbus_init()
    try:
        secretstorage.get_default_collection(connection).lock()
    finally:
        connection.close()
    # No one can answer an unlock prompt here, so it stays locked.
    with pytest.raises(KeyringUnavailableError, match="KeyringLocked") as refused:
        store.get("k")
    assert_offers_the_choices(str(refused.value))
    assert not store.backend_status().usable


def test_backend_name_is_module_and_class():
    assert backend_name(fail.Keyring()) == "keyring.backends.fail.Keyring"
