"""Deploying the agent to real sshd nodes in the namespace lab, through the client core and the CLI.

The lab has no user systemd, so every deploy here uses the supervised
fallback, and the reports must say so. Every test stops the agents it
started (``agents`` fixture) before the lab's own teardown, and checks that
none are left.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from sparksync_agent.protocol import AGENT_VERSION

from sparksync.core.bundle import add_to_cache, bundles_dir
from sparksync.core.ssh.client_key import ClientKey
from sparksync.core.deploy.health import current_answer
from sparksync.core.deploy.layout import LAYOUT
from sparksync.core.deploy.many import deploy_many, summary_table
from sparksync.core.deploy.prechecks import space_needed
from sparksync.core.fleet.state import NodeState
from sparksync.core.fleet.store import NodeStateStore
from sparksync.core.deploy.model import DeployOptions, Outcome, ProgressEvent, Stage
from sparksync.core.deploy.remote import RemoteNode
from sparksync.core.nodes.registry import Registry
from sparksync.core.ssh.secrets import SecretStore
from sparksync.core.ssh.transports import NodeTransports
from tests.core.deploy.lab_helpers import (
    FAST,
    agent_processes,
    home_of,
    in_node_mounts,
    lab_bundle,
    node_target,
    pair_all,
    stop_lab_agents,
    versioned_bundle,
)
from tests.core.bundle_helpers import pip_offline
from tests.core.keyring_fixtures import real_keyring  # noqa: F401  (a fixture)

pytestmark = pytest.mark.lab

HEALTH_S = 60.0
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def client_key(real_keyring) -> ClientKey:  # noqa: F811
    return ClientKey.load_or_create(SecretStore())


@pytest.fixture
def bundle(tmp_path_factory) -> Path:
    """The lab's real bundle, put into this test's bundle cache as a user would bring it."""
    return add_to_cache(lab_bundle(tmp_path_factory))


@pytest.fixture
def agents(ssh_lab_factory):
    """``make(n)`` -> an SshLab; the agents its users run are stopped (and checked gone) at teardown."""
    made = []

    def make(n: int):
        made.append(ssh_lab_factory(n))
        return made[-1]

    yield make
    users = [user for lab in made for user in lab.users()]
    stop_lab_agents(users)
    left = [proc.pid for user in users for proc in agent_processes(user)]
    assert not left, f"agent processes left behind: {left}"


def links_for(ssh_lab, client_key) -> NodeTransports:
    return NodeTransports(client_key, Registry(), dialer=ssh_lab.dialer, settings=FAST)


def hello_version(links: NodeTransports, name: str) -> tuple[str, str] | None:
    """(agent version, run id) of the agent on ``name``, asked through a tunnel; None if none answers."""
    with RemoteNode(links.get(name), name) as remote:
        answer = current_answer(remote, links)
    return None if answer is None else (answer.hello.agent_version, answer.hello.run_id)


def hello_node_id(links: NodeTransports, name: str) -> str | None:
    with RemoteNode(links.get(name), name) as remote:
        answer = current_answer(remote, links)
    return None if answer is None else answer.hello.node_id


def remote_sh(links: NodeTransports, name: str, script: str, *args: str) -> str:
    with RemoteNode(links.get(name), name) as remote:
        return remote.sh(script, *args).stdout.decode()


def deploy(links, names, **options):
    events: list[ProgressEvent] = []
    lock = threading.Lock()

    def progress(event: ProgressEvent) -> None:
        with lock:
            events.append(event)

    cancel = options.pop("cancel", None)
    on_event = options.pop("on_event", None)
    if on_event is not None:

        def progress(event: ProgressEvent) -> None:
            with lock:
                events.append(event)
            on_event(event)

    opts = DeployOptions(health_timeout_s=HEALTH_S, advertise=False, **options)
    results = deploy_many(names, transports=links, options=opts, progress=progress, cancel=cancel)
    print(summary_table(results))
    return results, events


# --- the main path ----------------------------------------------------------------------------


def test_eight_nodes_in_parallel_supervised_every_agent_answers_and_a_redeploy_changes_nothing(
    agents, client_key, bundle
):
    ssh_lab = agents(8)
    names = pair_all(ssh_lab, client_key)
    with links_for(ssh_lab, client_key) as links:
        results, events = deploy(links, names)

        assert [(r.node, r.outcome, r.version, r.service_mode) for r in results] == [
            (name, Outcome.DEPLOYED, AGENT_VERSION, "supervised") for name in names
        ], summary_table(results)
        for name in names:  # every node went through every stage, in order
            stages = list(dict.fromkeys(e.stage for e in events if e.node == name))
            assert stages == [
                Stage.CHECKING,
                Stage.UPLOADING,
                Stage.INSTALLING,
                Stage.STARTING,
                Stage.HEALTH,
                Stage.DONE,
            ]
        first = {name: hello_version(links, name) for name in names}
        assert all(answer[0] == AGENT_VERSION for answer in first.values()), first
        states = NodeStateStore().statuses(Registry().list())
        for node in Registry().list():
            assert (node.agent_version, node.service_mode) == (AGENT_VERSION, "supervised")
            assert node.deployed_at is not None
            assert states[node.name][0].state is NodeState.ONLINE  # what `node list` shows now
            assert hello_node_id(links, node.name) == node.node_id  # the agent took the id it was paired with
        layout = remote_sh(
            links,
            names[0],
            'readlink "$1"; ls "$2"; ls "$3"',
            LAYOUT.current,
            LAYOUT.versions,
            LAYOUT.bundles,
        )
        assert layout.split() == [f"versions/{AGENT_VERSION}", AGENT_VERSION, bundle.name]

        again, _ = deploy(links, names)
        assert [r.outcome for r in again] == [Outcome.UNCHANGED] * 8, summary_table(again)
        assert {name: hello_version(links, name) for name in names} == first  # same agents, not restarted
        assert all(
            len(agent_processes(ssh_lab.user(node))) == 2 for node in ssh_lab.nodes
        )  # supervisor + agent


def test_cancelled_upgrade_then_upgrade_then_a_failing_upgrade_rolls_back_to_a_running_agent(
    agents, client_key, bundle, tmp_path
):
    ssh_lab = agents(1)
    (name,) = pair_all(ssh_lab, client_key)
    newer = versioned_bundle(bundle, "0.1.1", tmp_path)
    broken = versioned_bundle(bundle, "0.1.2", tmp_path, broken=True)
    with links_for(ssh_lab, client_key) as links:
        assert deploy(links, [name])[0][0].outcome is Outcome.DEPLOYED
        before = hello_version(links, name)

        # Cancelled mid-install (as the wheels go in): the partial version goes, the old agent never stopped.
        cancel = threading.Event()

        def cancel_during_install(event: ProgressEvent) -> None:
            if event.stage is Stage.INSTALLING and event.message.startswith("installing "):
                cancel.set()

        (cancelled,), _ = deploy(links, [name], bundle=newer, cancel=cancel, on_event=cancel_during_install)
        assert cancelled.outcome is Outcome.CANCELLED and "nothing was changed" in cancelled.reason, cancelled
        assert hello_version(links, name) == before
        state = remote_sh(
            links,
            name,
            'readlink "$1"; ls -A "$2"; ls -A "$3"',
            LAYOUT.current,
            LAYOUT.versions,
            LAYOUT.bundles,
        )
        assert state.split() == [f"versions/{AGENT_VERSION}", AGENT_VERSION, bundle.name, newer.name]
        assert Registry().get(name).agent_version == AGENT_VERSION

        (upgraded,), _ = deploy(links, [name], bundle=newer)
        assert (upgraded.outcome, upgraded.version, upgraded.previous_version) == (
            Outcome.DEPLOYED, "0.1.1", AGENT_VERSION,
        )  # fmt: skip
        version, run_id = hello_version(links, name)
        assert version == "0.1.1"

        (failed,), events = deploy(links, [name], bundle=broken)
        assert failed.outcome is Outcome.ROLLED_BACK and failed.version == "0.1.1", failed
        assert failed.reason.startswith("rolled back to 0.1.1: the agent 0.1.2 exited at start"), (
            failed.reason
        )
        assert "fails at start on purpose" in failed.reason  # the agent's own last words, from its log
        assert Stage.ROLLING_BACK in {e.stage for e in events}
        version_after, run_after = hello_version(links, name)
        assert version_after == "0.1.1" and run_after != run_id  # restarted, and answering again
        links_now = remote_sh(
            links,
            name,
            'readlink "$1"; readlink "$2"; ls "$3"',
            LAYOUT.current,
            LAYOUT.previous,
            LAYOUT.versions,
        )
        assert links_now.split() == ["versions/0.1.1", f"versions/{AGENT_VERSION}", AGENT_VERSION, "0.1.1"]
        assert Registry().get(name).agent_version == "0.1.1"


# --- faults -----------------------------------------------------------------------------------


def path_without_python() -> Path:
    """A folder of links to every /usr/bin program but python*: a PATH on which python3 is missing."""
    folder = Path(tempfile.mkdtemp(prefix="sparksync-nopython-", dir="/tmp"))
    folder.chmod(0o755)
    for program in Path("/usr/bin").iterdir():
        if not program.name.startswith("python"):
            (folder / program.name).symlink_to(program)
    return folder


def test_a_node_without_python3_gets_one_clear_line_and_nothing_changes(agents, client_key, bundle):
    ssh_lab = agents(1)
    bare = ssh_lab.nodes[0]
    (name,) = pair_all(ssh_lab, client_key)
    folder = path_without_python()
    try:
        # sshd gives this node's sessions a PATH without python3, as on a machine without it.
        ssh_lab.service.add_config(ssh_lab.lab, bare, f"SetEnv PATH={folder}")
        with links_for(ssh_lab, client_key) as links:
            assert remote_sh(links, name, "command -v python3 || echo none").strip() == "none"
            (failed,), events = deploy(links, [name])
    finally:
        shutil.rmtree(folder)
    assert failed.outcome is Outcome.FAILED and {e.stage for e in events} == {Stage.CHECKING}
    assert failed.reason.startswith(f"{name}: python3 was not found on the node"), failed.reason
    assert "sudo apt install python3 python3-venv" in failed.reason and "\n" not in failed.reason
    assert not (home_of(ssh_lab.user(bare)) / ".local").exists()
    assert Registry().get(name).agent_version is None


MOUNT_TMPFS = """
set -e
stage=$(mktemp -d)
mount -t tmpfs -o "size=$2,mode=0700,uid=$3,gid=$4" tmpfs "$stage"
cp -a "$1"/. "$stage"/
mount --move "$stage" "$1"
rmdir "$stage"
"""
FILL = """
avail=$(df -Pk "$1" | tail -n 1 | awk '{print $4}')
fallocate -l $(( (avail - $2) * 1024 )) "$1/filler"
"""


def test_a_full_disk_is_refused_before_upload_and_enospc_during_upload_leaves_nothing(
    agents, client_key, bundle
):
    ssh_lab = agents(1)
    node = ssh_lab.nodes[0]
    (name,) = pair_all(ssh_lab, client_key)
    user = ssh_lab.user(node)
    home, entry = str(home_of(user)), pwd.getpwnam(user)
    # A small disk for the node's home, seen by its SSH sessions (the sshd's mount namespace):
    # just big enough to pass the free-space check, so the upload itself can run out of room.
    needed = space_needed(bundle.stat().st_size, upload=True, install=True)
    size = f"{needed // 2**20 + 16}m"
    mounted = in_node_mounts(ssh_lab, node, MOUNT_TMPFS, home, size, str(entry.pw_uid), str(entry.pw_gid))
    assert mounted.returncode == 0, mounted.stderr
    try:
        with links_for(ssh_lab, client_key) as links:
            assert in_node_mounts(ssh_lab, node, FILL, home, str(30 * 1024)).returncode == 0
            (refused,), events = deploy(links, [name])
            assert refused.outcome is Outcome.FAILED and {e.stage for e in events} == {Stage.CHECKING}
            assert refused.reason.startswith(
                f"{name}: not enough disk space in {home}: the agent needs about "
            )
            assert ", 30 MiB are free." in refused.reason, refused.reason

            # Room enough at the check, then the disk fills up while the bundle is on its way.
            in_node_mounts(ssh_lab, node, 'rm -f "$1/filler"', home)

            def fill_when_uploading(event: ProgressEvent) -> None:
                if event.stage is Stage.UPLOADING and event.fraction == 0.0:
                    in_node_mounts(ssh_lab, node, FILL, home, "256")

            (full,), _ = deploy(links, [name], on_event=fill_when_uploading)
            assert full.outcome is Outcome.FAILED, full
            assert f"copying {bundle.name} to {name} failed" in full.reason
            assert "the node's disk is full" in full.reason, full.reason
            left = remote_sh(
                links,
                name,
                'ls -A "$1" "$2" 2>&1; readlink "$3"',
                LAYOUT.versions,
                LAYOUT.bundles,
                LAYOUT.current,
            )
            assert ".part" not in left and "0." not in left, left
        assert Registry().get(name).agent_version is None
    finally:
        in_node_mounts(ssh_lab, node, 'umount -l "$1"', home)


def test_unreachable_node_and_changed_host_key_are_refused_and_the_others_deploy(agents, client_key, bundle):
    ssh_lab = agents(3)
    down, changed, fine = ssh_lab.nodes
    names = pair_all(ssh_lab, client_key)
    ssh_lab.stop_sshd(down)
    ssh_lab.regenerate_host_key(changed)
    with links_for(ssh_lab, client_key) as links:
        results, _ = deploy(links, names)
    outcomes = {r.node: (r.outcome, r.reason or "") for r in results}
    assert outcomes[down.name][0] is Outcome.FAILED and "Cannot reach" in outcomes[down.name][1]
    assert outcomes[changed.name][0] is Outcome.FAILED
    assert (
        f"the SSH host key of node {changed.name!r} ({changed.ip}) has CHANGED" in outcomes[changed.name][1]
    )
    assert outcomes[fine.name][0] is Outcome.DEPLOYED
    assert not (home_of(ssh_lab.user(changed)) / ".local").exists()  # refused before anything ran there
    versions = {n.name: n.agent_version for n in Registry().list()}
    assert versions == {down.name: None, changed.name: None, fine.name: AGENT_VERSION}


# --- the CLI ----------------------------------------------------------------------------------


def sparksync_cli(ssh_lab, env: dict[str, str], *args: str) -> subprocess.Popen:
    """``sparksync ARGS`` as its own process inside the lab's client namespace."""
    argv = ssh_lab.lab.wrap(ssh_lab.client, [sys.executable, "-m", "sparksync", *args])
    return subprocess.Popen(
        argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_cli_deploy_ctrl_c_then_deploy_then_unpair_uninstall_removes_everything(
    agents, client_key, bundle, real_keyring  # noqa: F811
):
    ssh_lab = agents(1)
    node = ssh_lab.nodes[0]
    (name,) = pair_all(ssh_lab, client_key)
    env = {**os.environ, **real_keyring.env}
    env.pop("PYTHON_KEYRING_BACKEND", None)
    home = home_of(ssh_lab.user(node))

    # Ctrl-C while the venv is being made: cancelled, nothing left, exit 130.
    proc = sparksync_cli(ssh_lab, env, "node", "deploy", name, "--no-advertise")
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "installing" in line and "venv" in line:
            proc.send_signal(signal.SIGINT)
            break
    out, rest = proc.communicate(timeout=120)
    err = "".join(lines) + rest
    assert proc.returncode == 130, err + "\nSTDOUT:\n" + out
    assert "sparksync: cancelling" in err and "cancelled" in out and "nothing was changed on the node" in out
    assert (
        not (home / LAYOUT.root / "versions" / AGENT_VERSION).exists()
        and not (home / LAYOUT.current).is_symlink()
    )
    assert not agent_processes(ssh_lab.user(node))

    proc = sparksync_cli(ssh_lab, env, "node", "deploy", "--all", "--no-advertise", "--json")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    (result,) = json.loads(out)["results"]
    assert (result["outcome"], result["service_mode"], result["version"]) == (
        "deployed",
        "supervised",
        AGENT_VERSION,
    )
    assert f"{name}: uploading" in err and f"{name}: health" in err
    assert len(agent_processes(ssh_lab.user(node))) == 2

    proc = sparksync_cli(ssh_lab, env, "node", "unpair", name, "--uninstall", "--json")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    document = json.loads(out)
    assert document["key_removed"] is True and "supervisor" in document["agent_removed"], document
    assert not agent_processes(ssh_lab.user(node))
    for path in (LAYOUT.root, LAYOUT.state_dir, LAYOUT.unit_file):
        assert not (home / path).exists(), path
    assert Registry().list() == []


def test_no_cached_bundle_and_no_internet_says_which_bundle_to_bring_and_where(agents, client_key, monkeypatch):
    ssh_lab = agents(1)
    (name,) = pair_all(ssh_lab, client_key)
    pip_offline(monkeypatch)  # the bundle cache is empty, and pip cannot reach any index
    with links_for(ssh_lab, client_key) as links:
        (failed,), _ = deploy(links, [name])
    wanted = f"sparksync-agent-{AGENT_VERSION}-{node_target().platform}-py{node_target().python}.tar.gz"
    assert failed.outcome is Outcome.FAILED and "this computer seems to have no internet" in failed.reason
    assert f"copy DIR/{wanted} into {bundles_dir()}/" in failed.reason, failed.reason
    assert not (home_of(ssh_lab.user(ssh_lab.nodes[0])) / ".local").exists()
