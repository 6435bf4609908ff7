"""Workloads for real: paired lab nodes, real agents, real llama.cpp and torch, through SSH tunnels.

Each node runs ``sparksync-agent serve`` as its own test user (``lab_agents``)
and has a fabric link (``enp1s0f0np0``, ``workload_lab.add_fabric``). The
client core starts ranks through each node's agent exactly as the CLI does;
the engines are the cached llama.cpp build and torch (CPU, gloo); the models
are tiny random ones written to a directory every test user can read.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import psutil
import pytest

from sparksync.core.engines.llamacpp_build import find_binaries
from sparksync.core.workloads import running
from sparksync.core.workloads.baseline import BaselineStore, key_of
from sparksync.core.workloads.fabric import Fabric
from sparksync.core.workloads.launch_request import resolve
from sparksync.core.workloads.launches import build_group
from sparksync.core.workloads.orchestrator import Orchestrator
from sparksync.core.workloads.training_scaling import scaling
from sparksync.core.workloads.workload_store import WorkloadStore
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.engines.tinymodel import ModelShape, train_tokenizer, write_tiny_model
from tests.lab.test_fleet_lab import (  # noqa: F401  (fixtures)
    agent_python,
    cli_env,
    client_key,
    lab_agents,
    open_fleet,
    sparksync,
)
from tests.lab.workload_lab import (
    FABRIC_IFACE,
    ChatLoad,
    SharedDir,
    add_fabric,
    engine_tunnel,
    user_processes,
    wait_fabric_reported,
    wait_for,
)

pytestmark = [pytest.mark.lab, pytest.mark.engine]

# 8 layers, so llama.cpp's layer split gives every rpc-server of a 4-node group some of them.
SPLIT_MODEL = ModelShape(
    "tiny-split", n_embd=64, n_layer=8, n_head=4, n_head_kv=4, n_ff=256, n_ctx=1024, seed=3
)
HTTP_PORT = 8080


@pytest.fixture(scope="module")
def binaries():
    found = find_binaries("cpu")
    if found is None:
        pytest.skip("llama.cpp is not built; run `make engines` or packaging/engines/build-llama-cpp.sh")
    return found


@pytest.fixture(scope="module")
def shared():
    """Models and scripts the node users can read: written once for the module."""
    folder = SharedDir()
    write_tiny_model(folder.path, SPLIT_MODEL, train_tokenizer())
    folder.publish()
    yield folder
    folder.remove()


def llama_overrides(binaries, shared) -> dict:
    return {
        "model": str(shared.path / f"{SPLIT_MODEL.name}.gguf"),
        "served_name": "tiny",
        "ports": {"http": HTTP_PORT},
        "llamacpp": {"server_binary": str(binaries.llama_server), "rpc_binary": str(binaries.rpc_server),
                     "threads": 1, "context": 1024, "parallel": 1},
    }  # fmt: skip


def cluster(make_agents, n: int, fabric: bool):
    ssh_lab, agents = make_agents(n)
    addresses = add_fabric(ssh_lab.lab, ssh_lab.nodes) if fabric else {}
    return ssh_lab, agents, addresses


def no_processes_left(ssh_lab, agents) -> None:
    for node in ssh_lab.nodes:
        keep = set(agents.pids.get(node.name, []))
        wait_for(lambda n=node, k=keep: not user_processes(ssh_lab.user(n), k), f"{node.name} emptied", 30)


def fabric_bytes(ssh_lab, node) -> int:
    """Bytes through the node's fabric link so far (its own sysfs, as ``ip netns exec`` mounts it)."""
    stats = f"/sys/class/net/{FABRIC_IFACE}/statistics"
    done = ssh_lab.lab.exec(node, ["cat", f"{stats}/rx_bytes", f"{stats}/tx_bytes"], check=True)
    return sum(int(v) for v in done.stdout.split())


# --- (a) one node: start, tokens/s in telemetry, restart the agent, stop ------------------------


