"""App settings: defaults, a round trip through the file, and files that must not be overwritten."""

from __future__ import annotations

import json

import pytest

from sparksync.core.apps.settings import (
    AppSettings,
    SettingsError,
    Theme,
    load_settings,
    save_settings,
    settings_path,
    update_settings,
)


def test_defaults_then_a_round_trip():
    assert load_settings() == AppSettings() and not settings_path().exists()
    wanted = AppSettings(
        sample_hz=5.0, window_s=3600.0, theme=Theme.DARK, start_at_login=True, tray_hint_shown=True
    )
    path = save_settings(wanted)
    assert path == settings_path() and oct(path.stat().st_mode & 0o777) == "0o600"
    assert json.loads(path.read_text())["version"] == 1
    assert load_settings() == wanted


def test_update_checks_values_in_plain_words():
    assert update_settings({"window_s": 60}).window_s == 60.0
    with pytest.raises(SettingsError, match="window_s"):
        update_settings({"window_s": 61})
    with pytest.raises(SettingsError, match="sample_hz"):
        update_settings({"sample_hz": 50})
    assert load_settings().window_s == 60.0


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "not valid JSON"),
        (b'{"version": 9}', "newer SparkSync"),
        (b'{"version": 1, "theme": "neon"}', "theme"),
    ],
)
def test_a_bad_or_newer_file_is_refused_and_left_alone(content, message):
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    with pytest.raises(SettingsError, match=message):
        load_settings()
    with pytest.raises(SettingsError):
        update_settings({"window_s": 60})
    assert path.read_bytes() == content
