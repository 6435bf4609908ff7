"""pytest plugin with the ``lab_factory`` and ``ssh_lab_factory`` fixtures.

tests/conftest.py loads it with ``pytest_plugins = ["tests.lab.fixtures"]``, so
any test, not only those under tests/lab, can build a lab. Tests that use
``lab_factory`` or ``netns_ready`` get the ``lab`` marker automatically, so
``-m "not lab"`` leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from .netlab import Lab, LabError, netns_usable, reap_stale_labs
from .sshd import SshdService, SshLab, lab_users, missing_tools, reap_stale_users


@pytest.fixture(scope="session")
def netns_ready() -> None:
    """Skip unless this process can make namespaces; reap labs that aborted runs left."""
    reason = netns_usable()
    if reason:
        pytest.skip(reason)
    reap_stale_labs()


@pytest.fixture
def lab_factory(netns_ready: None) -> Iterator[Callable[[int], Lab]]:
    """``make(n)`` builds an n-node lab; every lab made is torn down after the test."""
    labs: list[Lab] = []

    def make(n: int = 2) -> Lab:
        lab = Lab.create(n)
        labs.append(lab)
        return lab

    yield make
    failures = []
    for lab in reversed(labs):
        try:
            lab.teardown()
        except LabError as exc:
            failures.append(str(exc))
    if failures:
        pytest.fail("lab teardown left things behind: " + "; ".join(failures))


@pytest.fixture(scope="session")
def sshd_ready(netns_ready: None) -> None:
    """Skip unless sshd and the user tools are here; reap test users that aborted runs left."""
    reason = missing_tools()
    if reason:
        pytest.skip(reason)
    reap_stale_users()


@pytest.fixture
def ssh_lab_factory(
    sshd_ready: None, lab_factory: Callable[[int], Lab], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[int], SshLab]]:
    """``make(n)``: n nodes each running a real sshd with its own host key and test user,
    plus a client namespace (``.client``) on the same bridge. All removed after the test."""
    made: list[SshLab] = []

    def make(n: int = 2) -> SshLab:
        lab = lab_factory(n + 1)  # the last node is the client
        service = SshdService(tmp_path_factory.mktemp("sshd"))
        made.append(SshLab(lab, service))
        lab.add_service(service, lab.nodes[:n])
        return made[-1]

    yield make
    users = [user for ssh_lab in made for user in ssh_lab.users()]
    for ssh_lab in reversed(made):
        ssh_lab.lab.teardown()  # here rather than in lab_factory, so the check below sees the result
    left = sorted(set(users) & set(lab_users()))
    if left:
        pytest.fail(f"lab teardown left test users behind: {left}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if {"lab_factory", "netns_ready"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.lab)
