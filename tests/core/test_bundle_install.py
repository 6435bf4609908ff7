"""The install commands a node runs: the bundle's installer when it lists its wheels, pip for older ones."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from sparksync.core.bundle import BundleManifest, install_command, installer_wheels, pip_wheel, venv_command
from sparksync.core.bundle.install import WHEEL_INSTALLER
from sparksync.core.bundle.manifest import BundleFile

AGENT = "sparksync_agent-0.1.0-py3-none-any.whl"
PIP = "pip-26.3-py3-none-any.whl"
INSTALLER = "installer-1.1.0-py3-none-any.whl"
PACKAGING = "packaging-26.4-py3-none-any.whl"
PYDANTIC = "pydantic-2.14.4-py3-none-any.whl"


def manifest(*wheels: str, installs: list[str] | None = None) -> BundleManifest:
    return BundleManifest(
        format_version=1, agent_version="0.1.0", protocol_version="1.5", platform="linux-aarch64",
        python="3.12", created_at=datetime.now(timezone.utc), agent_wheel=AGENT, extras=["gpu"],
        glibc_min=None, files=[BundleFile(name=w, sha256="0" * 64, size=1) for w in (AGENT, *wheels)],
        installs=installs,
    )  # fmt: skip


def test_a_bundle_that_lists_its_wheels_installs_them_with_its_own_installer_and_no_pip():
    m = manifest(PYDANTIC, INSTALLER, PACKAGING, installs=[AGENT, PACKAGING, PYDANTIC])
    assert installer_wheels(m) == (INSTALLER, PACKAGING)
    assert venv_command("python3", "v", m) == ["python3", "-m", "venv", "--without-pip", "v"]
    cmd = install_command("v/bin/python", "/b", m)
    # Exactly the listed wheels (packaging too: the agent needs it), never the installer itself.
    tools = [INSTALLER, PACKAGING]
    assert cmd == ["v/bin/python", "-I", "-c", WHEEL_INSTALLER, "/b", *tools, AGENT, PACKAGING, PYDANTIC]


def test_a_bundle_with_pip_but_no_wheel_list_installs_with_its_pip():
    m = manifest(PYDANTIC, PIP, INSTALLER, PACKAGING)  # made before the manifest listed what to install
    assert installer_wheels(m) is None and pip_wheel(m) == PIP
    assert venv_command("python3", "v", m) == ["python3", "-m", "venv", "--without-pip", "v"]
    cmd = install_command("v/bin/python", "/b", m)
    assert cmd[:3] == ["v/bin/python", f"/b/{PIP}/pip", "install"]
    assert {"--no-index", "--isolated", "--no-compile"} <= set(cmd) and cmd[-1] == m.requirement()


def test_an_older_bundle_without_pip_or_installer_installs_with_ensurepips_pip():
    m = manifest(PYDANTIC, "pipx-1.0-py3-none-any.whl", installs=[AGENT, PYDANTIC])  # pipx is not pip
    assert pip_wheel(m) is None and installer_wheels(m) is None
    assert venv_command("python3", "v", m) == ["python3", "-m", "venv", "v"]
    assert install_command("v/bin/python", "/b", m)[:4] == ["v/bin/python", "-m", "pip", "install"]


def test_the_wheel_list_must_name_bundle_files_and_the_agent():
    with pytest.raises(ValidationError, match="not among the files: zeroconf"):
        manifest(PYDANTIC, installs=[AGENT, "zeroconf-0.154.0-py3-none-any.whl"])
    with pytest.raises(ValidationError, match="does not include the agent wheel"):
        manifest(PYDANTIC, installs=[PYDANTIC])
