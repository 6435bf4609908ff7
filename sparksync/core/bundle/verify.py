"""Checking a bundle archive before anything installs from it.

A bundle passes when: its manifest is present and readable; the archive holds
exactly the files the manifest lists, each with the listed SHA-256 and size;
every wheel's tags run on the bundle's target; and the agent wheel is there in
the stated version. Every problem found is reported, each naming its file.
"""

from __future__ import annotations

import json
import tarfile
import zlib
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from pydantic import ValidationError

from sparksync.core.bundle.archive import Contents, scan
from sparksync.core.bundle.errors import BundleVerifyError
from sparksync.core.bundle.manifest import AGENT_DISTRIBUTION, FORMAT_VERSION, MANIFEST_NAME, BundleManifest
from sparksync.core.bundle.platforms import Target, glibc_of

_MAX_LISTED = 6  # problems spelled out in the message; all of them stay in .problems


def verify_bundle(
    archive: Path, *, expect: Target | None = None, agent_version: str | None = None
) -> BundleManifest:
    """Return the manifest of a sound bundle, or raise BundleVerifyError listing what is wrong.

    ``expect`` and ``agent_version``, when given, must match what the bundle says it is for.
    """
    try:
        contents = scan(archive)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        problem = f"{archive.name} is not a readable .tar.gz bundle ({exc})"
        raise BundleVerifyError(_message(archive, [problem], expect), [problem]) from exc
    problems = list(contents.problems)
    manifest = _read_manifest(contents, problems)
    if manifest is not None:
        problems += _identity_problems(manifest, expect, agent_version)
        problems += _file_problems(manifest, contents.files)
        problems += [p for f in manifest.files if (p := wheel_problem(f.name, manifest.target))]
        problems += _agent_problems(manifest)
    if problems or manifest is None:  # no manifest is one of the problems
        target = expect or (manifest.target if manifest else None)
        raise BundleVerifyError(_message(archive, problems, target), problems)
    return manifest


def wheel_problem(name: str, target: Target) -> str | None:
    """Why the wheel file ``name`` cannot be installed on ``target``; None when it can."""
    try:
        _, _, _, wheel_tags = parse_wheel_filename(name)
    except InvalidWheelFilename:
        return f"{name} is not a valid wheel file name"
    if wheel_tags & target.supported_tags:
        return None
    shown = ", ".join(sorted(str(t) for t in wheel_tags))
    return f"{name} does not run on {target.describe()} (its tags: {shown})"


def glibc_needed(name: str, target: Target) -> tuple[int, int] | None:
    """The oldest glibc that can run wheel ``name`` on ``target``; None for a pure or abi-free wheel."""
    compatible = parse_wheel_filename(name)[3] & target.supported_tags
    needs = [glibc_of(tag.platform) for tag in compatible]
    known = [need for need in needs if need is not None]
    if not needs or len(known) < len(needs):
        return None
    return min(known)


def _read_manifest(contents: Contents, problems: list[str]) -> BundleManifest | None:
    if contents.manifest is None:
        problems.append(f"{MANIFEST_NAME} is missing")
        return None
    try:
        raw = json.loads(contents.manifest)
    except ValueError as exc:
        problems.append(f"{MANIFEST_NAME} is not valid JSON ({exc})")
        return None
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if isinstance(version, int) and version > FORMAT_VERSION:
        problems.append(
            f"{MANIFEST_NAME} has bundle format {version}, made by a newer SparkSync "
            f"(this one reads format {FORMAT_VERSION}); upgrade SparkSync"
        )
        return None
    try:
        return BundleManifest.model_validate(raw)
    except ValidationError as exc:
        problems.append(f"{MANIFEST_NAME} is malformed ({_first_error(exc)})")
        return None


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


def _identity_problems(
    manifest: BundleManifest, expect: Target | None, agent_version: str | None
) -> list[str]:
    problems = []
    if expect is not None and manifest.target != expect:
        problems.append(f"{MANIFEST_NAME} says {manifest.target.describe()}, not {expect.describe()}")
    if agent_version is not None and manifest.agent_version != agent_version:
        problems.append(f"{MANIFEST_NAME} says agent {manifest.agent_version}, not {agent_version}")
    return problems


def _file_problems(manifest: BundleManifest, found: dict[str, tuple[str, int]]) -> list[str]:
    listed = manifest.by_name()
    problems = [f"{n} is listed in {MANIFEST_NAME} but missing from the archive" for n in listed if n not in found]
    problems += [f"{n} is in the archive but not listed in {MANIFEST_NAME}" for n in found if n not in listed]
    for name, entry in listed.items():
        if name in found and found[name] != (entry.sha256, entry.size):
            sha, size = found[name]
            problems.append(
                f"{name} does not match its checksum (sha256 {sha[:12]}…, {size} bytes; "
                f"expected {entry.sha256[:12]}…, {entry.size} bytes): it was changed or damaged"
            )
    return problems


def _agent_problems(manifest: BundleManifest) -> list[str]:
    if manifest.agent_wheel not in manifest.by_name():
        return [f"the agent wheel {manifest.agent_wheel} is not among the bundle's files"]
    try:
        name, version, _, _ = parse_wheel_filename(manifest.agent_wheel)
    except InvalidWheelFilename:
        return []  # already reported by wheel_problem
    if name != canonicalize_name(AGENT_DISTRIBUTION) or str(version) != manifest.agent_version:
        return [f"{manifest.agent_wheel} is not {AGENT_DISTRIBUTION} {manifest.agent_version}"]
    return []


def _message(archive: Path, problems: list[str], target: Target | None) -> str:
    shown = "; ".join(problems[:_MAX_LISTED])
    if len(problems) > _MAX_LISTED:
        shown += f"; and {len(problems) - _MAX_LISTED} more"
    rebuild = "sparksync bundle build"
    if target is not None:
        rebuild += f" --platform {target.platform} --python {target.python}"
    return f"bundle {archive.name} failed verification: {shown}. Delete it and make a new one: '{rebuild}'"
