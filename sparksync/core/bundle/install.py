"""The command a node runs to install the agent from an unpacked bundle.

Kept here, next to the bundle format, so the deploy step and the tests run
exactly the same command.
"""

from __future__ import annotations

from sparksync.core.bundle.manifest import BundleManifest


def install_command(python: str, bundle_dir: str, manifest: BundleManifest) -> list[str]:
    """argv that installs the bundle's agent (GPU extra included) into ``python``'s environment.

    ``--no-index`` keeps pip off the network (nodes often have none) and
    ``--isolated`` keeps the node user's pip.conf and PIP_* variables out, so
    the result depends on the bundle alone. ``--no-compile``: pip would
    byte-compile every file of every wheel, most of which the agent never
    imports; Python compiles (and caches) what the agent does import as it
    starts. That was most of the install's CPU, paid on every node at once.
    """
    return [
        python, "-m", "pip", "install",
        "--isolated", "--no-index", "--find-links", bundle_dir,
        "--only-binary=:all:", "--disable-pip-version-check", "--no-input", "--no-compile",
        manifest.requirement(),
    ]  # fmt: skip
