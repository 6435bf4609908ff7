"""Starting, stopping and refusing to start: the agent as an operator meets it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from sparksync_agent.protocol import AGENT_VERSION, PROTOCOL_VERSION, AgentStatus

from tests.agent.agentproc import start_agent


def _agent_cli(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sparksync_agent", *args], capture_output=True, text=True, timeout=timeout
    )


def test_version_prints_agent_and_protocol():
    result = _agent_cli("version")
    assert result.returncode == 0
    assert AGENT_VERSION in result.stdout and PROTOCOL_VERSION in result.stdout


def test_node_id_and_token_survive_a_restart(agent_factory, tmp_path):
    state = tmp_path / "state"
    first = agent_factory(state_dir=state)
    node_id, token = (state / "node_id").read_text(), first.token
    assert oct((state / "token").stat().st_mode & 0o777) == "0o600"
    first.stop()
    second = agent_factory(state_dir=state)
    assert (state / "node_id").read_text() == node_id
    assert second.token == token
    with second.client() as client:
        assert client.get("/v1/snapshot").json()["info"]["node_id"] == node_id.strip()


def test_an_agent_reports_the_node_id_it_was_given(agent_factory, tmp_path):
    """Deploy writes the node's id (the one the client keys it by) before the agent starts."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "node_id").write_text("0a1b2c3d4e5f60718293a4b5c6d7e8f9\n")
    agent = agent_factory(state_dir=state)
    with agent.client() as client:
        assert client.post("/v1/hello", json={}).json()["node_id"] == "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
    assert (state / "node_id").read_text() == "0a1b2c3d4e5f60718293a4b5c6d7e8f9\n"


def test_status_command_reads_the_running_agent(agent_factory, tmp_path):
    agent = agent_factory(state_dir=tmp_path / "state")
    result = _agent_cli("status", "--json", "--state-dir", str(agent.state_dir))
    assert result.returncode == 0, result.stderr
    status = AgentStatus.model_validate_json(result.stdout)
    assert status.pid == agent.proc.pid
    assert agent.token not in result.stdout


def test_status_without_an_agent_says_so(tmp_path):
    result = _agent_cli("status", "--json", "--state-dir", str(tmp_path / "nothing"))
    assert result.returncode == 3
    assert "no agent is running" in result.stderr


def test_a_taken_port_is_a_clear_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _agent_cli("serve", "--state-dir", str(tmp_path / "s"), "--port", str(port))
    assert result.returncode == 2
    assert f"port {port}" in result.stderr and "already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unwritable_state_dir_exits_2(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a file where a directory must go: unwritable even for root
    result = _agent_cli("serve", "--state-dir", str(blocker / "state"))
    assert result.returncode == 2
    assert "cannot write the state directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_loose_token_file_is_refused_with_the_fix(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "token").write_text("secret-token-value\n")
    os.chmod(state / "token", 0o644)
    result = _agent_cli("serve", "--state-dir", str(state))
    assert result.returncode == 2
    assert f"chmod 600 {state / 'token'}" in result.stderr
    assert "secret-token-value" not in result.stderr


def test_bad_sample_rate_is_refused(tmp_path):
    result = _agent_cli("serve", "--state-dir", str(tmp_path), "--sample-hz", "50")
    assert result.returncode == 2 and "between 1 and 10" in result.stderr


def test_endpoint_file_names_the_free_port_chosen(tmp_path):
    agent = start_agent(tmp_path / "state", tmp_path / "log")
    try:
        endpoint = json.loads((tmp_path / "state" / "endpoint.json").read_text())
        assert endpoint["port"] == agent.port > 0
        with socket.create_connection(("127.0.0.1", agent.port), timeout=2):
            pass
    finally:
        agent.stop()


def test_an_agent_started_for_a_parent_stops_when_the_parent_dies(tmp_path):
    import time

    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    agent = start_agent(tmp_path / "state", tmp_path / "log", "--parent-pid", str(parent.pid))
    try:
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while agent.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert agent.proc.poll() is not None, "the agent outlived its parent"
        assert "parent process" in agent.log()
    finally:
        agent.stop()
