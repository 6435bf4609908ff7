from __future__ import annotations

import base64
import json
import multiprocessing
import stat
import subprocess
import time
from pathlib import Path

import paramiko
import pytest
from pydantic import ValidationError

from sparksync.core.base.paths import config_dir
from sparksync.core.nodes.registry import (
    MAX_NODES,
    REGISTRY_VERSION,
    ClusterFullError,
    DuplicateNodeError,
    FabricInterface,
    HostKeyChangedError,
    InvalidNodeNameError,
    PinnedHostKey,
    Registry,
    RegistryConflictError,
    RegistryUnreadableError,
    UnknownNodeError,
)
from sparksync.core.nodes.identity import node_id_from_fingerprint
from tests.core.node_factory import host_pkey, paired_node


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    return Registry(tmp_path / "config" / "nodes.json")


def fill(registry: Registry, count: int) -> None:
    for index in range(1, count + 1):
        registry.add(paired_node(f"spark-{index:04d}", index))


# -- reading and writing -------------------------------------------------------


def test_a_missing_file_is_an_empty_registry_and_reading_creates_nothing(registry):
    assert registry.list() == []
    assert len(registry) == 0
    assert not registry.path.exists()


def test_the_default_registry_lives_in_the_config_dir():
    assert Registry().path == config_dir() / "nodes.json"