def test_single_node_inference_streams_reports_tokens_survives_an_agent_restart_and_stops_clean(
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    binaries,
    shared,
):
    ssh_lab, agents, _ = cluster(lab_agents, 1, fabric=False)
    node = ssh_lab.nodes[0]
    events = []
    with open_fleet(ssh_lab, client_key) as fleet:
        nodes_agents = fleet
        # Installed the way `sparksync engine install` does: in ~/.local/bin, not on the agent's PATH.
        local_bin = agents.home(node) / ".local/bin"
        local_bin.mkdir(parents=True, exist_ok=True)
        (local_bin / "llama-server").symlink_to(binaries.llama_server)
        overrides = llama_overrides(binaries, shared)
        overrides["llamacpp"]["server_binary"] = "llama-server"
        plan, recipes = resolve("llamacpp-single", [node.name], None, overrides)
        orchestrator = Orchestrator(nodes_agents, WorkloadStore(), on_progress=events.append)
        workload = orchestrator.start(orchestrator.prepare(plan, recipes))
        assert workload.state == "ready", workload
        record = workload.record
        [rank] = workload.ranks
        assert (rank.ref.node, rank.ref.role) == (node.name, "llama-server")
        assert rank.status.argv[0] == "llama-server"  # found on ~/.local/bin, which the agent adds to PATH
        assert [e.event for e in events if e.name == rank.ref.name] == ["starting", "started", "ready"]
        keeper = rank.status.pid
        engine_pid = next(p.pid for p in psutil.Process(keeper).children() if "llama-server" in p.name())

        with engine_tunnel(fleet, node.name, HTTP_PORT) as tunnel:
            url = f"http://127.0.0.1:{tunnel.local_port}"
            with ChatLoad(url) as load:
                wait_for(lambda: (running.tokens(nodes_agents, record).decode_tps or 0) > 0,
                         "tokens/s in the node's telemetry")  # fmt: skip
                figures = running.tokens(nodes_agents, record)
            assert load.completions >= 1 and load.tokens > 0 and not load.errors
            [rank_figures] = figures.ranks
            assert (rank_figures.workload_id, rank_figures.role) == (record.workload_id, "llama-server")
            print(f"\nsingle node: {figures.decode_tps:.0f} tok/s decode, {load.completions} completions")

            # (e) The agent restarts; the engine keeps serving and the new agent re-attaches to it.
            agents.stop(node, signal.SIGTERM)
            assert psutil.pid_exists(engine_pid)
            agents.start(node, node.name)
            again = running.view(nodes_agents, record)
            assert again.state == "ready" and again.ranks[0].status.pid == keeper
            with ChatLoad(url) as load:
                wait_for(lambda: load.completions >= 2, "completions after the agent restart")
            assert not load.errors
            wait_for(
                lambda: (running.tokens(nodes_agents, record).decode_tps or 0) > 0, "tokens/s after restart"
            )

        failed = running.stop(nodes_agents, record, grace_s=5)
        assert not failed
        stopped = running.view(nodes_agents, record)
        assert stopped.state == "stopped", stopped
        assert not psutil.pid_exists(engine_pid)
        no_processes_left(ssh_lab, agents)


# --- (b) llama.cpp over RPC on 2 and 4 nodes ----------------------------------------------------


@pytest.mark.parametrize("n", [2, 4])
def test_multi_node_llamacpp_rpc_splits_the_model_and_streams(
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    binaries,
    shared,
    n,
):
    ssh_lab, agents, fabric = cluster(lab_agents, n, fabric=True)
    names = [node.name for node in ssh_lab.nodes]
    with open_fleet(ssh_lab, client_key) as fleet:
        nodes_agents = fleet
        wait_fabric_reported(nodes_agents, names)
        plan, recipes = resolve("llamacpp-rpc", names, None, llama_overrides(binaries, shared))
        orchestrator = Orchestrator(nodes_agents, WorkloadStore())
        prepared = orchestrator.prepare(plan, recipes)
        head = next(launch for launch in prepared.launches if launch.role == "llama-server")
        rpc_list = head.argv[head.argv.index("--rpc") + 1]
        assert rpc_list == ",".join(f"{fabric[name]}:50052" for name in names[1:])  # the fabric addresses
        before = {node.name: fabric_bytes(ssh_lab, node) for node in ssh_lab.nodes[1:]}
        workload = orchestrator.start(prepared)
        assert workload.state == "ready"
        assert sorted(r.ref.role for r in workload.ranks) == ["llama-server"] + ["rpc-server"] * (n - 1)
        record = workload.record

        with (
            engine_tunnel(fleet, names[0], HTTP_PORT) as tunnel,
            ChatLoad(f"http://127.0.0.1:{tunnel.local_port}") as load,
        ):
            wait_for(lambda: (running.tokens(nodes_agents, record).decode_tps or 0) > 0, "tokens/s reported")
            wait_for(lambda: load.completions >= 2, "two streamed answers")
            tokens = running.tokens(nodes_agents, record).decode_tps
        assert load.tokens > 0 and not load.errors

        for node in ssh_lab.nodes[1:]:
            moved = fabric_bytes(ssh_lab, node) - before[node.name]
            # Its layers went over the fabric at load, and activations every token.
            assert moved > 64 * 1024, f"{node.name}'s rpc-server saw only {moved} bytes on the fabric"
            ref = next(r for r in record.ranks if r.node == node.name)
            text = "\n".join(line.text for line in running.logs(nodes_agents, record.workload_id, ref).lines)
            assert "Accepted client connection" in text
        print(f"\n{n} nodes over RPC: {tokens:.0f} tok/s decode")

        assert not running.stop(nodes_agents, record, grace_s=5)
        assert running.view(nodes_agents, record).state == "stopped"
        no_processes_left(ssh_lab, agents)


