"""The install commands a node runs, for a bundle that brings its own pip and for an older one without."""

from __future__ import annotations

from datetime import datetime, timezone

from sparksync.core.bundle import BundleManifest, install_command, pip_wheel, venv_command
from sparksync.core.bundle.manifest import BundleFile

AGENT = "sparksync_agent-0.1.0-py3-none-any.whl"
PIP = "pip-26.3-py3-none-any.whl"


def manifest(*wheels: str) -> BundleManifest:
    return BundleManifest(
        format_version=1, agent_version="0.1.0", protocol_version="1.5", platform="linux-aarch64",
        python="3.12", created_at=datetime.now(timezone.utc), agent_wheel=AGENT, extras=["gpu"],
        glibc_min=None, files=[BundleFile(name=w, sha256="0" * 64, size=1) for w in (AGENT, *wheels)],
    )  # fmt: skip


def test_a_bundle_with_pip_makes_the_venv_without_pip_and_installs_with_its_own():
    m = manifest("pydantic-2.14.4-py3-none-any.whl", PIP)
    assert pip_wheel(m) == PIP
    assert venv_command("python3", "v", m) == ["python3", "-m", "venv", "--without-pip", "v"]
    cmd = install_command("v/bin/python", "/b", m)
    assert cmd[:3] == ["v/bin/python", f"/b/{PIP}/pip", "install"]
    assert {"--no-index", "--isolated", "--no-compile"} <= set(cmd) and cmd[-1] == m.requirement()


def test_an_older_bundle_without_pip_installs_as_before():
    m = manifest("pydantic-2.14.4-py3-none-any.whl", "pipx-1.0-py3-none-any.whl")  # pipx is not pip
    assert pip_wheel(m) is None
    assert venv_command("python3", "v", m) == ["python3", "-m", "venv", "v"]
    assert install_command("v/bin/python", "/b", m)[:4] == ["v/bin/python", "-m", "pip", "install"]
