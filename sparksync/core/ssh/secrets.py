"""Secrets (the client key's passphrase, agent tokens) in the OS keyring.

This is the only module that imports ``keyring``. It refuses every backend
that would lose a secret or keep it in plain text without the user asking:

- keyring's ``fail`` backend (nothing usable was found) and ``null`` backend
  (drops every secret), and a chain of zero backends;
- a plain-text backend (e.g. keyrings.alt's ``PlaintextKeyring``) that keyring
  picked by itself. The user can still choose one knowingly, through
  keyring's own selection: the ``PYTHON_KEYRING_BACKEND`` variable or
  keyring's config file. SparkSync never picks one.

Secret values are never logged and never put in an error message.

Entries are scoped to the SparkSync home: the service is
``sparksync:<16 hex digits of the SHA-256 of the home's path>`` (the
``SPARKSYNC_HOME`` directory, or the config dir without it), and inside it
names like ``client-key-passphrase`` and ``node/<id>/<kind>``. Two homes on
one desktop (a script or a test with its own ``SPARKSYNC_HOME`` beside the
user's app) therefore never overwrite each other's secrets. Before scoping
every home shared the one service ``sparksync``; an entry found only there
is copied into the home's own service when it is first read (and kept there,
since another home may still rely on it).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import keyring
import keyring.backend
import keyring.core
from keyring.backends import chainer, fail, null
from pydantic import BaseModel
from sparksync_agent.paths import sparksync_home

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.paths import config_dir

log = logging.getLogger(__name__)

LEGACY_SERVICE = "sparksync"  # the one service every home shared before entries were scoped
SERVICE_PREFIX = "sparksync:"
BACKEND_ENV = "PYTHON_KEYRING_BACKEND"  # keyring's own variable, not ours
_PROBE_KEY = "sparksync-keyring-probe"


class KeyringUnavailableError(SparkSyncError):
    """No usable keyring backend: SparkSync will not keep secrets anywhere else."""

    def __init__(self, reason: str, backend: str):
        self.reason = reason
        self.backend = backend
        super().__init__(_unavailable_message(reason, backend))


class KeyringStatus(BaseModel):
    usable: bool
    backend: str  # "module.Class" of the backend keyring would use
    reason: str | None = None  # why it is not usable


def home_service(home: Path | None = None) -> str:
    """The keyring service of one SparkSync home (by default the one this process uses)."""
    if home is None:
        home = sparksync_home() or config_dir()
    resolved = str(Path(home).expanduser().resolve())
    return SERVICE_PREFIX + hashlib.sha256(resolved.encode()).hexdigest()[:16]


class SecretStore:
    """get/set/delete secrets by name, in one keyring service.

    By default the service is this home's (``home_service()``, fixed when the
    store is made), and entries still kept in the shared legacy service are
    migrated when read. An explicit ``service`` has no legacy.

    ``backend`` is for callers that want a specific keyring backend; by
    default the one keyring selects (``keyring.get_keyring()``) is used at
    each call, so a backend set later (tests, a user's config) is honoured.
    """

    def __init__(self, service: str | None = None, backend: keyring.backend.KeyringBackend | None = None):
        self.service = service if service is not None else home_service()
        self.legacy_service = LEGACY_SERVICE if service is None else None
        self._backend = backend

    def get(self, name: str, *, migrate: bool = True) -> str | None:
        """The secret ``name``; with ``migrate``, one found only in the legacy service is copied here first."""
        value = self._call("read", name, lambda kr: kr.get_password(self.service, name))
        if value is None and migrate:
            value = self.get_legacy(name)
            if value is not None:
                self.set(name, value)
                log.info("keyring: moved %s from service %s into %s", name, self.legacy_service, self.service)
        return value

    def get_legacy(self, name: str) -> str | None:
        """The entry ``name`` of the shared pre-scoping service, if this store has one and it is there."""
        legacy = self.legacy_service
        if legacy is None:
            return None
        return self._call("read", name, lambda kr: kr.get_password(legacy, name))

    def set(self, name: str, value: str) -> None:
        self._call("store", name, lambda kr: kr.set_password(self.service, name, value), secret=value)
        log.debug("keyring: stored secret %s/%s", self.service, name)

    def delete(self, name: str) -> bool:
        """Remove ``name`` (here and in the legacy service); False when it was in neither."""
        removed = False
        for service in filter(None, (self.service, self.legacy_service)):
            if self._call("read", name, lambda kr, s=service: kr.get_password(s, name)) is None:
                continue
            self._call("delete", name, lambda kr, s=service: kr.delete_password(s, name))
            log.debug("keyring: deleted secret %s/%s", service, name)
            removed = True
        return removed

    def backend_status(self) -> KeyringStatus:
        """Whether secrets can be kept now; reads one (absent) probe entry to find out."""
        backend = self.backend()
        name = backend_name(backend)
        reason = refusal_reason(backend)
        if reason is None:
            try:
                backend.get_password(self.service, _PROBE_KEY)
            except Exception as exc:  # any backend failure means "not usable now"
                reason = _describe(exc)
        return KeyringStatus(usable=reason is None, backend=name, reason=reason)

    def backend(self) -> keyring.backend.KeyringBackend:
        return self._backend if self._backend is not None else keyring.get_keyring()

    def _call(self, action: str, name: str, operation, secret: str | None = None):
        backend = self.backend()
        reason = refusal_reason(backend)
        if reason is not None:
            raise KeyringUnavailableError(reason, backend_name(backend))
        try:
            return operation(backend)
        # Backends are plugins (D-Bus, macOS, Windows...) that raise their own
        # types; any failure to reach the store means no usable keyring now.
        except Exception as exc:
            reason = f"could not {action} {self.service}/{name}: {_describe(exc)}"
            if secret:  # a backend's message must not carry the secret into ours
                reason = reason.replace(secret, "<secret>")
            raise KeyringUnavailableError(reason, backend_name(backend)) from exc


def backend_name(backend: keyring.backend.KeyringBackend) -> str:
    cls = type(backend)
    return f"{cls.__module__}.{cls.__qualname__}"


def refusal_reason(backend: keyring.backend.KeyringBackend) -> str | None:
    """Why SparkSync refuses ``backend`` (judged by its type only), or None."""
    if isinstance(backend, fail.Keyring):
        return "keyring found no usable backend (no Secret Service, KWallet or OS keychain answered)"
    if isinstance(backend, null.Keyring):
        return "keyring is disabled (its 'null' backend drops every secret)"
    if isinstance(backend, chainer.ChainerBackend):
        try:
            members = backend.backends  # probes every backend; a D-Bus that vanished raises
        except Exception as exc:  # noqa: BLE001 - any probe failure means: no usable backend
            return f"keyring could not probe its backends ({type(exc).__name__}: {exc})"
        if not members:
            return "keyring found no usable backend to chain"
        # A chain stores into the first backend that accepts, so any
        # plain-text member could end up holding the secret.
        return next(filter(None, map(_plaintext_reason, members)), None)
    return _plaintext_reason(backend)


def _plaintext_reason(backend: keyring.backend.KeyringBackend) -> str | None:
    if "plaintext" not in backend_name(backend).lower() or _chosen_explicitly():
        return None
    return (
        f"keyring picked {backend_name(backend)} by itself, which keeps secrets unencrypted on disk; "
        "SparkSync uses a plain-text backend only when you choose it explicitly"
    )


def _chosen_explicitly() -> bool:
    if os.environ.get(BACKEND_ENV):
        return True
    try:
        return keyring.core.load_config() is not None
    except Exception:  # a broken keyring config file chooses nothing
        return False


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _unavailable_message(reason: str, backend: str) -> str:
    return (
        f"No usable keyring for SparkSync's secrets: {reason} (backend: {backend}).\n"
        "SparkSync keeps secrets (the passphrase of its SSH key) only in a keyring and never "
        "falls back to plain text. Choose one:\n"
        "  1. Install and unlock a Secret Service provider, such as GNOME Keyring (gnome-keyring) "
        "or KWallet, in your desktop session, then try again. Without a desktop: start a session "
        "bus with `dbus-run-session -- bash`, then in that shell run "
        "`gnome-keyring-daemon --unlock --components=secrets` with the keyring's password on its "
        "standard input.\n"
        f"  2. Choose a keyring backend yourself with keyring's {BACKEND_ENV} variable or its "
        "config file (list them: `python -m keyring --list-backends`), for example "
        "keyrings.alt.file.EncryptedKeyring after `pip install keyrings.alt`. A plain-text backend "
        "such as keyrings.alt.file.PlaintextKeyring is used only if you choose it this way, and "
        "then the passphrase lies unencrypted on disk."
    )
