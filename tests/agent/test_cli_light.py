"""`sparksync-agent version` and the supervisor load no wire models: deploy runs the first on every new
venv, and the second lives beside each agent, so their start-up is CPU every node pays."""

from __future__ import annotations

import json
import subprocess
import sys

from sparksync_agent._version import PROTOCOL_VERSION
from sparksync_agent._version import __version__ as AGENT_VERSION
from sparksync_agent.protocol import AGENT_VERSION as WIRE_AGENT_VERSION
from sparksync_agent.protocol import PROTOCOL_VERSION as WIRE_PROTOCOL_VERSION

LOADED = "import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"


def loaded_by(module: str) -> set[str]:
    argv = [sys.executable, "-c", LOADED.format(module=module)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    return set(json.loads(done.stdout))


def test_the_cli_loads_neither_pydantic_nor_the_protocol_until_a_command_needs_them():
    modules = loaded_by("sparksync_agent.cli")
    wire = {m for m in modules if m.split(".")[0] == "pydantic" or m.startswith("sparksync_agent.protocol")}
    assert not wire
    assert "sparksync_agent.runtime" not in modules


def test_version_prints_the_protocols_own_versions():
    assert (AGENT_VERSION, PROTOCOL_VERSION) == (WIRE_AGENT_VERSION, WIRE_PROTOCOL_VERSION)
    argv = [sys.executable, "-m", "sparksync_agent", "version"]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout == f"sparksync-agent {AGENT_VERSION} (protocol {PROTOCOL_VERSION})\n"
