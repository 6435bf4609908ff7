"""pytest plugin with the ``lab_factory`` fixture.

tests/conftest.py loads it with ``pytest_plugins = ["tests.lab.fixtures"]``, so
any test, not only those under tests/lab, can build a lab. Tests that use
``lab_factory`` or ``netns_ready`` get the ``lab`` marker automatically, so
``-m "not lab"`` leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from .netlab import Lab, LabError, netns_usable, reap_stale_labs


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if {"lab_factory", "netns_ready"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.lab)
