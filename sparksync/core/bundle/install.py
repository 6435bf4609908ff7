"""The commands a node runs to install the agent from an unpacked bundle.

Kept here, next to the bundle format, so the deploy step and the tests run
exactly the same commands.

The bundle is resolved when it is built: its manifest lists the exact wheels
a node installs (``installs``). So the node needs no resolver, only something
that unpacks wheels: PyPA's ``installer`` library, which the bundle carries as
a wheel together with ``packaging`` (for the node's own wheel tags), both pure
Python and run straight from their wheel files on ``sys.path``. The venv is
made ``--without-pip``. Per node install that is about a third of the CPU of
pip --no-index from the same folder (pip's start-up, its resolver and its
index of the folder were most of it), and eight nodes deploying at once share
their cores.

pip stays only for bundles made before the manifest listed its wheels (a
bundle already in the cache or shipped with the app): those install with the
bundle's own pip wheel when it has one, else with ensurepip's.
"""

from __future__ import annotations

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from sparksync.core.bundle.bytecode import BYTECODE_DISTRIBUTION
from sparksync.core.bundle.manifest import BundleManifest

PIP_DISTRIBUTION = "pip"
# What the node installs with: the library itself and the one it needs to read the node's wheel tags.
INSTALLER_DISTRIBUTION = "installer"
TAGS_DISTRIBUTION = "packaging"
INSTALLER_DISTRIBUTIONS = (INSTALLER_DISTRIBUTION, TAGS_DISTRIBUTION)

# Runs on the node as ``<venv>/bin/python -I -c WHEEL_INSTALLER <bundle dir> <installer.whl>
# <packaging.whl> <wheel>...``, with the standard library and those two wheels only. Every wheel's
# tags are checked against the node's interpreter before anything is written, so a wheel that does
# not fit is refused with its name and nothing is half installed. No bytecode compiled here: the
# bundle's bytecode wheel (bytecode.py), when it has one, holds what the agent imports at start,
# compiled once when the bundle was built; its .pyc files are put beside the installed sources
# (PyPA's installer refuses __pycache__ files in a wheel) and it is no distribution of its own.
# Python compiles whatever else the agent imports, and never the rest.
WHEEL_INSTALLER = r"""
import os, sys, sysconfig, zipfile
folder, tools, wheels = sys.argv[1], sys.argv[2:4], sys.argv[4:]
sys.path[:0] = [os.path.join(folder, tool) for tool in tools]
from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.sources import WheelFile
from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename

node = set(sys_tags())
unfit = [w for w in wheels if not parse_wheel_filename(w)[3] & node]
if unfit:
    sys.exit("refusing to install: %s does not run on this node (Python %d.%d, %s; it accepts e.g. %s)"
             % (", ".join(unfit), *sys.version_info[:2], os.uname().machine, next(iter(sys_tags()))))
paths = sysconfig.get_paths()
bytecode = [w for w in wheels if w.startswith("@BYTECODE@-")]
for wheel in wheels:
    if wheel in bytecode:
        continue
    with WheelFile.open(os.path.join(folder, wheel)) as source:
        scheme = {**paths, "headers": os.path.join(paths["include"], source.distribution)}
        destination = SchemeDictionaryDestination(
            scheme, interpreter=sys.executable, script_kind="posix", bytecode_optimization_levels=())
        install(source, destination, {"INSTALLER": b"sparksync\n"})
for wheel in bytecode:
    with zipfile.ZipFile(os.path.join(folder, wheel)) as archive:
        for member in archive.namelist():
            parts = member.split("/")
            if member.endswith(".pyc") and len(parts) >= 2 and parts[-2] == "__pycache__" and ".." not in parts:
                archive.extract(member, paths["purelib"])
""".replace("@BYTECODE@", BYTECODE_DISTRIBUTION)


def _wheel_of(manifest: BundleManifest, distribution: str) -> str | None:
    for entry in manifest.files:
        try:
            name = parse_wheel_filename(entry.name)[0]
        except InvalidWheelFilename:
            continue
        if name == distribution:
            return entry.name
    return None


def pip_wheel(manifest: BundleManifest) -> str | None:
    """The file name of the bundle's own pip wheel, or None when it carries none."""
    return _wheel_of(manifest, PIP_DISTRIBUTION)


def installer_wheels(manifest: BundleManifest) -> tuple[str, str] | None:
    """The installer and packaging wheels a node installs with; None for a bundle that installs with pip."""
    installer, tags = (_wheel_of(manifest, name) for name in INSTALLER_DISTRIBUTIONS)
    if manifest.installs is None or installer is None or tags is None:
        return None
    return installer, tags


def venv_command(python: str, venv: str, manifest: BundleManifest) -> list[str]:
    """argv that makes the agent's venv; without pip when the bundle brings what installs it."""
    if installer_wheels(manifest) is not None or pip_wheel(manifest) is not None:
        return [python, "-m", "venv", "--without-pip", venv]
    return [python, "-m", "venv", venv]


def install_command(python: str, bundle_dir: str, manifest: BundleManifest) -> list[str]:
    """argv that installs the bundle's agent (its extras included) into ``python``'s environment."""
    tools = installer_wheels(manifest)
    if tools is not None and manifest.installs is not None:
        # -I: the node user's PYTHONPATH and user site stay out; only the bundle's wheels count.
        bytecode = _wheel_of(manifest, canonicalize_name(BYTECODE_DISTRIBUTION))
        extra = [bytecode] if bytecode is not None else []
        return [python, "-I", "-c", WHEEL_INSTALLER, bundle_dir, *tools, *manifest.installs, *extra]
    return pip_install_command(python, bundle_dir, manifest)


def pip_install_command(python: str, bundle_dir: str, manifest: BundleManifest) -> list[str]:
    """pip --no-index from the bundle folder, for a bundle whose manifest lists no wheels to install.

    ``--no-index`` keeps pip off the network (nodes often have none) and
    ``--isolated`` keeps the node user's pip.conf and PIP_* variables out, so
    the result depends on the bundle alone. ``--no-compile``: pip would
    byte-compile every file of every wheel, most of which the agent never
    imports.
    """
    wheel = pip_wheel(manifest)
    pip = [python, f"{bundle_dir}/{wheel}/pip"] if wheel is not None else [python, "-m", "pip"]
    return [
        *pip, "install",
        "--isolated", "--no-index", "--find-links", bundle_dir,
        "--only-binary=:all:", "--disable-pip-version-check", "--no-input", "--no-compile",
        manifest.requirement(),
    ]  # fmt: skip
