"""The step logic of one node's deploy, on a fake node: what is installed, switched, kept and rolled back.

The fake keeps the layout as state (links, complete versions, what runs) and
changes it as the real scripts would; starting an agent and its health check
are replaced, so each decision can be forced. The real path is in
tests/lab/test_deploy_lab.py.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from sparksync.core.bundle.platforms import Target
from sparksync.core.deploy import node_deploy, service
from sparksync.core.deploy.bundles import ReadyBundle
from sparksync.core.deploy.errors import DeployCancelled, DeployError, HealthCheckError, PrecheckError
from sparksync.core.deploy.layout import LAYOUT
from sparksync.core.deploy.model import DeployOptions, Outcome, Stage
from sparksync.core.deploy.node_deploy import NodeDeploy, RolledBack, StartFailed
from sparksync.core.deploy.prechecks import PROBE
from sparksync.core.deploy.remote import RemoteNode
from sparksync.core.ssh.connection import CommandResult

TARGET = Target("linux-aarch64", "3.12")
AGENT = "sparksync_agent-0.1.0-py3-none-any.whl"
PACKAGING = "packaging-26.4-py3-none-any.whl"


class FakeNode:
    def __init__(self, current=None, previous=None, complete=(), python="/usr/bin/python3", free_mib=10_000):
        self.links = {"current": current, "previous": previous}
        self.complete = set(complete)
        self.venvs = set(complete)
        self.running = current
        self.python, self.free_mib = python, free_mib
        self.broken: set[str] = set()  # versions whose agent never answers
        self.restarts: list[str | None] = []
        self.stopped = 0
        self.uploads = 0
        self.cancel_at: str | None = None  # a step ("install", "health") that sets the cancel Event
        self.node_id_file: str | None = None  # the agent's state dir's node_id
        self.agent_id: str | None = None  # the id the running agent read when it started
        self.id_writes = 0

    def probe(self) -> str:
        lines = [
            "arch=aarch64",
            "home=/home/nvidia",
            "user=nvidia",
            f"df=dev 1 1 {self.free_mib * 1024} 1% /",
        ]
        if self.python:
            lines += [f"python={self.python}", "python_version=3.12.3", "venv=yes"]
        lines += [f"{k}=versions/{v}" if v else f"{k}=" for k, v in self.links.items()]
        lines += [f"complete={v}" for v in sorted(self.complete)]
        return "\n".join(lines) + "\nsystemd_user=no\n"


def ok(stdout: str = "") -> CommandResult:
    return CommandResult(0, stdout.encode(), b"")


class FakeRemote(RemoteNode):
    def __init__(self, node: FakeNode, cancel: threading.Event):
        super().__init__(transport=None, name="spark-1", cancel=cancel)
        self.node = node

    def sh(self, script: str, *args: str, timeout=None) -> CommandResult:
        self.check_cancel("a command")
        node = self.node
        if script == PROBE:
            return ok(node.probe())
        if script.startswith("sha256sum"):
            return CommandResult(1, b"", b"")
        if script.startswith("ln -sfn"):
            node.links[args[0].rsplit("/", 1)[1]] = args[1].removeprefix("versions/")
        elif script == 'rm -f "$1"' and args[0] in (LAYOUT.current, LAYOUT.previous):
            node.links[args[0].rsplit("/", 1)[1]] = None
        elif script.startswith("rm -rf") and args[0].startswith(LAYOUT.versions + "/"):
            version = args[0].rsplit("/", 1)[1]
            node.complete.discard(version)
            node.venvs.discard(version)
        elif script.startswith('cd "$1"'):  # prune
            node.complete &= set(args[1:])
        return ok()

    def run(self, argv, timeout=None, stdin=None) -> CommandResult:
        version = argv[0].split("/")[-4]  # versions/<v>/venv/bin/sparksync-agent
        return (
            ok(f"sparksync-agent {version} (protocol 1.0)\n")
            if version in self.node.venvs
            else CommandResult(127, b"", b"")
        )

    def run_killable(self, argv, timeout, doing) -> CommandResult:
        if "venv" in argv:
            assert "--without-pip" in argv  # the bundle brings what installs it
        install = argv[1:3] == ["-I", "-c"] and argv[5].startswith("installer-")  # the bundle's installer
        if install and self.node.cancel_at == "install":
            self.cancel.set()
        self.check_cancel(doing)
        if install:
            self.node.venvs.add(argv[0].split("/")[-4])  # /home/x/<root>/versions/<v>/venv/bin/python
        return ok()

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        if path.endswith("installed.json"):
            self.node.complete.add(path.split("/")[-2])
        if path == LAYOUT.node_id:
            assert mode == 0o600
            self.node.node_id_file, self.node.id_writes = data.decode(), self.node.id_writes + 1

    def upload(self, local: Path, remote: str, progress=None) -> None:
        self.node.uploads += 1
        if progress:
            progress(10, 10)

    def read_file(self, path: str, limit: int = 1 << 20):
        if path == LAYOUT.node_id and self.node.node_id_file is not None:
            return self.node.node_id_file.encode()
        return None


@pytest.fixture
def fakes(monkeypatch):
    """Replace starting and asking the agent with the fake node's behaviour."""
    state: dict[str, FakeNode] = {}

    def restart(remote, mode, *, advertise, sample_hz):
        node = state["node"]
        node.restarts.append(node.links["current"])
        node.running = node.links["current"]
        node.agent_id = (node.node_id_file or "").strip() or "made-by-the-agent"
        return []

    def wait_for_agent(remote, transports, *, version, mode, old_run_id, timeout_s):
        node = state["node"]
        if node.cancel_at == "health" and not remote.cancel.is_set():
            remote.cancel.set()
            raise DeployCancelled("cancelled while waiting for the new agent to answer")
        if version in node.broken or node.running != version:
            raise HealthCheckError(f"the agent {version} exited at start 3 times")
        return SimpleNamespace()

    def current_answer(remote, transports):
        node = state["node"]
        hello = SimpleNamespace(agent_version=node.running, node_id=node.agent_id)
        return SimpleNamespace(hello=hello) if node.running else None

    def stop_supervisor(remote):
        state["node"].stopped += 1
        state["node"].running = None

    monkeypatch.setattr(service, "restart", restart)
    monkeypatch.setattr(service, "stop_supervisor", stop_supervisor)
    monkeypatch.setattr(node_deploy, "wait_for_agent", wait_for_agent)
    monkeypatch.setattr(node_deploy, "current_answer", current_answer)
    monkeypatch.setattr(node_deploy, "read_endpoint", lambda remote: None)
    return state


