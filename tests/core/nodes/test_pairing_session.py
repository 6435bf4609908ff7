"""PairingSession: pair_node's callbacks answered from another thread, the password handed over once."""

from __future__ import annotations

import threading

import pytest

from sparksync.core.nodes.pairing_session import PairingSession
from sparksync.core.ssh.errors import HostKeyNotAcceptedError, PairingError
from sparksync.core.ssh.pairing import PairRequest

FINGERPRINT = "SHA256:" + "A" * 43


class FakePair:
    """Behaves like pair_node: confirm, then (only if confirmed) password."""

    def __init__(self):
        self.passwords: list[str] = []

    def __call__(self, request, *, password, confirm, progress):
        progress(f"{request.host} presents the host key ssh-ed25519 {FINGERPRINT}")
        if not confirm(FINGERPRINT):
            raise HostKeyNotAcceptedError("not accepted")
        self.passwords.append(password())
        return "paired"


def run_in_thread(session):
    outcome = {}

    def target():
        try:
            outcome["result"] = session.run()
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def test_the_password_is_handed_over_only_after_the_key_is_accepted_and_then_dropped():
    asked = threading.Event()
    fake = FakePair()
    session = PairingSession(
        PairRequest("10.0.0.5", "nvidia"), on_fingerprint=lambda fp: asked.set(), pair=fake
    )
    thread, outcome = run_in_thread(session)
    assert asked.wait(10)
    assert fake.passwords == []  # waiting for the user
    session.accept("s3cret")
    thread.join(10)
    assert outcome == {"result": "paired"} and fake.passwords == ["s3cret"]
    assert session._password is None


@pytest.mark.parametrize("how", ["refuse", "cancel"])
def test_refusing_or_cancelling_never_uses_the_password(how):
    asked = threading.Event()
    fake = FakePair()
    session = PairingSession(
        PairRequest("10.0.0.5", "nvidia"), on_fingerprint=lambda fp: asked.set(), pair=fake
    )
    thread, outcome = run_in_thread(session)
    assert asked.wait(10)
    getattr(session, how)()
    session.accept("too late")  # an answer after the first one changes nothing
    thread.join(10)
    assert isinstance(outcome["error"], HostKeyNotAcceptedError) and fake.passwords == []


def test_a_password_asked_for_before_any_confirmation_is_refused():
    def rogue(request, *, password, confirm, progress):
        return password()

    session = PairingSession(PairRequest("h", "u"), on_fingerprint=lambda fp: None, pair=rogue)
    with pytest.raises(PairingError, match="before the host key was confirmed"):
        session.run()
