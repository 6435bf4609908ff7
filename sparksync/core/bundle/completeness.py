"""Which of a folder's wheels the agent needs on the target, and what none of them covers.

pip picked the wheels; this walks the agent's dependency graph again from the
wheels' own metadata, testing each environment marker with the target's
values (not this machine's). It gives the wheels a node installs (the
manifest records them, so the node needs no resolver) and every requirement
nothing satisfies. With nothing missing, the node has every wheel it needs.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from sparksync.core.bundle.platforms import Target


@dataclass(frozen=True)
class Resolution:
    """The wheels the agent (with its extras) installs on a target, and what nothing satisfies."""

    wheels: list[str]  # file names, sorted; one per distribution
    missing: list[str]  # "name>=1 (needed by some.whl)", sorted
    conflicts: list[str]  # distributions two requirements want in different versions


def resolve(wheel_dir: Path, agent_wheel: str, extras: list[str], target: Target) -> Resolution:
    """Walk the agent's requirements (with ``extras``) on ``target`` through the wheels in ``wheel_dir``.

    Each requirement takes the newest wheel that satisfies it, as pip would
    from a folder that holds one version per distribution (what pip download
    leaves); should two requirements pick two versions, that is a conflict.
    """
    available = _index(wheel_dir)
    env = target.marker_environment()
    agent = wheel_dir / agent_wheel
    todo: list[tuple[Path, tuple[str, ...]]] = [(agent, tuple(extras))]
    seen: set[tuple[Path, tuple[str, ...]]] = set()
    picked: dict[NormalizedName, set[Path]] = {parse_wheel_filename(agent_wheel)[0]: {agent}}
    missing: set[str] = set()
    while todo:
        wheel, wanted = todo.pop()
        if (wheel, wanted) in seen:
            continue
        seen.add((wheel, wanted))
        for req in _applicable(wheel, wanted, env):
            name = canonicalize_name(req.name)
            candidates = available.get(name, [])
            found = [(v, p) for v, p in candidates if req.specifier.contains(v, prereleases=True)]
            if not found:
                missing.add(f"{req.name}{req.specifier} (needed by {wheel.name})")
                continue
            best = max(found)[1]
            picked.setdefault(name, set()).add(best)
            todo.append((best, tuple(sorted(req.extras))))
    twice = {name: paths for name, paths in picked.items() if len(paths) > 1}
    conflicts = [f"{name}: {', '.join(sorted(p.name for p in paths))}" for name, paths in twice.items()]
    wheels = sorted(p.name for paths in picked.values() for p in paths)
    return Resolution(wheels, sorted(missing), sorted(conflicts))


def missing_requirements(wheel_dir: Path, agent_wheel: str, extras: list[str], target: Target) -> list[str]:
    """Requirements of the agent (with ``extras``) that no wheel in ``wheel_dir`` satisfies on ``target``."""
    return resolve(wheel_dir, agent_wheel, extras, target).missing


def _index(wheel_dir: Path) -> dict[str, list[tuple[Version, Path]]]:
    available: dict[str, list[tuple[Version, Path]]] = {}
    for path in sorted(wheel_dir.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(path.name)
        available.setdefault(name, []).append((version, path))
    return available


def _applicable(wheel: Path, extras: tuple[str, ...], env: dict[str, str]) -> Iterator[Requirement]:
    """The wheel's requirements whose markers hold on the target, for the requested extras."""
    for line in _requires_dist(wheel):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue  # pip would have refused such metadata already
        if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in (*extras, "")):
            yield req


def _requires_dist(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            parts = PurePosixPath(member).parts
            if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
                text = archive.read(member).decode("utf-8", errors="replace")
                return HeaderParser().parsestr(text).get_all("Requires-Dist") or []
    return []
