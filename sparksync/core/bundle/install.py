"""The commands a node runs to install the agent from an unpacked bundle.

Kept here, next to the bundle format, so the deploy step and the tests run
exactly the same commands.

A bundle built by this release carries pip's own wheel (the installer, not
a dependency of the agent). The node then makes the venv ``--without-pip``
and runs pip straight from that wheel (pip supports running from its wheel
file), instead of letting ``python -m venv`` install and byte-compile a pip
through ensurepip that the agent never uses: that was about 2.7 of the
install's 3.8 CPU-s on each node, and eight nodes deploying at once share
their cores. A bundle without a pip wheel (an older one) installs as before.
"""

from __future__ import annotations

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from sparksync.core.bundle.manifest import BundleManifest

PIP_DISTRIBUTION = "pip"


def pip_wheel(manifest: BundleManifest) -> str | None:
    """The file name of the bundle's own pip wheel, or None when it carries none."""
    for entry in manifest.files:
        try:
            name = parse_wheel_filename(entry.name)[0]
        except InvalidWheelFilename:
            continue
        if name == PIP_DISTRIBUTION:
            return entry.name
    return None


def venv_command(python: str, venv: str, manifest: BundleManifest) -> list[str]:
    """argv that makes the agent's venv; without pip when the bundle brings its own."""
    if pip_wheel(manifest) is not None:
        return [python, "-m", "venv", "--without-pip", venv]
    return [python, "-m", "venv", venv]


def install_command(python: str, bundle_dir: str, manifest: BundleManifest) -> list[str]:
    """argv that installs the bundle's agent (GPU extra included) into ``python``'s environment.

    ``--no-index`` keeps pip off the network (nodes often have none) and
    ``--isolated`` keeps the node user's pip.conf and PIP_* variables out, so
    the result depends on the bundle alone. ``--no-compile``: pip would
    byte-compile every file of every wheel, most of which the agent never
    imports; Python compiles (and caches) what the agent does import as it
    starts. That was most of the install's CPU, paid on every node at once.
    """
    wheel = pip_wheel(manifest)
    pip = [python, f"{bundle_dir}/{wheel}/pip"] if wheel is not None else [python, "-m", "pip"]
    return [
        *pip, "install",
        "--isolated", "--no-index", "--find-links", bundle_dir,
        "--only-binary=:all:", "--disable-pip-version-check", "--no-input", "--no-compile",
        manifest.requirement(),
    ]  # fmt: skip
