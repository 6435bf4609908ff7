"""The fabric routes: the report from a fake sysfs tree, and how the helper's outcomes are answered."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sparksync_agent.api.app import create_app
from sparksync_agent.collectors import CollectorSet
from sparksync_agent.fabric import sudo
from sparksync_agent.fabric.report import FabricInspector
from sparksync_agent.fabric.service import FabricService
from sparksync_agent.protocol import FabricReport, FabricResult, NodeInfo
from sparksync_agent.runtime import AgentOptions, AgentRuntime
from tests.agent.fabric.test_ports_sysfs import ADDRESSES, fake_sys

TOKEN = "unit-test-token"
BODY = {"plan": {"plan_id": "p", "interfaces": [{"name": "enp1s0f0np0", "addresses": ["10.100.0.1/24"]}]},
        "sudo_password": "Body-Sekrit-1"}


@pytest.fixture
def client(tmp_path):
    info = NodeInfo(node_id="n1", hostname="h", arch="aarch64", os="Ubuntu", kernel="6", cpu_count=20, boot_time=0)
    runtime = AgentRuntime(AgentOptions(state_dir=tmp_path, sample_hz=1), "n1", info, CollectorSet([]))
    runtime.fabric = FabricService("n1", tmp_path, FabricInspector("n1", fake_sys(tmp_path / "sys"), lambda: ADDRESSES))
    with TestClient(create_app(runtime, TOKEN), headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        yield http


def test_report_without_probe(client):
    answer = client.get("/v1/fabric", params={"probe": False})
    assert answer.status_code == 200
    report = FabricReport.model_validate(answer.json())
    assert [i.name for i in report.interfaces][:2] == ["enp1s0f0np0", "enP2p1s0f0np0"] and not report.probed


@pytest.mark.parametrize(("raised", "status", "code"), [
    (sudo.SudoRefused("sudo refused: 1 incorrect password attempt"), 403, "sudo_refused"),
    (sudo.HelperRefused("enP7s7 is not a ConnectX-7 fabric netdev"), 400, "fabric_refused"),
    (sudo.HelperFailed("no answer"), 502, "fabric_helper_failed"),
])
def test_helper_outcomes_are_error_bodies(client, monkeypatch, raised, status, code):
    def run_helper(*args, **kwargs):
        raise raised

    monkeypatch.setattr("sparksync_agent.fabric.service.run_helper", run_helper)
    answer = client.post("/v1/fabric/apply", json=BODY)
    assert answer.status_code == status and answer.json()["error"] == code
    assert str(raised) in answer.json()["message"] and "Body-Sekrit-1" not in answer.text


def test_a_failed_apply_is_an_answer_with_its_steps(client, monkeypatch):
    failed = FabricResult(ok=False, action="apply", applier="iproute2", error="mtu refused", restored=True)
    monkeypatch.setattr("sparksync_agent.fabric.service.run_helper", lambda *a, **k: failed)
    answer = client.post("/v1/fabric/apply", json=BODY)
    assert answer.status_code == 200 and FabricResult.model_validate(answer.json()) == failed


def test_an_invalid_body_never_echoes_the_password(client):
    answer = client.post("/v1/fabric/apply", json={"plan": {"plan_id": 1}, "sudo_password": "Sekrit-XYZ"})
    assert answer.status_code == 422 and "Sekrit-XYZ" not in answer.text