# --- (c) torchrun with gloo on 2 nodes ---------------------------------------------------------------


def test_torchrun_gloo_training_on_two_nodes_logs_and_reports_tokens(
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    agent_python,  # noqa: F811
    shared,
):
    pytest.importorskip("torch", reason="torch (CPU) is in the test extras: pip install -e '.[test]'")
    ssh_lab, agents, fabric = cluster(lab_agents, 2, fabric=True)
    names = [node.name for node in ssh_lab.nodes]
    launcher = shared.script("torchrun", f'#!/bin/sh\nexec {agent_python} -m torch.distributed.run "$@"\n')
    script = shared.path / "tiny_ddp.py"
    from sparksync.core.workloads.examples import tiny_ddp

    script.write_text(Path(tiny_ddp.__file__).read_text())
    shared.publish()
    overrides = {
        "training": {"launcher": str(launcher), "script": str(script),
                     "args": ["--steps", "60", "--pace-ms", "40"]},
        "readiness": {"kind": "log", "pattern": r"step \d+/\d+", "timeout_s": 180},
    }  # fmt: skip
    with open_fleet(ssh_lab, client_key) as fleet:
        nodes_agents = fleet
        wait_fabric_reported(nodes_agents, names)
        plan, recipes = resolve("torchrun", names, None, overrides)
        orchestrator = Orchestrator(nodes_agents, WorkloadStore())
        prepared = orchestrator.prepare(plan, recipes)
        for launch in prepared.launches:
            assert launch.env["GLOO_SOCKET_IFNAME"] == FABRIC_IFACE
            assert launch.argv[launch.argv.index("--master_addr") + 1] == fabric[names[0]]
        workload = orchestrator.start(prepared)
        record = workload.record
        assert workload.state == "ready"  # both ranks logged a step: they synchronised

        def both_ranks_report() -> bool:
            figures = running.tokens(nodes_agents, record).ranks
            return len([f for f in figures if (f.decode_tps or 0) > 0]) == 2

        wait_for(both_ranks_report, "tok/sec from both ranks in telemetry")
        figures = running.tokens(nodes_agents, record)
        assert figures.decode_tps == pytest.approx(sum(f.decode_tps for f in figures.ranks))
        assert all(f.step is not None and f.loss is not None for f in figures.ranks)
        for ref in record.ranks:
            text = "\n".join(line.text for line in running.logs(nodes_agents, record.workload_id, ref).lines)
            assert f"rank {ref.rank}/2 synchronised" in text
        print(f"\ntorchrun on 2 nodes: {figures.decode_tps:,.0f} tok/s together")

        # Scaling from the live figures, against a one-node baseline set through the core (a one-node
        # run would record it by itself, at the cost of another torch start-up). The key the running
        # ranks' commands give is the one the same recipe has on one node.
        one_node = build_group("torchrun-1", recipes["torchrun"], names[:1], Fabric()).ranks[0].argv
        BaselineStore().set(key_of("torchrun", one_node), 1000.0)
        [group] = scaling(running.view(nodes_agents, record), running.tokens(nodes_agents, record),
                          BaselineStore())  # fmt: skip
        assert group.nodes == 2 and group.key == key_of("torchrun", one_node)
        assert group.tokens_per_s > 0
        assert group.efficiency == pytest.approx(group.tokens_per_s / (2 * 1000.0))
        assert group.speedup == pytest.approx(group.tokens_per_s / 1000.0)
        print(f"scaling against 1,000 tok/s on one node: {group.describe()}")

        final = running.watch(nodes_agents, record, threading.Event(), poll_s=0.5)
        assert final.state == "exited", [(r.ref.name, r.state, r.why()) for r in final.ranks]
        no_processes_left(ssh_lab, agents)