class Bundles:
    def __init__(self, version: str, target: Target = TARGET):
        manifest = SimpleNamespace(
            agent_version=version,
            target=target,
            requirement=lambda: f"sparksync-agent=={version}",
            files=[SimpleNamespace(name=n) for n in (AGENT, "installer-1.1.0-py3-none-any.whl", PACKAGING)],
            installs=[AGENT, PACKAGING],
        )
        self.ready = ReadyBundle(
            Path(f"/c/sparksync-agent-{version}-linux-aarch64-py3.12.tar.gz"), manifest, "ab" * 32, 5 << 20
        )

    def get(self, target, node):
        return self.ready


def run_deploy(fakes, node: FakeNode, version: str, node_id: str | None = None, **options):
    fakes["node"] = node
    cancel = threading.Event()
    stages: list[Stage] = []
    deploy = NodeDeploy(
        FakeRemote(node, cancel),
        None,
        DeployOptions(**options),
        Bundles(version),
        lambda s, f, m: stages.append(s),
        node_id,
    )
    return deploy.run(), stages


def test_a_fresh_node_gets_the_version_installed_linked_and_started(fakes):
    node = FakeNode()
    done, stages = run_deploy(fakes, node, "0.1.0")
    assert (done.outcome, done.version, done.mode, done.previous) == (
        Outcome.DEPLOYED,
        "0.1.0",
        "supervised",
        None,
    )
    assert node.links == {"current": "0.1.0", "previous": None} and node.complete == {"0.1.0"}
    assert node.running == "0.1.0" and node.uploads == 1
    assert list(dict.fromkeys(stages)) == [
        Stage.CHECKING, Stage.UPLOADING, Stage.INSTALLING, Stage.STARTING, Stage.HEALTH, Stage.DONE,
    ]  # fmt: skip


