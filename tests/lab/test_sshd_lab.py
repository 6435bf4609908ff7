"""The lab's sshd nodes themselves: real servers, each with its own key, name and user."""

from __future__ import annotations

import pwd
import subprocess
from pathlib import Path

import pytest

from .netlab import Lab
from .nsnet import read_banner
from .sshd import PASSWORD, SshdService, _create_user, lab_users, reap_stale_users


def test_each_node_runs_its_own_sshd_with_its_own_key_hostname_and_user(ssh_lab_factory):
    ssh_lab = ssh_lab_factory(2)
    n1, n2 = ssh_lab.nodes
    for node in ssh_lab.nodes:
        banner = read_banner(ssh_lab.client.netns, node.ip, 22, 5)
        assert banner.startswith(b"SSH-2.0-OpenSSH")
        assert node.extra["ssh_user"] == ssh_lab.user(node) and node.extra["ssh_password"] == PASSWORD
    assert ssh_lab.fingerprint(n1) != ssh_lab.fingerprint(n2)
    assert ssh_lab.hostname(n1) != ssh_lab.hostname(n2)
    assert ssh_lab.user(n1) != ssh_lab.user(n2) and set(ssh_lab.users()) <= set(lab_users())
    home = pwd.getpwnam(ssh_lab.user(n1)).pw_dir
    assert ssh_lab.authorized_keys_path(n1) == Path(home) / ".ssh" / "authorized_keys"
    # The client namespace runs no sshd.
    with pytest.raises(OSError):
        read_banner(ssh_lab.client.netns, ssh_lab.client.ip, 22, 2)


def test_a_regenerated_host_key_is_served_after_the_restart(ssh_lab_factory):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    before = ssh_lab.fingerprint(node)
    ssh_lab.regenerate_host_key(node)
    after = ssh_lab.fingerprint(node)
    scanned = ssh_lab.lab.exec(ssh_lab.client, ["ssh-keyscan", "-t", "ed25519", node.ip], check=True).stdout
    key_file = ssh_lab.service.workdir / "scanned"
    key_file.write_text(scanned)
    printed = subprocess.run(["ssh-keygen", "-lf", str(key_file)], capture_output=True, text=True, check=True)
    assert before != after and printed.stdout.split()[1] == after


def test_users_left_by_an_aborted_run_are_reaped(netns_ready, tmp_path):
    finished = subprocess.Popen(["true"])
    finished.wait()  # its pid now names no process: the owner of an aborted run
    orphan = f"sslab{finished.pid}xdeadn1"
    _create_user(orphan, "x")
    try:
        assert orphan in reap_stale_users()
        assert orphan not in lab_users()
    finally:
        subprocess.run(["userdel", "--remove", orphan], check=False, capture_output=True)


def test_a_failed_start_leaves_no_user_behind(netns_ready, tmp_path):
    class BrokenConfig(SshdService):
        def _launch(self, lab, node):
            raise RuntimeError("simulated sshd failure")

    lab = Lab.create(1)
    service = BrokenConfig(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="simulated"):
            lab.add_service(service)
    finally:
        lab.teardown()
    assert service.nodes["n1"].user not in lab_users()