# --- (d) a rank dies: reported, and the rest stopped ------------------------------------------------


def test_a_killed_rank_is_reported_and_the_other_ranks_are_stopped(
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    binaries,
    shared,
):
    ssh_lab, agents, _ = cluster(lab_agents, 2, fabric=True)
    names = [node.name for node in ssh_lab.nodes]
    with open_fleet(ssh_lab, client_key) as fleet:
        nodes_agents = fleet
        wait_fabric_reported(nodes_agents, names)
        plan, recipes = resolve("llamacpp-rpc", names, None, llama_overrides(binaries, shared))
        orchestrator = Orchestrator(nodes_agents, WorkloadStore())
        workload = orchestrator.start(orchestrator.prepare(plan, recipes))
        record = workload.record
        head = next(r for r in workload.ranks if r.ref.role == "llama-server")
        server = next(p for p in psutil.Process(head.status.pid).children() if "llama-server" in p.name())
        server.kill()

        final = running.watch(nodes_agents, record, threading.Event(), poll_s=0.3, grace_s=5)
        by_role = {r.ref.role: r for r in final.ranks}
        assert final.state == "failed"
        assert by_role["llama-server"].state == "failed"
        assert "signal 9" in by_role["llama-server"].why()
        assert by_role["rpc-server"].state == "stopped"  # stopped by the client, not by itself
        no_processes_left(ssh_lab, agents)


def test_a_rank_that_cannot_start_stops_the_started_ones_and_says_why(
    lab_agents,  # noqa: F811
    client_key,  # noqa: F811
    real_keyring,  # noqa: F811
    binaries,
    shared,
):
    """The CLI, as its own process: a taken port on the head fails the start after the rpc-server began."""
    ssh_lab, agents, _ = cluster(lab_agents, 2, fabric=True)
    names = [node.name for node in ssh_lab.nodes]
    with open_fleet(ssh_lab, client_key) as fleet:
        wait_fabric_reported(fleet, names)
    blocker = ssh_lab.lab.popen(ssh_lab.nodes[0], ["python3", "-c", BLOCK_PORT.format(port=HTTP_PORT)],
                                stdout=-1, text=True)  # fmt: skip
    try:
        assert ssh_lab.lab.read_line(blocker, 30).strip() == "listening"
        overrides = llama_overrides(binaries, shared)
        settings = [f"--set=llamacpp={json.dumps(overrides['llamacpp'])}", f"--http-port={HTTP_PORT}"]
        env = cli_env(real_keyring)
        result = sparksync(ssh_lab, env, "workload", "start", "llamacpp-rpc", "--nodes", ",".join(names),
                           "--model", overrides["model"], *settings)  # fmt: skip
    finally:
        blocker.kill()
        blocker.wait()
    assert result.returncode == 9, result.stderr
    assert "rank 0 (llama-server)" in result.stderr and "port 8080" in result.stderr
    assert "stopping" in result.stderr  # the rpc-server had started; it was stopped
    listed = json.loads(sparksync(ssh_lab, env, "workload", "list", "--json").stdout)["workloads"]
    [entry] = listed
    assert {r["role"]: r["state"] for r in entry["ranks"]}["rpc-server"] == "stopped"
    logs = sparksync(ssh_lab, env, "workload", "logs", entry["workload_id"], "--rank", "1")
    assert logs.returncode == 0 and "Accepted client connection" in logs.stdout, logs.stderr
    engines = sparksync(ssh_lab, env, "engine", "list", "--json", names[0])
    assert engines.returncode == 0, engines.stderr
    [report] = json.loads(engines.stdout)["nodes"]
    assert report["engines"]["custom"] is True and report["engines"]["llama.cpp"] is False  # not on its PATH
    assert (
        "llama-server is not on PATH" in {c["name"]: c["missing"] for c in report["checks"]}["llama-server"]
    )
    stopped = sparksync(ssh_lab, env, "workload", "stop", entry["workload_id"])
    assert stopped.returncode == 0, stopped.stderr
    no_processes_left(ssh_lab, agents)


BLOCK_PORT = (
    "import socket,sys,time; s=socket.socket(); s.bind(('127.0.0.1',{port})); s.listen(); "
    "print('listening', flush=True); time.sleep(600)"
)
