"""``sparksync node status`` through click's runner and as a real process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import psutil
from click.testing import CliRunner

from sparksync import __version__
from sparksync.cli.main import cli
from sparksync.core.agents.local import LocalAgent
from sparksync.core.base.paths import local_agent_state_dir
from sparksync.core.nodes.identity import local_node_id
from sparksync_agent.state import read_endpoint
from tests.machine import mem_total_bytes


def check_local_node(document: dict) -> dict:
    [node] = document["nodes"]
    assert node["name"] == "this computer" and node["source"] == "local" and node["error"] is None
    snapshot = node["snapshot"]
    assert node["id"] == snapshot["info"]["node_id"]  # this computer's id is its local agent's
    assert snapshot["info"]["hostname"] == socket.gethostname()
    assert snapshot["latest"]["memory"]["total_bytes"] == mem_total_bytes()
    assert snapshot["latest"]["seq"] >= 1
    return snapshot


def test_version():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"sparksync {__version__}"


def test_status_json_starts_and_stops_the_local_agent(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["node", "status", "--json"])
    assert result.exit_code == 0, result.output
    check_local_node(json.loads(result.stdout))
    assert json.loads(result.stdout)["nodes"][0]["id"] == local_node_id()
    assert read_endpoint(local_agent_state_dir()) is None  # it stopped the agent it started
    assert not psutil.Process().children(recursive=True)


def test_status_attaches_to_a_running_agent_and_leaves_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path))
    with LocalAgent(sample_hz=10) as agent:
        result = CliRunner().invoke(cli, ["node", "status", "--json"])
        assert result.exit_code == 0, result.output
        snapshot = check_local_node(json.loads(result.stdout))
        assert snapshot["run_id"] == agent.endpoint.run_id
        assert agent.is_alive()


def test_status_table(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["node", "status"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "this computer (local)"
    assert any(line.split() == ["hostname", socket.gethostname()] for line in lines)
    assert any(line.strip().startswith("memory") and "GB used" in line for line in lines)


def test_a_failing_agent_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path))
    (tmp_path / "data").write_text("a file where the data dir should be")
    result = CliRunner().invoke(cli, ["node", "status", "--json"])
    assert result.exit_code == 6  # LocalAgentError
    assert result.stderr.startswith("sparksync: error: this computer: the local agent exited")
    assert "Traceback" not in result.output
    [node] = json.loads(result.stdout)["nodes"]
    assert node["snapshot"] is None and "exited" in node["error"]


def test_python_dash_m_sparksync_reports_this_machine(tmp_path):
    env = {**os.environ, "SPARKSYNC_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "sparksync", "node", "status", "--json"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    check_local_node(json.loads(done.stdout))
    assert read_endpoint(tmp_path / "data" / "local-agent") is None
