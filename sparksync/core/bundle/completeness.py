"""Does a folder of wheels hold everything the agent needs on the target?

pip picked the wheels; this walks the agent's dependency graph again from the
wheels' own metadata, testing each environment marker with the target's
values (not this machine's), and lists every requirement nothing satisfies.
An empty list means ``pip install --no-index`` on the node will find them all.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from sparksync.core.bundle.platforms import Target


def missing_requirements(wheel_dir: Path, agent_wheel: str, extras: list[str], target: Target) -> list[str]:
    """Requirements of the agent (with ``extras``) that no wheel in ``wheel_dir`` satisfies on ``target``."""
    available = _index(wheel_dir)
    env = target.marker_environment()
    todo: list[tuple[Path, tuple[str, ...]]] = [(wheel_dir / agent_wheel, tuple(extras))]
    seen: set[tuple[Path, tuple[str, ...]]] = set()
    missing: set[str] = set()
    while todo:
        wheel, wanted = todo.pop()
        if (wheel, wanted) in seen:
            continue
        seen.add((wheel, wanted))
        for req in _applicable(wheel, wanted, env):
            candidates = available.get(canonicalize_name(req.name), [])
            found = [path for version, path in candidates if req.specifier.contains(version, prereleases=True)]
            if not found:
                missing.add(f"{req.name}{req.specifier} (needed by {wheel.name})")
            todo.extend((p, tuple(sorted(req.extras))) for p in found)
    return sorted(missing)


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
