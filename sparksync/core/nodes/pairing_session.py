"""One pairing driven from a window: the SSH work in a worker thread, the answers from the user.

``pair_node`` asks two things through callbacks, in its own thread: whether
to trust the host key it just read (``confirm``), then the password
(``password``). A window cannot answer inside those calls, so
``PairingSession`` turns them into a question and a wait:

1. ``run()`` (worker thread) calls pair_node; when it reads the host key,
   ``on_fingerprint(fingerprint)`` tells the window, and the worker waits.
2. The window shows the fingerprint and calls ``accept(password)`` or
   ``refuse()`` (any thread). Only then is the password handed over, and
   the session drops it as soon as pair_node has taken it.
3. ``cancel()`` (the dialog closed) refuses whatever is pending.

An mDNS cross-check mismatch or any other error stops pair_node before the
question; ``run`` raises it for the window to show.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.errors import PairingError
from sparksync.core.ssh.pairing import PairRequest, PairResult, pair_node

# pair_node's shape, minus what the session supplies: (request, password=, confirm=, progress=)
PairFunction = Callable[..., PairResult]


def pair_with_this_computers_key(request: PairRequest, *, password, confirm, progress) -> PairResult:
    """The real pairing: this client's key (from the keyring) and the default registry."""
    client_key = ClientKey.load_or_create(SecretStore())
    return pair_node(request, password=password, confirm=confirm, client_key=client_key, progress=progress)


class PairingSession:
    def __init__(
        self,
        request: PairRequest,
        *,
        on_fingerprint: Callable[[str], None],
        on_progress: Callable[[str], None] | None = None,
        pair: PairFunction = pair_with_this_computers_key,
    ):
        self.request = request
        self._on_fingerprint = on_fingerprint
        self._on_progress = on_progress or (lambda _line: None)
        self._pair = pair
        self._answered = threading.Event()
        self._lock = threading.Lock()
        self._accepted = False
        self._password: str | None = None
        self._asked = False

    def run(self) -> PairResult:
        """Pair (blocking; call it in a worker thread)."""
        return self._pair(
            self.request, password=self._take_password, confirm=self._confirm, progress=self._on_progress
        )

    def accept(self, password: str) -> None:
        """Trust the shown key and log in once with ``password``."""
        with self._lock:
            if self._answered.is_set():
                return
            self._accepted, self._password = True, password
        self._answered.set()

    def refuse(self) -> None:
        with self._lock:
            if self._answered.is_set():
                return
            self._accepted = False
        self._answered.set()

    cancel = refuse

    def _confirm(self, fingerprint: str) -> bool:
        self._asked = True
        self._on_fingerprint(fingerprint)
        self._answered.wait()
        with self._lock:
            if not self._accepted:
                self._password = None
            return self._accepted

    def _take_password(self) -> str:
        with self._lock:
            password, self._password = self._password, None
        if not self._asked or password is None:
            # pair_node never asks before the key is confirmed; refuse rather than log in blind.
            raise PairingError(
                "The password was asked for before the host key was confirmed; nothing was changed."
            )
        return password
