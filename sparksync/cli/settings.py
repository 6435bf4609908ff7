"""``sparksync settings show | set``: the Settings dialog, from a terminal."""

from __future__ import annotations

import json
import os

import click

from sparksync.core.apps import AppSettings, Autostart, load_settings, settings_path, update_settings
from sparksync.core.base import HOME_ENV, cache_dir, config_dir, data_dir, log_dir
from sparksync.core.ssh import SecretStore

KEYS = [k for k in AppSettings.model_fields if k not in ("version", "tray_hint_shown")]


@click.group("settings")
def settings() -> None:
    """The app's settings, where its data lives, and the keyring's status."""


@settings.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def show(as_json: bool) -> None:
    """Show the settings, the data folders and whether the keyring is usable."""
    current = load_settings()
    keyring = SecretStore().backend_status()
    doc = {
        "settings": current.model_dump(mode="json"),
        "settings_file": str(settings_path()),
        HOME_ENV: os.environ.get(HOME_ENV),
        "paths": {
            "config": str(config_dir()),
            "data": str(data_dir()),
            "cache": str(cache_dir()),
            "logs": str(log_dir()),
        },
        "keyring": keyring.model_dump(),
        "start_at_login_entry": str(Autostart().path),
    }
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    for key in KEYS:
        click.echo(f"{key}: {doc['settings'][key]}")
    for name, path in doc["paths"].items():
        click.echo(f"{name} dir: {path}")
    state = "usable" if keyring.usable else f"NOT usable ({keyring.reason})"
    click.echo(f"keyring: {state} [{keyring.backend}]")


@settings.command("set")
@click.argument("key", type=click.Choice(KEYS))
@click.argument("value")
def set_(key: str, value: str) -> None:
    """Change one setting (start_at_login also writes or removes the autostart entry)."""
    updated = update_settings({key: _parse(key, value)})
    if key == "start_at_login":
        Autostart().set(updated.start_at_login)
    click.echo(f"{key} = {updated.model_dump(mode='json')[key]}")


def _parse(key: str, value: str):
    if key == "start_at_login":
        return {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}.get(
            value.lower(), value
        )
    if key in ("sample_hz", "window_s"):
        try:
            return float(value)
        except ValueError:
            return value  # the settings model then says what is allowed
    return value
