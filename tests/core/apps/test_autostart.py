"""Start at login: the XDG autostart entry."""

from __future__ import annotations

import configparser

from sparksync.core.apps.autostart import Autostart, app_command, autostart_dir, desktop_entry


def test_enable_writes_a_desktop_entry_that_runs_this_sparksync_and_disable_removes_it(tmp_path):
    entry = Autostart(tmp_path / "autostart", ["/opt/spark sync/bin/sparksync-gui", "--flag"])
    assert not entry.enabled()
    entry.enable()
    assert entry.enabled() and entry.path.name == "sparksync.desktop"
    parsed = configparser.ConfigParser(interpolation=None)
    parsed.read_string(entry.path.read_text())
    desktop = parsed["Desktop Entry"]
    assert (
        desktop["Type"] == "Application" and desktop["Exec"] == '"/opt/spark sync/bin/sparksync-gui" --flag'
    )
    entry.disable()
    entry.disable()  # twice is fine
    assert not entry.enabled()


def test_the_command_carries_sparksync_home_and_the_folder_follows_xdg():
    argv = app_command({"SPARKSYNC_HOME": "/data/ss"})
    assert argv[:2] == ["env", "SPARKSYNC_HOME=/data/ss"]
    assert autostart_dir({"XDG_CONFIG_HOME": "/x/cfg"}).as_posix() == "/x/cfg/autostart"
    assert autostart_dir({"HOME": "/home/u"}).as_posix() == "/home/u/.config/autostart"
    assert "Exec=50%% a\n" in desktop_entry(["50%", "a"])
