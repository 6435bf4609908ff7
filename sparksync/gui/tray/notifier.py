"""Notifications (a node went offline, degraded or came back, a workload ended or failed, a benchmark
finished, a fabric link degraded), through one door.

With a tray icon they pop up from the tray; without one (no system tray on
this desktop, or tests) they go to the window's status bar. Either way
``shown`` is emitted, and the log gets the line.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QStatusBar, QSystemTrayIcon

log = logging.getLogger(__name__)

MESSAGE_MS = 10_000
_ICONS = {
    "info": QSystemTrayIcon.MessageIcon.Information,
    "warning": QSystemTrayIcon.MessageIcon.Warning,
    "error": QSystemTrayIcon.MessageIcon.Critical,
}


class Notifier(QObject):
    shown = Signal(str, str, str)  # title, message, where ("tray" or "status bar")

    def __init__(self, status_bar: QStatusBar, parent: QObject | None = None):
        super().__init__(parent)
        self.status_bar = status_bar
        self.tray: QSystemTrayIcon | None = None

    def set_tray(self, tray: QSystemTrayIcon | None) -> None:
        self.tray = tray

    def notify(self, title: str, message: str, level: str = "info") -> str:
        log.log(logging.WARNING if level != "info" else logging.INFO, "%s: %s", title, message)
        if self.tray is not None and self.tray.isVisible():
            self.tray.showMessage(title, message, _ICONS.get(level, _ICONS["info"]), MESSAGE_MS)
            where = "tray"
        else:
            self.status_bar.showMessage(f"{title}: {message}")
            where = "status bar"
        self.shown.emit(title, message, where)
        return where

    # --- the events the app tells about -----------------------------------------------------

    def node_offline(self, name: str, reason: str | None) -> str:
        return self.notify(f"{name} is offline", reason or "It stopped answering.", "warning")

    def node_online(self, name: str) -> str:
        return self.notify(f"{name} is online again", "It answers and streams its telemetry.")

    def node_degraded(self, name: str, reason: str | None) -> str:
        return self.notify(f"{name} is degraded", reason or "It answers, but not everything works.", "warning")

    def workload_ended(self, name: str, how: str) -> str:
        """A workload that ran is over on its own (``how``: "exited", "stopped")."""
        return self.notify(f"Workload {name} ended", f"It {how}; its last figures stay in the Workloads tab.")

    def fabric_link_degraded(self, link: str, why: str) -> str:
        return self.notify(f"Fabric link degraded: {link}", why, "warning")

    def fabric_link_healthy(self, link: str, detail: str) -> str:
        return self.notify(f"Fabric link healthy again: {link}", detail)

    def cluster_event(self, event) -> str:
        """A ``ClusterEvent`` from the core's ``ClusterEvents`` (the fabric checks tell them)."""
        from sparksync.core.nodes import EventKind

        if event.kind is EventKind.FABRIC_LINK_DEGRADED:
            return self.fabric_link_degraded(event.subject, event.detail)
        return self.fabric_link_healthy(event.subject, event.detail)

    def workload_failed(self, name: str, reason: str) -> str:
        return self.notify(f"Workload {name} failed", reason, "error")

    def benchmark_finished(self, name: str, summary: str) -> str:
        return self.notify(f"Benchmark {name} finished", summary)
