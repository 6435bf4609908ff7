"""``sparksync model`` on this computer, for real: its local agent lists, fetches and deletes.

The fetch runs the real huggingface_hub inside this computer's agent against a
local hub the test starts and fills (``hub_server``); no hub is reachable here.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sparksync.cli.main import cli
from sparksync.core.agents import LocalAgent
from tests.core.models.hub_server import HubServer
from tests.core.models.model_files import write_safetensors, write_tiny_gguf

pytestmark = pytest.mark.slow


def invoke(*args: str, code: int = 0):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    return result.stdout


@pytest.fixture
def here(tmp_path, monkeypatch, _isolated_home):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # the local agent inherits it
    write_tiny_gguf(_isolated_home / "models", "tiny")
    agent = LocalAgent(sample_hz=2).start()
    yield agent
    agent.stop()


def test_list_fetch_and_delete_on_this_computer(here, tmp_path):
    listed = json.loads(invoke("model", "list", "--json"))
    assert [n["name"] for n in listed["nodes"]] == ["this computer"]
    assert listed["nodes"][0]["free_bytes"] > 0
    [tiny] = listed["models"]
    cell = tiny["nodes"]["this computer"]
    assert (tiny["name"], cell["state"], cell["format"]) == ("tiny", "present", "gguf")
    assert tiny["size_bytes"] == cell["size_bytes"] > 0

    hub = HubServer()
    write_safetensors(tmp_path / "upload", shards=2, shard_bytes=200_000)
    hub.add_folder("acme/tiny-st", tmp_path / "upload")
    url = hub.start()
    try:
        lines = invoke("model", "fetch", "acme/tiny-st", "--node", "this-computer", "--endpoint", url,
                       "--no-token", "--json").splitlines()  # fmt: skip
    finally:
        hub.stop()
    events = [json.loads(line) for line in lines]
    assert events[-1]["event"] == "summary" and events[-1]["state"] == "done"
    assert events[-1]["bytes_done"] == sum(len(d) for d in hub.repos["acme/tiny-st"].files.values())
    assert all(e["event"] == "progress" for e in events[:-1]) and events[0]["state"] == "running"

    text = invoke("model", "list")
    rows = {line.split()[0]: line.split() for line in text.splitlines()[1:]}
    assert rows["acme/tiny-st"][-1] == "present" and rows["tiny"][-1] == "present"
    assert text.splitlines()[-1].startswith("FREE")

    invoke("model", "delete", "acme/tiny-st", "--node", "local")
    listed = json.loads(invoke("model", "list", "--json"))
    assert [m["name"] for m in listed["models"]] == ["tiny"]
    assert not (tmp_path / "hf" / "hub" / "models--acme--tiny-st").exists()
