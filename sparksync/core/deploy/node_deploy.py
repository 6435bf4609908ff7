"""Deploying the agent to one node, step by step, leaving nothing half-done.

1. Probe and check the node (python3, venv, CPU, disk), and give its agent
   the node's id (the state dir's ``node_id``), so the agent reports the id
   every store on this computer keys the node by.
2. Pick the bundle for its target; upload it unless the same bytes are there.
3. Install: unpack, a fresh venv for the version, the bundle's wheels into it
   (with the bundle's own installer, see bundle/install.py), then the
   ``installed.json`` marker. Any failure or cancel removes the
   version's folder again; ``current`` and the running agent are untouched.
4. Switch ``current`` (and ``previous``) atomically, restart the service or
   supervisor, and wait for hello with the new version through a tunnel.
5. If that fails (or is cancelled), switch back, restart the previous version
   and wait for it to answer: "rolled back to X: <why>". With no previous
   version, stop and remove the failed one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone

from sparksync.core.bundle import install_command, venv_command
from sparksync.core.deploy import service
from sparksync.core.deploy.bundles import BundleSource, ReadyBundle
from sparksync.core.deploy.errors import DeployCancelled, DeployError, InstallError
from sparksync.core.deploy.health import current_answer, read_endpoint, wait_for_agent
from sparksync.core.deploy.layout import LAYOUT
from sparksync.core.deploy.model import DeployOptions, Outcome, Stage
from sparksync.core.deploy.prechecks import (
    PROBE,
    NodeFacts,
    check_disk,
    check_node,
    parse_facts,
    probe_args,
    space_needed,
)
from sparksync.core.deploy.remote import RemoteNode, failure_text
from sparksync.core.base.errors import SparkSyncError
from sparksync.core.ssh.transports import NodeTransports

log = logging.getLogger(__name__)


class RolledBack(DeployError):
    """The new version failed its health check; the previous one was started again."""

    def __init__(self, message: str, version: str, mode: str, cancelled: bool = False):
        super().__init__(message)
        self.version, self.mode, self.cancelled = version, mode, cancelled


class StartFailed(DeployError):
    """The new version did not start and there was nothing to go back to; it was removed."""


@dataclass
class NodeOutcome:
    outcome: Outcome
    version: str
    mode: str
    previous: str | None
    notes: list[str] = field(default_factory=list)


class NodeDeploy:
    """One deploy of one node; ``run()`` returns what it did or raises why it did nothing."""

    def __init__(
        self,
        remote: RemoteNode,
        transports: NodeTransports,
        options: DeployOptions,
        bundles: BundleSource,
        report,
        node_id: str | None = None,
    ):
        self.remote = remote
        self.name = remote.name
        self.node_id = node_id
        self.transports = transports
        self.options = options
        self.bundles = bundles
        self.report = report

    # --- the steps -----------------------------------------------------------------------------

    def run(self) -> NodeOutcome:
        self.report(Stage.CHECKING, 0.0, "probing the node")
        facts = self.probe()
        target = check_node(facts, self.name)
        bundle = self.bundles.get(target, self.name)
        version, mode = bundle.version, service.choose_mode(facts, self.options.mode)
        self.report(
            Stage.CHECKING, 0.5, f"{target.describe()}, python3 {facts.python_version}, agent {version}"
        )
        installed = version in facts.complete and self.venv_works(version)
        self.give_node_id()
        if installed and facts.current == version:
            answer = current_answer(self.remote, self.transports)
            same_id = self.node_id is None or (answer is not None and answer.hello.node_id == self.node_id)
            if answer is not None and answer.hello.agent_version == version and same_id:
                running = service.running_mode(facts) or mode
                self.report(Stage.DONE, 1.0, f"agent {version} already runs ({running})")
                return NodeOutcome(Outcome.UNCHANGED, version, running, facts.current)
        uploaded = self.bundle_uploaded(bundle)
        check_disk(facts, self.name, space_needed(bundle.size, upload=not uploaded, install=not installed))
        self.report(Stage.CHECKING, 1.0, "checks passed")
        if not installed:
            self.install(bundle, facts, uploaded)
        return self.switch_and_start(bundle, facts, mode, installed_now=not installed)

    def probe(self) -> NodeFacts:
        result = self.remote.sh(PROBE, *probe_args())
        if result.exit_status != 0 and not result.stdout:
            raise DeployError(f"probing {self.name} failed: {failure_text(result)}")
        return parse_facts(result.stdout.decode(errors="replace"))

    def give_node_id(self) -> None:
        """Write the node's id where the agent reads it at start (kept as it is when it already matches)."""
        if self.node_id is None:
            return
        held = (self.remote.read_file(LAYOUT.node_id) or b"").decode(errors="replace").strip()
        if held == self.node_id:
            return
        if held:
            log.warning("%s: its agent's node id %s becomes %s, the id it was paired with", self.name, held,
                        self.node_id)  # fmt: skip
        self.remote.check_sh('mkdir -p -m 700 "$1"', LAYOUT.state_dir, doing="making the agent's state folder")
        self.remote.write_file(LAYOUT.node_id, f"{self.node_id}\n".encode(), mode=0o600)

    def venv_works(self, version: str) -> bool:
        result = self.remote.run([f"{LAYOUT.venv(version)}/bin/sparksync-agent", "version"])
        return result.exit_status == 0 and f" {version} " in result.stdout.decode(errors="replace")

    def bundle_uploaded(self, bundle: ReadyBundle) -> bool:
        result = self.remote.sh('sha256sum "$1" 2>/dev/null', self.bundle_path(bundle))
        return result.exit_status == 0 and result.stdout.split()[:1] == [bundle.sha256.encode()]

    @staticmethod
    def bundle_path(bundle: ReadyBundle) -> str:
        return f"{LAYOUT.bundles}/{bundle.path.name}"

    # --- install -------------------------------------------------------------------------------

    def install(self, bundle: ReadyBundle, facts: NodeFacts, uploaded: bool) -> None:
        version = bundle.version
        self.clean_leftovers(version)
        try:
            if uploaded:
                self.report(Stage.UPLOADING, 1.0, "the same bundle is already on the node")
            else:
                self.upload(bundle)
            self.make_venv(bundle, facts)
        except BaseException:
            with self.remote.uncancellable():
                self.clean_leftovers(version)
            raise

    def clean_leftovers(self, version: str) -> None:
        """Remove what a failed or cancelled install of ``version`` left (never another version)."""
        self.remote.check_sh(
            'rm -rf "$1" "$2" && rm -f "$3"/.*.part',
            LAYOUT.version_dir(version),
            LAYOUT.unpacked_bundle(version),
            LAYOUT.bundles,
            doing="removing a partial install",
        )

    def upload(self, bundle: ReadyBundle) -> None:
        self.remote.check_sh('mkdir -p "$1"', LAYOUT.bundles, doing="making the bundle folder")
        step = max(1, bundle.size // 20)
        last = [-step]

        def sent(done: int, total: int) -> None:
            if done - last[0] >= step or done == total:
                last[0] = done
                self.report(Stage.UPLOADING, done / max(total, 1), f"{done >> 20} of {total >> 20} MiB")

        self.report(Stage.UPLOADING, 0.0, f"{bundle.path.name} ({bundle.size >> 20} MiB)")
        try:
            self.remote.upload(bundle.path, self.bundle_path(bundle), sent)
        except DeployError as exc:
            raise type(exc)(f"{exc}{self.disk_hint()}") from exc

    def disk_hint(self) -> str:
        with self.remote.uncancellable():
            facts = self.probe()
        if facts.free_bytes is not None and facts.free_bytes < 4 * 1024 * 1024:
            return (
                f": the node's disk is full ({facts.free_bytes >> 10} KiB free in {facts.home}); free some space "
                "and deploy again"
            )
        return ""

    def make_venv(self, bundle: ReadyBundle, facts: NodeFacts) -> None:
        version, home = bundle.version, facts.home
        unpacked = LAYOUT.unpacked_bundle(version)
        self.report(Stage.INSTALLING, 0.0, "unpacking the bundle")
        self.remote.check_sh(
            'mkdir -p "$2" "$3" && tar -xzf "$1" -C "$3"',
            self.bundle_path(bundle), LAYOUT.version_dir(version), unpacked,
            doing="unpacking the bundle", timeout=self.options.install_timeout_s,
        )  # fmt: skip
        self.report(Stage.INSTALLING, 0.2, "making the venv")
        venv = f"{home}/{LAYOUT.venv(version)}"
        if facts.python is None:  # check_node refused such a node already
            raise InstallError(f"{self.name} has no python3 to make the agent's venv with")
        self.killable(venv_command(facts.python, venv, bundle.manifest), "making the venv")
        self.report(Stage.INSTALLING, 0.5, f"installing {bundle.manifest.requirement()} from the bundle")
        wheels = f"{home}/{unpacked}/{bundle.folder}"
        self.killable(install_command(f"{venv}/bin/python", wheels, bundle.manifest), "installing the agent")
        if not self.venv_works(version):
            raise InstallError(
                f"the agent {version} was installed on {self.name} but does not run (sparksync-agent version failed)"
            )
        marker = {
            "version": version,
            "bundle": bundle.path.name,
            "sha256": bundle.sha256,
            "installed_at": _now(),
        }
        self.remote.write_file(LAYOUT.installed_marker(version), json.dumps(marker).encode())
        self.remote.check_sh('rm -rf "$1"', unpacked, doing="removing the unpacked bundle")
        self.report(Stage.INSTALLING, 1.0, f"agent {version} installed")

    def killable(self, argv: list[str], doing: str) -> None:
        result = self.remote.run_killable(argv, self.options.install_timeout_s, doing)
        if result.exit_status != 0:
            raise InstallError(f"{doing} failed on {self.name}: {failure_text(result)}{self.disk_hint()}")

    # --- switch, start, health, rollback -------------------------------------------------------

    def switch_and_start(
        self, bundle: ReadyBundle, facts: NodeFacts, mode: str, installed_now: bool
    ) -> NodeOutcome:
        version, old = bundle.version, facts.current
        old_endpoint = read_endpoint(self.remote)
        try:
            self.report(Stage.STARTING, 0.0, f"switching to {version} ({mode})")
            if old != version:
                if old is not None:
                    self.set_link(LAYOUT.previous, old)
                self.set_link(LAYOUT.current, version)
            notes = service.restart(
                self.remote, mode, advertise=self.options.advertise, sample_hz=self.options.sample_hz
            )
            self.report(Stage.HEALTH, 0.0, "waiting for hello through the tunnel")
            wait_for_agent(
                self.remote, self.transports, version=version, mode=mode,
                old_run_id=old_endpoint.run_id if old_endpoint else None, timeout_s=self.options.health_timeout_s,
            )  # fmt: skip
        except (SparkSyncError, OSError) as exc:
            with self.remote.uncancellable():
                self.roll_back(exc, bundle, facts, mode, installed_now)
            raise
        self.report(Stage.HEALTH, 1.0, f"agent {version} answers")
        with self.remote.uncancellable():
            self.prune({v for v in (version, old) if v is not None})
        self.report(Stage.DONE, 1.0, f"agent {version} runs ({mode})")
        return NodeOutcome(Outcome.DEPLOYED, version, mode, old, notes)

    def roll_back(
        self, exc: BaseException, bundle: ReadyBundle, facts: NodeFacts, mode: str, installed_now: bool
    ) -> None:
        """Undo the switch after ``exc``; always raises (RolledBack, StartFailed, or ``exc`` itself)."""
        version, old = bundle.version, facts.current
        cancelled = isinstance(exc, DeployCancelled)
        why = "cancelled" if cancelled else str(exc)
        self.report(Stage.ROLLING_BACK, 0.0, why)
        if old is not None and old != version and old in facts.complete:
            self.set_link(LAYOUT.current, old)
            if facts.previous:
                self.set_link(LAYOUT.previous, facts.previous)
            else:
                self.remove_link(LAYOUT.previous)
            failed = read_endpoint(self.remote)
            old_mode = service.running_mode(facts) or mode
            service.restart(
                self.remote, old_mode, advertise=self.options.advertise, sample_hz=self.options.sample_hz
            )
            try:
                wait_for_agent(
                    self.remote, self.transports, version=old, mode=old_mode,
                    old_run_id=failed.run_id if failed else None, timeout_s=self.options.health_timeout_s,
                )  # fmt: skip
            except SparkSyncError as again:
                raise DeployError(
                    f"{why}; rolling back to {old} failed as well ({again}). Deploy again, or see the agent's "
                    f"log on the node (~/{LAYOUT.log_file} or journalctl --user -u sparksync-agent)"
                ) from exc
            if installed_now:
                self.remote.check_sh(
                    'rm -rf "$1"', LAYOUT.version_dir(version), doing="removing the failed version"
                )
            self.report(Stage.ROLLING_BACK, 1.0, f"agent {old} runs again")
            raise RolledBack(f"rolled back to {old}: {why}", old, old_mode, cancelled) from exc
        if old == version:
            raise exc  # the same version was already current: nothing older to go back to
        self.stop_everything(mode)
        self.remove_link(LAYOUT.current)
        if installed_now:
            self.remote.check_sh(
                'rm -rf "$1"', LAYOUT.version_dir(version), doing="removing the failed version"
            )
        if cancelled:
            raise exc
        raise StartFailed(
            f"the agent {version} did not start: {why}. It was removed again; nothing runs on the node"
        ) from exc

    def stop_everything(self, mode: str) -> None:
        service.stop_supervisor(self.remote)
        if mode == service.SYSTEMD:
            service.stop_systemd(self.remote, quiet=True, disable=True)

    def set_link(self, link: str, version: str) -> None:
        """Point ``link`` at ``versions/<version>`` atomically (a new link renamed over the old)."""
        self.remote.check_sh(
            'ln -sfn "$2" "$1.new" && mv -Tf "$1.new" "$1"',
            link,
            f"versions/{version}",
            doing=f"switching {link}",
        )

    def remove_link(self, link: str) -> None:
        self.remote.check_sh('rm -f "$1"', link, doing=f"removing {link}")

    def prune(self, keep: set[str]) -> None:
        """Drop versions and bundles other than ``keep`` (the new one and the one to roll back to)."""
        script = (
            'cd "$1" 2>/dev/null || exit 0; shift; for d in versions/*; do [ -e "$d" ] || continue; '
            'v=${d#versions/}; keep=no; for k in "$@"; do [ "$v" = "$k" ] && keep=yes; done; '
            '[ $keep = no ] && rm -rf "$d"; done; for b in bundles/sparksync-agent-*.tar.gz; do [ -e "$b" ] || continue; '
            'keep=no; for k in "$@"; do case "$b" in bundles/sparksync-agent-"$k"-*) keep=yes;; esac; done; '
            '[ $keep = no ] && rm -f "$b"; done; exit 0'
        )
        result = self.remote.sh(script, LAYOUT.root, *sorted(keep))
        if result.exit_status != 0:
            log.warning("%s: pruning old versions failed: %s", self.name, failure_text(result))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
