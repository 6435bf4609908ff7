"""What the fabric acceptance check found: per link, then for the whole cluster.

Each figure is kept with its unit, the pass mark it was judged against, and
its share of the link's line rate. A test that could not run (a tool
missing, no RDMA device) is ``not run`` with what to install: never a pass.
The whole report is one JSON document in the history (``fabric_checks``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

REPORT_VERSION = 1

# NVIDIA's figures for a healthy DGX Spark fabric (FACTS.md; NVIDIA's playbooks):
RDMA_CABLE_GBPS = 190.0  # ib_write_bw on one cable, both RoCE devices (92.6 + 97.3)
NCCL_BUSBW_GBPS = 21.875  # all_gather_perf -b 16G -e 16G -f 2, bus bandwidth in GB/s: the minimum
NCCL_RING_BUSBW_GBPS = 10.0  # the same on a ring
# SparkSync's own marks where NVIDIA gives none: a TCP stream set at half the line rate is a healthy
# link on the tooling users run; an RDMA pair below 90 % of NVIDIA's figure is flagged.
TCP_MARK_OF_LINE = 0.5
RDMA_MARK_OF_FIGURE = 0.9


class Verdict(str, Enum):
    passed = "pass"
    degraded = "degraded"  # works, below its mark
    failed = "fail"
    not_run = "not run"


_RANK = {Verdict.passed: 0, Verdict.not_run: 1, Verdict.degraded: 2, Verdict.failed: 3}


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    return max(verdicts, key=_RANK.__getitem__, default=Verdict.not_run)


class Measurement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    test: str  # "carrier", "speed", "mtu", "jumbo ping", "iperf3", "ib_write_bw", "all_gather"
    where: str  # "n1:enp1s0f0np0", "n1 -> n2", "cluster"
    verdict: Verdict
    value: float | None = None
    unit: str | None = None  # "Gb/s", "GB/s", "bytes"
    mark: float | None = None  # the pass mark, in ``unit``
    percent_of_line: float | None = None
    detail: str = ""

    def text(self) -> str:
        figure = "" if self.value is None else f" {self.value:.4g} {self.unit or ''}".rstrip()
        share = "" if self.percent_of_line is None else f" ({self.percent_of_line:.0f} % of line rate)"
        if self.detail.startswith(self.verdict.value):  # "not run: install perftest" says it already
            return f"{self.test} {self.where}: {self.detail}"
        note = f": {self.detail}" if self.detail else ""
        return f"{self.test} {self.where}: {self.verdict.value}{figure}{share}{note}"


class LinkCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    a: str  # "node:iface"
    b: str
    a_address: str
    b_address: str
    subnet: str
    line_rate_gbps: float
    mtu: int
    measurements: list[Measurement] = Field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        """The worst of what ran; "not run" only when nothing did (a missing tool never fails a link)."""
        ran = [m.verdict for m in self.measurements if m.verdict is not Verdict.not_run]
        return worst(ran) if ran else Verdict.not_run

    @property
    def nodes(self) -> tuple[str, str]:
        return self.a.split(":", 1)[0], self.b.split(":", 1)[0]

    def figure(self, test: str) -> list[Measurement]:
        return [m for m in self.measurements if m.test == test]


class FabricCheckReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = REPORT_VERSION
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    topology: str | None = None
    nodes: list[str] = Field(default_factory=list)
    links: list[LinkCheck] = Field(default_factory=list)
    cluster: list[Measurement] = Field(default_factory=list)
    duration_s: float = 0.0

    @property
    def measurements(self) -> list[Measurement]:
        return [m for link in self.links for m in link.measurements] + list(self.cluster)

    @property
    def verdict(self) -> Verdict:
        """fail or degraded if any test was; pass when everything else passed, some tests maybe not run."""
        found = worst([m.verdict for m in self.measurements])
        return Verdict.passed if found is Verdict.not_run and self.passed else found

    @property
    def passed(self) -> int:
        return sum(m.verdict is Verdict.passed for m in self.measurements)

    @property
    def not_run(self) -> list[Measurement]:
        return [m for m in self.measurements if m.verdict is Verdict.not_run]

    @property
    def problems(self) -> list[Measurement]:
        return [m for m in self.measurements if m.verdict in (Verdict.failed, Verdict.degraded)]

    def link(self, key: str) -> LinkCheck | None:
        return next((link for link in self.links if link.key == key), None)

    def summary(self) -> str:
        problems, skipped = self.problems, self.not_run
        parts = [f"{self.verdict.value}: {self.passed} passed"]
        if problems:
            parts.append(f"{len(problems)} flagged")
        if skipped:
            parts.append(f"{len(skipped)} not run")
        return ", ".join(parts) + f" on {len(self.links)} link(s) of {len(self.nodes)} node(s) in {self.duration_s:.0f} s"