def test_the_running_version_again_is_a_no_op(fakes):
    node = FakeNode(current="0.1.0", complete={"0.1.0"})
    done, stages = run_deploy(fakes, node, "0.1.0")
    assert done.outcome is Outcome.UNCHANGED and node.restarts == [] and node.uploads == 0
    assert Stage.INSTALLING not in stages


def test_the_agent_is_given_the_nodes_id_before_it_starts(fakes):
    node = FakeNode()
    done, _ = run_deploy(fakes, node, "0.1.0", node_id="0a1b2c3d4e5f60718293a4b5c6d7e8f9")
    assert done.outcome is Outcome.DEPLOYED
    assert node.node_id_file == "0a1b2c3d4e5f60718293a4b5c6d7e8f9\n" and node.agent_id == "0a1b2c3d4e5f60718293a4b5c6d7e8f9"


def test_a_running_agent_with_another_id_is_given_the_nodes_and_restarted(fakes):
    node = FakeNode(current="0.1.0", complete={"0.1.0"})
    node.node_id_file = node.agent_id = "its-own-random-id"  # e.g. paired before ids, or a copied disk
    done, _ = run_deploy(fakes, node, "0.1.0", node_id="0a1b2c3d4e5f60718293a4b5c6d7e8f9")
    assert done.outcome is Outcome.DEPLOYED and node.restarts == ["0.1.0"] and node.uploads == 0
    assert node.agent_id == "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
    again, _ = run_deploy(fakes, node, "0.1.0", node_id="0a1b2c3d4e5f60718293a4b5c6d7e8f9")
    assert again.outcome is Outcome.UNCHANGED and node.restarts == ["0.1.0"] and node.id_writes == 1


def test_an_installed_version_whose_agent_is_down_is_started_without_reinstalling(fakes):
    node = FakeNode(current="0.1.0", complete={"0.1.0"})
    node.running = None
    done, _ = run_deploy(fakes, node, "0.1.0")
    assert done.outcome is Outcome.DEPLOYED and node.uploads == 0 and node.restarts == ["0.1.0"]


def test_a_broken_venv_of_the_same_version_is_reinstalled(fakes):
    node = FakeNode(current="0.1.0", complete={"0.1.0"})
    node.venvs.clear()  # marker there, but `sparksync-agent version` fails
    done, _ = run_deploy(fakes, node, "0.1.0")
    assert done.outcome is Outcome.DEPLOYED and node.uploads == 1 and "0.1.0" in node.venvs


def test_an_upgrade_keeps_the_old_version_as_previous(fakes):
    node = FakeNode(current="0.1.0", previous="0.0.9", complete={"0.0.9", "0.1.0"})
    done, _ = run_deploy(fakes, node, "0.1.1")
    assert (done.outcome, done.previous) == (Outcome.DEPLOYED, "0.1.0")
    assert node.links == {"current": "0.1.1", "previous": "0.1.0"}
    assert node.complete == {"0.1.0", "0.1.1"}  # 0.0.9 pruned: neither current nor previous


def test_a_failing_upgrade_rolls_back_to_the_running_version(fakes):
    node = FakeNode(current="0.1.0", previous="0.0.9", complete={"0.0.9", "0.1.0"})
    node.broken.add("0.1.1")
    with pytest.raises(RolledBack) as caught:
        run_deploy(fakes, node, "0.1.1")
    assert str(caught.value) == "rolled back to 0.1.0: the agent 0.1.1 exited at start 3 times"
    assert (caught.value.version, caught.value.cancelled) == ("0.1.0", False)
    assert node.links == {"current": "0.1.0", "previous": "0.0.9"}  # exactly as before
    assert node.complete == {"0.0.9", "0.1.0"} and node.running == "0.1.0"
    assert node.restarts == ["0.1.1", "0.1.0"]


