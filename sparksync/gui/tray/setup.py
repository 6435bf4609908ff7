"""Give a main window its tray icon, where the desktop has a system tray."""

from __future__ import annotations

from PySide6.QtWidgets import QSystemTrayIcon

from sparksync.gui.tray.tray import Tray


def tray_available() -> bool:
    return QSystemTrayIcon.isSystemTrayAvailable()


def install_tray(window, *, available: bool | None = None, open_url=None) -> Tray | None:
    """A tray for ``window``, shown; None (closing the window then quits) where no tray exists."""
    if not (tray_available() if available is None else available):
        return None
    tray = Tray(
        window.actions,
        window.jobs,
        window.notifier,
        summary=window.summary,
        summary_text=lambda s: s.text(window.dashboard.memory_unit),
        open_dashboard=window.show_dashboard,
        pair_new_node=window.pair_new_node,
        quit_app=window.quit,
        open_url=open_url,
        workloads=getattr(window, "workloads", None),
        benchmarks=getattr(window, "benchmarks", None),
        node_memory=window.node_memory_text,
        parent=window,
    )
    window.enable_tray(tray)
    tray.show()
    return tray
