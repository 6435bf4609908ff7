"""ClusterActions holds one fleet for the app's life and shares its transports with every action."""

from __future__ import annotations

import threading

from sparksync.core.nodes.cluster_actions import ClusterActions
from sparksync.core.fleet.remote_node import SharedFleet


class FakeFleet:
    def __init__(self):
        self.transports = object()
        self.closed = threading.Event()

    def close(self):
        self.closed.set()


def test_the_fleet_opens_once_is_shared_with_node_handles_and_closes_after_the_last_user():
    made = []
    shared = SharedFleet(lambda: made.append(FakeFleet()) or made[-1])
    actions = ClusterActions(shared_fleet=shared)
    assert actions.shared_fleet is shared
    fleet = actions.fleet()
    assert actions.fleet() is fleet and actions.transports() is fleet.transports and len(made) == 1
    with shared.use() as used:  # what an SshNode's telemetry worker does
        assert used is fleet
        actions.close()  # the app quits while a worker still streams
        assert not fleet.closed.is_set()
    assert fleet.closed.is_set() and len(made) == 1
