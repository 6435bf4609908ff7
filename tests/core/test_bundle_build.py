"""Real bundles built from the package index: contents, resolution for the target, and a real offline install.

Each target is built once per session (tests/core/bundle_helpers.py); pip
downloads go to the package index configured on this machine.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from sparksync.core.bundle import (
    PLATFORMS,
    PYTHONS,
    BundleBuildError,
    BundleOfflineError,
    BundleVerifyError,
    Target,
    build_bundle,
    install_command,
    installer_wheels,
    pip_wheel,
    venv_command,
    verify_bundle,
)
from sparksync.core.bundle.archive import unpack
from sparksync.core.bundle.bytecode import BYTECODE_DISTRIBUTION, builds_for
from sparksync.core.bundle.install import pip_install_command
from sparksync.core.bundle.platforms import host_target
from sparksync_agent.protocol import AGENT_VERSION, PROTOCOL_VERSION
from tests.core.bundle_helpers import (
    AARCH64_312,
    AGENT_WHEEL,
    clean_pip_env,
    pip_offline,
    repack,
    session_agent_wheel,
    session_bundle,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def aarch64_bundle(tmp_path_factory) -> Path:
    return session_bundle(tmp_path_factory, AARCH64_312)


@pytest.fixture
def host_bundle(tmp_path_factory) -> Path:
    return session_bundle(tmp_path_factory, host_target())


def runs_on_cp312_aarch64(wheel: str) -> bool:
    """Written out independently of platforms.py: a manylinux aarch64 or 'any' platform, and a fitting ABI."""
    for tag in parse_wheel_filename(wheel)[3]:
        platform_ok = tag.platform == "any" or re.fullmatch(r"manylinux(2014|_2_\d+)_aarch64", tag.platform)
        abi_ok = (tag.abi == "cp312" and tag.interpreter == "cp312") or tag.abi == "none" or (
            tag.abi == "abi3" and int(tag.interpreter.removeprefix("cp3")) <= 12
        )
        if platform_ok and abi_ok:
            return True
    return False


def test_aarch64_bundle_holds_only_wheels_that_run_on_a_spark(aarch64_bundle):
    manifest = verify_bundle(aarch64_bundle, expect=AARCH64_312, agent_version=AGENT_VERSION)
    names = [f.name for f in manifest.files]
    assert aarch64_bundle.name == f"sparksync-agent-{AGENT_VERSION}-linux-aarch64-py3.12.tar.gz"
    assert [n for n in names if not runs_on_cp312_aarch64(n)] == []
    native = {parse_wheel_filename(n)[0] for n in names if n.endswith("_aarch64.whl")}
    # The compiled ones really are aarch64 builds; psutil's is the stable-ABI (abi3) kind.
    assert {"pydantic-core", "psutil", "zeroconf"} <= native
    assert any(n.startswith("psutil-") and "-abi3-" in n for n in names)
    assert AGENT_WHEEL in names and any(n.startswith("nvidia_ml_py-") for n in names)
    # Start-up bytecode only where this Python is the target's (bytecode is per Python minor version).
    bytecode = [n for n in names if n.startswith(f"{BYTECODE_DISTRIBUTION}-")]
    assert bytecode == ([f"{BYTECODE_DISTRIBUTION}-{AGENT_VERSION}-cp312-none-any.whl"] if builds_for("3.12") else [])


def test_aarch64_manifest_describes_the_bundle(aarch64_bundle):
    manifest = verify_bundle(aarch64_bundle)
    assert (manifest.agent_version, manifest.protocol_version) == (AGENT_VERSION, PROTOCOL_VERSION)
    assert (manifest.platform, manifest.python, manifest.format_version) == ("linux-aarch64", "3.12", 1)
    assert timedelta(0) <= datetime.now(timezone.utc) - manifest.created_at < timedelta(hours=6)
    # hf-xet (huggingface_hub's, for `model fetch`) is a manylinux_2_28 wheel; every other one is
    # manylinux2014. DGX OS 6 and 7 (Ubuntu 22.04, 24.04) ship glibc 2.35 and 2.39: any DGX OS runs them.
    assert manifest.glibc_min == "2.28"
    assert all(len(f.sha256) == 64 and f.size > 0 for f in manifest.files)


def test_tampering_with_one_real_wheel_fails_verify_naming_it(aarch64_bundle, tmp_path):
    def tamper(folder: Path) -> None:
        core = next(folder.glob("pydantic_core-*.whl"))
        data = bytearray(core.read_bytes())
        data[len(data) // 2] ^= 0x01
        core.write_bytes(bytes(data))

    with pytest.raises(BundleVerifyError) as caught:
        verify_bundle(repack(aarch64_bundle, tmp_path / "tampered.tar.gz", tamper))
    (problem,) = caught.value.problems
    assert re.match(r"pydantic_core-\S+_aarch64\.whl does not match its checksum", problem)


def test_the_wheels_a_spark_installs_are_exactly_what_pip_resolves_from_the_bundle(aarch64_bundle, tmp_path):
    # The manifest's list replaces pip's resolver on the node: pip, asked the same question
    # (the agent with its extras, for a Spark, from the bundle alone), must pick the same wheels.
    folder = unpack(aarch64_bundle, tmp_path / "unpacked")
    manifest = verify_bundle(aarch64_bundle)
    cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--no-index", "--find-links", str(folder),
           "--dry-run", "--target", str(tmp_path / "site"), *AARCH64_312.pip_target_args(),
           manifest.requirement()]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=clean_pip_env(), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    would = {w.lower().replace("_", "-") for w in done.stdout.split("Would install", 1)[1].split()}
    assert manifest.installs is not None
    listed = {"{}-{}".format(*parse_wheel_filename(name)[:2]) for name in manifest.installs}
    assert listed == would
    tools = installer_wheels(manifest)
    assert tools is not None and tools[0].startswith("installer-")  # what installs them rides along
    assert pip_wheel(manifest) is None  # and pip no longer does


def shipped_bytecode(folder: Path, manifest) -> set[str]:
    """The .pyc paths (relative to site-packages) in the bundle's bytecode wheel."""
    wheel = next(f.name for f in manifest.files if f.name.startswith(f"{BYTECODE_DISTRIBUTION}-"))
    with zipfile.ZipFile(folder / wheel) as archive:
        return {name for name in archive.namelist() if name.endswith(".pyc")}


