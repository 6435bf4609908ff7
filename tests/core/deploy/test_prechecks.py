"""The node probe's output, and the one-line verdicts of each pre-check."""

from __future__ import annotations

import subprocess

import pytest

from sparksync.core.bundle.platforms import Target
from sparksync.core.deploy.errors import PrecheckError
from sparksync.core.deploy.prechecks import (
    MIB,
    PROBE,
    NodeFacts,
    check_disk,
    check_node,
    parse_facts,
    probe_args,
    space_needed,
)

PROBED = """\
arch=aarch64
home=/home/nvidia
user=nvidia
python=/usr/bin/python3
python_version=3.12.3
venv=yes
df=/dev/nvme0n1p2     3842103 1200000 2642103      32% /
current=versions/0.1.0
previous=versions/0.0.9
complete=0.0.9
complete=0.1.0
partial=0.1.1
supervisor=4242
systemd_user=yes
service=active
linger=yes
some garbage line
"""


def good(**changes) -> NodeFacts:
    return parse_facts(PROBED).__class__(**{**parse_facts(PROBED).__dict__, **changes})


def test_the_probe_output_becomes_facts():
    facts = parse_facts(PROBED)
    assert (facts.arch, facts.home, facts.user) == ("aarch64", "/home/nvidia", "nvidia")
    assert (facts.python, facts.python_version, facts.python_minor, facts.venv_ok) == (
        "/usr/bin/python3", "3.12.3", "3.12", True,
    )  # fmt: skip
    assert facts.free_bytes == 2642103 * 1024
    assert (facts.current, facts.previous) == ("0.1.0", "0.0.9")
    assert facts.complete == ("0.0.9", "0.1.0") and facts.partial == ("0.1.1",)
    assert (facts.supervisor_pid, facts.systemd_user, facts.service_active, facts.linger) == (
        4242,
        True,
        True,
        True,
    )


def test_an_empty_node_gives_empty_facts():
    facts = parse_facts("arch=x86_64\nhome=/home/u\ndf=\ncurrent=\nprevious=\nsystemd_user=no\n")
    assert facts.python is None and facts.free_bytes is None and facts.current is None
    assert facts.complete == () and not facts.systemd_user and facts.supervisor_pid is None


def test_the_probe_script_runs_in_a_real_shell_and_changes_nothing(tmp_path):
    # The same script, here on this machine: a home with no agent in it.
    done = subprocess.run(
        ["sh", "-c", PROBE, "sh", *probe_args()], cwd=tmp_path, capture_output=True, text=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=30,
    )  # fmt: skip
    facts = parse_facts(done.stdout)
    assert facts.home == str(tmp_path) and facts.arch and facts.python == "/usr/bin/python3"
    assert facts.python_version.startswith("3.") and facts.free_bytes > 0
    assert facts.current is None and facts.complete == () and list(tmp_path.iterdir()) == []


def test_a_good_node_needs_the_bundle_of_its_cpu_and_python():
    assert check_node(parse_facts(PROBED), "spark-1") == Target("linux-aarch64", "3.12")
    assert check_node(good(arch="x86_64", python_version="3.11.2"), "n1") == Target("linux-x86_64", "3.11")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"python": None, "python_version": None}, "spark-1: python3 was not found on the node"),
        (
            {"python_version": "3.9.2"},
            "spark-1: python3 is 3.9.2, but the agent bundles need Python 3.10, 3.11 or 3.12",
        ),
        ({"venv_ok": False}, "sudo apt install python3.12-venv (or python3-venv)"),
        ({"python_version": None}, "spark-1: /usr/bin/python3 does not run"),
        (
            {"arch": "armv7l"},
            "spark-1: the CPU is 'armv7l'; the agent runs on aarch64 and x86_64 Linux only.",
        ),
    ],
)
def test_each_failed_check_is_one_clear_line(changes, expected):
    with pytest.raises(PrecheckError) as caught:
        check_node(good(**changes), "spark-1")
    assert len(caught.value.problems) == 1 and expected in caught.value.problems[0]
    assert "\n" not in str(caught.value)


def test_two_failed_checks_give_two_lines():
    with pytest.raises(PrecheckError) as caught:
        check_node(good(arch="riscv64", python=None, python_version=None), "n")
    assert len(caught.value.problems) == 2


def test_disk_space_needed_and_the_message_when_it_is_short():
    bundle = 5 * MIB
    fresh, uploaded = (
        space_needed(bundle, upload=True, install=True),
        space_needed(bundle, upload=False, install=True),
    )
    assert fresh - uploaded == bundle and space_needed(bundle, upload=True, install=False) == 0
    check_disk(good(free_bytes=fresh), "n", fresh)  # exactly enough
    with pytest.raises(PrecheckError) as caught:
        check_disk(good(free_bytes=30 * MIB, home="/home/u"), "n1", fresh)
    assert str(caught.value) == (
        f"n1: not enough disk space in /home/u: the agent needs about {fresh / MIB:.0f} MiB, 30 MiB are free. "
        "Free some space and deploy again."
    )
