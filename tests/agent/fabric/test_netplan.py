"""The netplan file the helper writes, checked by the real ``netplan generate`` (Debian: netplan.io)."""

from __future__ import annotations

import shutil

import pytest
from sparksync_agent.fabric import netplan
from sparksync_agent.protocol import InterfacePlan

pytestmark = pytest.mark.skipif(shutil.which("netplan") is None, reason="netplan.io is not installed")

PLAN = [InterfacePlan(name="enp1s0f0np0", addresses=["10.100.0.1/24"]),
        InterfacePlan(name="enP2p1s0f0np0", addresses=["10.100.1.1/24"], mtu=9000)]


def test_the_file_names_only_the_planned_netdevs_and_netplan_accepts_it():
    text = netplan.render("plan-1", PLAN)
    assert "plan plan-1" in text and "renderer" not in text
    assert text.count("mtu: 9000") == 2 and '- "10.100.1.1/24"' in text and "link-local: [ipv6]" in text
    ok, said = netplan.validate(text)
    assert ok, said
    assert "10-netplan-enP2p1s0f0np0.network" in said and "10-netplan-enp1s0f0np0.network" in said


def test_a_file_netplan_refuses_is_reported_with_its_reason():
    ok, said = netplan.validate(netplan.render("p", PLAN).replace("mtu: 9000", "mtu: lots", 1))
    assert not ok and "invalid unsigned int value 'lots'" in said
