"""Engine detection against a fake PATH: found binaries with versions, Python packages, and why others are missing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from sparksync_agent.engines.detect import detect, search_path


def _script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _fake_python(directory: Path, found: dict) -> Path:
    # Answers the package probe the way the node's python3 would.
    return _script(directory, "python3", f"cat <<'EOF'\n{json.dumps(found)}\nEOF")


def test_detection_reports_found_engines_with_versions_and_why_others_are_missing(tmp_path):
    _script(tmp_path, "llama-server", "echo 'version: 6543 (abc1234)' >&2; echo 'built with cc' >&2")
    _script(tmp_path, "rpc-server", "echo 'version: 6543 (abc1234)' >&2")
    _script(tmp_path, "torchrun", "exit 0")
    python = _fake_python(tmp_path, {
        "torch": {"found": True, "version": "2.13.0", "path": "/x/torch/__init__.py"},
        "vllm": {"found": False, "why": "not installed for this python"},
    })  # fmt: skip
    report = detect(path=str(tmp_path), python=str(python))
    checks = {c.name: c for c in report.checks}
    assert checks["llama-server"].available and checks["llama-server"].version == "version: 6543 (abc1234)"
    assert checks["llama-server"].path == str(tmp_path / "llama-server")
    assert checks["python:torch"].available and checks["python:torch"].version == "2.13.0"
    assert not checks["python:vllm"].available and "not installed" in checks["python:vllm"].missing
    assert not checks["vllm"].available and checks["vllm"].missing == "vllm is not on PATH"
    assert report.engines["llama.cpp"] and report.engines["torchrun"] and report.engines["custom"]
    assert not report.engines["vllm"] and "python:vllm" in report.missing["vllm"]
    assert not report.engines["trtllm"] and "trtllm-serve + mpirun" in report.missing["trtllm"]


def test_a_python_that_cannot_answer_marks_every_package_missing_with_the_reason(tmp_path):
    python = _script(tmp_path, "python3", "echo 'boom: broken interpreter' >&2; exit 1")
    report = detect(path=str(tmp_path), python=str(python))
    packages = [c for c in report.checks if c.kind == "python"]
    assert packages and all(not c.available and "boom: broken interpreter" in c.missing for c in packages)


def test_container_runtime_and_ngc_images(tmp_path):
    _script(
        tmp_path,
        "docker",
        """
case "$1" in
  version) echo 28.1.1 ;;
  images) printf 'nvcr.io/nvidia/vllm:25.11-py3\\nubuntu:24.04\\n' ;;
esac""",
    )
    report = detect(path=str(tmp_path), python=str(_fake_python(tmp_path, {})))
    checks = {c.name: c for c in report.checks}
    assert checks["docker"].available and checks["docker"].version == "28.1.1"
    assert checks["image:nvcr.io/nvidia/vllm:25.11-py3"].kind == "container-image"
    assert "image:ubuntu:24.04" not in checks
    assert report.engines["vllm"]
    assert not checks["podman"].available


def test_a_runtime_whose_daemon_is_down_says_so(tmp_path):
    _script(tmp_path, "docker", "echo 'Cannot connect to the Docker daemon' >&2; exit 1")
    report = detect(path=str(tmp_path), python=str(_fake_python(tmp_path, {})))
    docker = next(c for c in report.checks if c.name == "docker")
    assert (
        not docker.available and "daemon not reachable: Cannot connect to the Docker daemon" in docker.missing
    )


def test_the_search_path_adds_user_install_dirs(tmp_path):
    assert search_path(str(tmp_path)).split(os.pathsep)[0] == str(tmp_path)
    assert os.path.expanduser("~/.local/bin") in search_path(str(tmp_path)).split(os.pathsep)


def test_a_rank_gets_the_engine_directories_on_its_path(monkeypatch, tmp_path):
    # `sparksync engine install` puts engines in ~/.local/bin, often missing from the agent's PATH.
    from sparksync_agent.protocol import RankLaunch, ReadinessProbe
    from sparksync_agent.supervisor.supervisor import _with_engine_path

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    launch = RankLaunch(
        group="g", node="n", rank=0, role="llama-server", argv=["llama-server"],
        readiness=ReadinessProbe(kind="process"), log_name="g",
    )  # fmt: skip
    path = _with_engine_path(launch).env["PATH"].split(":")
    assert path[:2] == ["/usr/bin", "/bin"] and str(tmp_path / ".local/bin") in path
    given = launch.model_copy(update={"env": {"PATH": "/opt/x"}})
    assert _with_engine_path(given).env["PATH"].split(":")[0] == "/opt/x"  # the recipe's own PATH first
