"""Export an OpenSSH config snippet, so ``ssh spark-xxxx`` works from a terminal.

Each paired node gets a ``Host`` block named after it, using this client's
key. Host keys are checked against the keys pinned at pairing: the snippet
points ``UserKnownHostsFile`` at a known_hosts file we write from the
registry, with ``StrictHostKeyChecking yes``, so a terminal ssh refuses a
changed key just as SparkSync does. ``HostKeyAlias`` makes the entries
independent of the address used (a node with several addresses, or one
whose DHCP address changed, still matches its pinned key).

To use it, add ``Include /path/to/ssh_config`` at the top of
``~/.ssh/config`` (before any ``Host`` line; OpenSSH scopes an Include
placed after one to that block).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sparksync_agent.atomic import write_atomic

from sparksync.core.base.errors import SparkSyncError
from sparksync.core.base.paths import config_dir, ensure_dir
from sparksync.core.nodes.registry import PairedNode

CONFIG_FILE = "ssh_config"
KNOWN_HOSTS_FILE = "known_hosts"
HOST_KEY_ALIAS_PREFIX = "sparksync-"


class SshConfigError(SparkSyncError):
    """A path cannot be written into an ssh_config file."""


@dataclass(frozen=True)
class ExportedSshConfig:
    config_path: Path
    known_hosts_path: Path

    def include_line(self) -> str:
        # Include takes glob patterns but (in OpenSSH 9.2) no %-tokens, so '%' stays single.
        return f"Include {_quoted(self.config_path, tokens=False)}"


def host_key_alias(node: PairedNode) -> str:
    """The name the node's pinned key is filed under in our known_hosts."""
    return HOST_KEY_ALIAS_PREFIX + node.name


def render_ssh_config(
    nodes: Iterable[PairedNode], key_path: Path, known_hosts_path: Path, config_path: Path | None = None
) -> str:
    """The snippet; ``config_path`` (where it will be written) only fills in the usage comment."""
    include = (
        ExportedSshConfig(_absolute(config_path), Path(known_hosts_path)).include_line()
        if config_path is not None
        else "Include /path/to/this/file"
    )
    header = [
        "# Written by SparkSync from its node registry; changes here are overwritten.",
        "# Use it with a line at the top of ~/.ssh/config:",
        f"#   {include}",
        "# The key is encrypted and its passphrase is in the keyring: `sparksync node ssh-add`",
        "# loads the key into your ssh-agent (then ssh and BatchMode scripts need no passphrase).",
        "",
    ]
    blocks = [_host_block(node, key_path, known_hosts_path) for node in nodes]
    return "\n".join(header + blocks)


def render_known_hosts(nodes: Iterable[PairedNode]) -> str:
    lines = [f"{host_key_alias(n)} {n.host_key.key_type} {n.host_key.key_base64}" for n in nodes]
    return "".join(line + "\n" for line in lines)


def write_known_hosts(nodes: Iterable[PairedNode], path: Path) -> None:
    write_atomic(Path(path), render_known_hosts(nodes), mode=0o600)


def export_ssh_config(
    nodes: Iterable[PairedNode], key_path: Path, directory: Path | None = None
) -> ExportedSshConfig:
    """Write the snippet and its known_hosts into ``directory`` (the config dir by default)."""
    nodes = list(nodes)
    directory = ensure_dir(Path(directory) if directory is not None else config_dir())
    exported = ExportedSshConfig(directory / CONFIG_FILE, directory / KNOWN_HOSTS_FILE)
    write_known_hosts(nodes, exported.known_hosts_path)
    text = render_ssh_config(nodes, key_path, exported.known_hosts_path, exported.config_path)
    write_atomic(exported.config_path, text, mode=0o600)
    return exported


def _host_block(node: PairedNode, key_path: Path, known_hosts_path: Path) -> str:
    options = [
        ("HostName", _escaped(node.host)),
        ("User", node.user),
        ("Port", str(node.port)),
        ("IdentityFile", _quoted(_absolute(key_path))),
        ("IdentitiesOnly", "yes"),
        ("AddKeysToAgent", "yes"),
        ("HostKeyAlias", host_key_alias(node)),
        ("UserKnownHostsFile", _quoted(_absolute(known_hosts_path))),
        # Only our pinned key counts: no system-wide file, no learning new keys.
        ("GlobalKnownHostsFile", "/dev/null"),
        ("StrictHostKeyChecking", "yes"),
        ("UpdateHostKeys", "no"),
        ("CheckHostIP", "no"),
    ]
    body = "".join(f"    {key} {value}\n" for key, value in options)
    return f"Host {node.name}\n{body}"


def _absolute(path: Path) -> Path:
    return Path(path).expanduser().absolute()


def _quoted(path: Path, tokens: bool = True) -> str:
    # ssh_config splits on blanks unless the value is double-quoted (it has no
    # escape for '"'), and reads '%' as the start of a token in options that
    # take tokens (IdentityFile, UserKnownHostsFile).
    text = str(path)
    if '"' in text or "\n" in text:
        raise SshConfigError(
            f"The path {text!r} contains a double quote or a line break, which an ssh_config file "
            "cannot hold. Set SPARKSYNC_HOME to a plainer directory and export again."
        )
    return f'"{_escaped(text) if tokens else text}"'


def _escaped(value: str) -> str:
    return value.replace("%", "%%")
