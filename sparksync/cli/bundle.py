"""``sparksync bundle build | verify | list``: offline agent bundles.

``build`` needs the internet (or a pip mirror); what it makes lets a node
install the agent with none. By default it writes into the cache folder that
``sparksync node deploy`` reads, so building once here is enough.

``--json`` prints one document: ``{"path": "...", "manifest": {...}}`` where
``manifest`` is the bundle's manifest.json (agent and protocol version,
platform, python, created_at, glibc_min, files with sha256 and size).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from sparksync.core.bundle import (
    DEFAULT_PLATFORM,
    DEFAULT_PYTHON,
    PLATFORMS,
    PYTHONS,
    BundleBuildError,
    BundleManifest,
    BundleOfflineError,
    Target,
    build_bundle,
    bundles_dir,
    find_cached,
    find_shipped,
    shipped_dirs,
    verify_bundle,
)
from sparksync.core.bundle import cannot_build_message, is_frozen, offline_message


@click.group()
def bundle() -> None:
    """Offline agent bundles: the agent and every wheel it needs, for one node type."""


@bundle.command("build")
@click.option(
    "--platform",
    type=click.Choice(list(PLATFORMS)),
    default=DEFAULT_PLATFORM,
    show_default=True,
    help="The node's OS and CPU; a DGX Spark is linux-aarch64.",
)
@click.option(
    "--python",
    type=click.Choice(list(PYTHONS)),
    default=DEFAULT_PYTHON,
    show_default=True,
    help="The node's python3 version; DGX OS 7 (Ubuntu 24.04) has 3.12.",
)
@click.option(
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder to write the bundle into  [default: the bundle cache, where deploy looks]",
)
@click.option(
    "--agent-wheel",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Use this sparksync_agent wheel instead of building one from the agent's source.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the path and manifest as one JSON document.")
def build(platform: str, python: str, output: Path | None, agent_wheel: Path | None, as_json: bool) -> None:
    """Build one archive holding the agent wheel, its dependency wheels and a checksum manifest."""
    target = Target(platform, python)
    if is_frozen():
        # The packaged app has no pip and no agent source: say what it carries and what to bring.
        raise BundleBuildError(cannot_build_message(target))
    try:
        path = build_bundle(target, output or bundles_dir(), agent_source=agent_wheel, progress=_progress)
    except BundleOfflineError as exc:
        raise BundleOfflineError(offline_message(exc, target)) from exc
    _report(path, verify_bundle(path), as_json)


@bundle.command("verify")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the path and manifest as one JSON document.")
def verify(file: Path, as_json: bool) -> None:
    """Check a bundle: manifest, every checksum, no extra or missing file, wheel tags fit the target."""
    _report(file, verify_bundle(file), as_json)


@bundle.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the bundles and folders as one JSON document.")
def list_bundles(as_json: bool) -> None:
    """The sound bundles deploy can use without building: the cache's, then those shipped with the app."""
    found = [
        {"platform": t.platform, "python": t.python, "source": source, "path": str(path)}
        for t in (Target(p, py) for p in PLATFORMS for py in PYTHONS)
        for source, path in (("cache", find_cached(t)), ("shipped", find_shipped(t)))
        if path is not None
    ]
    if as_json:
        folders = {"cache": str(bundles_dir()), "shipped": [str(d) for d in shipped_dirs()]}
        click.echo(json.dumps({"bundles": found, **folders}, indent=2))
        return
    for entry in found:
        click.echo(f"{entry['platform']} Python {entry['python']}  {entry['source']:7}  {entry['path']}")
    if not found:
        click.echo(f"no agent bundles; deploy builds them into {bundles_dir()} (needs the internet)")


def _progress(line: str) -> None:
    # Progress goes to stderr so stdout stays the result (a path, or JSON).
    click.echo(line, err=True)


def _report(path: Path, manifest: BundleManifest, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"path": str(path), "manifest": manifest.model_dump(mode="json")}, indent=2))
        return
    glibc = f", needs glibc >= {manifest.glibc_min}" if manifest.glibc_min else ""
    click.echo(
        f"{path}\n  sparksync-agent {manifest.agent_version} (protocol {manifest.protocol_version}) "
        f"for {manifest.target.describe()}: {len(manifest.files)} wheels, every checksum matches{glibc}"
    )
