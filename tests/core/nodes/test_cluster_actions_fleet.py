"""ClusterActions holds one fleet for the app's life: made once, no keyring until a paired node, closed with the app."""

from __future__ import annotations

import pytest

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.fleet.problems import NodeProblem
from sparksync.core.nodes.cluster_actions import ClusterActions


def test_the_fleet_is_made_once_reaches_this_computer_without_the_keyring_and_closes_with_the_app(monkeypatch):
    def no_keyring(self):
        raise AssertionError("the keyring was asked although no paired node was reached")

    monkeypatch.setattr(ClusterActions, "_client_key", no_keyring)
    actions = ClusterActions(sample_hz=5)
    fleet = actions.fleet()
    assert actions.fleet() is fleet
    assert fleet.names() == ["this computer"] and fleet.cluster() == ["this computer"]
    assert fleet.agent("local") is fleet.agent("this computer") is fleet.local and fleet.local.sample_hz == 5
    actions.disconnect_all()  # nothing paired: nothing to drop, and still no keyring
    actions.close()
    with pytest.raises(SparkSyncError, match="closing"):
        actions.fleet()
    with pytest.raises(NodeProblem, match="closed"):
        fleet.agent("spark-1")
