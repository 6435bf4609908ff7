"""A command's --timeout bounds the whole command, SSH connect included, on a cut link.

The node is paired for real (sshd in its namespace), then its link is cut
with ``ip link set down``: a TCP connect to it then hangs until its own
limit. ``node status --timeout T`` and ``node list --check --timeout T``
must still end within T (± 0.5 s), counted from when the command's process
starts: the interpreter's start and SparkSync's imports count toward T too,
as for every command's --timeout (``sparksync.cli.command_clock``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.lab.sshd import PASSWORD

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
TOLERANCE_S = 0.5

@pytest.fixture
def env(real_keyring):  # noqa: F811
    env = {**os.environ, **real_keyring.env}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    return env


def _timed(ssh_lab, env, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()  # CLOCK_MONOTONIC is one clock for every process
    done = ssh_lab.lab.exec(ssh_lab.client, [sys.executable, "-m", "sparksync", *args], env=env, cwd=REPO)
    return time.monotonic() - started, done


@pytest.mark.parametrize("timeout", [2.0, 4.0])
def test_status_and_list_end_within_their_timeout_on_a_cut_link(ssh_lab_factory, env, timeout):
    ssh_lab = ssh_lab_factory(1)
    node = ssh_lab.nodes[0]
    paired = ssh_lab.lab.exec(
        ssh_lab.client,
        [sys.executable, "-m", "sparksync", "node", "pair", node.ip, "--user", ssh_lab.user(node),
         "--password-stdin", "--name", "n1", "--accept-host-key", ssh_lab.fingerprint(node),
         "--interface", ssh_lab.client.ip],
        input=PASSWORD + "\n", env=env, cwd=REPO,
    )  # fmt: skip
    assert paired.returncode == 0, paired.stderr
    subprocess.run(["ip", "-n", node.netns, "link", "set", node.iface, "down"], check=True)

    took, status = _timed(ssh_lab, env, "node", "status", "n1", "--json", "--timeout", str(timeout))
    assert status.returncode == 11, status.stderr  # offline
    report = json.loads(status.stdout)["nodes"][0]
    assert report["state"] == "offline" and report["snapshot"] is None
    print(f"node status --timeout {timeout:g}: {took:.2f} s")
    assert timeout - TOLERANCE_S <= took <= timeout + TOLERANCE_S, (took, status.stderr)

    took, listed = _timed(ssh_lab, env, "node", "list", "--check", "--json", "--timeout", str(timeout))
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["nodes"][0]["state"] == "offline"
    print(f"node list --check --timeout {timeout:g}: {took:.2f} s")
    assert timeout - TOLERANCE_S <= took <= timeout + TOLERANCE_S, (took, listed.stderr)
