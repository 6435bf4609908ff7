"""How a benchmark shows its figures: printed for people, written as JSON for tools.

Every figure sits beside the anchor measured in the same run, so a number read
on a slow CI box and one read on a workstation can still be compared.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

OUT_ENV = "SPARKSYNC_PERF_OUT"


def results_dir(default: Path) -> Path:
    """Where the JSON goes: $SPARKSYNC_PERF_OUT, else ``default`` (a pytest temp dir,
    so a benchmark run never dirties the repository)."""
    chosen = Path(os.environ.get(OUT_ENV) or default)
    chosen.mkdir(parents=True, exist_ok=True)
    return chosen


@dataclass
class Check:
    name: str
    passed: bool
    detail: str


@dataclass
class Report:
    """The figures of one benchmark, and its pass/fail checks against the targets."""

    name: str
    figures: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    def figure(self, key: str, value: Any, label: str | None = None, unit: str = "") -> None:
        self.figures[key] = value
        if label is not None:
            self.lines.append(f"  {label:<44} {_fmt(value)} {unit}".rstrip())

    def note(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def check(self, name: str, passed: bool, detail: str) -> None:
        self.checks.append(Check(name, bool(passed), detail))

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def publish(self, out_dir: Path) -> Path:
        """Print everything, then write the JSON; returns the JSON path."""
        path = out_dir / f"{self.name}.json"
        print(f"\n=== {self.name} ===")
        for line in self.lines:
            print(line)
        for c in self.checks:
            print(f"  [{'PASS' if c.passed else 'FAIL'}] {c.name}: {c.detail}")
        path.write_text(json.dumps(self._document(), indent=2, default=str))
        print(f"  figures written to {path}")
        return path

    def _document(self) -> dict[str, Any]:
        return {
            "benchmark": self.name,
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": _host(),
            "figures": self.figures,
            "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks],
        }


def assert_targets(report: Report) -> None:
    """Fail the test when any target was missed; every figure is already printed."""
    if report.failures:
        missed = "; ".join(f"{c.name} ({c.detail})" for c in report.failures)
        pytest.fail(f"{report.name} missed its targets: {missed}", pytrace=False)


def _host() -> dict[str, Any]:
    # The load average tells a reader whether other work shared the machine during the run.
    return {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_1_5_15": os.getloadavg(),
    }


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.1f}"
    return str(value)