def test_nodes_survive_a_reload_in_a_private_versioned_file(registry):
    node = paired_node(fabric=[FabricInterface(name="enp1s0f0np0", addresses=["192.168.100.1"],
                                               speed_mbps=200000, rdma_device="rocep1s0f0")])
    registry.add(node)

    again = Registry(registry.path)
    assert again.list() == [node]
    assert again.get(node.name).fabric[0].rdma_device == "rocep1s0f0"
    assert stat.S_IMODE(registry.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(registry.path.parent.stat().st_mode) == 0o700
    data = json.loads(registry.path.read_text())
    assert data["version"] == REGISTRY_VERSION
    assert set(data["nodes"][0]) == {
        "name", "host", "addresses", "port", "user", "host_key", "added_at", "node_id", "former_names",
        "fabric", "agent_version", "service_mode", "deployed_at",
    }  # nothing secret has a place in an entry


def test_added_at_is_recorded_in_utc(registry):
    registry.add(paired_node())
    assert registry.list()[0].added_at.utcoffset().total_seconds() == 0


def test_entries_handed_out_are_copies(registry):
    registry.add(paired_node("spark-0001"))
    registry.get("spark-0001").addresses.append("10.9.9.9")
    assert "10.9.9.9" not in registry.get("spark-0001").addresses


# -- the eight-node limit and duplicates -------------------------------------------


def test_eight_nodes_fit_and_a_ninth_is_refused_with_the_way_out(registry):
    fill(registry, MAX_NODES)
    before = registry.path.read_bytes()

    with pytest.raises(ClusterFullError) as refused:
        registry.add(paired_node("spark-0009", 9))

    message = str(refused.value)
    assert "at most 8" in message
    assert "sparksync node unpair NAME" in message
    assert registry.path.read_bytes() == before
    assert len(Registry(registry.path)) == MAX_NODES


def test_unpairing_one_frees_a_slot(registry):
    fill(registry, MAX_NODES)
    registry.remove("spark-0003")
    registry.add(paired_node("spark-0009", 9))
    assert "spark-0009" in Registry(registry.path)


def test_a_name_already_paired_is_refused(registry):
    registry.add(paired_node("spark-0001", 1))
    with pytest.raises(DuplicateNodeError, match="sparksync node unpair spark-0001"):
        registry.add(paired_node("spark-0001", 2))


def test_the_same_machine_under_another_name_is_refused(registry):
    first = paired_node("spark-0001", 1)
    registry.add(first)
    with pytest.raises(DuplicateNodeError, match="already paired as 'spark-0001'"):
        registry.add(paired_node("other-name", 1, host_key=first.host_key))


# -- get, remove, rename, update ------------------------------------------------------


def test_an_unknown_name_lists_the_known_ones(registry):
    fill(registry, 2)
    with pytest.raises(UnknownNodeError, match="spark-0001, spark-0002"):
        registry.get("spark-0404")
    with pytest.raises(UnknownNodeError):
        registry.remove("spark-0404")


def test_remove_returns_the_entry_and_persists(registry):
    fill(registry, 3)
    removed = registry.remove("spark-0002")
    assert removed.name == "spark-0002"
    assert Registry(registry.path).names() == ["spark-0001", "spark-0003"]


def test_rename_keeps_everything_else(registry):
    node = paired_node("spark-0001")
    registry.add(node)
    registry.rename("spark-0001", "left-desk")
    renamed = Registry(registry.path).get("left-desk")
    assert renamed.model_dump(exclude={"name", "former_names"}) == node.model_dump(exclude={"name", "former_names"})
    assert renamed.node_id == node.node_id and renamed.former_names == ["spark-0001"]
    assert "spark-0001" not in registry


def test_a_node_is_known_by_its_id_which_no_rename_changes(registry):
    node = paired_node("spark-0001")
    registry.add(node)
    assert registry.get(node.node_id) == node == registry.get_by_id(node.node_id)
    registry.rename(node.node_id, "a")  # an id works wherever a name does
    registry.rename("a", "b")
    registry.rename("b", "a")
    again = Registry(registry.path).get_by_id(node.node_id)
    assert again.name == "a" and again.former_names == ["spark-0001", "b"]
    with pytest.raises(UnknownNodeError):
        registry.get_by_id("0" * 32)


def test_by_default_a_node_is_known_by_its_pinned_host_key():
    node = paired_node()
    digest = base64.b64decode(node.host_key.fingerprint.removeprefix("SHA256:") + "=")
    assert node.node_id == digest.hex()[:32] == node_id_from_fingerprint(node.host_key.fingerprint)
    adopted = paired_node(node_id="5f0c3a9e1d2b4c6a8e7f9a0b1c2d3e4f")  # an agent's own id, when it had one
    assert adopted.node_id == "5f0c3a9e1d2b4c6a8e7f9a0b1c2d3e4f"
    with pytest.raises(ValidationError):
        paired_node(node_id="no spaces; no quotes")


def test_a_second_node_with_the_same_id_is_refused(registry):
    registry.add(paired_node("spark-0001", 1, node_id="cafe" * 8))
    with pytest.raises(DuplicateNodeError, match="already the id of paired node 'spark-0001'"):
        registry.add(paired_node("spark-0002", 2, node_id="cafe" * 8))


def test_a_version_1_file_is_read_with_ids_and_written_as_version_2(registry):
    nodes = [paired_node("spark-0001", 1), paired_node("spark-0002", 2)]
    v1 = [n.model_dump(mode="json", exclude={"former_names"}) | {"node_id": None} for n in nodes]
    registry.path.parent.mkdir(parents=True)
    registry.path.write_text(json.dumps({"version": 1, "nodes": v1}))

    read = Registry(registry.path).list()
    assert [n.node_id for n in read] == [node_id_from_fingerprint(n.host_key.fingerprint) for n in nodes]
    assert json.loads(registry.path.read_text())["version"] == 1  # reading changes nothing on disk
    registry.rename("spark-0002", "rack-2")
    data = json.loads(registry.path.read_text())
    assert data["version"] == REGISTRY_VERSION == 2
    assert [n["node_id"] for n in data["nodes"]] == [n.node_id for n in read]
    assert Registry(registry.path).get("rack-2").node_id == read[1].node_id


def test_rename_refuses_a_taken_or_unusable_name(registry):
    fill(registry, 2)
    with pytest.raises(DuplicateNodeError):
        registry.rename("spark-0001", "spark-0002")
    with pytest.raises(InvalidNodeNameError, match="letters, digits"):
        registry.rename("spark-0001", "my spark")
    with pytest.raises(InvalidNodeNameError, match="means this computer"):
        registry.rename("spark-0001", "Local")  # `--nodes local` is this computer, never a paired node
    assert Registry(registry.path).names() == ["spark-0001", "spark-0002"]


def test_update_replaces_the_entry_of_that_id(registry):
    registry.add(paired_node("spark-0001"))
    node = registry.get("spark-0001")
    node.agent_version = "0.3.0"
    node.fabric = [FabricInterface(name="enp1s0f1np1", addresses=["192.168.200.1"])]
    registry.update(node)
    assert Registry(registry.path).get("spark-0001") == node
    with pytest.raises(UnknownNodeError):
        registry.update(paired_node("spark-0404"))
    registry.update(node.model_copy(update={"name": "renamed"}))  # the id finds the entry
    assert Registry(registry.path).names() == ["renamed"]


@pytest.mark.parametrize(
    "field, value",
    [("name", "my spark"), ("name", "*"), ("name", "-x"), ("user", "a b"), ("host", "h;rm -rf"),
     ("port", 0), ("port", 65536)],
)
def test_entries_that_would_break_an_ssh_config_are_refused(field, value):
    with pytest.raises(ValidationError):
        paired_node(**{field: value})


# -- transactions and conflicts --------------------------------------------------------


def test_a_transaction_saves_several_changes_once(registry):
    fill(registry, 2)
    with registry.transaction():
        registry.remove("spark-0001")
        registry.add(paired_node("spark-0003", 3))
        assert Registry(registry.path).names() != registry.names()  # not saved yet
    assert Registry(registry.path).names() == ["spark-0002", "spark-0003"]


def test_a_failed_transaction_saves_nothing_and_reverts_memory(registry):
    fill(registry, 2)
    before = registry.path.read_bytes()
    with pytest.raises(RuntimeError), registry.transaction():
        registry.remove("spark-0001")
        raise RuntimeError("pairing failed half-way")
    assert registry.path.read_bytes() == before
    assert registry.names() == ["spark-0001", "spark-0002"]


def test_save_refuses_to_overwrite_a_change_made_by_another_process(registry):
    fill(registry, 1)
    mine = Registry(registry.path)
    mine.load()
    Registry(registry.path).add(paired_node("spark-0002", 2))  # "another process"

    with pytest.raises(RegistryConflictError, match="changed by another SparkSync"):
        mine.save()
    assert Registry(registry.path).names() == ["spark-0001", "spark-0002"]


def test_changes_always_start_from_what_is_on_disk(registry):
    stale = Registry(registry.path)
    stale.load()
    Registry(registry.path).add(paired_node("spark-0001", 1))
    stale.add(paired_node("spark-0002", 2))  # reloads under the lock first
    assert Registry(registry.path).names() == ["spark-0001", "spark-0002"]


# -- files we do not understand are kept ---------------------------------------------


def _valid_file_with(**changes) -> bytes:
    node = paired_node().model_dump(mode="json")
    data = {"version": REGISTRY_VERSION, "nodes": [node]}
    for key, value in changes.items():
        if key.startswith("node_"):
            node[key.removeprefix("node_")] = value
        else:
            data[key] = value
    return json.dumps(data).encode()


def _tampered_fingerprint() -> bytes:
    data = json.loads(_valid_file_with())
    data["nodes"][0]["host_key"]["fingerprint"] = PinnedHostKey.from_pkey(host_pkey()).fingerprint
    return json.dumps(data).encode()


CORRUPT = {
    "not json": b'{"version": 1, "nodes": [',
    "empty": b"",
    "binary": b"\xff\xfe\x00garbage",
    "a list": b"[]",
    "no version": json.dumps({"nodes": []}).encode(),
    "version zero": _valid_file_with(version=0),
    "version as text": _valid_file_with(version="1"),
    "a node without user": json.dumps(
        {"version": 1, "nodes": [paired_node().model_dump(mode="json", exclude={"user"})]}
    ).encode(),
    "an unknown field": _valid_file_with(node_password="x"),
    "a fingerprint that is not the key's": _tampered_fingerprint(),
    "two nodes with one name": json.dumps(
        {"version": 1, "nodes": [paired_node("a", 1).model_dump(mode="json"),
                                 paired_node("a", 2).model_dump(mode="json")]}
    ).encode(),
}


def _every_change(registry: Registry) -> list:
    return [
        lambda: registry.add(paired_node("spark-0042", 42)),
        lambda: registry.remove("spark-0001"),
        lambda: registry.rename("spark-0001", "x"),
        lambda: registry.update(paired_node("spark-0001")),
        registry.save,
        registry.transaction().__enter__,
    ]


@pytest.mark.parametrize("content", CORRUPT.values(), ids=CORRUPT.keys())
def test_a_corrupt_file_is_refused_named_and_never_overwritten(registry, content):
    registry.path.parent.mkdir(parents=True)
    registry.path.write_bytes(content)

    with pytest.raises(RegistryUnreadableError) as refused:
        registry.list()
    message = str(refused.value)
    assert str(registry.path) in message
    assert "left untouched" in message and "move it away" in message

    for change in _every_change(registry):
        with pytest.raises(RegistryUnreadableError):
            change()
    assert registry.path.read_bytes() == content


def test_a_file_from_a_newer_sparksync_is_refused_and_kept(registry):
    content = _valid_file_with(version=REGISTRY_VERSION + 1, future_field={"x": 1})
    registry.path.parent.mkdir(parents=True)
    registry.path.write_bytes(content)

    with pytest.raises(RegistryUnreadableError) as refused:
        registry.load()
    message = str(refused.value)
    assert str(registry.path) in message
    assert f"version {REGISTRY_VERSION + 1}" in message and "newer SparkSync" in message
    assert "Upgrade SparkSync" in message

    for change in _every_change(registry):
        with pytest.raises(RegistryUnreadableError):
            change()
    assert registry.path.read_bytes() == content


def test_a_file_that_turns_corrupt_after_a_read_is_not_overwritten(registry):
    fill(registry, 1)
    registry.load()
    registry.path.write_bytes(b"garbage")
    with pytest.raises(RegistryUnreadableError):
        registry.add(paired_node("spark-0002", 2))
    with pytest.raises(RegistryUnreadableError):
        registry.list()  # no stale copy is served after a failed read
    assert registry.path.read_bytes() == b"garbage"


# -- two processes at once ------------------------------------------------------------


def _add_and_hold(path: Path, name: str, index: int, barrier, hold_s: float) -> None:
    registry = Registry(path)
    barrier.wait(timeout=20)
    try:
        with registry.transaction():
            registry.add(paired_node(name, index))
            # Still inside the transaction: a process that read the file
            # without waiting for this lock would now overwrite our entry.
            time.sleep(hold_s)
    except DuplicateNodeError:
        raise SystemExit(3) from None


def _run_together(path: Path, specs: list[tuple[str, int]], hold_s: float = 0.3) -> list[int]:
    context = multiprocessing.get_context("fork")  # no resource-tracker process to leak
    barrier = context.Barrier(len(specs))
    processes = [
        context.Process(target=_add_and_hold, args=(path, name, index, barrier, hold_s))
        for name, index in specs
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=30)
    return [process.exitcode for process in processes]


def test_two_processes_adding_at_once_keep_both_entries(registry):
    fill(registry, 1)
    exit_codes = _run_together(registry.path, [("spark-0002", 2), ("spark-0003", 3)])
    assert exit_codes == [0, 0]
    assert sorted(Registry(registry.path).names()) == ["spark-0001", "spark-0002", "spark-0003"]


def test_two_processes_pairing_the_same_name_one_wins(registry):
    exit_codes = _run_together(registry.path, [("spark-0001", 1), ("spark-0001", 2)], hold_s=0.1)
    assert sorted(exit_codes) == [0, 3]
    assert Registry(registry.path).names() == ["spark-0001"]


def test_many_concurrent_adds_lose_nothing(registry):
    specs = [(f"spark-{i:04d}", i) for i in range(1, MAX_NODES + 1)]
    assert _run_together(registry.path, specs, hold_s=0.0) == [0] * MAX_NODES
    assert sorted(Registry(registry.path).names()) == [name for name, _ in specs]


# -- pinned host keys -------------------------------------------------------------------


def test_a_pinned_fingerprint_is_what_ssh_keygen_prints(tmp_path):
    pkey = host_pkey()
    pinned = PinnedHostKey.from_pkey(pkey)
    pub = tmp_path / "host.pub"
    pub.write_text(f"{pinned.key_type} {pinned.key_base64}\n")
    printed = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True)
    assert printed.stdout.split()[1] == pinned.fingerprint
    assert pinned.key_type == "ssh-ed25519"


