"""The app's settings: one versioned JSON file in the config dir, written atomically.

A missing file means the defaults. A file that is corrupt, or written by a
newer SparkSync, is never overwritten: reading it raises ``SettingsError``
naming the file, and the app then runs on the defaults without saving.
"""

from __future__ import annotations

import enum
import json
import logging
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sparksync_agent.atomic import write_atomic

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.core.base.units import DEFAULT_MEMORY_UNIT, MemoryUnit

log = logging.getLogger(__name__)

SETTINGS_VERSION: Final = 1
SETTINGS_FILE = "settings.json"
WINDOW_CHOICES = (60.0, 600.0, 3600.0)  # the dashboard's 1 min, 10 min, 1 h


class SettingsError(SparkSyncError):
    """The settings file cannot be read or written."""


class Theme(str, enum.Enum):
    SYSTEM = "system"  # follow the desktop's light or dark scheme
    LIGHT = "light"
    DARK = "dark"


class AppSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    version: Literal[1] = SETTINGS_VERSION
    sample_hz: float = Field(default=1.0, ge=0.1, le=10.0)  # the agents' sampling rate
    window_s: float = 600.0  # one of WINDOW_CHOICES
    theme: Theme = Theme.SYSTEM
    memory_unit: MemoryUnit = DEFAULT_MEMORY_UNIT
    start_at_login: bool = False
    # The first close to the tray says the app is still running; only once.
    tray_hint_shown: bool = False

    @field_validator("window_s")
    @classmethod
    def _offered_window(cls, value: float) -> float:
        if value not in WINDOW_CHOICES:
            raise ValueError(f"should be one of {', '.join(f'{w:g}' for w in WINDOW_CHOICES)} (seconds)")
        return value


def settings_path() -> Path:
    return config_dir() / SETTINGS_FILE


def load_settings(path: Path | None = None) -> AppSettings:
    path = Path(path) if path is not None else settings_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return AppSettings()
    except OSError as exc:
        raise SettingsError(
            f"The settings file {path} cannot be read ({exc.strerror}); fix its permissions."
        ) from exc
    return _parse(raw, path)


def save_settings(settings: AppSettings, path: Path | None = None) -> Path:
    path = Path(path) if path is not None else settings_path()
    data = json.dumps(settings.model_dump(mode="json"), indent=2) + "\n"
    try:
        ensure_dir(path.parent)
        write_atomic(path, data, mode=0o600)
    except OSError as exc:
        raise SettingsError(f"The settings could not be saved to {path} ({exc.strerror or exc}).") from exc
    log.debug("settings saved to %s", path)
    return path


def update_settings(changes: dict[str, Any], path: Path | None = None) -> AppSettings:
    """Read, change and save; a bad value raises SettingsError saying what is allowed."""
    current = load_settings(path)
    try:
        updated = AppSettings.model_validate({**current.model_dump(), **changes})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise SettingsError(f"Setting {where}: {error['msg']}.") from exc
    save_settings(updated, path)
    return updated


def _parse(raw: bytes, path: Path) -> AppSettings:
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _unreadable(path, f"it is not valid JSON ({exc})") from exc
    version = data.get("version") if isinstance(data, dict) else None
    if isinstance(version, int) and version > SETTINGS_VERSION:
        raise SettingsError(
            f"The settings file {path} comes from a newer SparkSync (format version {version}; this one "
            f"reads up to {SETTINGS_VERSION}). It was left untouched; the defaults apply until you upgrade."
        )
    try:
        return AppSettings.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise _unreadable(
            path, f"{'.'.join(str(p) for p in error['loc']) or 'top level'}: {error['msg']}"
        ) from exc


def _unreadable(path: Path, why: str) -> SettingsError:
    return SettingsError(
        f"The settings file {path} cannot be read: {why}. It was left untouched and the defaults apply; "
        f"fix it, or move it away (mv '{path}' '{path}.bad') to start from the defaults."
    )