def test_a_failing_first_install_is_stopped_and_removed(fakes):
    node = FakeNode()
    node.broken.add("0.1.0")
    with pytest.raises(StartFailed) as caught:
        run_deploy(fakes, node, "0.1.0")
    assert "the agent 0.1.0 did not start: the agent 0.1.0 exited at start 3 times" in str(caught.value)
    assert node.links["current"] is None and node.complete == set() and node.stopped == 1


def test_when_the_rollback_fails_too_the_message_says_both(fakes):
    node = FakeNode(current="0.1.0", complete={"0.1.0"})
    node.broken |= {"0.1.0", "0.1.1"}
    with pytest.raises(DeployError, match=r"rolling back to 0\.1\.0 failed as well"):
        run_deploy(fakes, node, "0.1.1")


def test_cancel_during_install_removes_the_partial_version_and_touches_nothing_else(fakes):
    node = FakeNode(current="0.1.0", complete={"0.1.0"})
    node.cancel_at = "install"
    with pytest.raises(DeployCancelled):
        run_deploy(fakes, node, "0.1.1")
    assert node.links == {"current": "0.1.0", "previous": None} and node.complete == {"0.1.0"}
    assert "0.1.1" not in node.venvs and node.restarts == [] and node.running == "0.1.0"


def test_cancel_after_the_switch_rolls_back(fakes):
    node = FakeNode(current="0.1.0", complete={"0.1.0"})
    node.cancel_at = "health"
    with pytest.raises(RolledBack) as caught:
        run_deploy(fakes, node, "0.1.1")
    assert caught.value.cancelled and str(caught.value) == "rolled back to 0.1.0: cancelled"
    assert node.links["current"] == "0.1.0" and node.running == "0.1.0" and node.complete == {"0.1.0"}


def test_no_python_stops_before_anything_changes(fakes):
    node = FakeNode(python=None)
    with pytest.raises(PrecheckError, match="python3 was not found"):
        run_deploy(fakes, node, "0.1.0")
    assert node.uploads == 0 and node.links["current"] is None


def test_too_little_disk_stops_before_the_upload(fakes):
    node = FakeNode(free_mib=20)
    with pytest.raises(PrecheckError, match="not enough disk space in /home/nvidia"):
        run_deploy(fakes, node, "0.1.0")
    assert node.uploads == 0


def test_a_bundle_for_another_target_is_refused():
    from sparksync.core.deploy.bundles import BundleSource

    source = BundleSource()
    source._ready[Path("/b")] = Bundles("0.1.0", Target("linux-x86_64", "3.12")).ready
    source.explicit = Path("/b")
    with pytest.raises(
        PrecheckError, match="is for linux-x86_64 Python 3.12, but the node needs linux-aarch64"
    ):
        source.get(TARGET, "spark-1")


def test_a_bundle_that_cannot_be_made_is_tried_once_and_its_message_kept(monkeypatch):
    from sparksync.core.bundle import BundleOfflineError
    from sparksync.core.deploy import bundles

    calls = []

    def offline(platform, python, progress=None):
        calls.append((platform, python))
        raise BundleOfflineError("pip could not reach the package index; bring sparksync-agent-0.1.0-...tar.gz")

    monkeypatch.setattr(bundles, "ensure_bundle", offline)
    source = bundles.BundleSource()
    for node in ("n1", "n2", "n3"):
        with pytest.raises(BundleOfflineError, match="bring sparksync-agent"):
            source.get(TARGET, node)
    assert calls == [("linux-aarch64", "3.12")]


def test_eight_nodes_of_one_kind_look_up_and_verify_their_bundle_once(monkeypatch):
    from sparksync.core.deploy import bundles

    looked, loaded = [], []
    ready = Bundles("0.1.0").ready
    def ensure(platform, python, progress=None):
        looked.append((platform, python))
        return ready.path

    def load(path):
        loaded.append(path)
        return ready

    monkeypatch.setattr(bundles, "ensure_bundle", ensure)
    monkeypatch.setattr(bundles.BundleSource, "_load", staticmethod(load))
    source = bundles.BundleSource()
    assert all(source.get(TARGET, f"n{i}") is ready for i in range(8))
    assert (len(looked), loaded) == (1, [ready.path])
