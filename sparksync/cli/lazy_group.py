"""A click group whose commands are imported only when one of them runs.

``sparksync --version`` and ``sparksync node list`` should not pay for the
modules that ``bench`` or ``switchyard`` need (numpy, paramiko, httpx,
zeroconf ...), so each command is named here by the module that holds it
and imported when click resolves it: to run it, or to list it in ``--help``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

import click


class LazyGroup(click.Group):
    """``commands``: name -> "module:attribute" of a click command, imported on first use."""

    def __init__(self, *args, lazy_commands: Mapping[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._lazy = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self._lazy:
            module, _, attribute = self._lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self._lazy[cmd_name]} is not a click command")
            self.add_command(command, cmd_name)  # resolved once
        return command

