"""Everything a user does to the cluster's membership, as one object both faces call.

The GUI calls these methods in worker threads (each may block on SSH, the
keyring or a file) and never reaches past this object, so tests can hand it
a fake with the same methods. The CLI command named beside each method is
that method's options and output, nothing more:

    paired / unpair / rename        sparksync node list | unpair | rename
    pair                            sparksync node pair
    deploy (progress: deploy_feed)  sparksync node deploy
    connect_all / disconnect_all    sparksync node connect / sparksync node status
    connect / disconnect            one node (the tray's toggle)
    events                          news for notifications (the fabric tells a degraded link)
    fleet                           the live node states (sparksync node status)
    open_terminal                   sparksync node ssh NAME
    open_app / close_app            sparksync app open (closes on Ctrl-C)
    custom_apps / add_app / remove_app  sparksync app list | add | remove
    keyring_status                  sparksync settings show

One ``Fleet`` serves all of it for the app's whole life: the way to every
node's agent (this computer's local one too), the live node states, the
telemetry, workloads, deploys, custom apps' tunnels and "connect all"
(one SSH transport per node). It is made on first use, in a worker, and
closed by ``close()`` once the app's telemetry has ended.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sparksync.core.deploy.feed import DeployFeed, finished
from sparksync.core.nodes.cluster_events import ClusterEvents
from sparksync.core.base.errors import SparkSyncError

if TYPE_CHECKING:
    from sparksync.core.ssh.client_key import ClientKey
    from sparksync.core.apps.custom_apps import AppSession, AppSessions, CustomApp, CustomApps
    from sparksync.core.deploy.model import DeployOptions, DeployResult, ProgressEvent
    from sparksync.core.discovery.browse import Discovery
    from sparksync.core.fleet.fleet import Fleet
    from sparksync.core.nodes.actions import RenameResult
    from sparksync.core.nodes.registry import PairedNode, Registry
    from sparksync.core.ssh.secrets import KeyringStatus
    from sparksync.core.ssh.connection import Dialer, SshSettings
    from sparksync.core.ssh.pairing import PairRequest, PairResult
    from sparksync.core.ssh.transports import NodeTransports
    from sparksync.core.ssh.unpair import UnpairResult

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 15.0


class ClusterActions:
    """The SSH, keyring and file stacks load on first use (in a worker), not when the window opens."""

    def __init__(
        self,
        registry_path: Path | None = None,
        apps_path: Path | None = None,
        *,
        client_key: ClientKey | None = None,
        sample_hz: float = 1.0,
        dialer: Dialer | None = None,
        ssh_settings: SshSettings | None = None,
        deploy_options: DeployOptions | None = None,
    ):
        self._registry_path = registry_path
        self._apps_path = apps_path
        self._registry: Registry | None = None
        self._apps: CustomApps | None = None
        self._sessions_: AppSessions | None = None
        self._lock = threading.Lock()
        self._key = client_key
        self._dialer = dialer  # None: plain TCP; the lab hands one that dials into its namespaces
        self._ssh_settings = ssh_settings
        self.deploy_options = deploy_options
        self.sample_hz = sample_hz  # this computer's agent samples at this rate
        self._fleet: Fleet | None = None
        self._closed = False
        self.deploy_feed = DeployFeed()  # per-node progress of every deploy started here
        self.discovery: Discovery | None = None  # the app's, once browsing: pairing cross-checks with it
        self.events = ClusterEvents()  # news for notifications (a degraded fabric link, ...)

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            from sparksync.core.nodes.registry import Registry

            self._registry = Registry(self._registry_path)
        return self._registry

    @property
    def apps(self) -> CustomApps:
        if self._apps is None:
            from sparksync.core.apps.custom_apps import CustomApps

            self._apps = CustomApps(self._apps_path)
        return self._apps

    @property
    def _sessions(self) -> AppSessions:
        with self._lock:
            if self._sessions_ is None:
                from sparksync.core.apps.custom_apps import AppSessions

                self._sessions_ = AppSessions(self.transports)
            return self._sessions_

    def fleet(self) -> Fleet:
        """The one fleet of the app (made on first call; call it in a worker); closed by close()."""
        with self._lock:
            if self._closed:
                raise SparkSyncError("The app is closing; the nodes are no longer reached.")
            if self._fleet is None:
                from sparksync.core.fleet.fleet import Fleet

                # The key is read from the keyring only once a paired node is reached.
                self._fleet = Fleet(
                    self._client_key, self.registry, dialer=self._dialer, settings=self._ssh_settings,
                    sample_hz=self.sample_hz,
                )  # fmt: skip
            return self._fleet

    def pair(
        self, request: PairRequest, *, password, confirm, progress=None, interfaces: list[str] | None = None
    ) -> PairResult:
        """Pair with this computer's key: the dialog's ``PairingSession`` and ``node pair`` call this.

        The host key is cross-checked against the node's mDNS advertisement,
        also for a typed host: the app looks it up in what its discovery has
        seen; the CLI, which has no discovery running, browses for a moment
        (on ``interfaces``, or all of this machine's addresses).
        """
        from sparksync.core.ssh.pairing import pair_node, with_advertised_keys

        request = with_advertised_keys(
            request, discovery=self.discovery, interfaces=interfaces, browse=self.discovery is None
        )
        return pair_node(
            request, password=password, confirm=confirm, progress=progress, client_key=self._client_key(),
            registry=self.registry, dialer=self._dialer, settings=self._ssh_settings,
        )  # fmt: skip

    # --- membership -----------------------------------------------------------------------

    def paired(self) -> list[PairedNode]:
        from sparksync.core.nodes.registry import Registry

        return Registry(self.registry.path).list()  # a fresh read: the CLI may have changed it

    def unpair(self, name: str, forget: bool = False, uninstall: bool = False) -> UnpairResult:
        """Remove this computer's key from the node (``uninstall``: its agent too) and drop it here.

        ``forget`` only drops it here: the key is never loaded, the node never reached.
        """
        from sparksync.core.ssh.unpair import unpair_node

        self._drop(name)
        # The same way to the nodes as everything else here: unpairing reaches this node and, to take its
        # node-to-node SSH keys off them, the other nodes of the fabric mesh.
        return unpair_node(
            name, client_key=self._client_key, registry=self.registry, forget=forget, dialer=self._dialer,
            settings=self._ssh_settings, uninstall=uninstall,
        )  # fmt: skip

    def rename(self, old: str, new: str) -> RenameResult:
        from sparksync.core.nodes.actions import rename_node

        result = rename_node(old, new, registry=self.registry)
        self._drop(old)
        return result

    def deploy(
        self,
        names: list[str],
        cancel: threading.Event | None = None,
        *,
        options: DeployOptions | None = None,
        progress: Callable[[ProgressEvent], None] | None = None,
    ) -> list[DeployResult]:
        """Install or upgrade the agent on ``names`` in parallel; progress goes to ``deploy_feed``.

        ``options`` (default: ``deploy_options``) say which bundle, service mode
        and health timeout; ``progress`` also gets every stage event (the CLI
        prints them). The deploy uses the fleet's transports; afterwards the
        nodes are checked through the fleet, so their state moves on (to
        online) for every listener.
        """
        from sparksync.core.deploy.many import deploy_many  # the deploy stack loads only when used

        def on_event(event: ProgressEvent) -> None:
            self.deploy_feed.on_event(event)
            if progress is not None:
                progress(event)

        fleet = self.fleet()
        results = deploy_many(
            names, transports=fleet.transports, registry=self.registry,
            options=options if options is not None else self.deploy_options, progress=on_event, cancel=cancel,
        )  # fmt: skip
        for result in results:
            self.deploy_feed.publish(finished(result))
        answered = [r.node for r in results if r.version is not None]
        if answered and not (cancel is not None and cancel.is_set()):
            try:
                fleet.check_all(answered)
            except SparkSyncError as exc:  # the deploy's own outcome stands; the next check says more
                log.warning("checking the nodes after the deploy failed: %s", exc)
        return results

    # --- links ----------------------------------------------------------------------------

    def transports(self) -> NodeTransports:
        """The fleet's transports: one per node, for deploys, apps and checks alike."""
        return self.fleet().transports

    def connect_all(self, timeout: float = CONNECT_TIMEOUT_S) -> dict[str, str | None]:
        """Connect every paired node; per node None (its SSH link is up) or why it is not.

        Through the fleet's check, so the node list and the tray learn every node's state too
        (a node whose agent is down is connected, and shows as degraded with the reason).
        """
        return self.connect_all_of(None, timeout)

    def connect(self, name: str, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
        """Connect one paired node: None (its SSH link is up) or why not; its state is told as for all."""
        return self.connect_all_of([name], timeout).get(name, f"{name} is not a paired node")

    def connect_all_of(self, names: list[str] | None, timeout: float = CONNECT_TIMEOUT_S) -> dict[str, str | None]:
        reports = self.fleet().check_all(names, timeout=timeout)
        return {
            r.node.name: None if r.status.reachable else (r.status.reason or r.status.state.value)
            for r in reports
        }

    def disconnect(self, name: str) -> None:
        """Close one node's apps and drop its SSH transport (the next use connects again)."""
        self._drop(name)

    def disconnect_all(self) -> None:
        """Close every app and drop every node's transport (the next use connects again)."""
        if self._sessions_ is not None:
            self._sessions.close_all()
        with self._lock:
            fleet = self._fleet
        if fleet is not None:
            for node in self.paired():
                fleet.drop(node.name)

    # --- per node ---------------------------------------------------------------------------

    def open_terminal(self, name: str) -> list[str]:
        from sparksync.core.apps.terminal import open_terminal

        return open_terminal(name, self.registry)

    def custom_apps(self) -> list[CustomApp]:
        from sparksync.core.apps.custom_apps import DGX_DASHBOARD

        return [DGX_DASHBOARD, *self.apps.list()]

    def open_app(self, node: str, app: CustomApp, timeout: float = CONNECT_TIMEOUT_S) -> AppSession:
        return self._sessions.open(app, node, timeout)

    def add_app(self, app: CustomApp) -> None:
        self.apps.add(app)

    def remove_app(self, name: str) -> None:
        self.apps.remove(name)

    def close_app(self, node: str, name: str) -> None:
        self._sessions.close(node, name)

    def open_sessions(self) -> list[AppSession]:
        return self._sessions.open_sessions()

    def keyring_status(self) -> KeyringStatus:
        from sparksync.core.ssh.secrets import SecretStore

        return SecretStore().backend_status()

    def close(self) -> None:
        """Close every app (tunnels, scripts), then let go of the fleet; the app is quitting."""
        if self._sessions_ is not None:
            self._sessions.close_all()
        with self._lock:
            self._closed = True
            fleet, self._fleet = self._fleet, None
        if fleet is not None:
            fleet.close()  # the app closes it once its telemetry has ended

    # --- internals --------------------------------------------------------------------------

    def _client_key(self) -> ClientKey:
        if self._key is None:
            from sparksync.core.ssh.client_key import ClientKey
            from sparksync.core.ssh.secrets import SecretStore

            self._key = ClientKey.load_or_create(SecretStore())
        return self._key

    def _drop(self, name: str) -> None:
        sessions = self._sessions_.open_sessions() if self._sessions_ is not None else []
        for session in sessions:
            if session.node == name:
                self._sessions.close(name, session.app.name)
        with self._lock:
            fleet = self._fleet
        if fleet is not None:
            fleet.drop(name)
