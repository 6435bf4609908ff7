"""A model copy over the cluster's own mesh: the applied fabric, ``sparksync cluster mesh``, then ``model copy``.

Four paired lab nodes with CX-7-like ports on a switch, the fabric plan
applied and stored (``mesh_lab.FabricNodes``), real agents, real sshd. The
mesh is set up by the CLI as a user would; the copy then goes from node to
node over the fabric addresses with each node's own mesh key
(``~/.ssh/id_ed25519_sparksync``), which the targets' sshd logs show: the
login came from the source's fabric address with the fingerprint of the
source's mesh key. Each copy is verified by sha256 against the source's
manifest, and the bytes compared here too. Without the mesh file the same
copy falls back to the management addresses (or relays) and says why.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess

import pytest

from sparksync.core.fabric.mesh import mesh_path
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)
from tests.core.models.model_files import write_safetensors
from tests.lab.lab_agents import LabAgents
from tests.lab.mesh_lab import TWIN_SUBNETS, FabricNodes
from tests.lab.model_lab import give, rmtree, same_files, store_of
from tests.lab.test_fleet_lab import agent_python, cli_env, client_key, sparksync  # noqa: F401  (fixtures)
from tests.lab.test_pairing_lab import pair

pytestmark = [pytest.mark.lab, pytest.mark.slow]

ACCEPTED = re.compile(r"Accepted publickey for (\S+) from (\S+) port \d+ ssh2: (\S+) (SHA256:\S+)")


def run_json(lab: FabricNodes, env, *args: str) -> dict:  # the last JSON line: the summary
    done = sparksync(lab.ssh_lab, env, *args)
    assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")][-1]


def mesh_fingerprint(lab: FabricNodes, node) -> str:
    pub = lab.ssh_lab.service.home(node) / ".ssh" / "id_ed25519_sparksync.pub"
    done = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True)
    return done.stdout.split()[1]


def logins(lab: FabricNodes, node) -> list[tuple[str, str, str]]:
    """(user, from address, key fingerprint) of every public-key login the node's sshd accepted."""
    text = lab.ssh_lab.service.nodes[node.name].log_file.read_text(errors="replace")
    return [(m[1], m[2], m[4]) for m in ACCEPTED.finditer(text)]


def sha256_tree(root) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(".")}  # fmt: skip


def test_a_copy_goes_node_to_node_over_the_fabric_with_the_mesh_key_and_falls_back_without_the_mesh(
    ssh_lab_factory, client_key, agent_python, real_keyring  # noqa: F811
):
    lab = FabricNodes.make(ssh_lab_factory, 4, client_key, pair)
    agents = LabAgents(lab.ssh_lab, client_key, agent_python)
    try:
        agents.start_many(lab.nodes, 1.0)
        env = cli_env(real_keyring)
        done = sparksync(lab.ssh_lab, env, "cluster", "mesh", "--json")
        assert done.returncode == 0, done.stderr
        made = json.loads(done.stdout)
        assert sorted(made["created"]) == sorted(n.name for n in lab.nodes)
        first, targets = lab.nodes[0], lab.nodes[1:]
        by_name = {n.name: n for n in lab.nodes}
        fabric_of = {f"{TWIN_SUBNETS[t]}.{n.index}": n.name for n in lab.nodes for t in (0, 1)}
        source = store_of(lab.ssh_lab, first)
        write_safetensors(source / "org" / "mesh-model", shards=3, shard_bytes=1 << 20)
        give(lab.ssh_lab, first, source)
        seen_before = {t.name: len(logins(lab, t)) for t in targets}

        to = [arg for t in targets for arg in ("--to", t.name)]
        report = run_json(lab, env, "model", "copy", "org/mesh-model", "--from", first.name, *to, "--json")
        assert report["ok"] and not report["relayed"], report
        results = {r["node"]: r for r in report["nodes"]}
        assert sorted(results) == sorted(t.name for t in targets)
        for target in targets:
            result = results[target.name]
            assert result["state"] == "copied" and result["route"] == "ssh", result
            # The address the copy connected to is the target's own fabric address, and the output says so.
            assert fabric_of.get(result["address"]) == target.name, result
            assert "over the fabric" in result["route_detail"] and "mesh key" in result["route_detail"], result
            # The target's sshd let the source in from the source's fabric address, with the source's mesh key.
            src = by_name[result["source"]]
            new = logins(lab, target)[seen_before[target.name]:]
            assert (lab.ssh_lab.user(target), next(a for a, n in fabric_of.items() if n == src.name
                                                   and a.rsplit(".", 1)[0] == result["address"].rsplit(".", 1)[0]),
                    mesh_fingerprint(lab, src)) in new, new  # fmt: skip
            # Every node-to-node login came over the fabric (this computer's own logins use the management net).
            mesh_keys = {mesh_fingerprint(lab, n) for n in lab.nodes}
            assert all(fabric_of.get(addr) for _user, addr, fp in new if fp in mesh_keys), new
            copied = store_of(lab.ssh_lab, target) / "org" / "mesh-model"
            assert sha256_tree(copied) == sha256_tree(source / "org" / "mesh-model")
            assert same_files(source / "org" / "mesh-model", copied)

        # Without the mesh file the copy does not go over the fabric, and says why: here it is relayed, since
        # the nodes have no other node-to-node SSH than the mesh's.
        rmtree(store_of(lab.ssh_lab, targets[0]) / "org" / "mesh-model")
        mesh_file = mesh_path()
        saved = mesh_file.read_bytes()
        mesh_file.unlink()
        try:
            report = run_json(lab, env, "model", "copy", "org/mesh-model", "--from", first.name, "--to",
                              targets[0].name, "--json")  # fmt: skip
        finally:
            mesh_file.write_bytes(saved)
        [result] = report["nodes"]
        assert result["state"] == "copied" and result["route"] == "relay" and report["relayed"], result
        assert "not over the fabric: the node-to-node mesh is not set up" in result["route_detail"], result
        assert same_files(source / "org" / "mesh-model", store_of(lab.ssh_lab, targets[0]) / "org" / "mesh-model")
    finally:
        agents.stop_all()
