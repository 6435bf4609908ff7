"""The CPU a node spends installing the agent: the bundle's own pip beside a venv's ensurepip.

What eight nodes deploying at once share is their cores, so the install's
CPU seconds (not its wall time on a busy machine) are the figure. Both ways
run here, on the real lab bundle, with the commands a node runs
(``venv_command`` + ``install_command``); the anchor is the way before: a
venv with pip from ensurepip, then ``python -m pip`` from it. CPU is read
from the finished children's rusage, so other work on the machine is not
counted.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys

import pytest

from sparksync.core.bundle import install_command, pip_wheel, venv_command, verify_bundle
from sparksync.core.bundle.archive import unpack
from tests.core.bundle_helpers import clean_pip_env
from tests.core.deploy.lab_helpers import lab_bundle
from tests.perf.report import Report, assert_targets

pytestmark = [pytest.mark.perf, pytest.mark.timeout(900)]

ROUNDS = 2


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str]) -> float:
    """CPU seconds of ``argv`` and everything it started."""
    before = children_cpu()
    done = subprocess.run(argv, capture_output=True, text=True, env=clean_pip_env(), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return children_cpu() - before


def test_install_cpu_bundle_pip_against_ensurepip(tmp_path, tmp_path_factory, perf_out):
    bundle = lab_bundle(tmp_path_factory)
    manifest = verify_bundle(bundle)
    assert pip_wheel(manifest) is not None
    folder = str(unpack(bundle, tmp_path / "unpacked"))
    old_install = install_command("PY", folder, manifest.model_copy(update={"files": [
        f for f in manifest.files if f.name != pip_wheel(manifest)]}))  # fmt: skip
    runs: dict[str, list[tuple[float, float]]] = {"bundle_pip": [], "ensurepip": []}
    for n in range(ROUNDS):
        for way in runs:
            venv = tmp_path / f"{way}-{n}"
            python = str(venv / "bin" / "python")
            if way == "bundle_pip":
                made = timed(venv_command(sys.executable, str(venv), manifest))
                installed = timed(install_command(python, folder, manifest))
            else:
                made = timed([sys.executable, "-m", "venv", str(venv)])
                installed = timed([python, *old_install[1:]])
            assert subprocess.run([str(venv / "bin" / "sparksync-agent"), "version"], timeout=60).returncode == 0
            runs[way].append((made, installed))
            shutil.rmtree(venv)
    best = {way: min(r, key=sum) for way, r in runs.items()}
    new, old = sum(best["bundle_pip"]), sum(best["ensurepip"])
    report = Report("deploy_install_cpu")
    report.note(f"CPU seconds per node install, best of {ROUNDS}: venv, then pip")
    for way, label in (("ensurepip", "anchor: venv with ensurepip, its pip"), ("bundle_pip", "venv --without-pip, the bundle's pip")):
        made, installed = best[way]
        report.figure(f"{way}_cpu_s", {"venv": round(made, 2), "pip": round(installed, 2), "all": round(made + installed, 2)},
                      label, "CPU-s")  # fmt: skip
    report.figure("ratio", round(new / old, 2), "bundle's pip / ensurepip", "x")
    report.check("the bundle's pip costs less CPU than ensurepip's", new < old, f"{new:.2f} vs {old:.2f} CPU-s")
    report.publish(perf_out)
    assert_targets(report)
