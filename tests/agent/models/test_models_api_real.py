"""The models API of a real agent process: list, fetch with real huggingface_hub, delete refused in use.

``fetch`` runs the real huggingface_hub inside the agent against a local hub
(``hub_server``) that the test starts and fills: no hub is reachable here.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from sparksync.core.agents.client import AgentClient
from sparksync.core.base.errors import AgentRequestError
from sparksync_agent.protocol import (
    FetchRequest,
    JobState,
    ModelState,
    RankLaunch,
    RootKind,
    RootsConfig,
)
from tests.agent.agentproc import start_agent
from tests.core.models.hub_server import HubServer
from tests.core.models.model_files import write_safetensors, write_tiny_gguf

pytestmark = pytest.mark.slow
TOKEN = "hf_test_secret_token_0123456789"


@pytest.fixture
def agent(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    state = tmp_path / "state"
    running = start_agent(state, tmp_path / "agent.log", "--sample-hz", "2")
    client = AgentClient(running.base_url, running.token, timeout=30.0)
    yield running, client
    client.close()
    running.stop(timeout=15)


@pytest.fixture
def hub(tmp_path):
    server = HubServer()
    write_safetensors(tmp_path / "upload", shards=2, shard_bytes=300_000)
    server.add_folder("acme/private-st", tmp_path / "upload", token=TOKEN)
    url = server.start()
    yield server, url
    server.stop()


def wait_job(client: AgentClient, job_id: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while True:
        job = client.model_job(job_id)
        if job.state.finished:
            return job
        assert time.monotonic() < deadline, f"model job {job_id} did not end: {job}"
        time.sleep(0.1)


def test_fetch_downloads_with_the_token_into_the_hf_cache_and_the_token_stays_out_of_logs(agent, hub, tmp_path):
    running, client = agent
    server, url = hub
    refused = client.fetch_model(FetchRequest(repo="acme/private-st", endpoint=url))
    failed = wait_job(client, refused.id)
    assert failed.state is JobState.failed and "acme/private-st" in failed.message

    job = client.fetch_model(FetchRequest(repo="acme/private-st", endpoint=url, token=TOKEN))
    assert job.state is JobState.running
    assert TOKEN not in repr(FetchRequest(repo="acme/private-st", token=TOKEN))
    done = wait_job(client, job.id)
    assert done.state is JobState.done, done.message
    assert done.bytes_total == done.bytes_done == sum(len(d) for d in server.repos["acme/private-st"].files.values())
    assert done.model is not None and done.model.root_kind is RootKind.hf_cache
    assert f"Bearer {TOKEN}" in server.seen_auth  # it reached the downloading process

    [entry] = client.models().models
    assert (entry.name, entry.state, entry.format.value) == ("acme/private-st", ModelState.present, "safetensors")
    assert entry.directory.startswith(str(tmp_path / "hf" / "hub" / "models--acme--private-st" / "snapshots"))
    assert {f.path for f in entry.files} == set(server.repos["acme/private-st"].files)
    # Never in the agent's log, its state files, nor the cache it wrote.
    assert TOKEN not in running.log()
    for path in [*running.state_dir.rglob("*"), *(tmp_path / "hf").rglob("*")]:
        if path.is_file() and not path.is_symlink():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_a_model_a_running_workload_names_cannot_be_deleted_until_it_stops(agent, tmp_path):
    running, client = agent
    roots = client.set_model_roots(RootsConfig(store=str(tmp_path / "store")))
    assert roots.store == str(tmp_path / "store")
    gguf = write_tiny_gguf(tmp_path / "store" / "busy")
    write_tiny_gguf(tmp_path / "store", "idle")
    launch = RankLaunch(
        group="g", node="local", rank=0, role="engine", log_name="engine",
        argv=[sys.executable, "-c", "import time; time.sleep(120)", "-m", str(gguf)],
        readiness={"kind": "process"},
    )  # fmt: skip
    client.start_rank("w-busy", launch)
    try:
        with pytest.raises(AgentRequestError) as refused:
            client.delete_model("busy")
        assert refused.value.status == 409 and "w-busy" in str(refused.value)
        client.delete_model("idle")
        assert [m.name for m in client.models().models] == ["busy"]
    finally:
        client.stop_workload("w-busy", grace_s=2)
    client.delete_model("busy")
    assert client.models().models == []
    assert not os.path.exists(gguf)
