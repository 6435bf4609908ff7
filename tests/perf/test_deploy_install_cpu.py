"""The CPU a node spends installing the agent: the bundle's installer beside pip, from the same wheels.

What eight nodes deploying at once share is their cores, so the install's
CPU seconds (not its wall time on a busy machine) are the figure. All ways
run here, on the real lab bundle's wheels:

- ``installer``: what a node runs now (``venv_command`` + ``install_command``):
  a venv without pip, then the bundle's wheel list unpacked by PyPA's
  ``installer`` run from its wheel;
- ``wheel_pip``: the way before: a venv without pip, then pip --no-index run
  from a pip wheel (the one pip downloads now, as a bundle carried it);
- the anchor, ``ensurepip``: a venv with ensurepip's pip, then that pip.

CPU is read from the finished children's rusage, so other work on the
machine is not counted.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparksync.core.bundle import install_command, installer_wheels, venv_command, verify_bundle
from sparksync.core.bundle.archive import unpack
from sparksync.core.bundle.install import pip_install_command
from sparksync.core.bundle.manifest import BundleManifest, file_entry
from sparksync.core.bundle.piprun import run_pip
from tests.core.bundle_helpers import clean_pip_env
from tests.core.deploy.lab_helpers import lab_bundle
from tests.perf.report import Report, assert_targets

pytestmark = [pytest.mark.perf, pytest.mark.timeout(900)]

ROUNDS = 2
WAYS = {
    "ensurepip": "anchor: venv with ensurepip, its pip",
    "wheel_pip": "before: no-pip venv, pip from its wheel",
    "installer": "now: no-pip venv, the bundle's installer",
}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str]) -> float:
    """CPU seconds of ``argv`` and everything it started."""
    before = children_cpu()
    done = subprocess.run(argv, capture_output=True, text=True, env=clean_pip_env(), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return children_cpu() - before


def with_pip_wheel(manifest: BundleManifest, folder: Path) -> BundleManifest:
    """``manifest`` as a bundle from before would have it: a pip wheel beside the others, no wheel list."""
    run_pip(["download", "--no-deps", "--only-binary=:all:", "--dest", str(folder), "pip"], "downloading pip")
    (pip,) = folder.glob("pip-*.whl")
    return manifest.model_copy(update={"files": [*manifest.files, file_entry(pip)], "installs": None})


def install_cpu(
    way: str, venv: Path, folder: str, now: BundleManifest, before: BundleManifest
) -> tuple[float, float]:
    """CPU seconds of making ``venv`` and of installing the agent into it, the ``way`` named."""
    python = str(venv / "bin" / "python")
    if way == "ensurepip":
        old = pip_install_command(python, folder, before.model_copy(update={"files": now.files}))
        return timed([sys.executable, "-m", "venv", str(venv)]), timed(old)
    manifest = now if way == "installer" else before
    made = timed(venv_command(sys.executable, str(venv), manifest))
    return made, timed(install_command(python, folder, manifest))


def test_install_cpu_installer_against_pip_and_ensurepip(tmp_path, tmp_path_factory, perf_out):
    bundle = lab_bundle(tmp_path_factory)
    manifest = verify_bundle(bundle)
    assert installer_wheels(manifest) is not None
    folder = unpack(bundle, tmp_path / "unpacked")
    before = with_pip_wheel(manifest, folder)
    runs: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for n in range(ROUNDS):
        for way in WAYS:
            venv = tmp_path / f"{way}-{n}"
            runs[way].append(install_cpu(way, venv, str(folder), manifest, before))
            agent = subprocess.run([str(venv / "bin" / "sparksync-agent"), "version"],
                                   check=False, timeout=60)  # fmt: skip
            assert agent.returncode == 0, way
            shutil.rmtree(venv)
    best = {way: min(r, key=sum) for way, r in runs.items()}
    total = {way: sum(b) for way, b in best.items()}
    report = Report("deploy_install_cpu")
    load = os.getloadavg()[0]
    report.note(f"CPU seconds per node install, best of {ROUNDS}: venv, then install; load {load:.2f}")
    for way, label in WAYS.items():
        made, installed = best[way]
        figures = {"venv": round(made, 2), "install": round(installed, 2), "all": round(made + installed, 2)}
        report.figure(f"{way}_cpu_s", figures, label, "CPU-s")
    new, pip, anchor = total["installer"], total["wheel_pip"], total["ensurepip"]
    report.figure("ratio", round(new / anchor, 2), "installer / ensurepip", "x")
    report.figure("ratio_pip", round(new / pip, 2), "installer / pip from its wheel", "x")
    report.check("the installer costs less CPU than pip from its wheel", new < pip, 
                 f"{new:.2f} vs {pip:.2f} CPU-s")
    report.publish(perf_out)
    assert_targets(report)