def checked_hash_pyc(path: Path) -> bool:
    """PEP 552 flags: hash-based (1) and checked against the source (2)."""
    return int.from_bytes(path.read_bytes()[4:8], "little") == 3


def source_of(pyc: Path) -> Path:
    return pyc.parent.parent / (pyc.name.split(".")[0] + ".py")


def installed(venv: Path) -> tuple[list[list[str]], list[str]]:
    """The distributions [name, version] in ``venv`` and the scripts in its bin folder."""
    listing = (
        "import importlib.metadata as m, json; "
        "print(json.dumps(sorted({(d.metadata['Name'].lower(), d.version) for d in m.distributions()})))"
    )
    done = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", listing], capture_output=True, text=True,
                          check=True, timeout=60)  # fmt: skip
    return json.loads(done.stdout), sorted(p.name for p in (venv / "bin").iterdir())


def test_host_bundle_installs_offline_into_a_fresh_venv_as_pip_would_and_the_agent_runs(
    host_bundle, tmp_path
):
    # The exact path a node takes: unpack, new venv, the bundle's installer, run the agent.
    folder = unpack(host_bundle, tmp_path / "unpacked")
    manifest = verify_bundle(host_bundle)
    venv = tmp_path / "venv"
    assert venv_command(sys.executable, str(venv), manifest)[-2:] == ["--without-pip", str(venv)]
    subprocess.run(venv_command(sys.executable, str(venv), manifest), check=True, timeout=300)
    install = install_command(str(venv / "bin" / "python"), str(folder), manifest)
    assert install[1:3] == ["-I", "-c"]  # the bundle's installer, not pip
    done = subprocess.run(install, capture_output=True, text=True, env=clean_pip_env(), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RuntimeWarning" not in done.stderr, done.stderr
    # Nothing byte-compiled at install: the only bytecode is what the agent imports at start, compiled
    # when the bundle was built (this Python is the host target's), checked against its source by hash.
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-I", "-c", purelib],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())  # fmt: skip
    shipped = shipped_bytecode(folder, manifest)
    assert f"sparksync_agent/__pycache__/daemon.{sys.implementation.cache_tag}.pyc" in shipped
    assert f"fastapi/__pycache__/applications.{sys.implementation.cache_tag}.pyc" in shipped
    found = {str(p.relative_to(site)): p for p in venv.rglob("*.pyc")}
    assert set(found) == shipped
    assert all(checked_hash_pyc(path) and source_of(path).is_file() for path in found.values())
    # The agent's start uses them: importing its server writes none of them again.
    before = {name: path.stat().st_ino for name, path in found.items()}
    env = {k: v for k, v in clean_pip_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([str(venv / "bin" / "python"), "-c", "import sparksync_agent.daemon, sparksync_agent.runtime"],
                   check=True, timeout=120, env=env)  # fmt: skip
    assert {name: found[name].stat().st_ino for name in found} == before
    version = subprocess.run([str(venv / "bin" / "sparksync-agent"), "version"],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"sparksync-agent {AGENT_VERSION} (protocol {PROTOCOL_VERSION})"
    gpu_extra = subprocess.run([str(venv / "bin" / "python"), "-c", "import pynvml"], timeout=60)
    assert gpu_extra.returncode == 0  # nvidia-ml-py came with the bundle
    # The same distributions and console scripts as pip installing the same requirement from the folder.
    by_pip = tmp_path / "by-pip"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(by_pip)], check=True, timeout=300)
    argv = pip_install_command(sys.executable, str(folder), manifest)  # this machine's pip, a node's flags,
    argv[3:3] = ["--python", str(by_pip / "bin" / "python")]  # installing into that venv
    done = subprocess.run(argv, capture_output=True, text=True, env=clean_pip_env(), timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert installed(venv) == installed(by_pip)


def test_a_wheel_that_does_not_fit_the_node_is_refused_by_name_and_nothing_is_installed(
    host_bundle, aarch64_bundle, tmp_path
):
    folder = unpack(host_bundle, tmp_path / "unpacked")
    manifest = verify_bundle(host_bundle)
    foreign = next(f for f in verify_bundle(aarch64_bundle).files if f.name.startswith("pydantic_core-"))
    unpack(aarch64_bundle, tmp_path / "other")
    (folder / foreign.name).write_bytes(next((tmp_path / "other").glob(f"*/{foreign.name}")).read_bytes())
    wrong = manifest.model_copy(update={"installs": [*(manifest.installs or []), foreign.name]})
    venv = tmp_path / "venv"
    subprocess.run(venv_command(sys.executable, str(venv), wrong), check=True, timeout=300)
    done = subprocess.run(install_command(str(venv / "bin" / "python"), str(folder), wrong),
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 1
    refused = f"refusing to install: {foreign.name} does not run on this node"
    assert done.stderr.startswith(refused), done.stderr
    assert installed(venv)[0] == []  # refused before a single wheel was unpacked


@pytest.mark.parametrize("target", [Target(p, v) for p in PLATFORMS for v in PYTHONS], ids=str)
def test_every_target_builds_and_follows_its_own_markers(target, tmp_path_factory):
    manifest = verify_bundle(session_bundle(tmp_path_factory, target), expect=target)
    dists = {parse_wheel_filename(f.name)[0] for f in manifest.files}
    # anyio needs exceptiongroup on Python < 3.11 only; this machine's Python must not decide that.
    assert ("exceptiongroup" in dists) == (target.python == "3.10")


def test_a_failed_build_leaves_nothing_behind(tmp_path_factory, tmp_path, monkeypatch):
    wheel = session_agent_wheel(tmp_path_factory)
    pip_offline(monkeypatch)
    out = tmp_path / "out"
    with pytest.raises(BundleOfflineError, match=r"could not reach the package index .*Connection refused"):
        build_bundle(AARCH64_312, out, agent_source=wheel)
    assert list(out.iterdir()) == []


def test_an_agent_wheel_of_another_version_is_refused(tmp_path):
    other = tmp_path / "sparksync_agent-9.9.9-py3-none-any.whl"
    other.write_bytes(b"")
    with pytest.raises(BundleBuildError, match=f"agent 9.9.9, but this SparkSync needs {AGENT_VERSION}"):
        build_bundle(AARCH64_312, tmp_path / "out", agent_source=other)
    assert list((tmp_path / "out").iterdir()) == []
