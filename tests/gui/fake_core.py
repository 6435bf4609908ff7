"""A stand-in for ``ClusterActions``: records calls, answers from what the test set."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sparksync.core.apps.custom_apps import DGX_DASHBOARD, CustomApp
from sparksync.core.nodes.actions import RenameResult
from sparksync.core.nodes.cluster_events import ClusterEvents
from sparksync.core.ssh.secrets import KeyringStatus
from sparksync.core.ssh.pairing import PairResult
from sparksync.core.ssh.unpair import UnpairResult
from tests.core.node_factory import paired_node


@dataclass
class FakeTunnel:
    local_port: int = 45678


class FakeSession:
    def __init__(self, app: CustomApp, node: str):
        self.app, self.node, self.tunnel, self.script = app, node, FakeTunnel(), None

    @property
    def url(self):
        return (
            None
            if self.app.browser_path is None
            else f"http://127.0.0.1:{self.tunnel.local_port}{self.app.browser_path}"
        )

    def wait_ready(self, timeout, cancel=None):
        return True


class FakeActions:
    def __init__(self, names: list[str] = ()):
        self.nodes = [paired_node(name, i + 1) for i, name in enumerate(names)]
        self.calls: list[tuple] = []
        self.fail: dict[str, Exception] = {}  # method name -> error to raise
        self.lock = threading.Lock()
        self.apps = [DGX_DASHBOARD, CustomApp(name="Jupyter", remote_port=8888, browser_path="/lab")]
        self.pair = self._pair
        self.events = ClusterEvents()  # the real hook the fabric code tells through

    def _record(self, name: str, *args):
        with self.lock:
            self.calls.append((name, *args))
        if name in self.fail:
            raise self.fail[name]

    def called(self, name: str) -> list[tuple]:
        with self.lock:
            return [c[1:] for c in self.calls if c[0] == name]

    def paired(self):
        self._record("paired")
        return list(self.nodes)

    def unpair(self, name, forget=False):
        self._record("unpair", name)
        node = next(n for n in self.nodes if n.name == name)
        self.nodes.remove(node)
        return UnpairResult(node, True, False)

    def rename(self, old, new):
        self._record("rename", old, new)
        i = next(i for i, n in enumerate(self.nodes) if n.name == old)
        self.nodes[i] = self.nodes[i].model_copy(update={"name": new})
        return RenameResult(self.nodes[i], old)

    def connect_all(self, timeout=15.0):
        self._record("connect_all")
        return {n.name: None for n in self.nodes}

    def disconnect_all(self):
        self._record("disconnect_all")

    def connect(self, name, timeout=15.0):
        self._record("connect", name)
        return None

    def disconnect(self, name):
        self._record("disconnect", name)

    def open_terminal(self, name):
        self._record("open_terminal", name)
        return ["xterm", "-e", "ssh", name]

    def custom_apps(self):
        self._record("custom_apps")
        return list(self.apps)

    def open_app(self, node, app, timeout=15.0):
        self._record("open_app", node, app.name)
        return FakeSession(app, node)

    def add_app(self, app):
        self._record("add_app", app.name)
        self.apps.append(app)

    def remove_app(self, name):
        self._record("remove_app", name)
        self.apps = [a for a in self.apps if a.name != name]

    def close_app(self, node, name):
        self._record("close_app", node, name)

    def keyring_status(self):
        self._record("keyring_status")
        return KeyringStatus(
            usable=False, backend="keyring.backends.fail.Keyring", reason="no Secret Service"
        )

    def close(self):
        self._record("close")

    def _pair(self, request, *, password, confirm, progress):
        self._record("pair", request.host)
        if not confirm("SHA256:" + "Q" * 43):
            from sparksync.core.ssh.errors import HostKeyNotAcceptedError

            raise HostKeyNotAcceptedError("The host key was not accepted, so nothing was changed.")
        node = paired_node("spark-new", 9, host=request.host)
        self.passwords = [password()]
        self.nodes.append(node)
        return PairResult(node, key_installed=True)


class FakeDeployActions(FakeActions):
    """Deploys through the real DeployFeed, with stages a test drives."""

    def __init__(self, names=()):
        super().__init__(names)
        from sparksync.core.deploy.feed import DeployFeed

        self.deploy_feed = DeployFeed()
        self.release = threading.Event()

    def deploy(self, names, cancel=None):
        from sparksync.core.deploy.model import DeployResult, Outcome, ProgressEvent, Stage
        from sparksync.core.deploy.feed import finished

        self._record("deploy", *names)
        results = []
        for name in names:
            self.deploy_feed.on_event(ProgressEvent(name, Stage.UPLOADING, 0.5, "12 MB"))
            self.release.wait(30)
            ok = name != "bad"
            outcome = Outcome.DEPLOYED if ok else Outcome.ROLLED_BACK
            result = DeployResult(
                name, outcome, "0.5.0", "supervised", 1.0, None if ok else "health check failed"
            )
            self.deploy_feed.publish(finished(result))
            results.append(result)
        return results
