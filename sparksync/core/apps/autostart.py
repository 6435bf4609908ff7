"""Start at login: an XDG autostart entry (``~/.config/autostart/sparksync.desktop``).

Desktops that follow the XDG Autostart spec (GNOME, KDE, Xfce...) start
every ``.desktop`` file in that folder at login. The entry runs the app the
way this SparkSync is installed, and passes ``SPARKSYNC_HOME`` on when one is
set, so the app started at login uses the same files as this one.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from sparksync_agent.atomic import write_atomic

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.paths import HOME_ENV

log = logging.getLogger(__name__)

DESKTOP_FILE = "sparksync.desktop"


class AutostartError(SparkSyncError):
    """The autostart entry could not be written or removed."""


def autostart_dir(environ: Mapping[str, str] = os.environ) -> Path:
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME", str(Path.home()))) / ".config")
    return Path(base) / "autostart"


def app_command(environ: Mapping[str, str] = os.environ) -> list[str]:
    """How to start this SparkSync's desktop app."""
    installed = shutil.which("sparksync-gui")
    argv = [installed] if installed else [sys.executable, "-m", "sparksync.gui.app"]
    home = environ.get(HOME_ENV)
    return ["env", f"{HOME_ENV}={home}", *argv] if home else argv


def desktop_entry(argv: list[str]) -> str:
    exec_line = " ".join(_exec_quote(arg) for arg in argv)
    return (
        "[Desktop Entry]\n"
        "Type=Application\n"
        "Name=SparkSync\n"
        "Comment=DGX Spark cluster manager (started at login)\n"
        f"Exec={exec_line}\n"
        "Icon=sparksync\n"
        "Terminal=false\n"
        "X-GNOME-Autostart-enabled=true\n"
    )


class Autostart:
    def __init__(self, directory: Path | None = None, argv: list[str] | None = None):
        self.directory = Path(directory) if directory is not None else autostart_dir()
        self.argv = argv
        self.path = self.directory / DESKTOP_FILE

    def enabled(self) -> bool:
        return self.path.is_file()

    def set(self, enabled: bool) -> None:
        self.enable() if enabled else self.disable()

    def enable(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, desktop_entry(self.argv or app_command()), mode=0o644)
        except OSError as exc:
            raise AutostartError(f"Could not write {self.path} to start SparkSync at login ({exc}).") from exc
        log.info("start at login: wrote %s", self.path)

    def disable(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            raise AutostartError(f"Could not remove {self.path} ({exc}); delete it by hand.") from exc
        log.info("start at login: removed %s", self.path)


def _exec_quote(arg: str) -> str:
    # The Desktop Entry spec: quote arguments holding reserved characters; inside
    # quotes, escape '"', '`', '$' and '\'. A literal '%' is written '%%'.
    arg = arg.replace("%", "%%")
    if arg and not any(c in arg for c in " \t\n\"'\\><~|&;$*?#()`"):
        return arg
    escaped = "".join("\\" + c if c in '"`$\\' else c for c in arg)
    return f'"{escaped}"'
