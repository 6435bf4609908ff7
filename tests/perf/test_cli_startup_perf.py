"""How long the CLI takes to start: ``sparksync --version`` and ``sparksync node list`` beside ``python -c pass``.

Each command runs as a user runs it (a fresh interpreter, ``python -m
sparksync``), interleaved with the anchor so that all see the same machine.
Both the wall time and the CPU time of the child are reported: on a shared
machine the CPU seconds say what the start itself costs. Target (issue 19):
``--version`` within 0.3 s. Which modules each command loads is checked,
untimed, in tests/cli/test_startup_imports.py.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

import pytest

from sparksync.core.nodes import Registry
from tests.core.node_factory import paired_node
from tests.perf.report import Report, assert_targets
from tests.perf.settings import installed_env

pytestmark = [pytest.mark.perf, pytest.mark.timeout(300)]

RUNS = 9
VERSION_TARGET_S = 0.3


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=60)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_cli_start_against_a_bare_interpreter(tmp_path, monkeypatch, perf_out):
    monkeypatch.setenv("SPARKSYNC_HOME", str(tmp_path))
    registry = Registry()
    for i in range(8):
        registry.add(paired_node(f"spark-{i + 1}", i + 1))
    env = installed_env(os.environ, tmp_path / "pycache")
    commands = {
        "python_pass": [sys.executable, "-c", "pass"],
        "version": [sys.executable, "-m", "sparksync", "--version"],
        "node_list": [sys.executable, "-m", "sparksync", "node", "list"],
    }
    for argv in commands.values():  # warm the file cache and the byte code
        _timed(argv, env)
    runs: dict[str, list[tuple[float, float]]] = {key: [] for key in commands}
    for _ in range(RUNS):
        for key, argv in commands.items():
            runs[key].append(_timed(argv, env))
    wall = {key: statistics.median(w for w, _ in r) for key, r in runs.items()}
    cpu = {key: statistics.median(c for _, c in r) for key, r in runs.items()}
    report = Report("cli_startup")
    report.note(f"median of {RUNS} runs each, interleaved; wall and CPU (user + system) of the child")
    labels = {"python_pass": "python -c pass (anchor)", "version": "sparksync --version",
              "node_list": "sparksync node list (8 paired nodes)"}  # fmt: skip
    for key, label in labels.items():
        report.figure(f"{key}_wall_s", round(wall[key], 4), f"{label}, wall", "s")
        report.figure(f"{key}_cpu_s", round(cpu[key], 4), f"{label}, CPU", "s")
    for key in ("version", "node_list"):
        report.figure(f"{key}_over_anchor_cpu", round(cpu[key] / cpu["python_pass"], 2),
                      f"{labels[key]} / anchor, CPU", "x")  # fmt: skip
    report.check("--version", wall["version"] <= VERSION_TARGET_S,
                 f"median {wall['version']:.3f} s <= {VERSION_TARGET_S:g} s")  # fmt: skip
    report.publish(perf_out)
    assert_targets(report)