def test_the_pinned_key_matches_only_itself():
    pkey = host_pkey()
    pinned = PinnedHostKey.from_pkey(pkey)
    same = paramiko.PKey.from_type_string(pinned.key_type, pkey.asbytes())
    assert pinned.matches(same)
    pinned.verify(same, "spark-0001")
    assert not pinned.matches(host_pkey())
    assert not pinned.matches(paramiko.ECDSAKey.generate())


def test_a_changed_host_key_is_refused_with_both_fingerprints():
    pinned = PinnedHostKey.from_pkey(host_pkey())
    intruder = host_pkey()
    with pytest.raises(HostKeyChangedError) as refused:
        pinned.verify(intruder, "spark-0001")
    message = str(refused.value)
    assert pinned.fingerprint in message and intruder.fingerprint in message
    assert "impostor" in message and "re-pair" in message


def test_a_pin_whose_parts_disagree_is_rejected():
    good = PinnedHostKey.from_pkey(host_pkey())
    with pytest.raises(ValidationError, match="fingerprint"):
        PinnedHostKey(key_type=good.key_type, key_base64=good.key_base64, fingerprint="SHA256:abc")
    with pytest.raises(ValidationError, match="key_type"):
        PinnedHostKey(key_type="ssh-rsa", key_base64=good.key_base64, fingerprint=good.fingerprint)
    with pytest.raises(ValidationError, match="base64"):
        PinnedHostKey(key_type=good.key_type, key_base64="not base64!", fingerprint=good.fingerprint)
