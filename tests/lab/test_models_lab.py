"""Model copies for real: paired lab nodes, real agents, real sshd, real rsync, the CLI as a user runs it.

- one node → seven over node-to-node SSH (``model_lab.mesh_keys``), fanned out
  from node to node, a target passing on each verified file while the next
  ones still arrive (seen over slow links); a corrupted byte on one target found by a fresh sha256 and
  repaired; a copy stopped halfway (Ctrl-C) listed partial, then resumed;
- without node-to-node SSH the copy is relayed through this computer (and
  says so); this computer as the source; a target without the space refused
  before any byte moves.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.core.models.model_files import flip_byte, write_safetensors, write_tiny_gguf
from tests.lab.model_lab import (
    give,
    mesh_keys,
    same_files,
    shape,
    small_disk,
    store_of,
    unmount,
    unshape,
)
from tests.lab.test_fleet_lab import (  # noqa: F401  (fixtures)
    REPO,
    agent_python,
    cli_env,
    client_key,
    lab_agents,
    sparksync,
)

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def run_json(ssh_lab, env, *args: str, code: int = 0) -> list[dict]:
    done = sparksync(ssh_lab, env, *args)
    assert done.returncode == code, f"{args}: {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def matrix(ssh_lab, env) -> dict:
    done = sparksync(ssh_lab, env, "model", "list", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    return {m["name"]: {n: c["state"] for n, c in m["nodes"].items()} for m in data["models"]}


def summary(lines: list[dict]) -> dict:
    [last] = [line for line in lines if line["event"] == "summary"]
    return last


def test_one_node_to_seven_over_node_to_node_ssh_as_a_tree_verified_repaired_and_resumed(
    lab_agents, real_keyring  # noqa: F811
):
    ssh_lab, agents = lab_agents(8)
    env = cli_env(real_keyring)
    nodes = ssh_lab.nodes
    first, targets = nodes[0], nodes[1:]
    mesh_keys(ssh_lab, nodes)
    source = store_of(ssh_lab, first)
    write_safetensors(source / "org" / "st-model", shards=3, shard_bytes=1 << 20)
    write_tiny_gguf(source, "tiny")
    give(ssh_lab, first, source)

    before = matrix(ssh_lab, env)
    assert before["org/st-model"][first.name] == "present"
    assert all(before["org/st-model"][t.name] == "missing" for t in targets)

    to = [arg for t in targets for arg in ("--to", t.name)]
    lines = run_json(ssh_lab, env, "model", "copy", "org/st-model", "--from", first.name, *to, "--json")
    report = summary(lines)
    assert report["ok"] and not report["relayed"]
    by_node = {r["node"]: r for r in report["nodes"]}
    assert sorted(by_node) == sorted(t.name for t in targets)
    assert {r["state"] for r in by_node.values()} == {"copied"}
    assert {r["route"] for r in by_node.values()} == {"ssh"}
    # A tree: nodes that had finished served others.
    sources = {r["source"] for r in by_node.values()}
    assert len(sources) >= 3 and first.name in sources, sources
    progress = [line for line in lines if line["event"] == "progress" and line["phase"] == "copying"]
    assert {p["node"] for p in progress} == set(by_node)
    assert all(p["bytes_total"] == report["size_bytes"] for p in progress)
    assert any(p["rate_bps"] for p in progress)
    for target in targets:
        assert same_files(source / "org" / "st-model", store_of(ssh_lab, target) / "org" / "st-model")
    after = matrix(ssh_lab, env)
    assert {after["org/st-model"][n.name] for n in nodes} == {"present"}

    # Pipelined: over links that take a second a shard, a target passes each shard on, once its own sha256
    # check found it good, to the next target while the later shards still reach it.
    write_safetensors(source / "piped", shards=4, shard_bytes=2 << 20, seed=3)
    give(ssh_lab, first, source)
    chain = [first, *targets[:3]]
    for node in chain:
        shape(ssh_lab, node, "16mbit")
    try:
        lines = run_json(ssh_lab, env, "model", "copy", "piped", "--from", first.name,
                         *[arg for t in targets[:3] for arg in ("--to", t.name)], "--json")  # fmt: skip
    finally:
        for node in chain:
            unshape(ssh_lab, node)
    report = summary(lines)
    assert report["ok"], report
    by_node = {r["node"]: r for r in report["nodes"]}
    early = [r for r in by_node.values() if r["served_early"]]
    assert early, by_node
    for result in early:
        upstream = result["source"]
        assert upstream in by_node and set(result["served_early"]) <= {f.name for f in (source / "piped").iterdir()}
        # The push from the upstream's staging folder ran before the upstream's own copy was done.
        moving = next(i for i, line in enumerate(lines) if line["event"] == "progress" and line["phase"] == "copying"
                      and line["node"] == result["node"] and line["source"] == upstream and line["bytes_done"] > 0)
        upstream_done = next(i for i, line in enumerate(lines) if line["event"] == "progress"
                             and line["phase"] == "done" and line["node"] == upstream)  # fmt: skip
        assert moving < upstream_done, (result, lines)
        assert by_node[upstream]["state"] == "copied" and result["state"] == "copied"
    for target in targets[:3]:
        assert same_files(source / "piped", store_of(ssh_lab, target) / "piped")

    # Without --from: a node that has it is the source; the GGUF goes out the same way.
    report = summary(run_json(ssh_lab, env, "model", "copy", "tiny", *to[:4], "--json"))
    assert report["ok"] and report["source"] == first.name

    # A flipped byte keeps size and mtime: only the fresh sha256 of the next copy sees it.
    victim = targets[3]
    shard = store_of(ssh_lab, victim) / "org" / "st-model" / "model-00002-of-00003.safetensors"
    flip_byte(shard)
    assert matrix(ssh_lab, env)["org/st-model"][victim.name] == "present"  # the cache is keyed by size+mtime
    lines = run_json(ssh_lab, env, "model", "copy", "org/st-model", "--to", victim.name, "--to", targets[0].name,
                     "--json")  # fmt: skip
    report = summary(lines)
    states = {r["node"]: (r["state"], r["recopied"]) for r in report["nodes"]}
    assert states[victim.name] == ("repaired", ["model-00002-of-00003.safetensors"])
    assert states[targets[0].name][0] == "present"
    assert same_files(source / "org" / "st-model", store_of(ssh_lab, victim) / "org" / "st-model")

    # Ctrl-C halfway through a copy over a slow link: partial, never present; the next run resumes.
    big = source / "big"
    write_safetensors(big, shards=2, shard_bytes=6 << 20, seed=5)
    give(ssh_lab, first, source)
    target = targets[1]
    shape(ssh_lab, first, "24mbit")
    try:
        argv = [sys.executable, "-m", "sparksync", "model", "copy", "big", "--from", first.name, "--to", target.name,
                "--json"]  # fmt: skip
        proc = ssh_lab.lab.popen(ssh_lab.client, argv, env=env, cwd=REPO, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)  # fmt: skip
        total, seen = None, 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = ssh_lab.lab.read_line(proc, 60).strip()
            if not line:
                break
            event = json.loads(line)
            if event.get("phase") == "copying" and event["bytes_total"]:
                total, seen = event["bytes_total"], event["bytes_done"]
                if seen > total * 0.4:
                    break
        assert total and total * 0.4 < seen < total, (seen, total)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert b"stopped" in err
        # The push on the source stopped too: no rsync left running there.
        user = ssh_lab.user(first)
        time.sleep(1)
        assert not [p for p in psutil.process_iter(["name", "username"])
                    if p.info["name"] == "rsync" and p.info["username"] == user]  # fmt: skip
        assert matrix(ssh_lab, env)["big"][target.name] == "partial"
        unshape(ssh_lab, first)
        report = summary(run_json(ssh_lab, env, "model", "copy", "big", "--from", first.name, "--to", target.name,
                                  "--json"))  # fmt: skip
        [result] = report["nodes"]
        assert result["state"] == "copied"
        assert result["literal_bytes"] < total * 0.75, result  # only what was missing crossed the link
        assert same_files(big, store_of(ssh_lab, target) / "big")
        assert matrix(ssh_lab, env)["big"][target.name] == "present"
    finally:
        unshape(ssh_lab, first)


def test_without_node_to_node_ssh_a_copy_is_relayed_and_a_full_target_is_refused_before_any_byte_moves(
    lab_agents, real_keyring, _isolated_home  # noqa: F811
):
    ssh_lab, agents = lab_agents(3)
    env = cli_env(real_keyring)
    first, second, third = ssh_lab.nodes
    source = store_of(ssh_lab, first)
    write_safetensors(source / "st", shards=2, shard_bytes=1 << 20)
    give(ssh_lab, first, source)

    done = sparksync(ssh_lab, env, "model", "copy", "st", "--from", first.name, "--to", second.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "relayed through this computer" in done.stdout
    assert same_files(source / "st", store_of(ssh_lab, second) / "st")

    # This computer as the source: its own store, over its SSH connection to the node.
    write_tiny_gguf(_isolated_home / "models", "here")
    report = summary(run_json(ssh_lab, env, "model", "copy", "here", "--from", "this-computer", "--to", third.name,
                              "--json"))  # fmt: skip
    assert report["ok"] and [(r["node"], r["route"]) for r in report["nodes"]] == [(third.name, "direct")]
    assert same_files(_isolated_home / "models", store_of(ssh_lab, third) / "here")

    # A store on a 1 MB disk: refused with the numbers, nothing made there.
    small = ssh_lab.service.home(third) / "small"
    agent_pid = agents.endpoint(third).pid
    small_disk(ssh_lab, third, agent_pid, small, "1m")
    try:
        done = sparksync(ssh_lab, env, "model", "roots", third.name, "--store", str(small))
        assert done.returncode == 0, done.stderr
        done = sparksync(ssh_lab, env, "model", "copy", "st", "--from", first.name, "--to", third.name)
        assert done.returncode == 41, done.stdout + done.stderr
        assert f"{third.name} needs 2.1 MB and has" in done.stderr and "Nothing was copied" in done.stderr
        listed = subprocess_ls(ssh_lab, third, agent_pid, small)
        assert listed == "", listed
        assert matrix(ssh_lab, env)["st"][third.name] == "missing"
    finally:
        unmount(agent_pid, small)


def subprocess_ls(ssh_lab, node, agent_pid: int, path) -> str:
    done = subprocess.run(["nsenter", "-t", str(agent_pid), "-m", "ls", "-A", str(path)], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout.strip()


@pytest.mark.engine
def test_a_workload_names_the_nodes_without_its_store_model_and_copies_it_first_with_copy_model(
    lab_agents, real_keyring  # noqa: F811
):
    from sparksync.core.engines.llamacpp_build import find_binaries

    binaries = find_binaries("cpu")
    if binaries is None:
        pytest.skip("llama.cpp is not built; run `make engines`")
    ssh_lab, agents = lab_agents(2)
    env = cli_env(real_keyring)
    first, second = ssh_lab.nodes
    source = store_of(ssh_lab, first)
    write_tiny_gguf(source / "tiny")
    give(ssh_lab, first, source)
    start = ["workload", "start", "llamacpp-single", "--nodes", second.name, "--model", "tiny",
             "--http-port", "18080", "--set", f"llamacpp.server_binary={binaries.llama_server}",
             "--set", "llamacpp.threads=1", "--set", "llamacpp.context=512", "--set", "llamacpp.parallel=1"]  # fmt: skip

    refused = sparksync(ssh_lab, env, *start)
    assert refused.returncode == 40, refused.stdout + refused.stderr
    assert f"model tiny" in refused.stderr and f"is not on {second.name}" in refused.stderr
    assert "--copy-model" in refused.stderr and f"copying it from {first.name}" in refused.stderr
    assert "no copy to those nodes has been measured yet" in refused.stderr

    started = sparksync(ssh_lab, env, *start, "--copy-model", "--json")
    assert started.returncode == 0, started.stdout + started.stderr
    view = json.loads(started.stdout)
    [rank] = view["ranks"]
    there = store_of(ssh_lab, second) / "tiny" / "tiny.gguf"
    assert rank["node"] == second.name and view["state"] == "ready"
    argv = rank["status"]["argv"]
    assert argv[argv.index("-m") + 1] == str(there)  # the node's own path
    assert argv[argv.index("--alias") + 1] == "tiny"
    assert f"{second.name}: done" in started.stderr
    try:
        busy = sparksync(ssh_lab, env, "model", "delete", "tiny", "--node", second.name)
        assert busy.returncode != 0 and "used by running workload" in busy.stderr
    finally:
        stopped = sparksync(ssh_lab, env, "workload", "stop", view["workload_id"])
        assert stopped.returncode == 0, stopped.stderr
    # The copy's rate is now measured: the next refusal says how long a copy would take.
    drop = sparksync(ssh_lab, env, "model", "delete", "tiny", "--node", second.name)
    assert drop.returncode == 0, drop.stderr
    again = sparksync(ssh_lab, env, *start)
    assert again.returncode == 40 and "at the copy rates measured so far" in again.stderr, again.stderr


def test_a_node_fetches_with_its_own_huggingface_hub_and_the_token_from_the_keyring(
    lab_agents, real_keyring, tmp_path  # noqa: F811
):
    import socket

    from tests.core.models.hub_server import HubServer
    from tests.lab.nsnet import in_netns

    token = "hf_lab_token_" + "x" * 20
    ssh_lab, agents = lab_agents(1)
    env = cli_env(real_keyring)
    node = ssh_lab.nodes[0]
    hub = HubServer()
    write_safetensors(tmp_path / "upload", shards=2, shard_bytes=1 << 20)
    hub.add_folder("acme/gated", tmp_path / "upload", token=token)

    def bound() -> socket.socket:  # the hub listens on the node's own loopback
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        return sock

    url = hub.start(in_netns(node.netns, bound))
    try:
        stored = ssh_lab.lab.exec(ssh_lab.client, [sys.executable, "-m", "sparksync", "model", "token", "set"],
                                  env=env, cwd=REPO, input=token + "\n")  # fmt: skip
        assert stored.returncode == 0, stored.stderr
        lines = run_json(ssh_lab, env, "model", "fetch", "acme/gated", "--node", node.name, "--endpoint", url, "--json")
    finally:
        hub.stop()
    done = lines[-1]
    assert done["event"] == "summary" and done["state"] == "done", done
    assert done["bytes_done"] == sum(len(d) for d in hub.repos["acme/gated"].files.values())
    assert f"Bearer {token}" in hub.seen_auth
    assert matrix(ssh_lab, env)["acme/gated"][node.name] == "present"
    home = ssh_lab.service.home(node)
    # Never in the agent's log, its state, the cache, nor anything the CLI printed.
    assert token not in (home / "lab-agent.log").read_text(errors="replace")
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert token.encode() not in path.read_bytes(), path
    assert token not in json.dumps(lines)
    cleared = sparksync(ssh_lab, env, "model", "token", "clear")
    assert cleared.returncode == 0 and "removed" in cleared.stdout, cleared.stderr
