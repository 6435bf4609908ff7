"""What the desktop offers around the nodes: launchers, settings, start at login.

- ``custom_apps``: named ports on a node reached through a tunnel, with a start script;
- ``terminal``: a terminal with SSH to a node;
- ``settings``: the app's settings file;
- ``autostart``: starting the app at login.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparksync.core.base.lazy import lazy_exports

if TYPE_CHECKING:
    from sparksync.core.apps.autostart import Autostart, AutostartError
    from sparksync.core.apps.custom_apps import (
        DGX_DASHBOARD,
        AppSession,
        AppSessions,
        CustomApp,
        CustomAppError,
        CustomApps,
    )
    from sparksync.core.apps.settings import (
        AppSettings,
        SettingsError,
        Theme,
        load_settings,
        save_settings,
        settings_path,
        update_settings,
    )
    from sparksync.core.apps.terminal import TerminalError, node_ssh_argv, open_terminal

# name -> the module that holds it
_WHERE = {
    "Autostart": "autostart",
    "AutostartError": "autostart",
    "DGX_DASHBOARD": "custom_apps",
    "AppSession": "custom_apps",
    "AppSessions": "custom_apps",
    "CustomApp": "custom_apps",
    "CustomAppError": "custom_apps",
    "CustomApps": "custom_apps",
    "AppSettings": "settings",
    "SettingsError": "settings",
    "Theme": "settings",
    "load_settings": "settings",
    "save_settings": "settings",
    "settings_path": "settings",
    "update_settings": "settings",
    "TerminalError": "terminal",
    "node_ssh_argv": "terminal",
    "open_terminal": "terminal",
}
__all__ = [
    "AppSession",
    "AppSessions",
    "AppSettings",
    "Autostart",
    "AutostartError",
    "CustomApp",
    "CustomAppError",
    "CustomApps",
    "DGX_DASHBOARD",
    "SettingsError",
    "TerminalError",
    "Theme",
    "load_settings",
    "node_ssh_argv",
    "open_terminal",
    "save_settings",
    "settings_path",
    "update_settings",
]
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
