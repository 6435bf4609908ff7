"""The pair dialog: the host key's fingerprint confirmed before the password is used, or refused."""

from __future__ import annotations

import threading

import pytest

from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.connection import SshSettings
from sparksync.core.ssh.errors import HostKeyMismatchError
from sparksync.core.ssh.pairing import pair_node
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.gui.fake_core import FakeActions
from tests.lab.sshd import PASSWORD

pytestmark = pytest.mark.gui
FINGERPRINT = "SHA256:" + "Q" * 43


@pytest.fixture
def dialog_for(qtbot):
    made = []

    def make(pair, discovered=None):
        from sparksync.gui.nodes.pair_dialog import PairDialog

        dialog = PairDialog(pair, discovered)
        qtbot.addWidget(dialog)
        dialog.show()
        made.append(dialog)
        return dialog

    yield make
    for dialog in made:
        dialog.reject()  # a worker still waiting for an answer gets "no"
        assert dialog.jobs.wait(30)


def fill(dialog, host="10.0.0.9", user="nvidia", password="s3cret"):
    dialog.host.setText(host)
    dialog.user.setText(user)
    dialog.password.setText(password)


def test_the_fingerprint_is_confirmed_before_the_password_is_used_and_the_field_is_cleared(qtbot, dialog_for):
    fake = FakeActions()
    dialog = dialog_for(fake.pair)
    fill(dialog)
    with qtbot.waitSignal(dialog.fingerprint_received, timeout=10_000):
        dialog.check_button.click()
    assert FINGERPRINT in dialog.fingerprint.text() and "ssh-keygen -lf" in dialog.fingerprint.text()
    assert dialog.trust_button.isVisible() and dialog.refuse_button.isVisible()
    assert not hasattr(fake, "passwords")  # nothing logged in yet
    assert dialog.password.text() == "s3cret"  # still only in the field
    with qtbot.waitSignal(dialog.paired, timeout=10_000) as paired:
        dialog.trust_button.click()
        assert dialog.password.text() == ""  # cleared straight after use
    assert fake.passwords == ["s3cret"] and paired.args[0].node.name == "spark-new"
    # Paired: the dialog offers the next step as a button, not a command to type.
    assert dialog.isVisible() and dialog.deploy_button.isVisible() and dialog.close_button.text() == "Later"
    assert "Paired 'spark-new'" in dialog.progress.text() and "sparksync node" not in dialog.progress.text()
    with qtbot.waitSignal(dialog.deploy_requested, timeout=10_000) as asked:
        dialog.deploy_button.click()
    assert asked.args == ["spark-new"] and not dialog.isVisible()


def test_refusing_the_key_changes_nothing_and_says_so(qtbot, dialog_for):
    fake = FakeActions()
    dialog = dialog_for(fake.pair)
    fill(dialog)
    with qtbot.waitSignal(dialog.fingerprint_received, timeout=10_000):
        dialog.check_button.click()
    with qtbot.waitSignal(dialog.pairing_ended, timeout=10_000):
        dialog.refuse_button.click()
    assert "not accepted" in dialog.error.text() and dialog.error.text().startswith("⚠")
    assert not hasattr(fake, "passwords") and fake.nodes == [] and dialog.password.text() == ""
    assert dialog.check_button.isVisible() and dialog.isVisible()  # the user can try again


def test_an_mdns_mismatch_is_a_warning_that_stops_before_any_question(qtbot, dialog_for):
    asked = []

    def mismatch(request, *, password, confirm, progress):
        asked.append(request.advertised_fingerprints)
        raise HostKeyMismatchError(
            "10.0.0.9 presents another host key than it advertised; possible impostor."
        )

    dialog = dialog_for(mismatch)
    fill(dialog)
    with qtbot.waitSignal(dialog.pairing_ended, timeout=10_000):
        dialog.check_button.click()
    assert "possible impostor" in dialog.error.text() and dialog.fingerprint.text() == ""
    assert not dialog.trust_button.isVisible() and dialog.password.text() == ""


def test_missing_fields_and_an_empty_password_are_said_plainly(qtbot, dialog_for):
    fake = FakeActions()
    dialog = dialog_for(fake.pair)
    dialog.host.setText("")
    assert not dialog.start() and "host name or address" in dialog.error.text()
    fill(dialog, password="")
    with qtbot.waitSignal(dialog.fingerprint_received, timeout=10_000):
        dialog.start()
    assert not dialog.trust() and "Type the password" in dialog.error.text()
    dialog.password.setText("pw")
    with qtbot.waitSignal(dialog.paired, timeout=10_000):
        assert dialog.trust()


def test_closing_the_dialog_while_it_asks_releases_the_worker(qtbot, dialog_for):
    fake = FakeActions()
    dialog = dialog_for(fake.pair)
    fill(dialog)
    with qtbot.waitSignal(dialog.fingerprint_received, timeout=10_000):
        dialog.start()
    dialog.reject()
    assert dialog.jobs.wait(10) and fake.nodes == [] and dialog.password.text() == ""


def test_pairing_a_real_sshd_node_through_the_dialog(qtbot, dialog_for, ssh_lab_factory, real_keyring):  # noqa: F811
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    client_key = ClientKey.load_or_create(SecretStore())
    settings = SshSettings(
        connect_timeout_s=2, handshake_timeout_s=5, auth_timeout_s=10, command_timeout_s=10
    )
    threads = []

    def pair(request, *, password, confirm, progress):
        threads.append(threading.current_thread())
        return pair_node(request, password=password, confirm=confirm, progress=progress,
                         client_key=client_key, dialer=ssh_lab.dialer, settings=settings)  # fmt: skip

    dialog = dialog_for(pair)
    fill(dialog, host=node.ip, user=ssh_lab.user(node), password=PASSWORD)
    dialog.name.setText("lab-1")
    with qtbot.waitSignal(dialog.fingerprint_received, timeout=30_000) as shown:
        dialog.check_button.click()
    assert shown.args[0] == ssh_lab.fingerprint(node)  # what sshd really presents
    with qtbot.waitSignal(dialog.paired, timeout=60_000):
        dialog.trust_button.click()
    entry = Registry().get("lab-1")
    assert entry.host_key.fingerprint == ssh_lab.fingerprint(node) and entry.user == ssh_lab.user(node)
    assert threads and threads[0] is not threading.main_thread()  # the SSH work ran off the GUI thread
