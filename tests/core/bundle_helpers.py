"""Helpers for the bundle tests: real bundles built once per session, fake ones, and a pip with no network.

Real bundles are memoised at module level (keyed by target) rather than in a
session fixture, so test modules in tests/core and tests/cli share one build.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from sparksync.core.bundle.archive import pack
from sparksync.core.bundle.build import agent_wheel, build_bundle
from sparksync.core.bundle.manifest import FORMAT_VERSION, BundleManifest, file_entry, utc_now
from sparksync.core.bundle.platforms import Target
from sparksync_agent.protocol import AGENT_VERSION, PROTOCOL_VERSION

AARCH64_312 = Target("linux-aarch64", "3.12")
AGENT_WHEEL = f"sparksync_agent-{AGENT_VERSION}-py3-none-any.whl"
FAKE_PSUTIL = "psutil-7.0.0-cp36-abi3-manylinux2014_aarch64.whl"  # in every fake bundle

_built: dict[object, Path] = {}


def session_agent_wheel(tmp_path_factory) -> Path:
    """The agent wheel, built from ./agent once per test session."""
    if "agent" not in _built:
        _built["agent"] = agent_wheel(None, tmp_path_factory.mktemp("agent-wheel"), lambda _: None)
    return _built["agent"]


def session_bundle(tmp_path_factory, target: Target) -> Path:
    """A real bundle for ``target`` (wheels from the package index), built once per test session."""
    if target not in _built:
        out = tmp_path_factory.mktemp(f"bundle-{target.platform}-{target.python}")
        _built[target] = build_bundle(target, out, agent_source=session_agent_wheel(tmp_path_factory))
    return _built[target]


def pip_offline(monkeypatch) -> None:
    """Make every pip this process starts see an index that refuses connections, and nothing else.

    Port 9 (discard) on loopback is closed, so pip fails exactly as it does
    with no internet; the config file, find-links and cache are cut off so no
    local mirror or cached page can stand in for the index.
    """
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    # One retry, not none: pip reports the refused connection only in its "Retrying" warning.
    monkeypatch.setenv("PIP_RETRIES", "1")
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT"):
        monkeypatch.delenv(name, raising=False)


def clean_pip_env() -> dict[str, str]:
    """This process's environment without any PIP_* setting (for pips that must use only their flags)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}


def fake_wheel(folder: Path, name: str, requires: tuple[str, ...] = (), payload: bytes = b"") -> Path:
    """A tiny wheel pip accepts: a zip with METADATA (holding ``requires``) and WHEEL."""
    dist, version = name.split("-")[:2]
    metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    path = folder / name
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{dist}-{version}.dist-info/METADATA", metadata)
        wheel.writestr(f"{dist}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
        wheel.writestr(f"{dist}/__init__.py", payload)
    return path


def fake_bundle(folder: Path, target: Target = AARCH64_312, extra_wheels: tuple[str, ...] = ()) -> Path:
    """A small bundle of fake wheels, packed by the real packer, with a correct manifest."""
    wheels = folder / "wheels"
    wheels.mkdir(parents=True)
    names = (AGENT_WHEEL, "pydantic-2.9.0-py3-none-any.whl", FAKE_PSUTIL)
    for name in names + tuple(extra_wheels):
        fake_wheel(wheels, name, payload=name.encode())
    manifest = BundleManifest(
        format_version=FORMAT_VERSION,
        agent_version=AGENT_VERSION,
        protocol_version=PROTOCOL_VERSION,
        platform=target.platform,
        python=target.python,
        created_at=utc_now(),
        agent_wheel=AGENT_WHEEL,
        files=[file_entry(p) for p in sorted(wheels.iterdir())],
    )
    archive = folder / target.bundle_name(AGENT_VERSION)
    pack(archive, manifest, wheels)
    return archive


def repack(archive: Path, dest: Path, change: Callable[[Path], None]) -> Path:
    """A copy of ``archive`` at ``dest`` after ``change(bundle_folder)``, packed as-is (no new manifest)."""
    scratch = dest.parent / f".unpacked-{dest.name}"
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(scratch, filter="data")
    (folder,) = scratch.iterdir()
    change(folder)
    with tarfile.open(dest, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    shutil.rmtree(scratch)
    return dest


def add_member(archive: Path, dest: Path, info: tarfile.TarInfo, data: bytes = b"") -> Path:
    """A copy of ``archive`` at ``dest`` with one more raw tar entry (links, odd paths)."""
    with tarfile.open(archive, "r:gz") as src, tarfile.open(dest, "w:gz") as out:
        for member in src:
            out.addfile(member, src.extractfile(member) if member.isfile() else None)
        info.size = len(data) if info.isfile() else 0
        out.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return dest
