"""mDNS through the real daemon: ``sparksync-agent serve --advertise --interface IP``."""

from __future__ import annotations

import json
import signal
import socket
import sys
import time

import pytest

from tests.agent.agentproc import start_agent
from tests.agent.test_advertise import BROWSE_NODE


def _browse(node_id: str, ip: str, timeout_s: float, popen=None):
    import subprocess

    argv = [sys.executable, "-c", BROWSE_NODE, ip, node_id, str(timeout_s)]
    return (popen or subprocess.Popen)(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_real_agent_is_found_on_loopback_and_says_goodbye(tmp_path):
    agent = start_agent(tmp_path / "state", tmp_path / "agent.log", "--advertise", "--interface", "127.0.0.1")
    try:
        node_id = (tmp_path / "state" / "node_id").read_text().strip()
        browser = _browse(node_id, "127.0.0.1", 8)
        found = json.loads(browser.stdout.readline() or "null")
        assert found, browser.stderr.read()
        txt = found["txt"]
        assert txt["node_id"] == node_id and txt["hostname"] == socket.gethostname()
        assert int(txt["mem_total"]) > 0 and txt["protocol"] and txt["agent_version"]
        assert agent.token not in json.dumps(found) and str(agent.port) not in txt.values()
        with agent.client() as client:
            assert client.get("/v1/status").json()["advertising"] is True
        agent.proc.send_signal(signal.SIGTERM)
        assert json.loads(browser.stdout.readline()) == {"removed": True}
        assert browser.wait(5) == 0
    finally:
        agent.stop()


@pytest.mark.lab
def test_real_agent_in_one_namespace_is_found_from_another(lab_factory, tmp_path):
    lab = lab_factory(2)
    node, other = lab.nodes
    argv = [sys.executable, "-m", "sparksync_agent", "serve", "--port", "0", "--state-dir", str(tmp_path / "s"),
            "--advertise", "--interface", node.ip]
    log = open(tmp_path / "agent.log", "wb")
    agent = lab.popen(node, argv, stdout=log, stderr=log)
    deadline = time.monotonic() + 15
    while not (tmp_path / "s" / "endpoint.json").exists():
        assert agent.poll() is None and time.monotonic() < deadline, (tmp_path / "agent.log").read_text()
        time.sleep(0.05)
    node_id = (tmp_path / "s" / "node_id").read_text().strip()
    browser = _browse(node_id, other.ip, 8, popen=lambda a, **kw: lab.popen(other, a, **kw))
    found = json.loads(lab.read_line(browser, 10) or "null")
    assert found, (tmp_path / "agent.log").read_text()
    assert found["addresses"] == [node.ip] and found["port"] == 22
    assert found["txt"]["node_id"] == node_id
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(5) in (0, -signal.SIGTERM)
    assert json.loads(lab.read_line(browser, 10)) == {"removed": True}
    browser.wait(5)
