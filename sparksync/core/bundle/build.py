"""Building an offline agent bundle for one target.

Steps: build the agent wheel from ``agent/`` (or take a given one), let pip
download every dependency wheel for the target (the GPU extra included), write
the checksum manifest, pack one archive, verify it, and only then move it into
place. All work happens in a temporary folder inside the output folder, so the
final rename is atomic and a failed or interrupted build leaves nothing behind.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from sparksync.core.bundle.archive import pack
from sparksync.core.bundle.bytecode import make_bytecode_wheel
from sparksync.core.bundle.completeness import resolve
from sparksync.core.bundle.errors import BundleBuildError
from sparksync.core.bundle.install import INSTALLER_DISTRIBUTIONS
from sparksync.core.bundle.manifest import (
    AGENT_DISTRIBUTION,
    AGENT_EXTRAS,
    FORMAT_VERSION,
    BundleManifest,
    file_entry,
    utc_now,
)
from sparksync.core.bundle.piprun import check_index_reachable, run_pip
from sparksync.core.bundle.platforms import Target
from sparksync.core.bundle.verify import glibc_needed, verify_bundle, wheel_problem
from sparksync.core.base.paths import ensure_dir
from sparksync_agent.protocol import AGENT_VERSION, PROTOCOL_VERSION

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


def build_bundle(
    target: Target,
    output_dir: Path,
    *,
    agent_source: Path | None = None,
    progress: Progress | None = None,
) -> Path:
    """Build the bundle for ``target`` into ``output_dir`` and return its path.

    ``agent_source`` is the agent's project folder or a ready agent wheel; by
    default the folder this client's ``sparksync_agent`` was installed from.
    """
    say = progress or log.info
    ensure_dir(output_dir)
    final = output_dir / target.bundle_name(AGENT_VERSION)
    work = Path(tempfile.mkdtemp(dir=output_dir, prefix=".building-"))
    try:
        agent = agent_wheel(agent_source, work / "agent", say)
        wheels = work / "wheels"
        say(f"downloading the agent's dependencies for {target.describe()}")
        check_index_reachable(f"downloading wheels for {target.describe()}")  # seconds, not minutes, offline
        installs = download_wheels(target, agent, wheels)
        make_bytecode_wheel(target.python, wheels, installs)  # only where this is the target's Python
        staged = work / final.name
        pack(staged, make_manifest(target, agent.name, wheels, installs), wheels)
        # Never publish a bundle that a node would then reject.
        verify_bundle(staged, expect=target, agent_version=AGENT_VERSION)
        os.replace(staged, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"built {final}")
    return final


def agent_wheel(source: Path | None, scratch: Path, say: Progress) -> Path:
    """The agent wheel: ``source`` itself when it is a wheel, else built from the project folder."""
    source = source or agent_project_dir()
    if source.is_file():
        return _checked_agent_wheel(source)
    if not (source / "pyproject.toml").is_file():
        raise BundleBuildError(
            f"{source} is neither an agent wheel nor the agent's project folder (no pyproject.toml)"
        )
    say(f"building the agent wheel from {source}")
    scratch.mkdir(parents=True, exist_ok=True)
    run_pip(["wheel", "--no-deps", "--wheel-dir", str(scratch), str(source)], "building the agent wheel")
    built = sorted(scratch.glob("*.whl"))
    if len(built) != 1:
        raise BundleBuildError(f"building the agent wheel from {source} gave {len(built)} wheels, not one")
    return _checked_agent_wheel(built[0])


def agent_project_dir() -> Path:
    """The agent's project folder next to the installed ``sparksync_agent`` (a source checkout)."""
    # Located, not imported: the client needs the agent's folder here, not its code.
    spec = importlib.util.find_spec("sparksync_agent")
    project = Path(spec.origin).resolve().parent.parent if spec and spec.origin else None
    if project is not None and (project / "pyproject.toml").is_file():
        return project
    raise BundleBuildError(
        f"the agent's source is not on this computer (looked in {project}); "
        "pass a ready wheel with --agent-wheel FILE (sparksync_agent-"
        f"{AGENT_VERSION}-py3-none-any.whl), or bring a ready bundle"
    )


def _checked_agent_wheel(path: Path) -> Path:
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise BundleBuildError(f"{path.name} is not a wheel file name ({exc})") from exc
    if name != canonicalize_name(AGENT_DISTRIBUTION):
        raise BundleBuildError(f"{path.name} is not a {AGENT_DISTRIBUTION} wheel")
    if str(version) != AGENT_VERSION:
        raise BundleBuildError(
            f"{path.name} is agent {version}, but this SparkSync needs {AGENT_VERSION}; "
            "use the agent wheel of the same release"
        )
    return path


def download_wheels(target: Target, agent: Path, dest: Path) -> list[str]:
    """Let pip resolve the agent and its extras for ``target``, save every wheel into ``dest``.

    Returns the wheels a node installs (the agent's closure on the target);
    the installer's own wheels ride along beside them (see install.py).
    """
    requirement = f"{agent}[{','.join(AGENT_EXTRAS)}]"
    args = ["download", "--dest", str(dest), *target.pip_target_args(), requirement, *INSTALLER_DISTRIBUTIONS]
    run_pip(args, f"downloading wheels for {target.describe()}", markers=target.marker_environment())
    strays = sorted(p.name for p in dest.iterdir() if p.suffix != ".whl")
    if strays:
        raise BundleBuildError(f"pip saved files that are not wheels: {', '.join(strays)}")
    resolved = resolve(dest, agent.name, list(AGENT_EXTRAS), target)
    if resolved.missing:
        raise BundleBuildError(
            f"pip left out wheels the agent needs on {target.describe()}: {'; '.join(resolved.missing)}. "
            "This pip may not honour the target's environment markers; try a newer pip"
        )
    if resolved.conflicts:
        raise BundleBuildError(
            f"the agent's requirements on {target.describe()} pick two versions of: "
            f"{'; '.join(resolved.conflicts)}"
        )
    return resolved.wheels


def make_manifest(
    target: Target, agent_wheel_name: str, wheel_dir: Path, installs: list[str]
) -> BundleManifest:
    """The manifest for the wheels in ``wheel_dir``, of which a node installs ``installs``.

    Refuses any wheel the target cannot run.
    """
    names = sorted(p.name for p in wheel_dir.glob("*.whl"))
    wrong = [p for name in names if (p := wheel_problem(name, target))]
    if wrong:
        # pip picked a wheel the target cannot install (a stray find-links folder, say).
        raise BundleBuildError("; ".join(wrong))
    glibcs = [g for name in names if (g := glibc_needed(name, target))]
    return BundleManifest(
        format_version=FORMAT_VERSION,
        agent_version=AGENT_VERSION,
        protocol_version=PROTOCOL_VERSION,
        platform=target.platform,
        python=target.python,
        created_at=utc_now(),
        agent_wheel=agent_wheel_name,
        extras=list(AGENT_EXTRAS),
        glibc_min=".".join(map(str, max(glibcs))) if glibcs else None,
        files=[file_entry(wheel_dir / name) for name in names],
        installs=installs,
    )
